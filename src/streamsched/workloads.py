"""Built-in workloads and clusters, by name, and a seeded random-DAG generator.

Workloads (``workload_names()``):

- ``linear-N``, ``diamond-N``, ``star-N`` for N = 10, 12, ..., 32: the micro-benchmarks of
  i-scheduler.txt section 5 (Fig. 3, Table 3) and t3-scheduler.txt section 5: linear has 2
  tasks per operator; diamond a source and sink of 4 tasks with middle operators of 2; star a
  middle operator of 4 tasks with 2-task sources and sinks added alternately (source first).
  Rate 1 per communicating task pair (every pair of consecutive operators' tasks), load 1.
- ``linear-tp``, ``diamond-tp``, ``star-tp``: the throughput variants of i-scheduler.txt 6.1
  (8 tasks per operator; star sources 4). The paper does not give their operator counts: we
  use 4 operators (linear), source + 2 middle + sink (diamond), 2 sources + centre + 2 sinks (star).
- ``rstorm-linear``, ``rstorm-diamond``, ``rstorm-star``: R-Storm's micro-benchmarks.
- ``wordcount`` (5 -> 8 shuffle -> 12 fields), ``exclamation`` (10 -> 3 -> 2 shuffle).
- ``smart-home`` (DEBS 2014: diamond, 10 tasks per operator), ``taxi-routes`` (DEBS 2015:
  16/16/8/4/1 with shuffle, shuffle, fields, global).
- ``parallel``, ``payload`` (fischer-metis-scheduler.txt IV-C: spout + D = 7 bolts in P = 10
  disjoint fields-grouped chains, modelled as ``forward``; tuples of 16 B and 3 KB).
- ``pageload`` (7-component shuffle chain, p = 3), ``processing`` (spout p = 2 -> transform
  p = 4 -> two branches of two bolts p = 4).
- ``random-K`` or ``random-K-sS``: :func:`random_topology` with K operators and seed S.

Clusters (``cluster_names()``): ``homogeneous-10`` (10 x capacity 4), ``heterogeneous-10``
(3 x 6 + 3 x 4 + 4 x 2), ``high-low-H-L`` (the I-/T3-Scheduler VMs: high = 4 cores, 4 GiB,
4 slots, capacity 16; low = 2 cores, 2 GiB, 2 slots, capacity 8; 2.7 GHz), ``thesis-9`` (the
nine supervisors of thesis Table 4.1; ``thesis-9-sK`` with K slots each, Table 4.2),
``storm-large-01/02/03`` (the supervisor layouts of Storm's ``TestLargeCluster``, racks included).
"""

from __future__ import annotations

import re
from typing import Callable

import numpy as np

from streamsched.errors import InputError
from streamsched.model.cluster import Cluster, Node
from streamsched.model.contention import PROFILES, builtin_profile, graph_from_profile
from streamsched.model.limits import check_nodes, check_operators, check_tasks
from streamsched.model.taskgraph import TaskGraph
from streamsched.model.topology import Operator, Stream, Topology
from streamsched.model.units import CORES

MICRO_SIZES = tuple(range(10, 33, 2))


def _op(name: str, p: int, role: str = "operator", **kw) -> Operator:
    return Operator(name=name, parallelism=p, role=role, **kw)


def _unit_pairs(name: str, ops: list[Operator], links: list[tuple[str, str]]) -> Topology:
    """Micro-benchmark convention: load 1 per task, rate 1 per communicating task pair."""
    ops = [Operator(**{**op.__dict__, "task_load": 1.0}) for op in ops]
    return Topology(name, tuple(ops), tuple(Stream(a, b, pair_rate=1.0) for a, b in links))


def micro_linear(n_tasks: int) -> Topology:
    """i-scheduler.txt Fig. 3a: a chain of n/2 operators of 2 tasks each."""
    k = n_tasks // 2
    ops = [_op(f"op{i}", 2, "source" if i == 0 else "sink" if i == k - 1 else "operator") for i in range(k)]
    return _unit_pairs(f"linear-{n_tasks}", ops, [(f"op{i}", f"op{i + 1}") for i in range(k - 1)])


