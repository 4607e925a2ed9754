"""``section6``: the section 6 workloads on their homogeneous and heterogeneous clusters with the
model's throughput (i-scheduler.txt Figs. 10-17, t3-scheduler.txt Figs. 7-10)."""

from __future__ import annotations

from streamsched.evaluation import paper_numbers as paper
from streamsched.evaluation.experiments.cells import Cell, Experiment
from streamsched.evaluation.experiments.tables import figure, missing_note, ok_rows, write_table


def list_cells(schedulers, quick, seed):
    cells = []
    micro = ("diamond-tp",) if quick else ("linear-tp", "diamond-tp", "star-tp")
    for w in micro:
        # i-scheduler.txt 6.1: I/O-intensive on 1 high + 2 low nodes, CPU-intensive on 2 high + 4 low
        cells += [Cell("section6", s, w, "high-low-1-2", seed, models=("io-bound",), label="I/O-intensive")
                  for s in schedulers]
        cells += [Cell("section6", s, w, "high-low-2-4", seed, models=("cpu-bound",), label="CPU-intensive")
                  for s in schedulers]
    apps = [("smart-home", "high-low-8-0"), ("smart-home", "high-low-2-4"), ("taxi-routes", "high-low-8-0"),
            ("taxi-routes", "high-low-2-2")]
    if quick:
        apps = apps[:1]
    models = ("default", "io-bound", "cpu-bound")
    for w, c in apps:
        cells += [Cell("section6", s, w, c, seed, models=models, label="application") for s in schedulers]
    if not quick:  # the papers re-ran OLS on as many nodes as the others used
        cells.append(Cell("section6", "ols", "smart-home", "high-low-4-0", seed, models=models, label="OLS on 4 nodes"))
        cells.append(Cell("section6", "ols", "taxi-routes", "high-low-3-0", seed, models=models, label="OLS on 3 nodes"))
    return cells


def summarise(rows, out_dir):
    from streamsched.evaluation.pictures import bar_chart  # matplotlib on use, not when experiments are listed

    ok = ok_rows(rows)
    written = []
    header = ["workload", "cluster", "setting", "scheduler", "nodes used", "inter-node traffic", "model",
              "throughput (model)", "relative to best (model)", "paper throughput", "relative to best (paper)",
              "paper nodes used"]
    lines = []
    groups = sorted({(r["workload"], r["cluster"], r["label"]) for r in ok})
    for w, c, label in groups:
        members = [r for r in ok if (r["workload"], r["cluster"], r["label"]) == (w, c, label)]
        printed = paper.SECTION6_THROUGHPUT.get((w, c), {})
        printed_nodes = paper.SECTION6_NODES.get((w, c), {})
        models = [k[len("throughput_"):] for k in members[0] if k.startswith("throughput_")]
        for model in models:
            best = max(r[f"throughput_{model}"] for r in members)
            paper_best = max(printed.values()) if printed else None
            for r in members:
                tp = r[f"throughput_{model}"]
                pp = printed.get(r["scheduler"])
                lines.append([w, c, label, r["scheduler"], r["nodes_used"], r["inter_node_traffic"], model, tp,
                              tp / best if best else None, pp, pp / paper_best if pp and paper_best else None,
                              printed_nodes.get(r["scheduler"])])
            names = [r["scheduler"] for r in members]
            relative = [r[f"throughput_{model}"] / best if best else None for r in members]
            paper_rel = [printed[n] / paper_best if n in printed and paper_best else None for n in names]
            written.append(figure(out_dir, f"{w}-{c}-{label.replace('/', '').replace(' ', '-')}-{model}", bar_chart(
                f"{w} on {c} ({label}), model {model}: throughput / best", names, relative, "relative",
                paper=paper_rel if printed and label == "application" else None)))
    notes = list(paper.SECTION6_CLAIMS) + [
        "Paper throughputs are tuples per 10 s per task on real Storm clusters; ours are the model's "
        "tuples/s. Compare the 'relative to best' columns, not absolute values."] + missing_note(rows)
    for (model, w), gains in paper.SECTION6_MICRO_GAINS.items():
        for (a, b), pct in gains.items():
            ra = next((r for r in ok if r["scheduler"] == a and r["workload"] == w and f"throughput_{model}" in r), None)
            rb = next((r for r in ok if r["scheduler"] == b and r["workload"] == w and f"throughput_{model}" in r), None)
            ours = f"{100 * (ra[f'throughput_{model}'] / rb[f'throughput_{model}'] - 1):+.0f} %" if ra and rb else "not run"
            notes.append(f"{w}, {model}: {a} over {b}: paper +{pct} %, model {ours}.")
    written += write_table(out_dir, "comparison", header, lines, notes)
    return written


EXPERIMENT = Experiment(
    "section6", "I/O- and CPU-intensive micro-benchmarks, smart home and taxi routes (model throughput)",
    ("i-scheduler", "t3", "r-storm", "ols", "even"), list_cells, summarise)
