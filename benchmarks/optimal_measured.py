"""``optimal`` on measured-style graphs and at scale: quality against the heuristics, bound,
gap, wall time and peak memory next to the time limit.

Quality: random DAG workloads (``random-110-s2``, ``random-450-s2``) on heterogeneous-10's node
mix scaled to 75 % utilisation, and linear-30 / diamond-30 as a pipeline measures them (loads
1 +- 1 %, rates +- 20 %, seed 1) on heterogeneous-10; ``optimal`` at ``--time-limit`` against
i-scheduler, t3 and metis (default parameters, seed 0). Scale: ``optimal`` with time limits
5 and 10 s on random-450-s2 (2,062 tasks) and random-4500-s2 (20,128 tasks), each run in a
fresh process (peak RSS of that process and of its warm-start child).

    nice .venv/bin/python benchmarks/optimal_measured.py quality --time-limit 10
    nice .venv/bin/python benchmarks/optimal_measured.py scale --limits 5,10
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np

from streamsched.model import Cluster, TaskGraph
from streamsched.schedulers import get_scheduler
from streamsched.workloads import cluster, workload

HEURISTICS = ("i-scheduler", "t3", "metis")


def measured(name: str, seed: int = 1) -> TaskGraph:
    """A micro-benchmark as a monitoring pipeline measures it: loads 1 +- 1 %, rates +- 20 %."""
    g, rng = workload(name), np.random.default_rng(seed)
    return TaskGraph.build(f"{name}-measured", g.operator_names, g.task_operator,
                           g.load * rng.uniform(0.99, 1.01, g.n_tasks), g.src, g.dst,
                           g.rate * rng.uniform(0.8, 1.2, g.n_edges))


def scaled_heterogeneous(graph: TaskGraph, utilisation: float = 0.75) -> Cluster:
    """heterogeneous-10's mix (3 x 6, 3 x 4, 4 x 2 per block of 38), blocks repeated and
    capacities scaled so that the graph fills ``utilisation`` and the largest task fits a
    small node."""
    need = graph.total_load / utilisation
    scale = max(1.0, graph.load.max() / 2.0 * 1.05)
    blocks = max(1, int(round(need / (38 * scale))))
    scale = need / (38 * blocks)
    return Cluster.from_types(f"heterogeneous-x{blocks}", (3 * blocks, {"capacity": 6 * scale}),
                              (3 * blocks, {"capacity": 4 * scale}), (4 * blocks, {"capacity": 2 * scale}))


def instances():
    for name in ("random-110-s2", "random-450-s2"):
        g = workload(name)
        yield name, g, scaled_heterogeneous(g)
    for name in ("linear-30", "diamond-30"):
        yield f"{name}-measured", measured(name), cluster("heterogeneous-10")


def quality(time_limit: float) -> None:
    for label, g, c in instances():
        row = dict(instance=label, tasks=g.n_tasks, nodes=c.n_nodes,
                   utilisation=round(g.total_load / c.total_capacity, 3))
        for name in HEURISTICS:
            try:
                row[name] = round(get_scheduler(name).schedule(g, c, seed=0).metadata["cost"], 2)
            except Exception as exc:  # noqa: BLE001 - a refusal is a result here
                row[name] = f"failed: {exc}"
        started = time.perf_counter()
        meta = get_scheduler("optimal", time_limit=time_limit).schedule(g, c, seed=0).metadata
        best_other = min(v for k, v in row.items() if k in HEURISTICS and isinstance(v, float))
        row.update(optimal=round(meta["cost"], 2), bound=round(meta["bound"], 2), gap=round(meta["gap"], 4),
                   status=meta["status"], formulation=meta["formulation"], bound_source=meta["bound_source"],
                   vs_best_heuristic=round(meta["cost"] / best_other - 1, 4),
                   wall_s=round(time.perf_counter() - started, 2))
        print(json.dumps(row), flush=True)


def one_scale_run(name: str, time_limit: float) -> None:
    g = workload(name)
    c = scaled_heterogeneous(g)
    started = time.perf_counter()
    meta = get_scheduler("optimal", time_limit=time_limit).schedule(g, c, seed=0).metadata
    wall = time.perf_counter() - started
    starts = {k: v for k, v in meta.get("warm_starts", {}).items() if isinstance(v, float)}
    print(json.dumps(dict(
        instance=name, tasks=g.n_tasks, edges=g.n_edges, nodes=c.n_nodes, time_limit=time_limit,
        wall_s=round(wall, 2), peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        child_peak_rss_mb=round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024),
        cost=round(meta["cost"], 1), best_warm_start=round(min(starts.values()), 1) if starts else None,
        warm_starts_in_time=sorted(starts), bound=round(meta["bound"], 1), formulation=meta["formulation"],
        note=meta.get("note", ""))), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    q = sub.add_parser("quality")
    q.add_argument("--time-limit", type=float, default=10.0)
    s = sub.add_parser("scale")
    s.add_argument("--limits", default="5,10")
    s.add_argument("--workloads", default="random-450-s2,random-4500-s2")
    one = sub.add_parser("one")
    one.add_argument("workload")
    one.add_argument("time_limit", type=float)
    args = parser.parse_args(argv)
    if args.command == "quality":
        quality(args.time_limit)
    elif args.command == "one":
        one_scale_run(args.workload, args.time_limit)
    else:
        for name in args.workloads.split(","):
            for limit in args.limits.split(","):
                subprocess.run([sys.executable, __file__, "one", name, limit], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
