"""Speed of the performance model (predict) and of report writing.

Run: nice .venv/bin/python benchmarks/evaluation_model.py
Prints one line per case: tasks, edges, and the median wall time of predict() under the default,
acking and io-bound (bisection for max spout pending) parameter sets, then the time to write a
compare report for every registered scheduler on diamond-tp / high-low-2-4.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from streamsched import workloads
from streamsched.workloads import fischer_chains, fischer_cluster
from streamsched.performance import ModelParams, predict, regime
from streamsched.evaluation.comparison import run_schedulers
from streamsched.evaluation.report import write_report
from streamsched.model import Placement
from streamsched.schedulers import available


def timed(fn, repeat=3):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    print("tasks  edges  default_s  acking_s  io-bound_s")
    for p in (10, 100, 1000, 5000):
        graph = fischer_chains(f"chains-{p}", p, 7, 3072.0, seed=0)
        cluster = fischer_cluster(f"fischer-{p}")
        placement = Placement.build(np.arange(graph.n_tasks) % p, np.zeros(graph.n_tasks, int))
        row = [timed(lambda prm=prm: predict(graph, cluster, placement, prm))
               for prm in (ModelParams(), ModelParams(acking=True), regime("io-bound"))]
        print(f"{graph.n_tasks:6d} {graph.n_edges:6d}  " + "  ".join(f"{t:9.4f}" for t in row))
    graph, cluster = workloads.workload("diamond-tp"), workloads.cluster("high-low-2-4")
    names = available()
    start = time.perf_counter()
    outcomes = run_schedulers(graph, cluster, names, model=ModelParams())
    schedule_s = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        paths = write_report(Path(tmp) / "r.html", graph, cluster, outcomes)
        report_s = time.perf_counter() - start
        size = paths[0].stat().st_size
    print(f"report: {len(names)} schedulers on diamond-tp/high-low-2-4: schedulers {schedule_s:.2f} s, "
          f"report {report_s:.2f} s, {size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