def micro_diamond(n_tasks: int) -> Topology:
    """i-scheduler.txt Fig. 3b: source (4) -> (n-8)/2 middle operators (2) -> sink (4)."""
    middle = (n_tasks - 8) // 2
    ops = [_op("source", 4, "source")] + [_op(f"mid{i}", 2) for i in range(middle)] + [_op("sink", 4, "sink")]
    links = [("source", f"mid{i}") for i in range(middle)] + [(f"mid{i}", "sink") for i in range(middle)]
    return _unit_pairs(f"diamond-{n_tasks}", ops, links)


def micro_star(n_tasks: int) -> Topology:
    """i-scheduler.txt Fig. 3c: 2-task sources and sinks added alternately around a 4-task centre."""
    outer = (n_tasks - 4) // 2
    n_src = (outer + 1) // 2
    n_sink = outer - n_src
    ops = [_op(f"source{i}", 2, "source") for i in range(n_src)] + [_op("center", 4)]
    ops += [_op(f"sink{i}", 2, "sink") for i in range(n_sink)]
    links = [(f"source{i}", "center") for i in range(n_src)] + [("center", f"sink{i}") for i in range(n_sink)]
    return _unit_pairs(f"star-{n_tasks}", ops, links)


def _throughput_variants() -> dict[str, Callable[[], Topology]]:
    def linear():
        ops = [_op("spout", 8, "source")] + [_op(f"bolt{i}", 8) for i in (1, 2)] + [_op("sink", 8, "sink")]
        return _unit_pairs("linear-tp", ops, [("spout", "bolt1"), ("bolt1", "bolt2"), ("bolt2", "sink")])

    def diamond():
        ops = [_op("spout", 8, "source"), _op("left", 8), _op("right", 8), _op("sink", 8, "sink")]
        return _unit_pairs("diamond-tp", ops, [("spout", "left"), ("spout", "right"), ("left", "sink"), ("right", "sink")])

    def star():
        ops = [_op("spout1", 4, "source"), _op("spout2", 4, "source"), _op("center", 8),
               _op("sink1", 8, "sink"), _op("sink2", 8, "sink")]
        links = [("spout1", "center"), ("spout2", "center"), ("center", "sink1"), ("center", "sink2")]
        return _unit_pairs("star-tp", ops, links)

    return {"linear-tp": linear, "diamond-tp": diamond, "star-tp": star}


def _rated(name, ops, streams, rate=1000.0) -> Topology:
    """Application workloads: load 1 per task (capacity = tasks), rates from ``rate`` at the spouts."""
    ops = [Operator(**{**op.__dict__, "task_load": 1.0,
                       "source_rate": rate if op.role == "source" else 0.0}) for op in ops]
    return Topology(name, tuple(ops), tuple(streams))


