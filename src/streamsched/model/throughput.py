"""Sustainable throughput under back-pressure: the source rate at which the first resource saturates.

A back-pressured job runs as fast as its busiest resource lets it. Every rate of the measured
graph is taken per source record, which placement does not change: edge e carries
``r_e / R`` records and ``b_e / R`` bytes per source record, task t needs ``l_t / R`` cores
(load units) per source record, where ``R`` is the measured source rate (:func:`source_rate`:
records/s the sources emit) and ``r_e``, ``b_e``, ``l_t`` are the graph's measured rates and
loads. At source rate ``s R`` everything scales by ``s``. Utilisation of node k's resources at
the measured rate (``s = 1``), with ``cut_e = 1`` where the edge's endpoints lie on different
nodes and ``c`` the network stack's CPU per remote record (at the sender and at the receiver):

    T1  cpu_k = (sum_{t on k} l_t + c * sum_{e cut, src or dst on k} r_e) / cap_k
    T2  out_k = sum_{e cut, src on k} b_e / net_out_k
    T3  in_k  = sum_{e cut, dst on k} b_e / net_in_k
    T4  U = max_k max(cpu_k, out_k, in_k),  s* = 1 / U
    T5  throughput = s* R  (records/s at the sources)

``cap_k`` is the node's capacity (cores in a cores cluster); a link whose capacity is unknown
(``net_in``/``net_out`` None) never saturates. The bottleneck is the node and resource reaching
``U``. ``s* < 1``: the placement overloads a resource at the measured rate; its prediction is
still ``s* R``, the rate its overload allows (never "invalid" without a number). A placement that
demands nothing has ``U = 0`` and an unbounded throughput. Tasks without a node (index -1) are
left out, with their edges.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamsched.errors import InputError
from streamsched.model.cluster import Cluster
from streamsched.model.taskgraph import TaskGraph

#: The resources of a node, in the order of :attr:`ThroughputPrediction.utilisation`'s columns.
RESOURCES = ("cpu", "link out", "link in")


def source_rate(graph: TaskGraph) -> float:
    """R of T5: records/s that the sources (tasks no edge enters) send over their edges."""
    receives = np.zeros(graph.n_tasks, dtype=bool)
    receives[graph.dst[graph.src != graph.dst]] = True
    return float(graph.rate[~receives[graph.src]].sum())


def capacities(cluster: Cluster) -> np.ndarray:
    """Nodes x 3: cap_k, net_out_k, net_in_k (inf where a link's capacity is unknown)."""
    unknown = math.inf
    return np.array([[n.capacity, unknown if n.net_out is None else n.net_out,
                      unknown if n.net_in is None else n.net_in] for n in cluster.nodes], dtype=np.float64)


def demands(graph: TaskGraph, node_of: np.ndarray, n_nodes: int, net_cpu_per_record: float = 0.0) -> np.ndarray:
    """Nodes x 3 at the measured rate: CPU (load units, T1's numerator), bytes/s out (T2), bytes/s in (T3)."""
    node_of = np.asarray(node_of, dtype=np.int64)
    if node_of.shape != (graph.n_tasks,):
        raise InputError(f"placement has {node_of.size} tasks, graph {graph.name!r} has {graph.n_tasks}")
    placed = node_of >= 0
    s, d = node_of[graph.src], node_of[graph.dst]
    cut = (s != d) & (s >= 0) & (d >= 0)
    out = np.zeros((n_nodes, 3))
    out[:, 0] = np.bincount(node_of[placed], weights=graph.load[placed], minlength=n_nodes)
    if net_cpu_per_record:
        records = graph.rate[cut] * float(net_cpu_per_record)
        out[:, 0] += np.bincount(s[cut], weights=records, minlength=n_nodes)
        out[:, 0] += np.bincount(d[cut], weights=records, minlength=n_nodes)
    out[:, 1] = np.bincount(s[cut], weights=graph.bytes_rate[cut], minlength=n_nodes)
    out[:, 2] = np.bincount(d[cut], weights=graph.bytes_rate[cut], minlength=n_nodes)
    return out


def ratio(demand: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """demand / capacity elementwise: 0 where nothing is demanded, inf where a demand meets no capacity."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(demand > 0, demand / capacity, 0.0)


@dataclass(frozen=True)
class ThroughputPrediction:
    """T1-T5 for one placement; ``to_row`` gives the figures a comparison row shows."""

    source_rate: float
    peak: float
    """U of T4: the busiest resource's utilisation at the measured rate."""
    scale: float
    """s* = 1 / U (inf when nothing is demanded)."""
    throughput: float
    bottleneck_node: str | None
    bottleneck_resource: str | None
    remote_bytes: float
    utilisation: np.ndarray = field(repr=False)
    """Nodes x 3 (:data:`RESOURCES`): T1-T3."""

    @property
    def bottleneck(self) -> str:
        if self.bottleneck_node is None:
            return "none (nothing demanded)"
        return f"{self.bottleneck_resource} of {self.bottleneck_node}"

    @property
    def overloaded(self) -> bool:
        return self.peak > 1.0

    def to_row(self) -> dict[str, Any]:
        return {"predicted_throughput": self.throughput, "predicted_bottleneck": self.bottleneck,
                "peak_utilisation": self.peak, "overloaded": self.overloaded}


def predict_throughput(graph: TaskGraph, cluster: Cluster, node_of: np.ndarray,
                       net_cpu_per_record: float = 0.0) -> ThroughputPrediction:
    """T1-T5 of the placement ``node_of`` (node index per task) of ``graph`` on ``cluster``;
    ``net_cpu_per_record`` is ``c`` of T1 (cores per remote record/s, >= 0)."""
    if not (isinstance(net_cpu_per_record, (int, float)) and math.isfinite(net_cpu_per_record)
            and net_cpu_per_record >= 0):
        raise InputError(f"net_cpu_per_record: must be a finite number >= 0, got {net_cpu_per_record!r}")
    demand = demands(graph, node_of, cluster.n_nodes, net_cpu_per_record)
    util = ratio(demand, capacities(cluster))
    rate = source_rate(graph)
    peak = float(util.max()) if util.size else 0.0
    if peak > 0:
        k, r = np.unravel_index(int(np.argmax(util)), util.shape)
        node, resource = cluster.nodes[int(k)].name, RESOURCES[int(r)]
        scale = 1.0 / peak
    else:
        node, resource, scale = None, None, math.inf
    throughput = scale * rate if rate > 0 else 0.0
    util.setflags(write=False)
    return ThroughputPrediction(rate, peak, scale, throughput, node, resource, float(demand[:, 1].sum()), util)
