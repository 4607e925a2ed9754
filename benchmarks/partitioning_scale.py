"""The METIS scheduler on a 1,000,000-task, 10,000,000-edge graph onto 1,000 nodes.

The graph: 100 operators of 10,000 tasks (load 1); every task of operators 0-98 sends to 10
tasks of the next operator (offsets 0, +-1, +-2, 37, 101, 997, 3331, 5003 around its own index:
mostly local, some far), and the first operator's tasks also send to 10 tasks of operator 2
(skip edges): 9,900,000 + 100,000 edges, rates uniform in [1, 100) (seeded). Cluster: 1,000
nodes of capacity 1,050 (5 % slack), 4 slots each. ``--tasks N`` scales it: 100 operators of
N / 100 tasks onto N / 1,000 nodes.

Reports wall time and peak resident memory (ru_maxrss) of each stage, the inter-node traffic
of ``metis`` and of ``even`` on the same graph. Each scheduler runs in its own process so
that peak memory is its own::

    nice .venv/bin/python benchmarks/partitioning_scale.py             # both, ~2-4 minutes
    nice .venv/bin/python benchmarks/partitioning_scale.py --only metis --param objective=cut

``ratio`` mode: in one process, the ``metis`` scheduler against a bare ``pymetis.part_graph``
call on the same CSR graph (same vertex and edge weights, options and seed; the arrays built
beforehand, outside the timing), alternately ``--repeat`` times each; the ratio is best
scheduler time / best bare time, so it counts everything the scheduler does outside METIS
(CSR, weights, capacity repair, the second level onto workers, metadata, cost)::

    nice .venv/bin/python benchmarks/partitioning_scale.py ratio --tasks 250000 --repeat 3
    nice .venv/bin/python benchmarks/partitioning_scale.py ratio --tasks 1000000 --repeat 2
    nice .venv/bin/python benchmarks/partitioning_scale.py ratio --tasks 1000000 --objective cut
    nice .venv/bin/python benchmarks/partitioning_scale.py ratio --tasks 250000 --profile /tmp/metis.prof
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

LAYERS, WIDTH, FANOUT = 100, 10_000, 10
OFFSETS = np.array([0, 1, -1, 2, -2, 37, 101, 997, 3331, 5003])
SKIP_OFFSETS = np.array([0, 3, -3, 11, -11, 53, 211, 1499, 2999, 4999])


def big_graph(seed: int = 0, tasks: int = LAYERS * WIDTH):
    from streamsched.model.taskgraph import TaskGraph

    width = tasks // LAYERS
    rng = np.random.default_rng(seed)
    j = np.arange(width)
    src, dst = [], []
    for layer in range(LAYERS - 1):
        s = np.repeat(layer * width + j, FANOUT)
        d = (layer + 1) * width + (np.repeat(j, FANOUT) + np.tile(OFFSETS, width)) % width
        src.append(s)
        dst.append(d)
    src.append(np.repeat(j, FANOUT))
    dst.append(2 * width + (np.repeat(j, FANOUT) + np.tile(SKIP_OFFSETS, width)) % width)
    src, dst = np.concatenate(src), np.concatenate(dst)
    rate = rng.uniform(1.0, 100.0, src.size)
    n = LAYERS * width
    return TaskGraph.build(f"scale-{n}", [f"op{i}" for i in range(LAYERS)], np.repeat(np.arange(LAYERS), width),
                           np.ones(n), src, dst, rate)


def big_cluster(tasks: int = LAYERS * WIDTH):
    from streamsched.model.cluster import Cluster

    nodes = max(1, tasks // 1000)
    return Cluster.from_types(f"scale-{nodes}", (nodes, {"capacity": 1050.0, "slots": 4}))


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run_one(name: str, params: dict, tasks: int = LAYERS * WIDTH) -> dict:
    from streamsched.metrics import inter_node_traffic, inter_worker_traffic
    from streamsched.schedulers import get_scheduler

    start = time.perf_counter()
    graph = big_graph(tasks=tasks)
    nodes = big_cluster(tasks)
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


def bare_inputs(graph, objective: str, seed: int):
    """The CSR arrays, weights and options the ``metis`` scheduler hands METIS, built here once."""
    import pymetis

    from streamsched.partitioning.backends import _csr_arrays, integer_weights
    from streamsched.schedulers.metis import traffic_weights

    xadj, adjncy, eweights = _csr_arrays(graph.undirected)
    del graph.__dict__["undirected"]  # the scheduler's run builds its own
    idx = pymetis.zero_copy_dtype()
    return dict(adjacency=pymetis.CSRAdjacency(xadj.astype(idx), adjncy.astype(idx)),
                vweights=integer_weights(traffic_weights(graph), allow_zero=True).astype(idx),
                eweights=eweights.astype(idx),
                options=pymetis.Options(seed=seed, ufactor=30, objtype=pymetis.ObjType.VOL
                                        if objective == "volume" else pymetis.ObjType.CUT))


def ratio(tasks: int, objective: str, repeat: int, profile: str | None, seed: int = 0) -> dict:
    import pymetis

    from streamsched.native_output import captured_native_output
    from streamsched.schedulers import get_scheduler

    from streamsched.partitioning import backends

    graph, nodes = big_graph(tasks=tasks), big_cluster(tasks)
    inputs = bare_inputs(graph, objective, seed)
    scheduler = get_scheduler("metis", objective=objective)
    bare_s, sched_s, bare_cpu, sched_cpu, same = [], [], [], [], []
    inside_cpu = []  # CPU seconds in METIS calls made by the scheduler: [first call, all calls]
    metis = backends._metis

    def timed_metis(*args, **kwargs):
        cpu = time.process_time()
        try:
            return metis(*args, **kwargs)
        finally:
            spent = time.process_time() - cpu
            calls = inside_cpu[-1]
            calls[0] += spent if calls[2] == 0 else 0.0
            calls[1] += spent
            calls[2] += 1

    backends._metis = timed_metis
    for _ in range(repeat):
        inside_cpu.append([0.0, 0.0, 0])
        start, cpu = time.perf_counter(), time.process_time()
        with captured_native_output("METIS"):
            bare = pymetis.part_graph(nodes.n_nodes, **inputs)
        bare_s.append(time.perf_counter() - start)
        bare_cpu.append(time.process_time() - cpu)
        graph.__dict__.pop("undirected", None)
        start, cpu = time.perf_counter(), time.process_time()
        if profile:
            import cProfile

            profiler = cProfile.Profile()
            placement = profiler.runcall(scheduler.schedule, graph, nodes, seed)
            profiler.dump_stats(profile)
        else:
            placement = scheduler.schedule(graph, nodes, seed=seed)
        sched_s.append(time.perf_counter() - start)
        sched_cpu.append(time.process_time() - cpu)
        parts = np.asarray(bare.vertex_part)
        same.append(_same_partition(parts, placement.node_of))
    adjacency = graph.undirected
    quality = dict(bare_volume=comm_volume(adjacency, parts), scheduler_volume=comm_volume(adjacency, placement.node_of),
                   bare_cut=round(float(adjacency.data[parts[np.repeat(np.arange(graph.n_tasks), np.diff(
                       adjacency.indptr))] != parts[adjacency.indices]].sum()) / 2, 1))
    return dict(tasks=graph.n_tasks, edges=graph.n_edges, nodes=nodes.n_nodes, objective=objective,
                bare_s=[round(x, 2) for x in bare_s], scheduler_s=[round(x, 2) for x in sched_s],
                ratio=round(min(sched_s) / min(bare_s), 3), bare_cpu_s=[round(x, 2) for x in bare_cpu],
                scheduler_cpu_s=[round(x, 2) for x in sched_cpu], cpu_ratio=round(min(sched_cpu) / min(bare_cpu), 3),
                metis_calls=inside_cpu[-1][2], first_metis_call_cpu_s=[round(c[0], 2) for c in inside_cpu],
                all_metis_calls_cpu_s=[round(c[1], 2) for c in inside_cpu],
                outside_metis_cpu_s=[round(s - c[1], 2) for s, c in zip(sched_cpu, inside_cpu)],
                outside_metis_share=round(min(s - c[1] for s, c in zip(sched_cpu, inside_cpu)) / min(bare_cpu), 3),
                outside_first_call_share=round(min(s - c[0] for s, c in zip(sched_cpu, inside_cpu)) / min(bare_cpu), 3),
                load=[round(x, 1) for x in os.getloadavg()], peak_mb=round(peak_mb()),
                valid=placement.violations(graph, nodes) == [], cost=round(placement.metadata["cost"], 1), **quality,
                repaired=bool(placement.metadata.get("repaired", False)),
                tasks_off_bare_partition=same)


def comm_volume(adjacency, parts: np.ndarray) -> int:
    """Total communication volume: per vertex, the number of other parts among its neighbours."""
    parts = np.asarray(parts, dtype=np.int64)
    rows = np.repeat(np.arange(parts.size), np.diff(adjacency.indptr))
    other = parts[adjacency.indices]
    foreign = other != parts[rows]
    return int(np.unique(rows[foreign] * (int(parts.max()) + 1) + other[foreign]).size)


def _same_partition(parts: np.ndarray, node_of: np.ndarray) -> int:
    """How many tasks the scheduler did not leave with the bulk of their METIS part (the
    heaviest-to-largest relabelling and the capacity repair move some)."""
    n_parts = int(max(parts.max(), node_of.max())) + 1
    pairs = np.bincount(parts * n_parts + node_of, minlength=n_parts * n_parts).reshape(n_parts, n_parts)
    return int(parts.size - pairs.max(axis=1).sum())


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "ratio":
        parser = argparse.ArgumentParser(description="metis scheduler / bare pymetis.part_graph, same process")
        parser.add_argument("ratio")
        parser.add_argument("--tasks", type=int, default=LAYERS * WIDTH)
        parser.add_argument("--objective", default="volume", choices=("volume", "cut"))
        parser.add_argument("--repeat", type=int, default=2)
        parser.add_argument("--profile", help="cProfile the (last) scheduler run into this file")
        args = parser.parse_args()
        print(json.dumps(ratio(args.tasks, args.objective, args.repeat, args.profile)), flush=True)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=LAYERS * WIDTH)
    parser.add_argument("--only", choices=("metis", "even"))
    parser.add_argument("--param", action="append", default=[], help="KEY=VALUE for metis (repeatable)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        params = dict(p.split("=", 1) for p in args.param) if args.child == "metis" else {}
        print(json.dumps(run_one(args.child, params, args.tasks)))
        return 0
    for name in [args.only] if args.only else ["metis", "even"]:
        extra = [f"--param={p}" for p in args.param]
        out = subprocess.run([sys.executable, __file__, "--child", name, f"--tasks={args.tasks}", *extra], capture_output=True, text=True,
                             check=True)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