def _applications() -> dict[str, Callable[[], Topology]]:
    def rstorm_linear():
        ops = [_op("spout", 4, "source")] + [_op(f"bolt{i}", 6) for i in (1, 2, 3)]
        names = ["spout", "bolt1", "bolt2", "bolt3"]
        return _rated("rstorm-linear", ops, [Stream(a, b) for a, b in zip(names, names[1:])])

    def rstorm_diamond():
        ops = [_op("spout", 2, "source")] + [_op(f"bolt{i}", 4) for i in range(1, 5)] + [_op("output", 6, "sink")]
        streams = [Stream("spout", f"bolt{i}") for i in range(1, 5)] + [Stream(f"bolt{i}", "output") for i in range(1, 5)]
        return _rated("rstorm-diamond", ops, streams)

    def rstorm_star():
        ops = [_op("spout1", 2, "source"), _op("spout2", 2, "source"), _op("center", 6),
               _op("output1", 6, "sink"), _op("output2", 6, "sink")]
        streams = [Stream("spout1", "center"), Stream("spout2", "center"),
                   Stream("center", "output1"), Stream("center", "output2")]
        return _rated("rstorm-star", ops, streams)

    def wordcount():
        ops = [_op("spout", 5, "source", tuple_bytes=60), _op("split", 8, selectivity=8, tuple_bytes=12),
               _op("count", 12, "sink", tuple_bytes=20)]
        return _rated("wordcount", ops, [Stream("spout", "split"), Stream("split", "count", "fields", key_skew=1.0)])

    def exclamation():
        ops = [_op("word", 10, "source", tuple_bytes=12), _op("exclaim1", 3, tuple_bytes=15), _op("exclaim2", 2, "sink")]
        return _rated("exclamation", ops, [Stream("word", "exclaim1"), Stream("exclaim1", "exclaim2")])

    def smart_home():
        ops = [_op("source", 10, "source", tuple_bytes=48), _op("house_load", 10, selectivity=0.1),
               _op("plug_load", 10, selectivity=0.1), _op("sink", 10, "sink")]
        streams = [Stream("source", "house_load", "fields"), Stream("source", "plug_load", "fields"),
                   Stream("house_load", "sink"), Stream("plug_load", "sink")]
        return _rated("smart-home", ops, streams)

    def taxi_routes():
        ops = [_op("source", 16, "source", tuple_bytes=180), _op("parse", 16, tuple_bytes=40),
               _op("cells", 8, tuple_bytes=24), _op("route_count", 4, selectivity=0.05, tuple_bytes=200),
               _op("top_routes", 1, "sink")]
        streams = [Stream("source", "parse"), Stream("parse", "cells"), Stream("cells", "route_count", "fields"),
                   Stream("route_count", "top_routes", "global")]
        return _rated("taxi-routes", ops, streams)

    def chains(name: str, tuple_bytes: float, depth: int = 7, parallelism: int = 10):
        ops = [_op("spout", parallelism, "source", tuple_bytes=tuple_bytes)]
        ops += [_op(f"bolt{i}", parallelism, "sink" if i == depth else "operator", tuple_bytes=tuple_bytes)
                for i in range(1, depth + 1)]
        names = [op.name for op in ops]
        return _rated(name, ops, [Stream(a, b, "forward") for a, b in zip(names, names[1:])])

    def pageload():
        ops = [_op("spout", 3, "source")] + [_op(f"bolt{i}", 3) for i in range(1, 7)]
        names = [op.name for op in ops]
        return _rated("pageload", ops, [Stream(a, b) for a, b in zip(names, names[1:])])

    def processing():
        ops = [_op("spout", 2, "source"), _op("transform", 4), _op("a1", 4), _op("a2", 4, "sink"),
               _op("b1", 4), _op("b2", 4, "sink")]
        streams = [Stream("spout", "transform"), Stream("transform", "a1"), Stream("a1", "a2"),
                   Stream("transform", "b1"), Stream("b1", "b2")]
        return _rated("processing", ops, streams)

    return {
        "rstorm-linear": rstorm_linear, "rstorm-diamond": rstorm_diamond, "rstorm-star": rstorm_star,
        "wordcount": wordcount, "exclamation": exclamation, "smart-home": smart_home,
        "taxi-routes": taxi_routes, "parallel": lambda: chains("parallel", 16.0),
        "payload": lambda: chains("payload", 3072.0), "pageload": pageload, "processing": processing,
    }


