"""Core scale benchmark: a ~1,000,000-task random DAG built, placed by the even scheduler, evaluated.

Run: .venv/bin/python benchmarks/bench_core.py [--operators 182000] [--max-parallelism 10] [--seed 0]
Prints wall time per stage and the process's peak resident memory; the baseline in the same
process is one vectorised pass over the edge arrays (the least any metric can cost).
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from streamsched import metrics
from streamsched.model import Cluster, TaskGraph
from streamsched.model.graph_files import read_graph, write_graph
from streamsched.schedulers import get_scheduler
from streamsched.workloads import random_topology


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--operators", type=int, default=182_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-parallelism", type=int, default=10)
    args = parser.parse_args()
    timings: dict[str, float] = {}

    start = time.perf_counter()
    topology = random_topology(args.operators, seed=args.seed, parallelism=(1, args.max_parallelism))
    timings["random topology"] = time.perf_counter() - start

    start = time.perf_counter()
    graph = TaskGraph.from_topology(topology)
    timings["task graph (grouping semantics)"] = time.perf_counter() - start

    nodes = max(1, graph.n_tasks // 1000)
    capacity = max(1.25 * graph.total_load / nodes, 2 * float(graph.load.max()))
    cluster = Cluster.from_types("big", (nodes, {"capacity": capacity, "slots": 8}))
    start = time.perf_counter()
    placement = get_scheduler("even").schedule(graph, cluster, seed=args.seed)
    timings["even scheduler"] = time.perf_counter() - start

    start = time.perf_counter()
    report = metrics.evaluate(graph, placement, cluster)
    timings["evaluate (all metrics)"] = time.perf_counter() - start

    start = time.perf_counter()
    baseline = float(graph.rate[placement.node_of[graph.src] != placement.node_of[graph.dst]].sum())
    timings["baseline: one pass over edges"] = time.perf_counter() - start
    assert baseline == report["inter_node_traffic"]

    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "graph.parquet"
        start = time.perf_counter()
        write_graph(graph, path)
        timings["write Parquet"] = time.perf_counter() - start
        start = time.perf_counter()
        again = read_graph(path)
        timings["read Parquet"] = time.perf_counter() - start
        assert again.n_edges == graph.n_edges

    print(f"tasks {graph.n_tasks:,}  edges {graph.n_edges:,}  nodes {cluster.n_nodes}  valid {report['valid']}")
    for stage, seconds in timings.items():
        ratio = seconds / timings["baseline: one pass over edges"]
        print(f"{stage:34s} {seconds:8.2f} s  ({ratio:6.1f} x baseline)")
    print(f"peak RSS {peak_rss_mb():,.0f} MB; arrays of the graph "
          f"{sum(a.nbytes for a in (graph.src, graph.dst, graph.rate, graph.bytes_rate, graph.load)) / 2**20:,.0f} MB")


if __name__ == "__main__":
    main()
