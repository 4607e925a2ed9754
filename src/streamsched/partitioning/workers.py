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
from streamsched.native_output import captured_native_output
from streamsched.partitioning.backends import AUTO_BOTH_LIMIT, CSRGraph, check_arguments, partition_csr


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
    check_arguments(2, 1.0, "cut", backend, "auto")
    node_of = node_of.astype(np.int64)
    counts = np.bincount(node_of, minlength=cluster.n_nodes)
    slots = cluster.slots
    stranded = np.flatnonzero((counts > 0) & (slots == 0))
    if stranded.size:
        k = int(stranded[0])
        raise InfeasibleError(f"node {cluster.nodes[k].name!r} holds {counts[k]} tasks but has no worker slots")

    worker_of = np.zeros(graph.n_tasks, np.int32)
    # tasks in node order; the intra-node entries of the graph's symmetric adjacency (cached on
    # the graph: the partitioning schedulers have built it already) as one CSR matrix in that
    # order, so that each node's sub-graph is a diagonal block (rows and columns lo..hi). The
    # order is stable, so each row's columns stay sorted.
    n = graph.n_tasks
    index = np.int32 if n < 2**31 else np.int64  # half the memory traffic below
    order = np.argsort(node_of, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)])
    position = np.empty(n, index)
    position[order] = np.arange(n, dtype=index)
    adjacency = graph.undirected
    per_row = np.diff(adjacency.indptr)
    node = node_of.astype(index)
    keep = (np.repeat(node, per_row) == node[adjacency.indices]) & (adjacency.data > 0)
    rows = np.repeat(position, per_row)[keep]
    cols = position[adjacency.indices[keep]]
    data = adjacency.data[keep]
    loop = rows == cols  # self-loops (TaskGraph.undirected has none)
    if loop.any():
        rows, cols, data = rows[~loop], cols[~loop], data[~loop]
    blocks = sp.csr_matrix((data, (rows, cols)), shape=(n, n))

    busy = [k for k in np.flatnonzero(counts > 0).tolist()
            if workers_needed(int(counts[k]), int(slots[k]), max_tasks_per_worker) > 1]
    if not busy:
        return worker_of
    with captured_native_output("KaHIP" if backend.startswith("kahip") else "METIS"):
        for k in busy:
            t = int(counts[k])
            w = workers_needed(t, int(slots[k]), max_tasks_per_worker)
            lo, hi = int(starts[k]), int(starts[k + 1])
            first, last = int(blocks.indptr[lo]), int(blocks.indptr[hi])
            sub = CSRGraph(blocks.indptr[lo:hi + 1] - first, blocks.indices[first:last] - lo, blocks.data[first:last])
            cap = max(max_tasks_per_worker, -(-t // w))
            ones = np.ones(t)
            parts = partition_csr(sub, w, ones, ones.astype(np.int64), imbalance=cap * w / t, seed=seed,
                                  backend=backend, method=_method(t, w), part_capacity=np.full(w, float(cap)))
            worker_of[order[lo:hi]] = _number_by_first_task(parts)
    return worker_of


def _method(tasks: int, workers: int) -> str:
    """METIS recursive bisection for a few workers of a large node, as METIS' manual advises
    for up to 8 parts (and pymetis does by default): on 1,000-task nodes into 4 workers it
    takes 2.9 ms against k-way's 6.3 ms. Smaller nodes try both (``auto``)."""
    return "recursive" if tasks > AUTO_BOTH_LIMIT and workers <= 8 else "auto"


def _number_by_first_task(parts: np.ndarray) -> np.ndarray:
    """Relabel parts 0, 1, ... in the order of their lowest member (empty parts vanish)."""
    _, first = np.unique(parts, return_index=True)
    label = np.empty(int(parts.max()) + 1, np.int64)
    label[parts[np.sort(first)]] = np.arange(first.size)
    return label[parts]