def random_topology(n_operators: int, seed: int = 0, max_fanout: int = 5,
                    parallelism: tuple[int, int] = (1, 8), groupings: dict[str, float] | None = None,
                    source_share: float = 0.1, name: str | None = None) -> Topology:
    """A seeded random DAG: operator i draws 1-2 parents among the 16 operators before it whose
    fan-out is below ``max_fanout`` (so the DAG has depth; none free: i becomes a source).

    About ``source_share`` of the operators are sources; parallelism is uniform in
    ``parallelism``; groupings are drawn from ``groupings`` (weights; default 60 % shuffle, 28 %
    fields with skew in [0, 1.5], 10 % global, 2 % all); selectivity uniform in [0.3, 1].
    """
    if n_operators < 1:
        raise InputError(f"random workload: operators must be >= 1, got {n_operators}")
    check_operators(n_operators, f"random workload {name or n_operators!r}")
    check_tasks(n_operators * parallelism[0], f"random workload {name or n_operators!r}")
    rng = np.random.default_rng(seed)
    groupings = groupings or {"shuffle": 0.6, "fields": 0.28, "global": 0.1, "all": 0.02}
    kinds = list(groupings)
    weights = np.array([groupings[k] for k in kinds], dtype=float)
    n_sources = max(1, int(round(n_operators * source_share)))
    par = rng.integers(parallelism[0], parallelism[1] + 1, size=n_operators)
    selectivity = rng.uniform(0.3, 1.0, size=n_operators)
    tuple_bytes = rng.integers(16, 1024, size=n_operators)
    n_parents = 1 + rng.integers(0, 2, size=n_operators)
    kind_of = rng.choice(len(kinds), size=(n_operators, 2), p=weights / weights.sum())
    skew_of = rng.uniform(0, 1.5, size=(n_operators, 2))
    pick = rng.random(size=(n_operators, 2))
    kind_names = [kinds[k] for k in kind_of.ravel().tolist()]
    fanout = [0] * n_operators
    has_parent = [False] * n_operators
    streams: list[Stream] = []
    for i in range(n_sources, n_operators):
        window = [j for j in range(max(0, i - 16), i) if fanout[j] < max_fanout]
        if not window:
            continue
        first = int(pick[i, 0] * len(window))
        parents = [window[first]]
        if n_parents[i] == 2 and len(window) > 1:
            second = int(pick[i, 1] * (len(window) - 1))
            parents.append(window[second + (second >= first)])
        for k, parent in enumerate(sorted(parents)):
            kind = kind_names[2 * i + k]
            skew = float(skew_of[i, k]) if kind == "fields" else 0.0
            streams.append(Stream(f"op{parent}", f"op{i}", kind, key_skew=skew))
            fanout[parent] += 1
        has_parent[i] = True
    ops = []
    for i in range(n_operators):
        role = "operator" if has_parent[i] and fanout[i] else "sink" if has_parent[i] else "source"
        ops.append(Operator(f"op{i}", int(par[i]), role, cpu_per_tuple=1e-3, selectivity=float(selectivity[i]),
                            tuple_bytes=float(tuple_bytes[i]), source_rate=1000.0 if role == "source" else 0.0))
    return Topology(name or f"random-{n_operators}-s{seed}", tuple(ops), tuple(streams))


_MICRO = {"linear": micro_linear, "diamond": micro_diamond, "star": micro_star}
_FIXED: dict[str, Callable[[], Topology]] = {**_throughput_variants(), **_applications()}


# --------------------------------------------------- Fischer's chains (graphs, not topologies)
def fischer_chains(name: str, parallelism: int, depth: int, tuple_bytes: float, seed: int) -> TaskGraph:
    """fischer-metis-scheduler.txt IV-C, Fig. 3: a spout and ``depth`` bolts, ``parallelism``
    tasks each, joined by fields grouping on one key per chain. Storm routes a key to
    ``hash(key) mod P``, so stage j's task i feeds stage j+1's task ``perm_j(i)`` for a seeded
    permutation: the chains are disjoint but not aligned by task index. Spouts emit 1000 tuples/s."""
    rng = np.random.default_rng(seed)
    p = parallelism
    task_operator = np.repeat(np.arange(depth + 1), p)
    chain = np.arange(p)
    src, dst = [], []
    for stage in range(depth):
        nxt = rng.permutation(p)
        src.append(stage * p + chain)
        dst.append((stage + 1) * p + nxt[chain])
        chain = nxt[chain]
    src_a, dst_a = np.concatenate(src), np.concatenate(dst)
    rate = np.full(src_a.size, 1000.0)
    names = ["spout"] + [f"bolt{i}" for i in range(1, depth + 1)]
    return TaskGraph.build(name, names, task_operator, np.ones(task_operator.size), src_a, dst_a, rate,
                           bytes_rate=rate * tuple_bytes)


