"""Gr-Storm (Muhammad [1]_ section 3.5, Algorithms 10 and 11).

Graph partitioning (Algorithm 10 lines 2-4): the weighted DAG (edge capacity = rate) gets a
super-source feeding every source task and a super-sink fed by every sink task, and its minimum
s-t cut (max-flow min-cut, section 3.5.1) splits the tasks in two: those the residual graph
still reaches from the source, and the rest. Each part is cut again the same way (its own
sources and sinks) until it fits a node: load <= the largest node capacity.

Physical mapping (Algorithm 11): nodes ranked by GFLOPS = cores x GHz x flops/cycle (eq. 3.1,
lines 2-8), partitions by communication (line 9: traffic inside the part, largest first); each
partition takes one free worker slot, filling the most powerful node before the next (lines
10-16).

Where the thesis is silent, we choose (capacity-aware, so placements stay valid):

- A partition goes to the first node, in rank order, with a free slot and room for its load;
  when no node has both, to the node with room (most communication with the part, then most
  room) and onto the worker there it talks to most. A partition that fits nowhere is cut again;
  a single task that fits nowhere fails the packing
  (:class:`~streamsched.schedulers.base.PackingFailed`: repaired, or refused with ``strict``).
- Isolated tasks (no edges inside the part) join the lighter side of a cut; a part whose cut
  separates nothing (no internal edges) is halved in task order.
- Rates become integers for the max-flow (scipy's Dinic needs them), about 2^20 levels in all.

References
----------
.. [1] Muhammad, A. (2023) "A scheduler for efficient scheduling of stream processing tasks on
   computational clusters", PhD thesis, Department of Computer Science, Capital University of
   Science and Technology, Islamabad.
"""

from __future__ import annotations

import heapq
from collections import deque

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, maximum_flow

from streamsched.model.cluster import Cluster
from streamsched.model.placement import CAPACITY_TOLERANCE, Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.schedulers import register
from streamsched.schedulers.base import STRICT, PackingFailed, Scheduler

#: Total integer capacity of a flow network (keeps scipy's int32 sums from overflowing).
FLOW_LEVELS = 2**29


