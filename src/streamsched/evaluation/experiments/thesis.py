"""``thesis``: the six scenarios of thesis Table 4.2 for WordCount and Exclamation."""

from __future__ import annotations

from streamsched.evaluation import paper_numbers as paper
from streamsched.evaluation.experiments.cells import Cell, Experiment
from streamsched.evaluation.experiments.tables import figure, missing_note, ok_rows, write_table


def list_cells(schedulers, quick, seed):
    scenarios = (1, 4) if quick else tuple(paper.THESIS_SCENARIOS)
    cells = []
    for w in ("wordcount", "exclamation"):
        for k in scenarios:
            slots, required = paper.THESIS_SCENARIOS[k]
            cells += [Cell("thesis", s, w, f"thesis-9-s{slots}", seed, params=(("workers", required),),
                           models=("default", "io-bound"), label=f"S{k}") for s in schedulers]
    return cells


def summarise(rows, out_dir):
    from streamsched.evaluation.pictures import line_chart  # matplotlib on use, not when experiments are listed

    ok = ok_rows(rows)
    written = []
    header = ["topology", "scenario", "scheduler", "workers used", "nodes used", "inter-node traffic",
              "throughput (model)", "gain vs even %", "throughput per node (eq. 1.2)", "io-bound throughput",
              "paper: best gain vs default", "paper nodes used"]
    lines = []
    for w in ("wordcount", "exclamation"):
        scenarios = sorted({r["label"] for r in ok if r["workload"] == w}, key=lambda s: int(s[1:]))
        schedulers = sorted({r["scheduler"] for r in ok if r["workload"] == w})
        by = {(r["scheduler"], r["label"]): r for r in ok if r["workload"] == w}
        for label in scenarios:
            k = int(label[1:])
            base = by.get(("even", label))
            stated = paper.THESIS_GAINS[w].get(k)
            for s in schedulers:
                r = by.get((s, label))
                if r is None:
                    continue
                gain = 100 * (r["throughput_default"] / base["throughput_default"] - 1) if base else None
                stated_text = f"{stated[0]} +{stated[1]} %" if stated and stated[0] == s else None
                nodes_paper = paper.THESIS_NODES.get(w, {}).get(k, {})
                lines.append([w, label, s, r["workers_used"], r["nodes_used"], r["inter_node_traffic"],
                              r["throughput_default"], gain, r["per_node_default"], r["throughput_io-bound"],
                              stated_text, nodes_paper.get("even" if s == "even" else "proposed")
                              if s in ("even", stated[0] if stated else "") else None])
        for key, title, unit in (("throughput_default", "throughput (model)", "tuples/s"),
                                 ("nodes_used", "nodes used", "nodes"),
                                 ("per_node_default", "throughput per node (eq. 1.2)", "tuples/s/node")):
            series = {s: [by.get((s, lab), {}).get(key) for lab in scenarios] for s in schedulers}
            xs = [int(lab[1:]) for lab in scenarios]
            written.append(figure(out_dir, f"{w}-{key}", line_chart(
                f"{w}: {title} per scenario (Table 4.2)", xs, series, "scenario", unit)))
    notes = list(paper.THESIS_CLAIMS) + [
        "Scenarios: slots per node / slots required = " + ", ".join(
            f"S{k}: {a}/{b}" for k, (a, b) in paper.THESIS_SCENARIOS.items()) + "; 'workers' is passed to "
        "every scheduler that declares it.",
        "The thesis also names a 'TRA-Storm' for word count S6 and exclamation S5; it is not described "
        "there, so its gains are not listed."] + missing_note(rows)
    written += write_table(out_dir, "comparison", header, lines, notes)
    return written


EXPERIMENT = Experiment(
    "thesis", "six scenarios of thesis Table 4.2, WordCount and Exclamation",
    ("even", "isolation", "r-storm", "top-storm", "a3-storm", "ban-storm", "gr-storm"), list_cells, summarise)