def fischer_graph(name: str, seed: int = 0) -> TaskGraph | None:
    """``fischer-parallel-P``, ``fischer-payload-P`` (depth 7, tuples of 16 and 3072 bytes) or
    ``fischer-bytes-B-P`` (depth 3, tuples of B bytes, fischer-metis-scheduler.txt V-B1); None
    for any other name."""
    match = re.fullmatch(r"fischer-(parallel|payload)-([1-9]\d*)", name)
    if match:
        size = 16.0 if match.group(1) == "parallel" else 3072.0
        check_tasks(8 * int(match.group(2)), f"workload {name!r}")
        return fischer_chains(name, int(match.group(2)), 7, size, seed)
    match = re.fullmatch(r"fischer-bytes-(\d+)-([1-9]\d*)", name)
    if match:
        check_tasks(4 * int(match.group(2)), f"workload {name!r}")
        return fischer_chains(name, int(match.group(2)), 3, float(match.group(1)), seed)
    return None


def fischer_cluster(name: str) -> Cluster | None:
    """``fischer-N``: N iMacs (4 cores at 2.7 GHz, 1 Gbps), one worker slot each, capacity 8
    tasks (fischer-metis-scheduler.txt IV-D: about 8 tasks per machine); None for any other name."""
    match = re.fullmatch(r"fischer-([1-9]\d*)", name)
    if match:
        n = int(match.group(1))
        check_nodes(n, f"cluster {name!r}")
        nodes = tuple(Node(f"imac{i + 1}", capacity=8.0, slots=1, cores=4, ghz=2.7, ram_mb=8192.0,
                           rack=f"row-{i // 8}") for i in range(n))
        return Cluster(name, nodes)
    return None


#: ``list workloads``: per name (a family for the sized ones), what it is and where it comes from.
WORKLOAD_DESCRIPTIONS: dict[str, tuple[str, str]] = {
    "linear-N": ("micro-benchmark: a chain of N/2 operators of 2 tasks; rate 1 per task pair, load 1",
                 "i-scheduler.txt Fig. 3a; t3-scheduler.txt sec. 5"),
    "diamond-N": ("micro-benchmark: source (4 tasks) -> (N-8)/2 middle operators (2) -> sink (4)",
                  "i-scheduler.txt Fig. 3b; t3-scheduler.txt sec. 5"),
    "star-N": ("micro-benchmark: 2-task sources and sinks, added alternately, around a 4-task centre",
               "i-scheduler.txt Fig. 3c; t3-scheduler.txt sec. 5"),
    "linear-tp": ("throughput variant: a chain of 4 operators of 8 tasks", "i-scheduler.txt sec. 6.1"),
    "diamond-tp": ("throughput variant: spout -> two middle operators -> sink, 8 tasks each", "i-scheduler.txt sec. 6.1"),
    "star-tp": ("throughput variant: 2 spouts (4 tasks) -> centre (8) -> 2 sinks (8)", "i-scheduler.txt sec. 6.1"),
    "rstorm-linear": ("R-Storm's linear benchmark: spout (4) -> 3 bolts (6), shuffle", "R-Storm (Peng et al. 2015)"),
    "rstorm-diamond": ("R-Storm's diamond benchmark: spout (2) -> 4 bolts (4) -> output (6)", "R-Storm (Peng et al. 2015)"),
    "rstorm-star": ("R-Storm's star benchmark: 2 spouts (2) -> centre (6) -> 2 outputs (6)", "R-Storm (Peng et al. 2015)"),
    "wordcount": ("WordCount: spout (5) -> split (8, shuffle, x8 words) -> count (12, fields, skewed keys)",
                  "thesis-top-a3-ban-gr-storm.txt ch. 4, Table 4.2"),
    "exclamation": ("Exclamation: word (10) -> exclaim1 (3) -> exclaim2 (2), shuffle",
                    "thesis-top-a3-ban-gr-storm.txt ch. 4, Table 4.2"),
    "smart-home": ("DEBS 2014 load prediction: source -> house / plug load (fields) -> sink, 10 tasks each",
                   "i-scheduler.txt sec. 6.2"),
    "taxi-routes": ("DEBS 2015 frequent routes: 16 / 16 / 8 / 4 / 1 tasks; shuffle, shuffle, fields, global",
                    "t3-scheduler.txt sec. 6.3"),
    "parallel": ("Parallel: spout + 7 bolts in 10 disjoint chains, 16 B tuples", "fischer-metis-scheduler.txt IV-C"),
    "payload": ("Payload: Parallel with 3 KB tuples",
                "fischer-metis-scheduler.txt IV-C"),
    "pageload": ("PageLoad: a shuffle chain of 7 components of 3 tasks", "R-Storm's evaluation (thesis related work)"),
    "processing": ("Processing: spout (2) -> transform (4) -> two branches of two bolts (4)",
                   "R-Storm's evaluation (thesis related work)"),
    "fischer-parallel-P": ("Fischer's Parallel as measured: spout + 7 bolts in P disjoint fields-grouped chains "
                           "(seeded routing), 1000 tuples/s of 16 B per pair", "fischer-metis-scheduler.txt IV-C"),
    "fischer-payload-P": ("fischer-parallel-P with 3 KB tuples (the demo: P = 10, 80 tasks)",
                          "fischer-metis-scheduler.txt IV-C"),
    "fischer-bytes-B-P": ("depth-3 chains of P tasks per stage, tuples of B bytes", "fischer-metis-scheduler.txt V-B1"),
    "random-K[-sS]": ("seeded random DAG of K operators (seed S, default 0), parallelism 1-8", "ours (random_topology)"),
    "caps-<profile>": ("a CAPSys operator profile (compute, state, network per task): Q1-Q6, Q1_updated-Q6_updated, "
                       "multi, q8, deem", "CAPSys (EuroSys 2025), scripts/caps-go/json"),
    "caps-Q2-join-N": ("CAPSys's Q2-join profile scaled to N tasks (Figure 10)", "CAPSys cmd/eval_only_caps"),
}


