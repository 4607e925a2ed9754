"""The second level of scheduling: the tasks of each node split over its worker processes.

I-Scheduler [1]_ section 4.4, Algorithm 1 lines 55-62 (and T3-Scheduler [2]_ section 4.5): a node
hosting t tasks gets ``w = ceil(t / T)`` workers, T the maximum tasks per worker (line 57), and
its sub-graph is K-way partitioned into w parts (line 58; METIS k-way [3]_) so that highly communicating tasks
share a worker. Here w is also capped by the node's slots (a node never runs more workers than
it has slots); each worker then holds at most ``max(T, ceil(t / w))`` tasks, which is T unless
the slots run out. Inter-worker traffic is only ever cut inside a node, so the first level's
inter-node traffic is unchanged.

References
----------
.. [1] Eskandari, L.; Mair, J.; Huang, Z.; Eyers, D. (2020) "I-Scheduler: Iterative scheduling for
   distributed stream processing systems", Future Generation Computer Systems,
   doi:10.1016/j.future.2020.11.011.
.. [2] Eskandari, L.; Mair, J.; Huang, Z.; Eyers, D. (2018) "T3-Scheduler: A topology and traffic
   aware two-level scheduler for stream processing systems in a heterogeneous cluster", Future
   Generation Computer Systems 89, pp. 617-632, doi:10.1016/j.future.2018.07.011.
.. [3] Karypis, G.; Kumar, V. (1998) "Multilevel k-way partitioning scheme for irregular graphs",
   Journal of Parallel and Distributed Computing 48(1), pp. 96-129.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from streamsched.errors import InfeasibleError, InputError
from streamsched.model.cluster import Cluster
from streamsched.model.taskgraph import TaskGraph
from streamsched.partitioning.backends import partition


def workers_needed(n_tasks: int, slots: int, max_tasks_per_worker: int) -> int:
    """``min(ceil(t / T), slots)`` (Algorithm 1 line 57, capped by the node's slots)."""
    return min(-(-n_tasks // max_tasks_per_worker), slots)


def assign_workers(graph: TaskGraph, cluster: Cluster, node_of: np.ndarray, max_tasks_per_worker: int = 5,
                   seed: int = 0, backend: str = "metis") -> np.ndarray:
    """``worker_of`` for every task: the worker slot (0-based, per node) chosen by K-way partitioning.

    Workers of a node are numbered in the order of their lowest task index. Raises
    ``InfeasibleError`` when a node has tasks but no slots, ``InputError`` on a bad ``node_of``
    or ``max_tasks_per_worker`` < 1.
    """
    node_of = np.asarray(node_of)
    if node_of.shape != (graph.n_tasks,):
        raise InputError(f"assign_workers: node_of has shape {node_of.shape}, graph {graph.name!r} has {graph.n_tasks} tasks")
    if max_tasks_per_worker < 1:
        raise InputError(f"assign_workers: max_tasks_per_worker must be >= 1, got {max_tasks_per_worker}")
    if graph.n_tasks and (node_of.min() < 0 or node_of.max() >= cluster.n_nodes):
        bad = int(np.flatnonzero((node_of < 0) | (node_of >= cluster.n_nodes))[0])
        raise InputError(f"assign_workers: task {graph.task_ids[bad]} is on unknown node index {node_of[bad]}")
    node_of = node_of.astype(np.int64)
    counts = np.bincount(node_of, minlength=cluster.n_nodes)
    slots = cluster.slots
    stranded = np.flatnonzero((counts > 0) & (slots == 0))
    if stranded.size:
        k = int(stranded[0])
        raise InfeasibleError(f"node {cluster.nodes[k].name!r} holds {counts[k]} tasks but has no worker slots")

    worker_of = np.zeros(graph.n_tasks, np.int32)
    # local index of each task within its node, and the intra-node edges grouped by node
    order = np.argsort(node_of, kind="stable")
    starts = np.r_[0, np.cumsum(counts)]
    local = np.empty(graph.n_tasks, np.int64)
    local[order] = np.arange(graph.n_tasks) - starts[node_of[order]]
    src, dst = graph.src.astype(np.int64), graph.dst.astype(np.int64)
    inside = (node_of[src] == node_of[dst]) & (src != dst) & (graph.rate > 0)
    e_node = node_of[src[inside]]
    e_order = np.argsort(e_node, kind="stable")
    e_node, e_src, e_dst = e_node[e_order], local[src[inside]][e_order], local[dst[inside]][e_order]
    e_rate = graph.rate[inside][e_order]
    e_starts = np.searchsorted(e_node, np.arange(cluster.n_nodes + 1))

    for k in np.flatnonzero(counts > 0).tolist():
        t = int(counts[k])
        w = workers_needed(t, int(slots[k]), max_tasks_per_worker)
        if w <= 1:
            continue
        lo, hi = e_starts[k], e_starts[k + 1]
        directed = sp.coo_matrix((e_rate[lo:hi], (e_src[lo:hi], e_dst[lo:hi])), shape=(t, t))
        adjacency = (directed + directed.T).tocsr()
        cap = max(max_tasks_per_worker, -(-t // w))
        parts = partition(adjacency, w, imbalance=cap * w / t, seed=seed, backend=backend,
                          part_capacity=np.full(w, float(cap)))
        tasks = order[starts[k]:starts[k + 1]]
        worker_of[tasks] = _number_by_first_task(parts)
    return worker_of


def _number_by_first_task(parts: np.ndarray) -> np.ndarray:
    """Relabel parts 0, 1, ... in the order of their lowest member (empty parts vanish)."""
    _, first = np.unique(parts, return_index=True)
    label = np.empty(int(parts.max()) + 1, np.int64)
    label[parts[np.sort(first)]] = np.arange(first.size)
    return label[parts]
