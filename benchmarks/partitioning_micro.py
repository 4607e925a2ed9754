"""I-Scheduler, METIS and Gr-Storm on the 72 micro-benchmark instances (i-scheduler.txt section 5).

linear/diamond/star x 10..32 tasks x homogeneous-10/heterogeneous-10 (Table 3). For each:
i-scheduler with theta = 1 s (cost, wall time, partitioning time = wall - solver time, items
handed to the solver), the theta = 0 fallback, metis and gr-storm (defaults, seed 0), and the
optimum: ``solve_placement`` (CP-SAT, 1 thread) warm-started with the best of these, proven
within ``--time-limit``. One solve runs first so that no timed run pays for importing OR-Tools.

    nice .venv/bin/python benchmarks/partitioning_micro.py --json /tmp/partitioning_micro.json
    .venv/bin/python benchmarks/partitioning_micro.py --from-json /tmp/partitioning_micro.json  # the tables
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from streamsched.schedulers import get_scheduler
from streamsched.solvers import solve_placement
from streamsched.workloads import MICRO_SIZES, cluster, workload

#: The paper's I-Scheduler misses (section 5): instance -> (I-Scheduler, optimum).
PAPER_MISSES = {("diamond-30", "heterogeneous-10"): (148, 146), ("star-30", "heterogeneous-10"): (90, 86)}


def run(name: str, cluster_name: str, time_limit: float) -> dict:
    graph, nodes = workload(name), cluster(cluster_name)
    row: dict = {"instance": name, "cluster": cluster_name}
    placements = {}
    for label, scheduler in (("i1", get_scheduler("i-scheduler", theta=1.0)),
                             ("i0", get_scheduler("i-scheduler", theta=0.0)),
                             ("metis", get_scheduler("metis")), ("gr", get_scheduler("gr-storm"))):
        placement = scheduler.schedule(graph, nodes, seed=0)
        assert placement.violations(graph, nodes) == [], (label, name, cluster_name)
        placements[label] = placement
        meta = placement.metadata
        row[label] = meta["cost"]
        row[f"{label}_s"] = round(meta["wall_time_s"], 4)
    meta = placements["i1"].metadata
    row.update(i1_mode=meta["mode"], i1_phi=meta["phi"], i1_items=meta.get("items"),
               i1_solver_s=round(meta.get("solver_time_s", 0.0), 4),
               i1_partition_s=round(meta["wall_time_s"] - meta.get("solver_time_s", 0.0), 4))
    best = min(placements.values(), key=lambda p: p.metadata["cost"])
    result = solve_placement(graph.load, graph.src, graph.dst, graph.rate, nodes.capacity, time_limit=time_limit,
                             workers=1, warm_start=np.asarray(best.node_of))
    row.update(optimum=result.objective, optimum_status=result.status, optimum_s=round(result.wall_time_s, 2))
    return row


def markdown(rows: list[dict]) -> str:
    proven = all(r["optimum_status"] == "optimal" for r in rows)
    hit = lambda key: sum(r[key] <= r["optimum"] + 1e-9 for r in rows)
    ratio = lambda key: np.mean([r[key] / r["optimum"] if r["optimum"] else 1.0 for r in rows])
    lines = [
        f"optimum proven on {sum(r['optimum_status'] == 'optimal' for r in rows)}/{len(rows)} instances"
        + ("" if proven else " (the others: best known)"),
        "",
        "| scheduler | equal to the optimum | mean cost / optimum | slowest run |",
        "|---|---:|---:|---:|",
    ]
    for key, label in (("i1", "i-scheduler theta = 1 s"), ("i0", "i-scheduler theta = 0 (fallback)"),
                       ("metis", "metis"), ("gr", "gr-storm")):
        slowest = max(r[f"{key}_s"] for r in rows)
        lines.append(f"| {label} | {hit(key)}/{len(rows)} | {ratio(key):.3f} | {slowest * 1000:.0f} ms |")
    lines += ["", "| instance | cluster | i-sched. theta=1 | items to solver | time (s) | theta=0 | metis "
              "| gr-storm | optimum |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        mark = lambda key: f"**{r[key]:g}**" if r[key] > r["optimum"] + 1e-9 else f"{r[key]:g}"
        lines.append(f"| {r['instance']} | {r['cluster']} | {mark('i1')} | {r['i1_items'] or '-'} | {r['i1_s']:.2f} "
                     f"| {mark('i0')} | {mark('metis')} | {mark('gr')} | {r['optimum']:g} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds for each optimum")
    parser.add_argument("--shapes", default="linear,diamond,star")
    parser.add_argument("--json", help="write every row to this file")
    parser.add_argument("--markdown", action="store_true", help="print the tables for docs/benchmarks.md")
    parser.add_argument("--from-json", help="render --markdown from a file written by --json")
    args = parser.parse_args(argv)
    if args.from_json:
        with open(args.from_json) as saved:
            print(markdown(json.load(saved)["rows"]))
        return 0
    solve_placement([1.0, 1.0], [0], [1], [1.0], [1.0, 1.0], time_limit=5.0, workers=1)  # warm-up
    rows = []
    for shape in args.shapes.split(","):
        for cluster_name in ("homogeneous-10", "heterogeneous-10"):
            for size in MICRO_SIZES:
                row = run(f"{shape}-{size}", cluster_name, args.time_limit)
                paper = PAPER_MISSES.get((row["instance"], cluster_name))
                if paper:
                    row["paper_i_scheduler"], row["paper_optimum"] = paper
                rows.append(row)
                if not args.markdown:
                    print(json.dumps(row), flush=True)
    summary = {
        "instances": len(rows),
        "i1_optimal": sum(r["i1"] <= r["optimum"] + 1e-9 for r in rows),
        "i0_optimal": sum(r["i0"] <= r["optimum"] + 1e-9 for r in rows),
        "i1_misses": [(r["instance"], r["cluster"], r["i1"], r["optimum"]) for r in rows if r["i1"] > r["optimum"] + 1e-9],
        "i1_max_s": max(r["i1_s"] for r in rows),
        "i1_max_partition_s": max(r["i1_partition_s"] for r in rows),
    }
    print(markdown(rows) if args.markdown else json.dumps(summary))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"summary": summary, "rows": rows}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
