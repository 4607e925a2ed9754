"""Cost of reading and writing documents through their JSON Schemas (issue 28, item 6).

For each document kind and size: the reader (``Topology.from_dict``, ``Cluster.from_dict``,
``Placement.from_dict``) or the exporter (``exports.export``, which checks the plan against its
schema), against the baseline of the same run, ``json.loads`` of the same document's text
(median of ``--repeat`` runs, wall time). Run it with the sources of two commits to compare them:

    PYTHONPATH=src nice .venv/bin/python benchmarks/documents.py
    PYTHONPATH=/path/to/other/checkout/src nice .venv/bin/python benchmarks/documents.py

Sizes: topologies of 500 and 50,000 operators (the operator bound), clusters of 1,000 and
20,000 nodes listed one by one, placements and plans of random-K workloads.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from streamsched import workloads
from streamsched.model import Cluster, Placement, Topology
from streamsched.schedulers import get_scheduler


def median_seconds(function, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def topology_document(n: int) -> dict:
    return {"name": "t", "operators": [{"name": f"o{k}", "parallelism": 2, "cpu_per_tuple": 0.001, "memory_mb": 64,
                                        "role": "operator"} for k in range(n)],
            "streams": [{"from": f"o{k}", "to": f"o{k + 1}", "grouping": "shuffle"} for k in range(n - 1)]}


def cluster_document(n: int) -> dict:
    return {"name": "c", "nodes": [{"name": f"n{k}", "capacity": 4, "slots": 4, "cores": 4, "ram_mb": 4096,
                                    "rack": f"r{k % 10}", "kind": "cloud"} for k in range(n)]}


def row(kind: str, size: str, text: str, work, repeat: int) -> None:
    parse = median_seconds(lambda: json.loads(text), repeat)
    seconds = median_seconds(work, repeat)
    print(f"| {kind} | {size} | {parse:.3f} | {seconds:.3f} | {seconds / parse:.1f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workloads", default="random-200,random-2000", help="placements and plans of these")
    args = parser.parse_args()
    print("| document | size | json.loads s | read or export s | ratio |\n|---|---|---|---|---|")
    for n in (500, 50_000):
        document = topology_document(n)
        row("topology", f"{n:,} operators", json.dumps(document), lambda: Topology.from_dict(document), args.repeat)
    for n in (1_000, 20_000):
        document = cluster_document(n)
        row("cluster", f"{n:,} nodes", json.dumps(document), lambda: Cluster.from_dict(document), args.repeat)
    from streamsched.engines.exports import export

    for name in args.workloads.split(","):
        graph = workloads.workload(name)
        cluster = Cluster.from_types("c", (200, {"capacity": graph.total_load / 20, "slots": 4}))
        placement = get_scheduler("even").schedule(graph, cluster)
        document = placement.to_dict(graph, cluster)
        size = f"{graph.n_tasks:,} tasks"
        row("placement", size, json.dumps(document), lambda: Placement.from_dict(document, graph, cluster), args.repeat)
        for fmt in ("heron", "kubernetes"):
            text = json.dumps(export(fmt, graph, cluster, placement))
            row(f"{fmt} plan", size, text, lambda: export(fmt, graph, cluster, placement), args.repeat)


if __name__ == "__main__":
    main()