def workload_descriptions() -> list[tuple[str, str, str, str]]:
    """``(name, tasks, what, source)`` per entry of :data:`WORKLOAD_DESCRIPTIONS`; tasks counted
    from the built graph (sized families: their sizes)."""
    sizes = f"{MICRO_SIZES[0]}-{MICRO_SIZES[-1]}"
    out = []
    for name, (what, source) in WORKLOAD_DESCRIPTIONS.items():
        if name == "caps-Q2-join-N":
            tasks = "N"
        elif name.endswith("-N"):
            tasks = f"N = {sizes}"
        elif name.endswith("-P"):
            tasks = "8 P" if name.startswith(("fischer-parallel", "fischer-payload")) else "4 P"
        elif name == "caps-<profile>":
            tasks = "21-263"
        elif name in _FIXED:
            tasks = str(workload(name).n_tasks)
        else:
            tasks = "varies"
        out.append((name, tasks, what, source))
    return out


def workload_names() -> list[str]:
    micro = [f"{shape}-{n}" for shape in _MICRO for n in MICRO_SIZES]
    return micro + sorted(_FIXED) + ["fischer-parallel-P", "fischer-payload-P", "fischer-bytes-B-P", "random-K[-sS]"] + [
        f"caps-{k}" for k in PROFILES if k != "Q2-join"] + ["caps-Q2-join-N"]


def topology(name: str) -> Topology:
    """The built-in workload ``name`` as a logical topology."""
    match = re.fullmatch(r"(linear|diamond|star)-(\d+)", name)
    if match and int(match.group(2)) in MICRO_SIZES:
        return _MICRO[match.group(1)](int(match.group(2)))
    match = re.fullmatch(r"random-(\d+)(?:-s(\d+))?", name)
    if match:
        return random_topology(int(match.group(1)), seed=int(match.group(2) or 0), name=name)
    if name in _FIXED:
        return _FIXED[name]()
    raise InputError(f"unknown workload {name!r} (known: {', '.join(workload_names())})")


def workload(name: str, seed: int = 0) -> TaskGraph:
    """The built-in workload ``name`` as a task graph (``seed``: the routing of Fischer's chains)."""
    if name.startswith("caps-"):
        return caps_workload(name)
    graph = fischer_graph(name, seed)
    return graph if graph is not None else TaskGraph.from_topology(topology(name))


