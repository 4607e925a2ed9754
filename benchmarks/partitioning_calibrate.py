"""Measure I-Scheduler's FIND_THRESHOLD table (i-scheduler.txt Algorithm 1 line 4) on this machine.

For each item count n, the exact solver (cp-sat, 1 thread, as I-Scheduler calls it) solves the
micro-benchmarks of that size (linear, diamond, star; load 1, rate 1 per pair) on the
homogeneous-10 and heterogeneous-10 clusters; the table keeps the slowest wall time per n.
Sizes grow until the slowest solve exceeds ``--stop`` seconds (each solve capped by it).

    nice .venv/bin/python benchmarks/partitioning_calibrate.py            # rewrites the table
    nice .venv/bin/python benchmarks/partitioning_calibrate.py --dry-run  # prints it only
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

from streamsched.model.taskgraph import TaskGraph
from streamsched.solvers import solve_placement
from streamsched.workloads import cluster, micro_diamond, micro_linear, micro_star

TABLE = Path(__file__).resolve().parents[1] / "src" / "streamsched" / "data" / "i_scheduler_calibration.json"
COMMAND = "nice .venv/bin/python benchmarks/partitioning_calibrate.py"


def shapes(n: int):
    yield micro_linear(n)
    if n >= 10:
        yield micro_diamond(n)
    if n >= 6:
        yield micro_star(n)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4:32:2", help="first:last:step item counts")
    parser.add_argument("--stop", type=float, default=10.0, help="stop after a size slower than this (s)")
    parser.add_argument("--solver", default="cp-sat")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    first, last, step = (int(x) for x in args.sizes.split(":"))
    clusters = [cluster("homogeneous-10"), cluster("heterogeneous-10")]
    # warm-up: the first solve of a process pays for imports and solver start-up
    solve_placement([1.0, 1.0], [0], [1], [1.0], [1.0, 1.0], time_limit=5.0, backend=args.solver, workers=1)
    sizes, seconds, details = [], [], []
    for n in range(first, last + 1, step):
        slowest = 0.0
        for topology in shapes(n):
            graph = TaskGraph.from_topology(topology)
            for nodes in clusters:
                start = time.perf_counter()
                result = solve_placement(graph.load, graph.src, graph.dst, graph.rate, nodes.capacity,
                                         time_limit=args.stop, backend=args.solver, workers=1, seed=0)
                wall = time.perf_counter() - start
                slowest = max(slowest, wall)
                details.append({"graph": graph.name, "cluster": nodes.name, "seconds": round(wall, 4),
                                "status": result.status, "objective": result.objective})
                print(f"{graph.name:12s} {nodes.name:17s} {wall:8.3f}s {result.status}", flush=True)
        sizes.append(n)
        seconds.append(round(slowest, 4))
        if slowest > args.stop:
            break
    table = {
        "description": "slowest exact-solver wall time (s) per item count, micro-benchmarks on "
                       "homogeneous-10 and heterogeneous-10; phi(theta) = largest size whose "
                       "sizes up to it all solve within theta",
        "command": COMMAND,
        "solver": args.solver,
        "solver_workers": 1,
        "machine": f"{platform.machine()} {platform.processor() or ''} python {platform.python_version()}".strip(),
        "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "sizes": sizes,
        "seconds": seconds,
        "instances": details,
    }
    text = json.dumps(table, indent=1)
    if args.dry_run:
        print(text)
    else:
        TABLE.write_text(text + "\n")
        print(f"wrote {TABLE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
