"""T3-Scheduler: topology and traffic aware two-level scheduling (Eskandari et al.
[1]_, Algorithms 1-2).

First level (section 4.4): the *simplified graph* has one vertex per group of tasks (initially
one group per operator, section 4.2), weighted by the summed task load, and one edge per pair of
communicating groups, weighted by the summed task-pair rates. Nodes are taken largest capacity
first, ties broken at random from the seed (section 4.3). An empty node starts from the
heaviest group pair (``FIND_STARTING_POINT``); a pair too large for the node is split by
*group-pair partitioning* (section 4.4.2, its three scenarios; Appendix A). A node with room
left grows its sub-graph by the neighbouring group with the largest traffic to it
(``FIND_NEIGHBOUR``); a group too large is split by *single-group partitioning* (section 4.4.3;
Appendix B). The simplified graph is updated after each split: the tasks of a group that stay
unassigned form the new group (A2, B2). When a node with room has no unassigned neighbour left,
it starts again from the heaviest remaining pair, so every node is filled (section 4.3: "fills
a node ... up to its capacity"). Tasks left when every node is filled fail the packing
(:class:`~streamsched.schedulers.base.PackingFailed`: repaired, or refused with ``strict``).

Second level (section 4.5, eq. 3): the tasks of each node go to ``ceil(t / T)`` workers by
K-way partitioning (:func:`streamsched.partitioning.workers.assign_workers`).

Ties between task pairs of equal rate are broken by task order (the paper picks "at random";
task order reproduces Appendix A exactly); ties between equal-capacity nodes come from the seed.

References
----------
.. [1] Eskandari, L.; Mair, J.; Huang, Z.; Eyers, D. (2018) "T3-Scheduler: A topology and traffic
   aware two-level scheduler for stream processing systems in a heterogeneous cluster", Future
   Generation Computer Systems 89, pp. 617-632, doi:10.1016/j.future.2018.07.011.
"""

from __future__ import annotations

import numpy as np

from streamsched.model.placement import Placement
from streamsched.schedulers import register
from streamsched.schedulers.base import STRICT, PackingFailed, Param, Scheduler, remaining_capacity

UNASSIGNED = -1


def node_order(capacity: np.ndarray, seed: int) -> list[int]:
    """Section 4.3: highest capacity first; equal capacities in a random order drawn from ``seed``."""
    tie_break = np.random.default_rng(seed).permutation(capacity.size)
    return [int(k) for k in np.lexsort((tie_break, -capacity))]


