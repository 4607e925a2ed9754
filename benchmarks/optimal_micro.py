"""The optimal scheduler on the 72 micro-benchmark instances of i-scheduler.txt section 5.

linear/diamond/star x 10..32 tasks x homogeneous-10/heterogeneous-10, one back-end and time
limit per run. Prints one line per instance and a summary (proven within 1 s / 10 s / limit).

    nice .venv/bin/python benchmarks/optimal_micro.py --backend cp-sat --time-limit 10
    nice .venv/bin/python benchmarks/optimal_micro.py --backend highs --time-limit 10 --workers 1
    nice .venv/bin/python benchmarks/optimal_micro.py --backend cplex --formulation assignment
"""

from __future__ import annotations

import argparse
import json
import sys

from streamsched.solvers import SolverLimitError, solve_placement
from streamsched.workloads import MICRO_SIZES, cluster, workload

#: Optimal costs printed in i-scheduler.txt section 5 (the figures give the rest as plots).
PAPER_OPTIMA = {("diamond-30", "heterogeneous-10"): 146, ("star-30", "heterogeneous-10"): 86,
                ("linear-32", "heterogeneous-10"): 24}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cp-sat")
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--formulation", default="auto")
    parser.add_argument("--shapes", default="linear,diamond,star")
    parser.add_argument("--json", help="write every result to this file")
    args = parser.parse_args(argv)
    rows = []
    for shape in args.shapes.split(","):
        for size in MICRO_SIZES:
            for cluster_name in ("homogeneous-10", "heterogeneous-10"):
                name = f"{shape}-{size}"
                g, c = workload(name), cluster(cluster_name)
                try:
                    r = solve_placement(g.load, g.src, g.dst, g.rate, c.capacity, time_limit=args.time_limit,
                                        backend=args.backend, workers=args.workers, formulation=args.formulation)
                    row = dict(instance=name, cluster=cluster_name, status=r.status, cost=r.objective,
                               bound=r.bound, gap=r.gap, seconds=round(r.wall_time_s, 3), model=r.formulation)
                except SolverLimitError as exc:
                    row = dict(instance=name, cluster=cluster_name, status="limit", error=str(exc))
                paper = PAPER_OPTIMA.get((name, cluster_name))
                if paper is not None:
                    row["paper"] = paper
                rows.append(row)
                print(json.dumps(row), flush=True)
    proven = [r for r in rows if r["status"] == "optimal"]
    within = lambda s: sum(1 for r in proven if r["seconds"] <= s)
    summary = dict(backend=args.backend, time_limit=args.time_limit, workers=args.workers,
                   formulation=args.formulation, instances=len(rows), proven=len(proven),
                   proven_1s=within(1.0), proven_10s=within(10.0),
                   limit_errors=sum(1 for r in rows if r["status"] == "limit"),
                   total_seconds=round(sum(r.get("seconds", 0) for r in rows), 1),
                   max_seconds=max((r.get("seconds", 0) for r in rows), default=0),
                   paper_mismatches=[r["instance"] for r in rows if "paper" in r and r.get("cost") != r["paper"]])
    print(json.dumps(summary))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"summary": summary, "rows": rows}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
