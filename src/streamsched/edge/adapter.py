"""Run the edge algorithms on an ordinary ``TaskGraph`` + ``Cluster`` (the registered schedulers).

The mapping keeps the edge model's rules (Ghosh et al. [1]_ section 3.3) and makes its constraint 2
the cluster's capacity:

- every task is a query with input rate 1 and compute latency ``lambda = load / capacity`` on a
  node, so constraint 2 (``max omega_in x sum lambda <= 1``, no interference) reads
  ``sum of loads <= capacity``; no battery; source tasks count (``sources_free`` is off);
- constraint 1 uses the nodes' ``kind``: tasks without upstream go on edge nodes and tasks
  without downstream on cloud nodes; a cluster with no edge (cloud) nodes lifts the rule for
  sources (sinks);
- network latency between distinct nodes, in the same unit as ``lambda`` (the time of one load
  unit on a capacity-1 node): :data:`SAME_RACK` within a rack, :data:`OTHER_RACK` across racks,
  plus :data:`EDGE_CLOUD` between an edge and a cloud node; bandwidth is the smaller of the two
  nodes' ``bandwidth_mbps``; event size is the stream's bytes per tuple.

References
----------
.. [1] Ghosh, R.; Komma, S. P. R.; Simmhan, Y. (2018) "Adaptive energy-aware scheduling of dynamic
   event analytics across edge and cloud resources", 18th IEEE/ACM International Symposium on
   Cluster, Cloud and Grid Computing (CCGRID 2018); arXiv:1801.01087 [cs.DC].
"""

from __future__ import annotations

import numpy as np

from streamsched.edge.deployment import Deployment
from streamsched.edge.ga import GASettings, PlacementProblem, run_ga
from streamsched.edge.model import CLOUD, EDGE, Dataflow, EdgeSystem
from streamsched.edge.topset import place_topset
from streamsched.errors import InfeasibleError
from streamsched.model.cluster import Cluster
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph

SAME_RACK = 0.05
OTHER_RACK = 0.1
EDGE_CLOUD = 0.4
#: Latency factor of a node without capacity: nothing with load fits on it.
NO_CAPACITY = 1e30


def system_from_cluster(cluster: Cluster) -> EdgeSystem:
    nodes = cluster.nodes
    r = len(nodes)
    kind = np.array([EDGE if n.kind == "edge" else CLOUD for n in nodes], dtype=np.int64)
    capacity = cluster.capacity
    speed = np.where(capacity > 0, 1.0 / np.where(capacity > 0, capacity, 1.0), NO_CAPACITY)
    rack = np.array([n.rack for n in nodes])
    latency = np.where(rack[:, None] == rack[None, :], SAME_RACK, OTHER_RACK)
    latency = latency + np.where(kind[:, None] != kind[None, :], EDGE_CLOUD, 0.0)
    np.fill_diagonal(latency, 0.0)
    mbps = np.array([n.bandwidth_mbps for n in nodes], dtype=float)
    bandwidth = np.minimum(mbps[:, None], mbps[None, :]) * 125_000.0
    bandwidth = np.where(bandwidth > 0, bandwidth, 1.0)
    np.fill_diagonal(bandwidth, np.inf)
    return EdgeSystem(
        name=cluster.name, kind=kind, latency_class=np.zeros(r, dtype=np.int64), speed=speed,
        interference=np.zeros(r), battery_mah=np.full(r, np.inf), base_load_ma=np.zeros(r),
        recharge_s=np.zeros(r), net_latency=latency, net_bandwidth=bandwidth, sources_free=False,
        names=tuple(n.name for n in nodes),
    )


def dataflow_from_graph(graph: TaskGraph) -> Dataflow:
    n = graph.n_tasks
    keep = graph.src != graph.dst
    src, dst = graph.src[keep].astype(np.int64), graph.dst[keep].astype(np.int64)
    parents: list[list[int]] = [[] for _ in range(n)]
    for a, b in zip(src.tolist(), dst.tolist()):
        parents[b].append(a)
    rate = graph.rate[keep]
    emitted_bytes = np.bincount(src, weights=graph.bytes_rate[keep], minlength=n)
    emitted = np.bincount(src, weights=rate, minlength=n)
    tuple_bytes = np.where(emitted > 0, emitted_bytes / np.where(emitted > 0, emitted, 1.0), 0.0)
    load = graph.load.astype(float)
    return Dataflow(
        name=graph.name, parents=tuple(tuple(ps) for ps in parents),
        latency=np.stack([load, load], axis=1), selectivity=np.ones(n), event_bytes=tuple_bytes,
        energy=np.zeros(n), input_rate=1.0, given_input_rates=np.ones(n),
    )


def to_placement(mapping: np.ndarray, cluster: Cluster, metadata: dict) -> Placement:
    """Node per task; tasks of a node go round robin over its worker slots."""
    node_of = np.asarray(mapping, dtype=np.int64)
    worker_of = np.full(node_of.size, -1, dtype=np.int64)
    slots = cluster.slots
    seen = np.zeros(cluster.n_nodes, dtype=np.int64)
    for t, k in enumerate(node_of.tolist()):
        if slots[k] > 0:
            worker_of[t] = seen[k] % slots[k]
            seen[k] += 1
    return Placement.build(node_of, worker_of, metadata)


def topset_placement(graph: TaskGraph, cluster: Cluster, penalty: bool = False,
                     prefer_kind: int | None = None) -> Placement:
    """TopSet (or TopSet/P, or a kind-preferring variant) on a task graph."""
    system = system_from_cluster(cluster)
    deployment = Deployment(system)
    dataflow = dataflow_from_graph(graph)
    mapping = place_topset(deployment, 0, dataflow, penalty=penalty, prefer_kind=prefer_kind)
    return to_placement(mapping, cluster, {"makespan": deployment.makespan(0)})


def ga_placement(graph: TaskGraph, cluster: Cluster, settings: GASettings, seed: int,
                 warm_start: bool) -> Placement:
    """The GA on a task graph; ``warm_start`` puts TopSet's placement in the first population."""
    system = system_from_cluster(cluster)
    dataflow = dataflow_from_graph(graph)
    initial = None
    if warm_start:
        try:
            initial = place_topset(Deployment(system), 0, dataflow)
        except InfeasibleError:
            initial = None
    problem = PlacementProblem(system, [dataflow])
    genes, _, generations = run_ga(problem, settings, seed, initial)
    deployment = Deployment(system)
    deployment.deploy(0, dataflow, genes)
    return to_placement(genes, cluster, {"makespan": deployment.makespan(0), "generations": generations})
