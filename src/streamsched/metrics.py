"""Quality measures of a placement: pure functions, one definition used everywhere.

Every traffic measure sums directed edge rates, so each communicating task pair is counted
once (the matrix X of i-scheduler.txt eq. 3 is symmetric and only i < j is summed).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamsched.model.cluster import Cluster
from streamsched.model.placement import NO_WORKER, Placement
from streamsched.model.taskgraph import TaskGraph


def _weights(graph: TaskGraph, weight: str) -> np.ndarray:
    if weight == "rate":
        return graph.rate
    if weight == "bytes":
        return graph.bytes_rate
    raise ValueError(f"weight must be 'rate' or 'bytes', not {weight!r}")


def cut_traffic(src: np.ndarray, dst: np.ndarray, weight: np.ndarray, part: np.ndarray) -> float:
    """The traffic objective on plain arrays: summed ``weight`` of the edges ``src -> dst`` whose
    endpoints lie in different parts (nodes). W of i-scheduler.txt eq. 3; the one definition
    that metrics, solvers, partitioners and schedulers use."""
    return float(np.asarray(weight)[part[src] != part[dst]].sum())


def inter_node_traffic(graph: TaskGraph, placement: Placement, weight: str = "rate") -> float:
    """W of i-scheduler.txt eq. 3 (= cost(G,P) of fischer-metis-scheduler.txt III):
    sum of R(ti,tj) over edges whose endpoints sit on different nodes."""
    return cut_traffic(graph.src, graph.dst, _weights(graph, weight), placement.node_of)


def inter_worker_traffic(graph: TaskGraph, placement: Placement, weight: str = "rate") -> float:
    """Sum of rates of edges that leave a worker process (other worker or other node).

    A task with no worker slot (``NO_WORKER``) counts as a worker of its own.
    """
    node, worker = placement.node_of, placement.worker_of
    s, d = graph.src, graph.dst
    same = (node[s] == node[d]) & (worker[s] == worker[d]) & (worker[s] != NO_WORKER)
    same |= s == d
    return float(_weights(graph, weight)[~same].sum())


def node_loads(graph: TaskGraph, placement: Placement, cluster: Cluster) -> np.ndarray:
    """Summed task load per node, index-aligned with ``cluster.nodes``."""
    return np.bincount(placement.node_of, weights=graph.load, minlength=cluster.n_nodes)


def utilisation(graph: TaskGraph, placement: Placement, cluster: Cluster) -> np.ndarray:
    """Load / capacity per node (0 where a node has no capacity and no load)."""
    load = node_loads(graph, placement, cluster)
    cap = cluster.capacity
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(cap > 0, load / np.where(cap > 0, cap, 1), np.where(load > 0, np.inf, 0.0))


def nodes_used(placement: Placement) -> int:
    return int(np.unique(placement.node_of).size)


def workers_used(placement: Placement) -> int:
    assigned = placement.worker_of != NO_WORKER
    pairs = placement.node_of[assigned].astype(np.int64) * (1 << 31) + placement.worker_of[assigned]
    return int(np.unique(pairs).size)


def load_imbalance(graph: TaskGraph, placement: Placement, cluster: Cluster) -> float:
    """loadImba(G,P) = max_k pw_k / apw of fischer-metis-scheduler.txt III, over all K nodes."""
    load = node_loads(graph, placement, cluster)
    average = load.sum() / cluster.n_nodes
    return float(load.max() / average) if average > 0 else 0.0


def capacity_imbalance(graph: TaskGraph, placement: Placement, cluster: Cluster) -> float:
    """Heterogeneous-aware imbalance: max utilisation / mean utilisation (1 = proportional)."""
    total_cap = cluster.total_capacity
    if total_cap <= 0 or graph.total_load <= 0:
        return 0.0
    return float(utilisation(graph, placement, cluster).max() / (graph.total_load / total_cap))


#: R-Storm's network distances: same worker, other worker on the node, other node, other rack.
DISTANCE_SAME_WORKER, DISTANCE_OTHER_WORKER, DISTANCE_OTHER_NODE, DISTANCE_OTHER_RACK = 0, 1, 2, 3


def edge_distances(graph: TaskGraph, placement: Placement, cluster: Cluster) -> np.ndarray:
    """R-Storm network distance (0/1/2/3) of every edge."""
    node, worker = placement.node_of, placement.worker_of
    racks = np.unique([n.rack for n in cluster.nodes], return_inverse=True)[1]
    s, d = graph.src, graph.dst
    dist = np.full(graph.n_edges, DISTANCE_OTHER_WORKER, dtype=np.int8)
    same_worker = (worker[s] == worker[d]) & (worker[s] != NO_WORKER) | (s == d)
    dist[same_worker] = DISTANCE_SAME_WORKER
    dist[node[s] != node[d]] = DISTANCE_OTHER_NODE
    dist[racks[node[s]] != racks[node[d]]] = DISTANCE_OTHER_RACK
    return dist


def traffic_by_distance(graph: TaskGraph, placement: Placement, cluster: Cluster,
                        weight: str = "rate") -> dict[str, float]:
    """Storm's network metric (docs/Resource_Aware_Scheduler_overview.md compares strategies by
    it): the traffic of edges within a worker, between workers of a node, between nodes of a
    rack and between racks (each edge in exactly one). With structural traffic (rate 1 per
    connected executor pair, :mod:`streamsched.engines.storm.nimbus`) these count connections."""
    dist = edge_distances(graph, placement, cluster)
    totals = np.bincount(dist, weights=_weights(graph, weight), minlength=4)
    return dict(zip(("intra_worker", "inter_worker", "inter_node", "inter_rack"), totals.tolist()))


def network_distance(graph: TaskGraph, placement: Placement, cluster: Cluster, weight: str = "rate") -> float:
    """R-Storm's network-distance score: sum over edges of distance x rate."""
    return float((edge_distances(graph, placement, cluster) * _weights(graph, weight)).sum())


def remote_traffic(graph: TaskGraph, placement: Placement) -> dict[str, float]:
    """What a placement sends over the network and between processes: tuples/s between nodes
    (:func:`inter_node_traffic`), between workers (:func:`inter_worker_traffic`) and in all."""
    return {"inter_node_traffic": inter_node_traffic(graph, placement),
            "inter_worker_traffic": inter_worker_traffic(graph, placement),
            "total_traffic": float(graph.rate.sum())}


def evaluate(graph: TaskGraph, placement: Placement, cluster: Cluster) -> dict[str, Any]:
    """Every metric of this module in one JSON-ready dictionary."""
    util = utilisation(graph, placement, cluster)
    violations = placement.violations(graph, cluster)
    return {
        "inter_node_traffic": inter_node_traffic(graph, placement),
        "inter_node_bytes": inter_node_traffic(graph, placement, "bytes"),
        "inter_worker_traffic": inter_worker_traffic(graph, placement),
        "total_traffic": graph.total_rate,
        "nodes_used": nodes_used(placement),
        "workers_used": workers_used(placement),
        "load_imbalance": load_imbalance(graph, placement, cluster),
        "capacity_imbalance": capacity_imbalance(graph, placement, cluster),
        "max_utilisation": float(util.max()),
        "network_distance": network_distance(graph, placement, cluster),
        "inter_rack_traffic": traffic_by_distance(graph, placement, cluster)["inter_rack"],
        "valid": not violations,
        "violations": violations,
    }
