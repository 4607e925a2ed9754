"""OLS: Aniello et al.'s traffic-based online scheduler [1]_, as Fischer and Bernstein [2]_
(section IV-B2), T3-Scheduler [3]_ (section 2) and I-Scheduler [4]_ (section 2) describe it.

Phase 1 puts executors (tasks) into worker slots: task pairs in decreasing traffic; a pair of
unplaced tasks goes to the least loaded slot that can take both, otherwise each to the least
loaded slot that can take it; a pair with one task placed brings the other to its slot if it
fits there, else to the least loaded slot that fits. Phase 2 places the slots onto nodes the
same way, with slot pairs in decreasing inter-slot traffic and "least loaded" meaning the
lowest utilisation (load / capacity). Node load accumulates over the whole plan, so capacity is
enforced cumulatively (the public code never adds a placed slot's load to its node).

Knobs, all in [0, 1] except gamma:

- ``beta``: nodes used, from the fewest whose capacity covers the load (0) to every node (1),
  largest capacity first;
- ``delta``: slots per used node, from 1 (0) to all of the node's slots (1);
- ``alfa``: executors per slot, from ``ceil(E / S)`` (0) to ``E - S + 1`` (1);
- ``gamma``: a slot's load at most ``gamma`` x the average slot load (>= 1).

Defaults are the values Fischer and Bernstein [2]_ took from Aniello et al. [1]_ (alfa 0, beta 0.5, gamma 1.1)
and one worker per node (delta 0), which Aniello et al. recommend to avoid inter-worker traffic.
A task that no slot can take within alfa/gamma goes to the least loaded slot; a slot that no
node can take is split, its tasks going one by one to the node they exchange most traffic with
among those with room; a task with no such node fails the packing
(:class:`~streamsched.schedulers.base.PackingFailed`: repaired, or refused with ``strict``).
The traffic.improvement rule (re-schedule only for a large enough cut)
is :func:`streamsched.schedulers.replanning.should_reschedule`.

References
----------
.. [1] Aniello, L.; Baldoni, R.; Querzoni, L. (2013) "Adaptive online scheduling in Storm",
   Proceedings of the 7th ACM International Conference on Distributed Event-Based Systems (DEBS
   '13), pp. 207-218.
.. [2] Fischer, L.; Bernstein, A. (2015) "Workload scheduling in distributed stream processors using
   graph partitioning", 2015 IEEE International Conference on Big Data (IEEE BigData 2015), Santa
   Clara, CA, IEEE Computer Society.
.. [3] Eskandari, L.; Mair, J.; Huang, Z.; Eyers, D. (2018) "T3-Scheduler: A topology and traffic
   aware two-level scheduler for stream processing systems in a heterogeneous cluster", Future
   Generation Computer Systems 89, pp. 617-632, doi:10.1016/j.future.2018.07.011.
.. [4] Eskandari, L.; Mair, J.; Huang, Z.; Eyers, D. (2020) "I-Scheduler: Iterative scheduling for
   distributed stream processing systems", Future Generation Computer Systems,
   doi:10.1016/j.future.2020.11.011.
"""

from __future__ import annotations

import math

import numpy as np

from streamsched.errors import InfeasibleError
from streamsched.model.cluster import Cluster
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.schedulers import register
from streamsched.schedulers.base import STRICT, PackingFailed, Param, Scheduler, remaining_capacity


def _pairs(rows: np.ndarray, cols: np.ndarray, weight: np.ndarray) -> list[tuple[int, int]]:
    """Unordered pairs by decreasing summed weight, ties by the pair's indices."""
    keep = rows != cols
    lo, hi, w = np.minimum(rows[keep], cols[keep]), np.maximum(rows[keep], cols[keep]), weight[keep]
    if lo.size == 0:
        return []
    base = int(hi.max()) + 1
    keys, inverse = np.unique(lo.astype(np.int64) * base + hi, return_inverse=True)
    total = np.bincount(inverse, weights=w)
    order = np.lexsort((keys, -total))
    return [divmod(int(keys[i]), base) for i in order if total[i] > 0]


