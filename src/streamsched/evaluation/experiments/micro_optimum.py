"""``micro-optimum``: cost and resolution time against the optimum on the 72 micro-benchmark
instances (i-scheduler.txt Figs. 4-9, t3-scheduler.txt Figs. 5-6)."""

from __future__ import annotations

from streamsched import workloads
from streamsched.evaluation import paper_numbers as paper
from streamsched.evaluation.experiments.cells import Cell, Experiment
from streamsched.evaluation.experiments.tables import figure, missing_note, ok_rows, write_table


#: Time limit given to the optimal scheduler per micro instance (the papers' CPLEX ran for hours
#: on a 64-core server; a run that stops at the limit reports its gap).
MICRO_TIME_LIMIT_S = 30.0


def list_cells(schedulers, quick, seed):
    sizes = (10, 16, 22) if quick else workloads.MICRO_SIZES
    return [Cell("micro-optimum", s, f"{shape}-{n}", c, seed, params=(("time_limit", MICRO_TIME_LIMIT_S),))
            for shape in ("linear", "diamond", "star") for n in sizes
            for c in ("homogeneous-10", "heterogeneous-10") for s in schedulers]


def summarise(rows, out_dir):
    from streamsched.evaluation.pictures import line_chart  # matplotlib on use, not when experiments are listed

    written = []
    ok = ok_rows(rows)
    optimum = {(r["workload"], r["cluster"]): r["inter_node_traffic"] for r in ok if r["scheduler"] == "optimal"
               and (str(r.get("status")).lower() in ("ok", "optimal") or r.get("gap") == 0)}
    schedulers = sorted({r["scheduler"] for r in ok})
    header = ["instance", "cluster", "optimum (ours)", "optimum (paper)"]
    for s in schedulers:
        header += [f"{s} cost", f"{s} paper", f"{s} time s"]
    lines = []
    instances = sorted({(r["workload"], r["cluster"]) for r in rows if r["workload"] != "-"}, key=lambda k: (k[0].split("-")[0], int(k[0].split("-")[1]), k[1]))
    by_key = {(r["scheduler"], r["workload"], r["cluster"]): r for r in ok}
    for w, c in instances:
        shape, n = w.split("-")[0], int(w.split("-")[1])
        printed = paper.MICRO_COST.get((shape, n, c), {})
        line = [w, c, optimum.get((w, c)), printed.get("optimal")]
        for s in schedulers:
            r = by_key.get((s, w, c))
            line += [r["inter_node_traffic"] if r else None, printed.get(s), r.get("wall_time_s") if r else None]
        lines.append(line)
    notes = list(paper.MICRO_CLAIMS) + missing_note(rows)
    if optimum:
        for s in schedulers:
            if s == "optimal":
                continue
            gaps = [by_key[(s, w, c)]["inter_node_traffic"] - optimum[(w, c)] for (w, c) in optimum if (s, w, c) in by_key]
            if gaps:
                notes.append(f"{s}: matches the optimum on {sum(g <= 1e-9 for g in gaps)} of {len(gaps)} "
                             f"instances; largest excess {max(gaps):g}.")
    written += write_table(out_dir, "comparison", header, lines, notes)
    for shape in ("linear", "diamond", "star"):
        for c in ("homogeneous-10", "heterogeneous-10"):
            sizes = sorted({int(w.split("-")[1]) for (w, cc) in instances if w.startswith(shape + "-") and cc == c})
            if not sizes:
                continue
            cost = {s: [by_key.get((s, f"{shape}-{n}", c), {}).get("inter_node_traffic") for n in sizes] for s in schedulers}
            wall = {s: [by_key.get((s, f"{shape}-{n}", c), {}).get("wall_time_s") for n in sizes] for s in schedulers}
            written.append(figure(out_dir, f"cost-{shape}-{c}", line_chart(
                f"{shape}, {c}: cost (i-scheduler.txt Figs. 4-6)", sizes, cost, "tasks", "inter-node traffic",
                dashed=("optimal",))))
            written.append(figure(out_dir, f"time-{shape}-{c}", line_chart(
                f"{shape}, {c}: resolution time (Figs. 7-9)", sizes, wall, "tasks", "seconds", log_y=True,
                dashed=("optimal",))))
    return written


EXPERIMENT = Experiment(
    "micro-optimum", "cost and resolution time against the optimum, 72 micro-benchmark instances",
    ("optimal", "i-scheduler", "t3", "metis", "r-storm", "ols", "even"), list_cells, summarise)