class _FirstLevel:
    """Mutable state of Algorithm 1's first level: groups, the node being filled, its room."""

    def __init__(self, graph, capacity: np.ndarray):
        self.capacity = capacity
        self.load = graph.load
        self.group = graph.task_operator.astype(np.int64).copy()
        self.node_of = np.full(graph.n_tasks, UNASSIGNED, np.int64)
        sym = graph.undirected.tocoo()
        upper = sym.row < sym.col
        self.u, self.v, self.w = sym.row[upper], sym.col[upper], sym.data[upper]
        self.adjacency = graph.undirected
        self.node = UNASSIGNED
        self.room = 0.0

    # ------------------------------------------------------------ bookkeeping
    def unassigned(self) -> np.ndarray:
        return self.node_of == UNASSIGNED

    def assign(self, tasks) -> None:
        tasks = np.asarray(list(tasks), dtype=np.int64)
        self.node_of[tasks] = self.node
        self.room -= float(self.load[tasks].sum())

    def fits(self, *tasks: int) -> bool:
        return float(self.load[list(tasks)].sum()) <= self.room

    def is_full(self) -> bool:
        free = self.unassigned()
        return not free.any() or self.room < float(self.load[free].min())

    def members(self, group: int) -> np.ndarray:
        return np.flatnonzero((self.group == group) & self.unassigned())

    # ------------------------------------------------------ Algorithm 2 steps
    def starting_point(self) -> tuple[int, ...]:
        """``FIND_STARTING_POINT``: the unassigned group pair with the highest summed rate."""
        free = self.unassigned()
        gu, gv = self.group[self.u], self.group[self.v]
        mask = free[self.u] & free[self.v] & (gu != gv)
        if mask.any():
            lo, hi = np.minimum(gu[mask], gv[mask]), np.maximum(gu[mask], gv[mask])
            keys, inverse = np.unique(lo * (self.group.max() + 1) + hi, return_inverse=True)
            weight = np.bincount(inverse, weights=self.w[mask])
            best = int(keys[int(np.argmax(weight))])
            return divmod(best, int(self.group.max()) + 1)
        # no communicating pair left: the heaviest remaining group on its own
        groups, inverse = np.unique(self.group[free], return_inverse=True)
        loads = np.bincount(inverse, weights=self.load[free])
        return (int(groups[int(np.argmax(loads))]),)

    def neighbour(self) -> int | None:
        """``FIND_NEIGHBOUR``: the unassigned group with the most traffic to the node's sub-graph."""
        free = self.unassigned()
        here = self.node_of == self.node
        a = here[self.u] & free[self.v]
        b = here[self.v] & free[self.u]
        if not (a.any() or b.any()):
            return None
        groups = np.concatenate([self.group[self.v[a]], self.group[self.u[b]]])
        weight = np.bincount(groups, weights=np.concatenate([self.w[a], self.w[b]]))
        return int(np.argmax(weight))

    def partition_pair(self, first: int, second: int) -> None:
        """Group-pair partitioning, section 4.4.2 (Appendix A): fill the node with task pairs of
        (first, second) in decreasing rate; the unselected tasks stay as groups A2 and B2."""
        side = {int(t): 0 for t in self.members(first)}
        side.update({int(t): 1 for t in self.members(second)})
        pairs = []
        for t, s in side.items():
            if s != 0:
                continue
            row = slice(self.adjacency.indptr[t], self.adjacency.indptr[t + 1])
            for other, rate in zip(self.adjacency.indices[row], self.adjacency.data[row]):
                if side.get(int(other)) == 1:
                    pairs.append((-float(rate), t, int(other)))
        pairs.sort()
        rate_of = {(a, b): -r for r, a, b in pairs}
        selected: set[int] = set()
        for _, a, b in pairs:
            if self.is_full():
                break
            if a not in selected and b not in selected:  # scenario 1: both new
                if self.fits(a, b):
                    self._select(selected, a, b)
            elif a in selected and b in selected:  # scenario 3: nothing to do
                continue
            else:  # scenario 2: one selected; pair the new task with an unselected partner
                new = b if a in selected else a
                partner_side = 1 - side[new]
                candidates = [
                    (-rate_of[(k, new) if partner_side == 0 else (new, k)], k)
                    for k, s in side.items()
                    if s == partner_side and k not in selected
                    and ((k, new) if partner_side == 0 else (new, k)) in rate_of
                ]
                for _, k in sorted(candidates):
                    if self.fits(k, new):
                        self._select(selected, k, new)
                        break
                else:  # one group exhausted: the pair's new task alone (section 4.4.2, last paragraph)
                    if self.fits(new):
                        self._select(selected, new)
        if not selected:  # no communicating pair fits: take single tasks (load order)
            self.partition_group(first)

    def _select(self, selected: set[int], *tasks: int) -> None:
        selected.update(tasks)
        self.assign(tasks)

    def partition_group(self, group: int) -> None:
        """Single-group partitioning, section 4.4.3 (Appendix B): the group's tasks with the most
        traffic to the node's sub-graph first, skipping tasks larger than the room left."""
        tasks = self.members(group)
        here = (self.node_of == self.node).astype(np.float64)
        to_node = self.adjacency[tasks] @ here
        for t in tasks[np.lexsort((tasks, -to_node))].tolist():
            if self.is_full():
                break
            if self.fits(t):
                self.assign([t])

    def select_group(self) -> None:
        """``GROUP_SELECTION`` (Algorithm 2) for the current node."""
        if (self.node_of == self.node).any():
            g = self.neighbour()
            if g is not None:
                if self.fits(*self.members(g)):
                    self.assign(self.members(g))
                else:
                    self.partition_group(g)
                return
        p = self.starting_point()
        tasks = np.concatenate([self.members(g) for g in p])
        if self.fits(*tasks):
            self.assign(tasks)
        elif len(p) == 2:
            self.partition_pair(*p)
        else:
            self.partition_group(p[0])

    def fill(self, node: int) -> None:
        """``FIRST_LEVEL``: select groups until the node is full or every task is placed."""
        self.node, self.room = node, float(self.capacity[node])
        while not self.is_full():
            before = int(self.unassigned().sum())
            self.select_group()
            if int(self.unassigned().sum()) == before:  # nothing fitted (tasks larger than the room)
                break


def t3_first_level(graph, capacity: np.ndarray, seed: int) -> np.ndarray:
    """Task -> node of Algorithm 1's first level; ``PackingFailed`` (the tasks placed so far)
    if nodes run out."""
    state = _FirstLevel(graph, capacity)
    for node in node_order(capacity, seed):
        if not state.unassigned().any():
            break
        state.fill(node)
    left = np.flatnonzero(state.unassigned())
    if left.size:
        raise PackingFailed(
            f"t3: {left.size} tasks (load {graph.load[left].sum():g}) left after filling every node; "
            f"the largest task left needs {graph.load[left].max():g}", state.node_of)
    return state.node_of


@register
class T3Scheduler(Scheduler):
    name = "t3"
    summary = "T3-Scheduler: operator groups grown into node-sized sub-graphs, then K-way into workers"
    objective = "traffic"
    randomised = True
    params = (
        Param("max_tasks_per_worker", int, 5, "T of eq. 3 (the paper's experiments use 5)", low=1),
        STRICT,
    )

    def place(self, graph, cluster, params, seed):
        from streamsched.partitioning.workers import assign_workers

        def second_level(node_of: np.ndarray) -> np.ndarray:
            return assign_workers(graph, cluster, node_of, max_tasks_per_worker=params["max_tasks_per_worker"],
                                  seed=seed)

        try:
            node_of = t3_first_level(graph, remaining_capacity(cluster), seed)
        except PackingFailed as failure:
            failure.workers_for = second_level
            raise
        return Placement.build(node_of, second_level(node_of))