class _Bins:
    """Bins (slots or nodes) with a load limit, an item-count limit and a utilisation order."""

    def __init__(self, limit: np.ndarray, max_items: np.ndarray):
        self.limit = limit.astype(np.float64)
        self.max_items = max_items.astype(np.int64)
        self.load = np.zeros(limit.size)
        self.items = np.zeros(limit.size, np.int64)

    def fits(self, b: int, load: float, count: int) -> bool:
        return self.items[b] + count <= self.max_items[b] and self.load[b] + load <= self.limit[b]

    def least_loaded(self, load: float, count: int, among=None) -> int | None:
        among = range(self.limit.size) if among is None else among
        best, best_key = None, None
        for b in among:
            if self.fits(b, load, count):
                key = (self.load[b] / self.limit[b] if self.limit[b] > 0 else math.inf, b)
                if best_key is None or key < best_key:
                    best, best_key = b, key
        return best

    def put(self, b: int, load: float, count: int) -> None:
        self.load[b] += load
        self.items[b] += count


def _greedy_pairs(pairs, item_load: np.ndarray, bins: _Bins) -> np.ndarray:
    """The pair heuristic of both phases: returns the bin of every item (-1 = still unplaced)."""
    where = np.full(item_load.size, -1, np.int64)

    def put(item: int, b: int) -> None:
        where[item] = b
        bins.put(b, float(item_load[item]), 1)

    for a, b in pairs:
        if where[a] >= 0 and where[b] >= 0:
            continue
        if where[a] < 0 and where[b] < 0:
            both = bins.least_loaded(float(item_load[a] + item_load[b]), 2)
            if both is not None:
                put(a, both)
                put(b, both)
                continue
            for item in (a, b):
                target = bins.least_loaded(float(item_load[item]), 1)
                if target is not None:
                    put(item, target)
            continue
        placed, new = (a, b) if where[a] >= 0 else (b, a)
        if bins.fits(int(where[placed]), float(item_load[new]), 1):
            put(new, int(where[placed]))
        else:
            target = bins.least_loaded(float(item_load[new]), 1)
            if target is not None:
                put(new, target)
    return where


def ols_plan(graph: TaskGraph, cluster: Cluster, alfa: float, beta: float, gamma: float,
             delta: float) -> tuple[np.ndarray, np.ndarray]:
    """``(node_of, worker_of)`` of Aniello et al.'s two phases with the knobs above."""
    capacity = remaining_capacity(cluster)
    usable = [k for k in np.lexsort((np.arange(cluster.n_nodes), -capacity)).tolist()
              if cluster.slots[k] > 0 and capacity[k] > 0]
    if not usable:
        raise InfeasibleError(f"ols: cluster {cluster.name!r} has no node with slots and capacity")
    covered = np.cumsum(capacity[usable])
    fewest = min(int(np.searchsorted(covered, graph.total_load - 1e-12)) + 1, len(usable))
    chosen = usable[: fewest + int(round(beta * (len(usable) - fewest)))]
    slots_per_node = {k: 1 + int(round(delta * (int(cluster.slots[k]) - 1))) for k in chosen}
    n_slots = sum(slots_per_node.values())
    n_exec = graph.n_tasks
    lowest = math.ceil(n_exec / n_slots)
    max_exec = lowest + int(round(alfa * max(n_exec - n_slots + 1 - lowest, 0)))
    slot_limit = gamma * graph.total_load / n_slots if graph.total_load > 0 else math.inf

    # phase 1: tasks -> slots
    slots = _Bins(np.full(n_slots, slot_limit), np.full(n_slots, max_exec))
    task_pairs = _pairs(graph.src.astype(np.int64), graph.dst.astype(np.int64), graph.rate)
    slot_of = _greedy_pairs(task_pairs, graph.load, slots)
    for task in np.flatnonzero(slot_of < 0).tolist():
        target = slots.least_loaded(float(graph.load[task]), 1)
        if target is None:  # alfa / gamma too tight: the least loaded slot
            target = int(np.lexsort((np.arange(n_slots), slots.load))[0])
        slot_of[task] = target
        slots.put(target, float(graph.load[task]), 1)

    # phase 2: slots -> nodes (every usable node may host a slot no chosen node can take)
    nodes = _Bins(capacity, np.array([slots_per_node.get(k, int(cluster.slots[k])) for k in range(cluster.n_nodes)]))
    slot_load = np.bincount(slot_of, weights=graph.load, minlength=n_slots)
    slot_pairs = _pairs(slot_of[graph.src], slot_of[graph.dst], graph.rate)
    chosen_bins = _Restricted(nodes, chosen)
    node_of_slot = _greedy_pairs(slot_pairs, slot_load, chosen_bins)
    occupied = np.bincount(slot_of, minlength=n_slots) > 0
    for s in np.lexsort((np.arange(n_slots), -slot_load)).tolist():
        if node_of_slot[s] >= 0 or not occupied[s]:
            continue
        target = nodes.least_loaded(float(slot_load[s]), 1, chosen)
        if target is None:
            target = nodes.least_loaded(float(slot_load[s]), 1, usable)
        if target is not None:
            node_of_slot[s] = target
            nodes.put(target, float(slot_load[s]), 1)

    node_of = np.full(graph.n_tasks, -1, np.int64)
    worker_of = np.full(graph.n_tasks, -1, np.int64)
    workers_on = np.zeros(cluster.n_nodes, np.int64)
    worker_index: dict[int, int] = {}
    for s in range(n_slots):
        if node_of_slot[s] >= 0:
            k = int(node_of_slot[s])
            worker_index[s] = int(workers_on[k])
            workers_on[k] += 1
            members = slot_of == s
            node_of[members] = k
            worker_of[members] = worker_index[s]
    _place_split_slots(graph, cluster, capacity, nodes, node_of, worker_of, workers_on)
    return node_of, worker_of


