"""The METIS scheduler on a 1,000,000-task, 10,000,000-edge graph onto 1,000 nodes.

The graph: 100 operators of 10,000 tasks (load 1); every task of operators 0-98 sends to 10
tasks of the next operator (offsets 0, +-1, +-2, 37, 101, 997, 3331, 5003 around its own index:
mostly local, some far), and the first operator's tasks also send to 10 tasks of operator 2
(skip edges): 9,900,000 + 100,000 edges, rates uniform in [1, 100) (seeded). Cluster: 1,000
nodes of capacity 1,050 (5 % slack), 4 slots each.

Reports wall time and peak resident memory (ru_maxrss) of each stage, the inter-node traffic
of ``metis`` and of ``even`` on the same graph. Each scheduler runs in its own process so
that peak memory is its own::

    nice .venv/bin/python benchmarks/partitioning_scale.py             # both, ~2-4 minutes
    nice .venv/bin/python benchmarks/partitioning_scale.py --only metis --param objective=cut
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np

LAYERS, WIDTH, FANOUT = 100, 10_000, 10
OFFSETS = np.array([0, 1, -1, 2, -2, 37, 101, 997, 3331, 5003])
SKIP_OFFSETS = np.array([0, 3, -3, 11, -11, 53, 211, 1499, 2999, 4999])


def big_graph(seed: int = 0):
    from streamsched.model.taskgraph import TaskGraph

    rng = np.random.default_rng(seed)
    j = np.arange(WIDTH)
    src, dst = [], []
    for layer in range(LAYERS - 1):
        s = np.repeat(layer * WIDTH + j, FANOUT)
        d = (layer + 1) * WIDTH + (np.repeat(j, FANOUT) + np.tile(OFFSETS, WIDTH)) % WIDTH
        src.append(s)
        dst.append(d)
    src.append(np.repeat(j, FANOUT))
    dst.append(2 * WIDTH + (np.repeat(j, FANOUT) + np.tile(SKIP_OFFSETS, WIDTH)) % WIDTH)
    src, dst = np.concatenate(src), np.concatenate(dst)
    rate = rng.uniform(1.0, 100.0, src.size)
    n = LAYERS * WIDTH
    return TaskGraph.build("scale-1m", [f"op{i}" for i in range(LAYERS)], np.repeat(np.arange(LAYERS), WIDTH),
                           np.ones(n), src, dst, rate)


def big_cluster():
    from streamsched.model.cluster import Cluster

    return Cluster.from_types("scale-1000", (1000, {"capacity": 1050.0, "slots": 4}))


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run_one(name: str, params: dict) -> dict:
    from streamsched.metrics import inter_node_traffic, inter_worker_traffic
    from streamsched.schedulers import get_scheduler

    start = time.perf_counter()
    graph = big_graph()
    nodes = big_cluster()
    build_s = time.perf_counter() - start
    build_mb = peak_mb()
    start = time.perf_counter()
    placement = get_scheduler(name, **params).schedule(graph, nodes, seed=0)
    schedule_s = time.perf_counter() - start
    return {
        "scheduler": name,
        "params": params,
        "tasks": graph.n_tasks,
        "edges": graph.n_edges,
        "nodes": nodes.n_nodes,
        "graph_build_s": round(build_s, 2),
        "peak_mb_after_build": round(build_mb),
        "schedule_s": round(schedule_s, 2),
        "peak_mb": round(peak_mb()),
        "valid": placement.violations(graph, nodes) == [],
        "inter_node_traffic": inter_node_traffic(graph, placement),
        "inter_worker_traffic": inter_worker_traffic(graph, placement),
        "total_traffic": graph.total_rate,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("metis", "even"))
    parser.add_argument("--param", action="append", default=[], help="KEY=VALUE for metis (repeatable)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        params = dict(p.split("=", 1) for p in args.param) if args.child == "metis" else {}
        print(json.dumps(run_one(args.child, params)))
        return 0
    for name in [args.only] if args.only else ["metis", "even"]:
        extra = [f"--param={p}" for p in args.param]
        out = subprocess.run([sys.executable, __file__, "--child", name, *extra], capture_output=True, text=True,
                             check=True)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