def caps_workload(name: str) -> TaskGraph:
    """``caps-<profile>`` (CAPSys's profiles, :data:`~streamsched.model.contention.PROFILES`) and
    ``caps-Q2-join-N``: Figure 10's Q2-join scaled to N tasks as CAPSys's ``eval_only_caps`` does."""
    match = re.fullmatch(r"caps-Q2-join-(\d+)", name)
    if match:
        tasks = int(match.group(1))
        if not 6 <= tasks <= 1_000_000:
            raise InputError(f"workload {name!r}: Q2-join takes 6 to 1000000 tasks")
        return graph_from_profile(builtin_profile("Q2-join").scaled(tasks), name)
    key = name[len("caps-"):]
    if key not in PROFILES or key == "Q2-join":
        raise InputError(f"unknown workload {name!r} (known CAPSys profiles: "
                         f"{', '.join('caps-' + k for k in PROFILES if k != 'Q2-join')}, caps-Q2-join-N)")
    return graph_from_profile(builtin_profile(key), name)


# ------------------------------------------------------------------ clusters
HIGH = dict(capacity=16.0, slots=4, cores=4, ghz=2.7, ram_mb=4096.0)
LOW = dict(capacity=8.0, slots=2, cores=2, ghz=2.7, ram_mb=2048.0)
#: thesis Table 4.1: (names, cores, GHz, flops/cycle as printed, RAM GB).
THESIS_MACHINES = (
    (("node-a", "node-b", "node-c"), 8, 3.40, 6816, 3.7),
    (("node-d", "node-e", "node-f"), 4, 3.20, 6385, 7.7),
    (("node-g", "node-h", "node-i"), 4, 2.53, 5054, 3.7),
)


def thesis_cluster(slots: int = 3) -> Cluster:
    nodes = [Node(name, capacity=4.0 * cores, slots=slots, cores=cores, ghz=ghz, flops_per_cycle=fpc,
                  ram_mb=ram * 1024)
             for names, cores, ghz, fpc, ram in THESIS_MACHINES for name in names]
    return Cluster(f"thesis-9-s{slots}", tuple(nodes))


#: ``list clusters``: per name, what it is and where it comes from.
CLUSTER_DESCRIPTIONS: dict[str, tuple[str, str]] = {
    "homogeneous-10": ("10 nodes of capacity 4 (tasks)", "ours: the micro-benchmarks' default"),
    "heterogeneous-10": ("3 nodes of capacity 6 + 3 of 4 + 4 of 2 (tasks)", "ours"),
    "high-low-H-L": ("H high VMs (4 cores, 4 GiB, 4 slots, capacity 16) + L low (2 cores, 2 GiB, 2 slots, 8)",
                     "i-scheduler.txt sec. 5-6; t3-scheduler.txt sec. 6"),
    "thesis-9": ("the nine supervisors (8 / 4 / 4 cores), 3 worker slots each", "thesis Table 4.1"),
    "thesis-9-sK": ("thesis-9 with K worker slots per node (the scenarios S1-S6)", "thesis Tables 4.1-4.2"),
    "caps-WxS": ("W workers of S slots, capacity S tasks each (CAPSys's cluster shapes, e.g. caps-4x8)",
                 "CAPSys (EuroSys 2025)"),
    "fischer-N": ("N iMacs (4 cores at 2.7 GHz, 1 Gbps), one worker slot, capacity 8 tasks (the demo: N = 11)",
                  "fischer-metis-scheduler.txt IV-D"),
    "storm-large-01": ("1,312 supervisors in 16 racks: 3,600/3,500 % CPU, 178,000 MB (racks 0-11), 2,400/2,300 %, "
                       "118,100 MB (12-13), 1,200/1,100 %, 42,480 MB (14-15); 50 slots (capacity in cores)",
                       "Storm TestLargeCluster.getSupervisorDistribution01"),
    "storm-large-02": ("1,922 supervisors in 21 racks, 10 kinds of machine (capacity in cores)",
                       "Storm TestLargeCluster.getSupervisorDistribution02"),
    "storm-large-03": ("80 supervisors in 2 racks: 1,100 % CPU, 58,829 MB, 12 slots (capacity in cores)",
                       "Storm TestLargeCluster.getSupervisorDistribution03"),
}