class _Restricted:
    """A view of bins that only offers ``among`` for new items (phase 2 on the chosen nodes)."""

    def __init__(self, bins: _Bins, among: list[int]):
        self.bins, self.among = bins, among

    def fits(self, b, load, count):
        return self.bins.fits(b, load, count)

    def least_loaded(self, load, count):
        return self.bins.least_loaded(load, count, self.among)

    def put(self, b, load, count):
        self.bins.put(b, load, count)


def _place_split_slots(graph, cluster, capacity, nodes: _Bins, node_of, worker_of, workers_on) -> None:
    """Tasks of slots no node could take: one by one to the node with room they talk to most;
    ``PackingFailed`` (the others placed) when some fit nowhere."""
    left = np.flatnonzero(node_of < 0)
    if left.size == 0:
        return
    adjacency = graph.undirected
    refused = None
    for task in left[np.argsort(-graph.load[left], kind="stable")].tolist():
        row = slice(adjacency.indptr[task], adjacency.indptr[task + 1])
        neighbours, rates = adjacency.indices[row], adjacency.data[row]
        placed = node_of[neighbours] >= 0
        traffic = np.bincount(node_of[neighbours[placed]], weights=rates[placed], minlength=cluster.n_nodes)
        best = None
        for k in np.lexsort((np.arange(cluster.n_nodes), -traffic)).tolist():
            if cluster.slots[k] > 0 and nodes.load[k] + graph.load[task] <= capacity[k]:
                best = k
                break
        if best is None:
            refused = refused or (
                f"ols: task {graph.task_label(task)} (load {graph.load[task]:g}) fits on no node "
                f"(largest room left {float((capacity - nodes.load).max()):g})"
            )
            continue
        if workers_on[best] == 0:
            workers_on[best] = 1
        node_of[task] = best
        worker_of[task] = int(workers_on[best]) - 1
        nodes.load[best] += graph.load[task]
    if refused:
        raise PackingFailed(refused, node_of, worker_of, nodes=np.flatnonzero(cluster.slots > 0))


@register
class OnlineScheduler(Scheduler):
    name = "ols"
    summary = "Aniello et al.'s online scheduler: traffic-ordered task pairs into least loaded slots, slots onto nodes"
    objective = "traffic"
    params = (
        Param("alfa", float, 0.0, "executors per slot: ceil(E/S) (0) .. E-S+1 (1)", low=0.0, high=1.0),
        Param("beta", float, 0.5, "nodes used: fewest that fit (0) .. all (1)", low=0.0, high=1.0),
        Param("gamma", float, 1.1, "max slot load as a multiple of the average slot load", low=1.0),
        Param("delta", float, 0.0, "slots per node: 1 (0) .. all the node's slots (1)", low=0.0, high=1.0),
        STRICT,
    )

    def place(self, graph, cluster, params, seed):
        node_of, worker_of = ols_plan(graph, cluster, params["alfa"], params["beta"], params["gamma"], params["delta"])
        return Placement.build(node_of, worker_of)
