"""An explicit analytical performance model: throughput, latency and utilisation of a placement.

The papers judge schedulers by throughput and latency measured on real Storm clusters
(i-scheduler.txt and t3-scheduler.txt section 6, fischer-metis-scheduler.txt V, thesis
chapter 4). We cannot run those clusters, so this module *predicts* the figures from the task
graph, the cluster hardware and the placement. It is a model, not a measurement; every
formula is written out in docs/evaluation.md and each step is a short function here.

All demands scale linearly with the source rate: at rate scale ``s`` every edge carries
``s * rate[e]`` tuples/s. The model finds the largest sustainable ``s`` (the bottleneck) and
reports throughput there; latency is computed at an operating point below it.
"""

from __future__ import annotations

import json
import math
import weakref
from dataclasses import asdict, dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from streamsched.errors import InputError
from streamsched.metrics import nodes_used
from streamsched.model.cluster import Cluster
from streamsched.model.placement import NO_WORKER, Placement
from streamsched.model.taskgraph import TaskGraph

HOP_SAME_WORKER, HOP_OTHER_WORKER, HOP_OTHER_NODE = 0, 1, 2


@dataclass(frozen=True)
class ModelParams:
    """Constants of the model. The field defaults are the prior the calibration starts from
    (Storm 1.x on the papers' 2.7 GHz, 1 Gbps machines); the fitted sets are :data:`REGIMES`."""

    cycles_per_load_unit: float = 5.4e8
    """CPU cycles/s that one unit of task load demands at the graph's reference rates. The
    default puts the papers' full nodes (capacity 4 load units per 2.7 GHz core) at 80 % CPU."""
    serialize_cycles_per_tuple: float = 5.0e3
    """Fixed CPU cycles to serialise one tuple leaving a worker (the same again to deserialise)."""
    serialize_cycles_per_byte: float = 10.0
    """Per-byte serialisation cycles (Kryo-like, ~250 MB/s per 2.7 GHz core; same to deserialise)."""
    message_overhead_bytes: float = 50.0
    """Header and framing bytes added to every tuple sent between nodes."""
    tuple_bytes: float | None = None
    """Override every edge's tuple size (bytes); None keeps the graph's ``bytes_rate / rate``."""
    network_latency_s: float = 2.0e-4
    """One-way latency of a hop between nodes (switch + TCP stack)."""
    ipc_latency_s: float = 5.0e-5
    """Latency of a hop between two workers (JVMs) of one node (loopback)."""
    intra_worker_latency_s: float = 5.0e-6
    """Latency of a hand-off between two executors of one worker (in-memory queue)."""
    max_cpu_utilisation: float = 1.0
    """Usable share of a node's cores (T3-Scheduler caps nodes at 0.8)."""
    acking: bool = False
    """Storm's acking: one ack per executed tuple plus init/complete per spout tuple, sent to
    ackers spread one per worker (fischer-metis-scheduler.txt V-B2)."""
    ack_bytes: float = 40.0
    ack_cycles: float = 3.0e3
    """Acker CPU cycles per ack message."""
    max_spout_pending: int = 0
    """Storm's ``topology.max.spout.pending`` per source task; 0 = unlimited. With a limit,
    throughput also obeys Little's law: pending x source tasks / tuple-tree time (M9)."""
    operating_point: float = 0.8
    """Without a pending limit, latency is reported at this fraction of the maximum rate."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or value is None:
                continue
            if not (isinstance(value, (int, float)) and value >= 0 and math.isfinite(value)):
                raise InputError(f"model.{f.name}: must be a finite number >= 0, got {value!r}")
        if not 0 < self.max_cpu_utilisation <= 1:
            raise InputError(f"model.max_cpu_utilisation: must be in (0, 1], got {self.max_cpu_utilisation}")
        if not 0 < self.operating_point < 1:
            raise InputError(f"model.operating_point: must be in (0, 1), got {self.operating_point}")

    def with_(self, **changes: Any) -> ModelParams:
        unknown = set(changes) - {f.name for f in fields(self)}
        if unknown:
            known = ", ".join(f.name for f in fields(self))
            raise InputError(f"model.{sorted(unknown)[0]}: unknown parameter (known: {known})")
        return replace(self, **changes)


#: The fitted parameter sets (written by ``benchmarks/calibrate_model.py``, never by hand;
#: docs/evaluation.md, "Calibration"): one per paper hardware and ``default``.
CALIBRATION_FILE = Path(__file__).resolve().parent / "data" / "model_calibration.json"
#: Workload settings of i-scheduler.txt section 6.1 applied to the default set: I/O-intensive
#: runs throttle the spouts (Storm's max spout pending), CPU-intensive runs do not.
SETTING_SETS = {"io-bound": {"max_spout_pending": 1}, "cpu-bound": {"max_spout_pending": 0}}


def read_calibration() -> dict[str, Any]:
    """The document of :data:`CALIBRATION_FILE`, read as a package resource (so that it is also
    found where the package runs from a zip: the Spark executors' ``addPyFile``)."""
    resource = resources.files("streamsched").joinpath("data", CALIBRATION_FILE.name)
    return json.loads(resource.read_text(encoding="utf-8"))


def _fitted_sets() -> tuple[dict[str, ModelParams], dict[str, str]]:
    """The parameter sets of :data:`CALIBRATION_FILE` and a one-line description of each."""
    try:
        document = read_calibration()
    except FileNotFoundError:
        return {}, {}
    sets: dict[str, ModelParams] = {}
    described: dict[str, str] = {}
    for name, entry in document["sets"].items():
        sets[name] = ModelParams(**entry["params"]).with_(**entry.get("setting", {}))
        held = entry.get("held_out_error_pct") or {}
        error = (f"held-out error median {held['median']:.0f} %, mean {held['mean']:.0f} % over {held['n']} cells"
                 if held.get("n") else "no held-out error")
        throttled = "; spouts throttled, max spout pending 1" if entry.get("setting") else ""
        described[name] = f"{name}: fitted on {', '.join(entry['papers'])} ({entry['cases']} cells{throttled}); {error}"
    default = document["default"]
    sets["default"] = sets[default]
    described["default"] = f"default = {described[default]}"
    for name, setting in SETTING_SETS.items():
        sets[name] = sets[default].with_(**setting)
        described[name] = (f"{name} = {default} with max spout pending 1 (section 6.1 I/O-intensive)"
                           if setting["max_spout_pending"] else
                           f"{name} = {default} without spout throttling (section 6.1 CPU-intensive)")
    return sets, described


REGIMES, _DESCRIPTIONS = _fitted_sets()


def regime(name: str) -> ModelParams:
    if not REGIMES:
        raise InputError(f"{CALIBRATION_FILE}: missing; run benchmarks/calibrate_model.py")
    try:
        return REGIMES[name]
    except KeyError:
        raise InputError(f"unknown model parameter set {name!r} (known: {', '.join(REGIMES)})") from None


def describe(name: str) -> str:
    """Which fitted set ``name`` is, the papers it was fitted on and its held-out error."""
    regime(name)
    return _DESCRIPTIONS[name]


def fitted_set(params: ModelParams) -> str | None:
    """The name of the fitted set ``params`` equals (``default`` first; acking aside), else None."""
    plain = params.with_(acking=False)
    return next((name for name in ("default", *REGIMES) if REGIMES.get(name) == plain), None)


def describe_params(params: ModelParams) -> str:
    """:func:`describe` of the fitted set ``params`` equals, or a note that the parameters are
    not a fitted set."""
    name = fitted_set(params)
    if name is None:
        return "custom parameters, not a fitted set (no measured error)"
    return describe(name) + (", with acking" if params.acking else "")


@dataclass(frozen=True)
class Demands:
    """Per-node and per-task resource demands at rate scale 1 (the graph's reference rates)."""

    node_cycles: np.ndarray        # CPU cycles/s per node (tasks + (de)serialisation + ackers)
    task_cycles: np.ndarray        # cycles/s on each task's executor thread
    nic_out: np.ndarray            # bytes/s leaving each node
    nic_in: np.ndarray             # bytes/s entering each node
    hop: np.ndarray                # HOP_* class of every edge
    edge_bytes: np.ndarray         # bytes per tuple of every edge (overhead excluded)
    processed: np.ndarray          # tuples/s each task executes (sources: emits)
    data_messages: float           # tuples/s delivered over edges
    ack_messages: float            # ack messages/s (0 without acking)


@dataclass(frozen=True)
class Prediction:
    """What the model predicts for one placement; ``to_dict`` is JSON-ready."""

    max_rate_scale: float
    rate_scale: float
    bottleneck: str
    regime: str
    throughput_tps: float
    source_tps: float
    nodes_used: int
    throughput_per_node: float
    latency_s: float
    tuple_tree_time_s: float
    task_latency_s: float
    messages_per_s: float
    ack_messages_per_s: float
    wire_bytes_per_source_tuple: float
    """Bytes that cross node boundaries (data, overhead and acks) per spout tuple."""
    node_cpu_utilisation: np.ndarray = field(repr=False)
    nic_utilisation: np.ndarray = field(repr=False)
    task_utilisation: np.ndarray = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("node_cpu_utilisation", "nic_utilisation", "task_utilisation"):
            out[key] = np.asarray(out[key]).tolist()
        return out

    def summary(self) -> dict[str, Any]:
        """The scalar figures only (for tables)."""
        return {k: v for k, v in self.to_dict().items() if not isinstance(v, list)}


def _worker_key(placement: Placement) -> np.ndarray:
    """A process id per task: (node, worker); a task without a worker is a process of its own."""
    node = placement.node_of.astype(np.int64)
    worker = placement.worker_of.astype(np.int64)
    key = node * (1 << 32) + worker
    alone = worker == NO_WORKER
    key[alone] = -1 - np.flatnonzero(alone)
    return key


def edge_hops(graph: TaskGraph, placement: Placement) -> np.ndarray:
    """HOP_SAME_WORKER / HOP_OTHER_WORKER / HOP_OTHER_NODE for every edge (self-loops: same worker)."""
    node, proc = placement.node_of, _worker_key(placement)
    s, d = graph.src, graph.dst
    hop = np.full(graph.n_edges, HOP_OTHER_WORKER, dtype=np.int8)
    hop[(proc[s] == proc[d]) | (s == d)] = HOP_SAME_WORKER
    hop[node[s] != node[d]] = HOP_OTHER_NODE
    return hop


def demands(graph: TaskGraph, cluster: Cluster, placement: Placement, params: ModelParams) -> Demands:
    """Resource demands at the reference rates (docs/evaluation.md, equations M1-M5)."""
    n, k = graph.n_tasks, cluster.n_nodes
    node = placement.node_of
    src, dst, rate = graph.src, graph.dst, graph.rate
    in_rate = np.bincount(dst, weights=rate, minlength=n)
    out_rate = np.bincount(src, weights=rate, minlength=n)
    processed = np.where(in_rate > 0, in_rate, out_rate)
    # M1: task CPU = load x cycles per load unit
    task_cycles = graph.load * params.cycles_per_load_unit
    if params.tuple_bytes is None:
        with np.errstate(divide="ignore", invalid="ignore"):
            edge_bytes = np.where(rate > 0, graph.bytes_rate / np.where(rate > 0, rate, 1), 0.0)
    else:
        edge_bytes = np.full(graph.n_edges, float(params.tuple_bytes))
    hop = edge_hops(graph, placement)
    # M2: a tuple leaving its worker is serialised by the sender and deserialised by the receiver
    leaves = hop != HOP_SAME_WORKER
    ser = rate * (params.serialize_cycles_per_tuple + params.serialize_cycles_per_byte * edge_bytes) * leaves
    task_cycles = task_cycles + np.bincount(src, weights=ser, minlength=n) + np.bincount(dst, weights=ser, minlength=n)
    node_cycles = np.bincount(node, weights=task_cycles, minlength=k)
    # M3: tuples leaving a node cross the sender's NIC out and the receiver's NIC in
    cut = hop == HOP_OTHER_NODE
    wire = rate * (edge_bytes + params.message_overhead_bytes) * cut
    nic_out = np.bincount(node[src], weights=wire, minlength=k)
    nic_in = np.bincount(node[dst], weights=wire, minlength=k)
    data_messages = float(rate.sum())
    ack_messages = 0.0
    if params.acking:
        node_cycles, nic_out, nic_in, ack_messages = _acking(
            graph, placement, cluster, params, in_rate, out_rate, node_cycles, nic_out, nic_in)
    return Demands(node_cycles, task_cycles, nic_out, nic_in, hop, edge_bytes, processed,
                   data_messages, ack_messages)


def _acking(graph, placement, cluster, params, in_rate, out_rate, node_cycles, nic_out, nic_in):
    """M5: Storm's acker bolts, one per worker; ack targets are uniform over ackers (random ids).

    Every executed tuple sends one ack from its task's node; every spout tuple sends an init
    message from the spout's node and receives a completion message back. A message from node
    j reaches an acker on another node with probability ``1 - a_j / A`` (``a_j`` ackers on j of
    ``A``), so acking traffic is spread over the cluster whatever the placement.
    """
    k = cluster.n_nodes
    node = placement.node_of
    proc = _worker_key(placement)
    _, first = np.unique(proc, return_index=True)
    ackers = np.bincount(node[first], minlength=k).astype(float)
    total = ackers.sum()
    share = ackers / total
    sources = in_rate == 0
    acks_sent = np.bincount(node, weights=in_rate + np.where(sources, out_rate, 0.0), minlength=k)
    completions = np.bincount(node, weights=np.where(sources, out_rate, 0.0), minlength=k)
    messages = float(acks_sent.sum() + completions.sum())
    wire_bytes = params.ack_bytes + params.message_overhead_bytes
    # out of node j: acks to ackers elsewhere; into node j: acks from elsewhere to its ackers
    acks_leaving = acks_sent * (1 - share)
    nic_out = nic_out + acks_leaving * wire_bytes
    nic_in = nic_in + (share * acks_sent.sum() - share * acks_sent) * wire_bytes
    # completions go back from the acker to the spout's node
    nic_out = nic_out + (share * completions.sum() - share * completions) * wire_bytes
    nic_in = nic_in + completions * (1 - share) * wire_bytes
    ser = params.serialize_cycles_per_tuple + params.serialize_cycles_per_byte * params.ack_bytes
    cross_worker = 1 - 1 / total
    acker_cycles = share * messages * (params.ack_cycles + ser * cross_worker)
    sender_cycles = (acks_sent + completions) * ser * cross_worker
    return node_cycles + acker_cycles + sender_cycles, nic_out, nic_in, messages


def _supply(cluster: Cluster, params: ModelParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    cores = np.array([nd.cores for nd in cluster.nodes], float)
    hz = np.array([nd.ghz for nd in cluster.nodes], float) * 1e9
    bandwidth = np.array([nd.bandwidth_mbps for nd in cluster.nodes], float) * 1e6 / 8
    return cores * hz * params.max_cpu_utilisation, hz, bandwidth


def _ratio(supply: np.ndarray, demand: np.ndarray) -> np.ndarray:
    """supply / demand per element; inf where nothing is demanded, 0 where demand meets no supply."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(demand > 0, supply / np.where(demand > 0, demand, 1), np.inf)


def max_rate_scale(graph: TaskGraph, cluster: Cluster, placement: Placement, dem: Demands,
                   params: ModelParams) -> tuple[float, str, str]:
    """M4: the largest ``s`` with every node's CPU, NIC and every executor thread below capacity.

    Returns ``(s*, bottleneck, regime)``; ``regime`` is ``cpu``, ``network`` or ``thread``.
    """
    cpu_supply, hz, bandwidth = _supply(cluster, params)
    candidates = []
    node_names = [nd.name for nd in cluster.nodes]
    for label, kind, limits in (
        ("cpu", "cpu", _ratio(cpu_supply, dem.node_cycles)),
        ("nic-out", "network", _ratio(bandwidth, dem.nic_out)),
        ("nic-in", "network", _ratio(bandwidth, dem.nic_in)),
    ):
        j = int(np.argmin(limits))
        candidates.append((float(limits[j]), f"{label} of {node_names[j]}", kind))
    if graph.n_tasks:
        thread = _ratio(hz[placement.node_of], dem.task_cycles)
        t = int(np.argmin(thread))
        candidates.append((float(thread[t]), f"executor of task {graph.task_label(t)}", "thread"))
    return min(candidates, key=lambda c: c[0])


def latencies(graph: TaskGraph, cluster: Cluster, placement: Placement, dem: Demands,
              params: ModelParams, scale: float) -> tuple[float, float, float, np.ndarray, np.ndarray, np.ndarray]:
    """M6-M8 at rate scale ``scale``: (end-to-end latency, tuple-tree time, mean task sojourn,
    task utilisation, node CPU utilisation, NIC utilisation). Infinite when a resource is
    saturated. The tuple-tree time (M9) is the time all descendants of one spout tuple spend
    in hops and in tasks: ``(sum_e r_e hop_e + sum_t p_t W_t) / spout tuples``."""
    cpu_supply, hz, bandwidth = _supply(cluster, params)
    node = placement.node_of
    node_util = scale * _ratio(dem.node_cycles, cpu_supply)
    nic_util = scale * np.maximum(_ratio(dem.nic_out, bandwidth), _ratio(dem.nic_in, bandwidth))
    node_util = np.where(np.isinf(node_util) & (dem.node_cycles == 0), 0.0, node_util)
    nic_util = np.where(np.isinf(nic_util) & (dem.nic_out + dem.nic_in == 0), 0.0, nic_util)
    task_hz = hz[node]
    task_util = scale * dem.task_cycles / task_hz
    with np.errstate(divide="ignore", invalid="ignore"):
        service = np.where(dem.processed > 0, dem.task_cycles / np.where(dem.processed > 0, dem.processed, 1) / task_hz, 0.0)
    busy = np.maximum(task_util, node_util[node])
    with np.errstate(divide="ignore"):
        sojourn = np.where(busy < 1, service / np.maximum(1 - busy, 1e-300), np.inf)
    # hop latency of every edge
    hop_latency = np.where(dem.hop == HOP_SAME_WORKER, params.intra_worker_latency_s,
                           np.where(dem.hop == HOP_OTHER_WORKER, params.ipc_latency_s, params.network_latency_s))
    cut = dem.hop == HOP_OTHER_NODE
    link_util = nic_util[node[graph.src]]
    transmit = (dem.edge_bytes + params.message_overhead_bytes) / bandwidth[node[graph.src]]
    with np.errstate(divide="ignore", invalid="ignore"):
        queued = np.where(link_util < 1, transmit / np.maximum(1 - link_util, 1e-300), np.inf)
    hop_latency = hop_latency + np.where(cut, queued, 0.0)
    end_to_end = _path_latency(graph, sojourn, hop_latency)
    mean_sojourn = float(sojourn.mean()) if graph.n_tasks else 0.0
    in_rate = np.bincount(graph.dst, weights=graph.rate, minlength=graph.n_tasks)
    spout_tuples = float(dem.processed[in_rate == 0].sum())
    with np.errstate(invalid="ignore"):
        work = float((graph.rate * hop_latency).sum() + (dem.processed * sojourn)[dem.processed > 0].sum())
    tree_time = work / spout_tuples if spout_tuples > 0 else 0.0
    return end_to_end, tree_time, mean_sojourn, task_util, node_util, nic_util


def _path_latency(graph: TaskGraph, sojourn: np.ndarray, hop_latency: np.ndarray) -> float:
    """M8: a tuple's latency at task t is the rate-weighted mean over t's inputs of (latency at
    the sender + hop) plus t's sojourn; the result is the rate-weighted mean over the sinks."""
    n = graph.n_tasks
    if n == 0:
        return 0.0
    levels, edge_groups = _levels(graph)
    at = np.zeros(n)
    weight_in = np.bincount(graph.dst, weights=graph.rate, minlength=n)
    arrived = np.zeros(n)
    for tasks, edges in zip(levels, edge_groups):
        w = weight_in[tasks]
        base = np.divide(arrived[tasks], w, out=np.zeros(tasks.size), where=w > 0)
        at[tasks] = base + sojourn[tasks]
        if edges.size:
            np.add.at(arrived, graph.dst[edges],
                      graph.rate[edges] * (at[graph.src[edges]] + hop_latency[edges]))
    out_rate = np.bincount(graph.src, weights=graph.rate, minlength=n)
    sinks = out_rate == 0
    weights = np.where(sinks, weight_in, 0.0)
    if weights.sum() <= 0:
        return float(at[sinks].mean()) if sinks.any() else float(at.mean())
    return float((at * weights)[weights > 0].sum() / weights.sum())


_LEVELS: "weakref.WeakKeyDictionary[TaskGraph, tuple]" = weakref.WeakKeyDictionary()


def _levels(graph: TaskGraph) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Tasks grouped by longest-path depth (Kahn's algorithm) and the edges leaving each group;
    cached per graph. Raises ``InputError`` on a cycle."""
    cached = _LEVELS.get(graph)
    if cached is not None:
        return cached
    n = graph.n_tasks
    keep = np.flatnonzero(graph.src != graph.dst)
    src, dst = graph.src[keep], graph.dst[keep]
    indegree = np.bincount(dst, minlength=n)
    depth = np.zeros(n, dtype=np.int64)
    by_src = np.argsort(src, kind="stable")
    starts = np.searchsorted(src[by_src], np.arange(n + 1))
    frontier = np.flatnonzero(indegree == 0)
    seen, level = 0, 0
    while frontier.size:
        depth[frontier] = level
        seen += frontier.size
        out = np.concatenate([by_src[starts[t]:starts[t + 1]] for t in frontier.tolist()]) if frontier.size else []
        children = dst[np.asarray(out, dtype=np.int64)]
        np.subtract.at(indegree, children, 1)
        frontier = np.unique(children[indegree[children] == 0])
        level += 1
    if seen != n:
        raise InputError(f"graph {graph.name!r}: the latency model needs an acyclic task graph")
    levels = [np.flatnonzero(depth == d) for d in range(level)]
    edge_depth = depth[src]
    groups = [keep[edge_depth == d] for d in range(level)]
    _LEVELS[graph] = (levels, groups)
    return levels, groups


def predict(graph: TaskGraph, cluster: Cluster, placement: Placement,
            params: ModelParams | None = None) -> Prediction:
    """Throughput, latency, utilisation, nodes used and throughput per node of ``placement``.

    Throughput is the executed tuples/s (every edge delivery executed once, as Storm's
    ``__execute-count`` sums them) at the largest sustainable rate scale; with
    ``max_spout_pending`` it is the fixed point of Little's law. Throughput per node is thesis
    eq. 1.2 (average throughput / nodes used).
    """
    params = params or regime("default")
    if placement.n_tasks != graph.n_tasks:
        raise InputError(f"placement has {placement.n_tasks} tasks, graph {graph.name!r} has {graph.n_tasks}")
    dem = demands(graph, cluster, placement, params)
    s_max, bottleneck, kind = max_rate_scale(graph, cluster, placement, dem, params)
    in_rate = np.bincount(graph.dst, weights=graph.rate, minlength=graph.n_tasks)
    source_tasks = in_rate == 0
    source_rate = float(dem.processed[source_tasks].sum())
    if params.max_spout_pending and math.isfinite(s_max) and source_rate > 0:
        scale = _pending_fixed_point(graph, cluster, placement, dem, params, s_max, source_rate,
                                     int(source_tasks.sum()))
        if scale < params.operating_point * s_max:
            kind, bottleneck = "latency", f"max spout pending {params.max_spout_pending} (Little's law)"
        throughput_scale = latency_scale = scale
    else:
        throughput_scale = s_max
        latency_scale = params.operating_point * s_max if math.isfinite(s_max) else 1.0
    end_to_end, tree_time, mean_sojourn, task_util, node_util, nic_util = latencies(
        graph, cluster, placement, dem, params, latency_scale)
    used = nodes_used(placement)
    throughput = throughput_scale * dem.data_messages
    return Prediction(
        max_rate_scale=s_max,
        rate_scale=throughput_scale,
        bottleneck=bottleneck,
        regime=kind,
        throughput_tps=throughput,
        source_tps=throughput_scale * source_rate,
        nodes_used=used,
        throughput_per_node=throughput / used if used else 0.0,
        latency_s=end_to_end,
        tuple_tree_time_s=tree_time,
        task_latency_s=mean_sojourn,
        messages_per_s=throughput_scale * (dem.data_messages + dem.ack_messages),
        ack_messages_per_s=throughput_scale * dem.ack_messages,
        wire_bytes_per_source_tuple=float(dem.nic_out.sum()) / source_rate if source_rate else 0.0,
        node_cpu_utilisation=node_util,
        nic_utilisation=nic_util,
        task_utilisation=task_util,
    )


def _pending_fixed_point(graph, cluster, placement, dem, params, s_max, source_rate, n_sources) -> float:
    """M9: the scale ``s`` with ``s * source_rate = pending * n_sources / tree_time(s)`` (root finding).

    Storm holds a pending spout tuple until its whole tuple tree is acknowledged, so each
    pending slot is occupied by the tree's tuples; Little's law over those tuples gives the
    equation, with the tree time of :func:`latencies` (every branch of a fan-out counted). The
    left side grows with ``s`` and the right side falls (queueing grows with load), so the root
    in ``(0, s_max)`` is unique (Brent's method, bisection where the ends are infinite).
    """
    window = params.max_spout_pending * n_sources

    def excess(s: float) -> float:
        latency = latencies(graph, cluster, placement, dem, params, s)[1]
        if not math.isfinite(latency) or latency <= 0:
            return math.inf if not math.isfinite(latency) else -math.inf
        return s * source_rate - window / latency

    low, high = 0.0, s_max
    at_high = excess(high * (1 - 1e-9))
    if at_high <= 0:
        return high * (1 - 1e-9)
    at_low = excess(low)
    if math.isfinite(at_low) and math.isfinite(at_high):  # Brent's method: ~10 latency passes, not 60
        from scipy.optimize import brentq  # on use: scipy.optimize slows the CLI's start-up

        return brentq(excess, low, high * (1 - 1e-9), xtol=1e-12 * high, rtol=1e-9)
    for _ in range(60):
        if high - low <= 1e-9 * high:
            break
        mid = 0.5 * (low + high)
        if excess(mid) > 0:
            high = mid
        else:
            low = mid
    return low