#: Storm's TestLargeCluster.SupervisorDistribution: (count, rack, slots, memory MB, CPU %) rows.
STORM_LARGE: dict[str, tuple[tuple[int, str, int, int, int], ...]] = {
    "storm-large-01": tuple(row for rack in range(16) for row in (
        (41, f"r{rack:03d}", 50, *((178_000, 3600) if rack < 12 else (118_100, 2400) if rack < 14 else (42_480, 1200))),
        (41, f"r{rack:03d}", 50, *((178_000, 3500) if rack < 12 else (118_100, 2300) if rack < 14 else (42_480, 1100))))),
    "storm-large-02": (
        (78, "r001", 12, 42461, 1100), (146, "r002", 36, 181362, 3500), (18, "r003", 36, 181362, 3500),
        (120, "r004", 36, 181362, 3500), (24, "r005", 36, 181362, 3500), (16, "r005", 48, 177748, 4700),
        (12, "r006", 18, 88305, 1800), (368, "r006", 36, 181205, 3500), (62, "r007", 48, 177748, 4700),
        (50, "r008", 36, 181348, 3500), (64, "r008", 48, 177748, 4700), (74, "r009", 48, 177748, 4700),
        (74, "r010", 48, 177748, 4700), (10, "r011", 48, 177748, 4700), (78, "r012", 24, 120688, 2300),
        (150, "r013", 48, 177748, 4700), (76, "r014", 36, 181362, 3500), (38, "r015", 48, 174431, 4700),
        (78, "r016", 36, 181375, 3500), (72, "r017", 36, 181362, 3500), (80, "r018", 36, 181362, 3500),
        (76, "r019", 36, 181362, 3500), (78, "r020", 24, 120696, 2300), (80, "r021", 24, 120696, 2300)),
    "storm-large-03": ((40, "r001", 12, 58829, 1100), (40, "r002", 12, 58829, 1100)),
}


def storm_large_cluster(name: str) -> Cluster:
    """A layout of :data:`STORM_LARGE`: supervisor ``<rack>s<index in rack>``, capacity and
    cores = CPU % / 100 (loads in cores: Storm's percent of a core / 100), RAM, slots, rack."""
    nodes, seen = [], {}
    for count, rack, slots, memory, cpu in STORM_LARGE[name]:
        for _ in range(count):
            seen[rack] = seen.get(rack, -1) + 1
            nodes.append(Node(f"{rack}s{seen[rack]:03d}", capacity=cpu / 100.0, slots=slots, cores=cpu // 100,
                              ram_mb=float(memory), rack=rack))
    return Cluster(name, tuple(nodes), capacity_unit=CORES)


def cluster_names() -> list[str]:
    """The built-in clusters (a family's pattern for the sized ones), as ``list clusters`` shows them."""
    return list(CLUSTER_DESCRIPTIONS)


def cluster(name: str) -> Cluster:
    """The built-in cluster ``name``."""
    if name in STORM_LARGE:
        return storm_large_cluster(name)
    if name == "homogeneous-10":
        return Cluster.from_types(name, (10, {"capacity": 4.0}))
    if name == "heterogeneous-10":
        return Cluster.from_types(name, (3, {"capacity": 6.0}), (3, {"capacity": 4.0}), (4, {"capacity": 2.0}))
    match = re.fullmatch(r"high-low-(\d+)-(\d+)", name)
    if match and int(match.group(1)) + int(match.group(2)) > 0:
        return Cluster.from_types(name, (int(match.group(1)), HIGH), (int(match.group(2)), LOW))
    match = re.fullmatch(r"thesis-9(?:-s(\d+))?", name)
    if match:
        if int(match.group(1) or 3) < 1:
            raise InputError(f"cluster {name!r}: thesis-9-sK needs K >= 1 worker slots per node")
        return thesis_cluster(int(match.group(1) or 3))
    fischer = fischer_cluster(name)
    if fischer is not None:
        return fischer
    match = re.fullmatch(r"caps-(\d+)x(\d+)", name)
    if match and int(match.group(1)) > 0 and int(match.group(2)) > 0:
        slots = int(match.group(2))
        return Cluster.from_types(name, (int(match.group(1)), {"capacity": float(slots), "slots": slots}))
    raise InputError(f"unknown cluster {name!r} (known: {', '.join(cluster_names())})")
