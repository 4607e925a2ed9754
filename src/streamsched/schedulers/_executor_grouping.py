"""Shared steps of TOP-Storm, A3-Storm and BAN-Storm (Muhammad [1]_ chapter 3;
[2]_, [3]_, [4]_).

1. *Executor grouping* (Algorithm 2 lines 2-34, Algorithm 5, Algorithm 7 lines 1-37): with
   ``omega`` slots, each slot takes up to ``e_ps = ceil(e / omega)`` executors (tasks here). Walk
   the executor pairs (TOP-Storm: in DAG order; A3/BAN: by decreasing traffic); a pair of two
   unassigned executors opens a new slot, which then takes, one at a time, the unassigned
   executor interacting most with the slot (TOP: connections, A3/BAN: traffic in and out),
   until ``e_ps``. Leftover executors go round robin, ``counter % omega`` from counter 1.
   Algorithm 5 lines 5-14 (omega = 1: one slot; omega >= e: one executor per slot) apply to
   all three. Two gaps of the pseudo-code are closed here: a slot stops growing when no
   unassigned executor interacts with it (the thesis' Spout B example: a non-interacting
   executor "can not be selected"), and no slot beyond ``omega`` is opened.
2. *Slots onto nodes* (Algorithm 3, 6, 8): nodes ranked by computation power (eq. 3.2, or 3.3
   for BAN-Storm), slots sorted (TOP: by executors, A3/BAN: by traffic), and each slot goes to
   the first node in rank order with a free slot, so a node's slots are used up before the next
   node is opened (fewest nodes). The thesis ignores node capacity; here a slot also needs the
   node's remaining capacity, so placements stay valid on heterogeneous clusters. When no
   number of slots lets every slot fit, the grouping that left the least load out fails the
   packing (:class:`~streamsched.schedulers.base.PackingFailed`: repaired, or refused with
   ``strict``).

Node power uses GFLOPs = cores x GHz x flops/cycle (eq. 3.1), RAM in GB and bandwidth in Mbps,
as the thesis tables print them. Ranks compare powers rounded to whole units, ties in cluster
order: this reproduces Tables 3.1, 3.2 and 3.8-3.10, which print integer powers and list
equal-looking nodes in their original order (Table 3.9: B 35.8 before D 36.0, both "36").

References
----------
.. [1] Muhammad, A. (2023) "A scheduler for efficient scheduling of stream processing tasks on
   computational clusters", PhD thesis, Department of Computer Science, Capital University of
   Science and Technology, Islamabad.
.. [2] Muhammad, A.; Aleem, M.; Islam, M. A. (2021) "TOP-Storm: A topology-based resource-aware
   scheduler for stream processing engine", Cluster Computing 24(1), pp. 417-431.
.. [3] Muhammad, A.; Aleem, M. (2021) "A3-Storm: topology-, traffic-, and resource-aware Storm
   scheduler for heterogeneous clusters", The Journal of Supercomputing 77(2), pp. 1059-1093.
.. [4] Muhammad, A.; Aleem, M. (2021) "BAN-Storm: a bandwidth-aware scheduling mechanism for stream
   jobs", Journal of Grid Computing 19(3).
"""

from __future__ import annotations

import math
from abc import abstractmethod

import numpy as np
import scipy.sparse as sp

from streamsched.model.cluster import Cluster, Node
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.schedulers.base import STRICT, PackingFailed, Param, Scheduler, remaining_capacity

MB_PER_GB = 1024.0


def computation_power(node: Node, alpha: float) -> float:
    """Eq. 3.2: ``alpha x Processing_Speed + (1 - alpha) x RAM`` (GFLOPs, GB)."""
    return alpha * node.gflops + (1.0 - alpha) * node.ram_mb / MB_PER_GB


def node_power(node: Node, alpha: float, beta: float, gamma: float) -> float:
    """Eq. 3.3: ``alpha x Processing_Speed + beta x DRAM + gamma x bandwidth`` (GFLOPs, GB, Mbps)."""
    return alpha * node.gflops + beta * node.ram_mb / MB_PER_GB + gamma * node.bandwidth_mbps


def rank_nodes(powers) -> list[int]:
    """Node indices by decreasing power rounded to whole units; ties keep cluster order."""
    rounded = np.floor(np.asarray(powers, dtype=np.float64) + 0.5)
    return [int(k) for k in np.lexsort((np.arange(rounded.size), -rounded))]


def group_executors(graph: TaskGraph, omega: int, by_traffic: bool) -> list[list[int]]:
    """Executor grouping (Algorithm 2 / 5 / 7): ``omega`` slots, each a list of task indices."""
    n = graph.n_tasks
    if omega <= 1:
        return [list(range(n))]
    if omega >= n:
        return [[t] for t in range(n)]
    per_slot = math.ceil(n / omega)
    keep = graph.src != graph.dst
    src, dst, rate = graph.src[keep], graph.dst[keep], graph.rate[keep]
    if by_traffic:  # Algorithm 5 line 16: pairs by decreasing traffic, ties in list order
        order = np.argsort(-rate, kind="stable")
        src, dst = src[order], dst[order]
        affinity_matrix = graph.undirected
    else:  # TOP-Storm: DAG connectivity, one unit per connected pair
        affinity_matrix = graph.undirected.copy()
        affinity_matrix.data[:] = 1.0
    affinity_matrix = sp.csr_matrix(affinity_matrix)
    assigned = np.zeros(n, dtype=bool)
    slots: list[list[int]] = []

    def add(slot: list[int], task: int, affinity: np.ndarray) -> None:
        slot.append(task)
        assigned[task] = True
        row = slice(affinity_matrix.indptr[task], affinity_matrix.indptr[task + 1])
        affinity[affinity_matrix.indices[row]] += affinity_matrix.data[row]

    for s, d in zip(src.tolist(), dst.tolist()):
        if len(slots) == omega:
            break
        if assigned[s] or assigned[d]:
            continue
        slot: list[int] = []
        affinity = np.zeros(n)
        add(slot, s, affinity)
        add(slot, d, affinity)
        while len(slot) < per_slot:  # getFrequentlyInteractingExecutor / CommunicatingExecutor
            candidates = np.where(assigned, -1.0, affinity)
            best = int(np.argmax(candidates))
            if candidates[best] <= 0:
                break
            add(slot, best, affinity)
        slots.append(slot)
    slots.extend([] for _ in range(omega - len(slots)))
    counter = 1  # Algorithm 2 lines 24-32: leftovers round robin from slot 1
    for task in np.flatnonzero(~assigned).tolist():
        slots[counter % omega].append(task)
        counter += 1
    return [slot for slot in slots if slot]


