"""Costs of the greedy schedulers on the 72 micro-benchmark instances next to the optimum.

Instances: linear/diamond/star with 10, 12, ..., 32 tasks on homogeneous-10 and
heterogeneous-10 (i-scheduler.txt and t3-scheduler.txt section 5). Each scheduler runs with its
default parameters and seed 0; the optimum comes from :func:`streamsched.solvers.solve_placement`
(CP-SAT, one thread, warm-started with the best greedy placement) within ``--time-limit``
seconds; when it is not proven the table shows the best cost and the proven lower bound.

    nice .venv/bin/python benchmarks/greedy_micro.py --time-limit 60 --json /tmp/greedy_micro.json
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from streamsched import workloads
from streamsched.schedulers import get_scheduler
from streamsched.solvers import solve_placement

SCHEDULERS = ("t3", "ols", "r-storm", "top-storm", "a3-storm", "ban-storm")
SHAPES = ("linear", "diamond", "star")
CLUSTERS = ("homogeneous-10", "heterogeneous-10")


def run_instance(shape: str, n: int, cluster_name: str, time_limit: float) -> dict:
    graph, cluster = workloads.workload(f"{shape}-{n}"), workloads.cluster(cluster_name)
    row: dict = {"workload": graph.name, "cluster": cluster_name, "costs": {}, "wall_s": {}}
    best = None
    for name in SCHEDULERS:
        placement = get_scheduler(name).schedule(graph, cluster, seed=0)
        assert not placement.violations(graph, cluster), (name, graph.name)
        row["costs"][name] = placement.metadata["cost"]
        row["wall_s"][name] = placement.metadata["wall_time_s"]
        if best is None or placement.metadata["cost"] < best.metadata["cost"]:
            best = placement
    started = time.perf_counter()
    result = solve_placement(graph.load, graph.src, graph.dst, graph.rate, cluster.capacity,
                             time_limit=time_limit, workers=1, warm_start=best.node_of)
    row["optimum"] = {"cost": result.objective, "bound": result.bound, "status": result.status,
                      "wall_s": time.perf_counter() - started}
    return row


def markdown(rows: list[dict]) -> str:
    lines = ["| instance | cluster | " + " | ".join(SCHEDULERS) + " | optimum |",
             "|---|---|" + "---:|" * (len(SCHEDULERS) + 1)]
    for row in rows:
        opt = row["optimum"]
        optimum = f"{opt['cost']:g}" if opt["status"] == "optimal" else f"<= {opt['cost']:g} (>= {opt['bound']:g})"
        costs = " | ".join(f"{row['costs'][name]:g}" for name in SCHEDULERS)
        lines.append(f"| {row['workload']} | {row['cluster']} | {costs} | {optimum} |")
    return "\n".join(lines)


def summary(rows: list[dict]) -> str:
    proven = [r for r in rows if r["optimum"]["status"] == "optimal"]
    out = [f"optimum proven on {len(proven)} of {len(rows)} instances"]
    for name in SCHEDULERS:
        equal = sum(r["costs"][name] == r["optimum"]["cost"] for r in proven)
        ratio = [r["costs"][name] / r["optimum"]["cost"] for r in proven if r["optimum"]["cost"] > 0]
        worst = max(r["wall_s"][name] for r in rows)
        out.append(f"{name}: equal to the optimum on {equal}/{len(proven)}, mean cost/optimum "
                   f"{np.mean(ratio):.3f}, max {np.max(ratio):.3f}, slowest {worst * 1000:.1f} ms")
    linear = [r for r in proven if r["workload"].startswith("linear")]
    out.append(f"t3 equal to the optimum on linear: {sum(r['costs']['t3'] == r['optimum']['cost'] for r in linear)}"
               f"/{len(linear)} proven linear instances")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0, help="solver seconds per instance")
    parser.add_argument("--sizes", default="10-32", help="task counts, e.g. 10-20 or 14")
    parser.add_argument("--json", help="also write every row here")
    args = parser.parse_args()
    low, _, high = args.sizes.partition("-")
    sizes = [n for n in workloads.MICRO_SIZES if int(low) <= n <= int(high or low)]
    rows = []
    for shape in SHAPES:
        for cluster_name in CLUSTERS:
            for n in sizes:
                rows.append(run_instance(shape, n, cluster_name, args.time_limit))
                print(f"{rows[-1]['workload']} {cluster_name}: {rows[-1]['costs']} optimum {rows[-1]['optimum']}",
                      flush=True)
    print(markdown(rows))
    print(summary(rows))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