def min_cut_split(graph: TaskGraph, tasks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Split ``tasks`` by the minimum cut between their sources and sinks (section 3.5.1)."""
    n = tasks.size
    local = np.full(graph.n_tasks, -1, np.int64)
    local[tasks] = np.arange(n)
    inside = (local[graph.src] >= 0) & (local[graph.dst] >= 0) & (graph.src != graph.dst) & (graph.rate > 0)
    s, d, r = local[graph.src[inside]], local[graph.dst[inside]], graph.rate[inside]
    has_in = np.bincount(d, minlength=n) > 0
    has_out = np.bincount(s, minlength=n) > 0
    connected = has_in | has_out
    if s.size == 0:
        half = max(1, n // 2)
        return tasks[:half], tasks[half:]
    scale = min(2.0**20 / r.max(), FLOW_LEVELS / (2.0 * r.sum()))
    cap = np.maximum(1, np.rint(r * scale)).astype(np.int64)
    infinite = int(cap.sum()) + 1
    source, sink = n, n + 1
    sources = np.flatnonzero(connected & ~has_in)
    sinks = np.flatnonzero(connected & ~has_out)
    rows = np.concatenate([s, np.full(sources.size, source), sinks])
    cols = np.concatenate([d, sources, np.full(sinks.size, sink)])
    vals = np.concatenate([cap, np.full(sources.size + sinks.size, infinite)])
    network = sp.csr_matrix((vals.astype(np.int32), (rows, cols)), shape=(n + 2, n + 2))
    network.sum_duplicates()
    flow = maximum_flow(network, source, sink).flow
    residual = (network - flow).tocsr()
    residual.data[residual.data < 0] = 0
    residual.eliminate_zeros()
    reached = breadth_first_order(residual, source, directed=True, return_predecessors=False)
    side = np.zeros(n + 2, dtype=bool)
    side[reached] = True
    upper = side[:n] & connected
    lower = ~side[:n] & connected
    if not upper.any() or not lower.any():  # a cycle-free part always has both; guard anyway
        half = max(1, n // 2)
        return tasks[:half], tasks[half:]
    for t in np.flatnonzero(~connected).tolist():  # isolated tasks join the lighter side
        if graph.load[tasks[upper]].sum() <= graph.load[tasks[lower]].sum():
            upper[t] = True
        else:
            lower[t] = True
    return tasks[upper], tasks[lower]


def partition_by_min_cut(graph: TaskGraph, tasks: np.ndarray, max_load: float) -> list[np.ndarray]:
    """Cut recursively (Algorithm 10 line 4) until every part's load is at most ``max_load``."""
    done: list[np.ndarray] = []
    todo = deque([tasks])
    limit = max_load * (1 + CAPACITY_TOLERANCE) + CAPACITY_TOLERANCE
    while todo:
        part = todo.popleft()
        if part.size <= 1 or graph.load[part].sum() <= limit:
            done.append(part)
        else:
            todo.extend(min_cut_split(graph, part))
    return done


def internal_traffic(graph: TaskGraph, part: np.ndarray) -> float:
    member = np.zeros(graph.n_tasks, dtype=bool)
    member[part] = True
    return float(graph.rate[member[graph.src] & member[graph.dst]].sum())


def gflops_order(cluster: Cluster) -> list[int]:
    """Node indices by GFLOPS (eq. 3.1), most powerful first; ties by capacity, then index."""
    return sorted(range(cluster.n_nodes), key=lambda k: (-cluster.nodes[k].gflops, -cluster.capacity[k], k))


@register
class GrStorm(Scheduler):
    name = "gr-storm"
    summary = "Gr-Storm: recursive max-flow min-cut partitions, most traffic to the most GFLOPS"
    objective = "traffic"  # thesis section 1.4, research question 2
    params = (STRICT,)

    def place(self, graph, cluster, params, seed):
        room = cluster.capacity * (1 + CAPACITY_TOLERANCE) + CAPACITY_TOLERANCE
        free_slots = cluster.slots.copy()
        ranked = gflops_order(cluster)
        node_of = np.full(graph.n_tasks, -1, np.int64)
        worker_of = np.full(graph.n_tasks, -1, np.int64)
        queue: list = []

        def enqueue(part: np.ndarray) -> None:  # line 9: most communication first
            key = (-internal_traffic(graph, part), -float(graph.load[part].sum()), int(part.min()))
            heapq.heappush(queue, (key, part.tolist()))

        for part in partition_by_min_cut(graph, np.arange(graph.n_tasks), float(cluster.capacity.max())):
            enqueue(part)
        adjacency = graph.undirected
        n_parts = len(queue)
        refused = None
        while queue:
            part = np.array(heapq.heappop(queue)[1], dtype=np.int64)
            load = float(graph.load[part].sum())
            node = next((k for k in ranked if free_slots[k] > 0 and room[k] >= load), None)
            if node is not None:
                worker_of[part] = cluster.slots[node] - free_slots[node]
                free_slots[node] -= 1
            else:
                node = _shared_node(graph, cluster, adjacency, part, node_of, room, load)
                if node is None:
                    if part.size == 1:
                        refused = refused or (f"gr-storm: task {graph.task_ids[part[0]]} (load {load:g}) fits on "
                                              f"no node (largest room left {room.max():g})")
                        continue
                    for piece in min_cut_split(graph, part):
                        enqueue(piece)
                    n_parts += 1
                    continue
                worker_of[part] = _busiest_worker(adjacency, part, node_of, worker_of, node)
            node_of[part] = node
            room[node] -= load
        if refused:
            raise PackingFailed(refused, node_of, worker_of, metadata={"partitions": n_parts})
        return Placement.build(node_of, worker_of, {"partitions": n_parts})


def _shared_node(graph, cluster, adjacency, part, node_of, room, load) -> int | None:
    """A node with room but no free slot: most traffic with ``part``, then most room."""
    fits = np.flatnonzero((room >= load) & (cluster.slots > 0))
    if fits.size == 0:
        return None
    rows = adjacency[part].tocoo()
    placed = node_of[rows.col] >= 0
    towards = np.bincount(node_of[rows.col[placed]], weights=rows.data[placed], minlength=cluster.n_nodes)
    return int(fits[np.lexsort((fits, -room[fits], -towards[fits]))[0]])


def _busiest_worker(adjacency, part, node_of, worker_of, node) -> int:
    """The worker of ``node`` the part communicates with most (0 when none)."""
    rows = adjacency[part].tocoo()
    there = (node_of[rows.col] == node) & (worker_of[rows.col] >= 0)
    if not there.any():
        return 0
    traffic = np.bincount(worker_of[rows.col[there]], weights=rows.data[there])
    return int(np.argmax(traffic))