def slot_traffic(graph: TaskGraph, slots: list[list[int]]) -> np.ndarray:
    """Total traffic of each slot's executors (edges touching the slot, inner ones once)."""
    slot_of = np.full(graph.n_tasks, -1)
    for k, slot in enumerate(slots):
        slot_of[slot] = k
    a, b = slot_of[graph.src], slot_of[graph.dst]
    out = np.bincount(a, weights=graph.rate, minlength=len(slots))
    cross = a != b
    out += np.bincount(b[cross], weights=graph.rate[cross], minlength=len(slots))
    return out


def map_slots_to_nodes(graph: TaskGraph, cluster: Cluster, slots: list[list[int]], slot_order: list[int],
                       node_rank: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 3 lines 21-27: slots in ``slot_order`` onto nodes in ``node_rank``, first node
    with a free slot and room: ``(node_of, worker_of)``, -1 for the tasks of a slot that fits
    nowhere."""
    free_slots = cluster.slots.astype(np.int64).copy()
    room = remaining_capacity(cluster)
    node_of = np.full(graph.n_tasks, -1, np.int32)
    worker_of = np.full(graph.n_tasks, -1, np.int32)
    for s in slot_order:
        need = float(graph.load[slots[s]].sum())
        for k in node_rank:
            if free_slots[k] > 0 and room[k] >= need:
                break
        else:
            continue
        node_of[slots[s]] = k
        worker_of[slots[s]] = cluster.slots[k] - free_slots[k]
        free_slots[k] -= 1
        room[k] -= need
    return node_of, worker_of


class ThesisScheduler(Scheduler):
    """TOP/A3/BAN-Storm: executor grouping into ``workers`` slots, then slots onto ranked nodes.

    ``workers`` = 0 takes the fewest slots (from ``ceil(total load / largest capacity)`` up)
    for which every slot fits on a node; when none does (or a given ``workers`` does not fit),
    the packing fails with the grouping that left the least load out.
    """

    by_traffic: bool = True
    params = (Param("workers", int, 0, "omega, worker slots for the topology (0 = fewest that fit)", low=0), STRICT)

    @abstractmethod
    def node_rank(self, cluster: Cluster, params) -> list[int]:
        """Node indices, most powerful first."""

    def slot_order(self, graph: TaskGraph, slots: list[list[int]]) -> list[int]:
        """Algorithm 6 lines 18-20 / Algorithm 8 line 16: slots by decreasing traffic."""
        traffic = slot_traffic(graph, slots)
        return [int(k) for k in np.lexsort((np.arange(len(slots)), -traffic))]

    def place(self, graph, cluster, params, seed):
        rank = [k for k in self.node_rank(cluster, params) if cluster.slots[k] > 0]
        total_slots = int(cluster.slots.sum())
        if params["workers"]:
            candidates = [params["workers"]]
        else:
            lowest = max(1, math.ceil(graph.total_load / max(float(cluster.capacity.max()), 1e-12) - 1e-9))
            candidates = range(lowest, max(lowest, min(graph.n_tasks, total_slots)) + 1)
        closest = (np.inf, np.full(graph.n_tasks, -1), None, {})  # least load left out
        for omega in candidates:
            if omega > total_slots:
                break
            slots = group_executors(graph, omega, self.by_traffic)
            node_of, worker_of = map_slots_to_nodes(graph, cluster, slots, self.slot_order(graph, slots), rank)
            if (node_of >= 0).all():
                return Placement.build(node_of, worker_of, {"workers": len(slots)})
            left_out = float(graph.load[node_of < 0].sum())
            if left_out < closest[0]:
                closest = (left_out, node_of, worker_of, {"workers": len(slots)})
        raise PackingFailed(
            f"{self.name}: no grouping into {params['workers'] or 'at most ' + str(total_slots)} worker slots "
            f"fits cluster {cluster.name!r} (capacity {cluster.total_capacity:g}, {total_slots} slots; "
            f"graph load {graph.total_load:g})", closest[1], closest[2], nodes=sorted(rank), metadata=closest[3])


class PowerRankedScheduler(ThesisScheduler):
    """TOP- and A3-Storm: nodes ranked by eq. 3.2, ``alpha`` x GFLOPs + (1 - alpha) x RAM."""

    params = ThesisScheduler.params + (
        Param("alpha", float, 0.8, "eq. 3.2 weight of GFLOPs against RAM (0.2 ranks by memory)", low=0.0, high=1.0),
    )

    def node_rank(self, cluster, params):
        return rank_nodes([computation_power(node, params["alpha"]) for node in cluster.nodes])
