"""Capacity-aware local search on an assignment: single moves and pairwise swaps.

Kernighan-Lin / Fiduccia-Mattheyses style improvement for the k-way placement problem, on the
sparse graph and vectorised with numpy/scipy: the traffic of every item towards every node that
holds one of its neighbours is one sparse product ``T = A @ onehot(assignment)``; the gain of
moving item ``i`` to node ``k`` is ``T[i, k] - T[i, node(i)]`` (plus the migration cost saved,
when re-planning). Each round applies the best positive moves that fit (capacity, memory, item
limit, allowed nodes) and touch no neighbour of an item moved earlier in the round, so every
applied gain is exact and the cost strictly falls; a move blocked by capacity is tried as a swap
with an item on the target node (gain of both moves minus twice their shared edge).

References
----------
- B. W. Kernighan, S. Lin, 1970. An efficient heuristic procedure for partitioning graphs.
  Bell System Technical Journal 49(2) (section 2: gains of exchanging a pair).
- C. M. Fiduccia, R. M. Mattheyses, 1982. A linear-time heuristic for improving network
  partitions. 19th Design Automation Conference (section 3: single moves under a balance
  constraint, gains from the neighbours' sides).
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from streamsched.solvers.problem import TOLERANCE, PlacementProblem

#: Blocked moves tried as swaps per round (the best by gain).
SWAP_CANDIDATES = 400


def adjacency_matrix(problem: PlacementProblem) -> sp.csr_matrix:
    """The symmetric items x items weight matrix (CSR) of ``problem``'s pairs."""
    n = problem.n_items
    a, b, w = problem.pair_a, problem.pair_b, problem.weight
    return sp.csr_matrix((np.r_[w, w], (np.r_[a, b], np.r_[b, a])), shape=(n, n))


def traffic_towards_nodes(adjacency: sp.csr_matrix, assignment: np.ndarray, n_nodes: int) -> sp.coo_matrix:
    """Sparse items x nodes matrix: weight from each item to the items on each node."""
    n = assignment.size
    onehot = sp.csr_matrix((np.ones(n), (np.arange(n), assignment)), shape=(n, n_nodes))
    return (adjacency @ onehot).tocoo()


class LocalSearch:
    """Moves and swaps on one problem; :meth:`improve` never returns a worse assignment."""

    def __init__(self, problem: PlacementProblem, adjacency: sp.csr_matrix | None = None):
        self.problem = problem
        self.adjacency = adjacency_matrix(problem) if adjacency is None else adjacency
        self.room = problem.capacity * (1 + TOLERANCE) + TOLERANCE
        self.memory_room = None if problem.memory is None else problem.node_memory * (1 + TOLERANCE) + TOLERANCE

    def improve(self, assignment: np.ndarray, deadline: float) -> np.ndarray:
        """Rounds of moves (then swaps) until none improves or ``deadline`` passes."""
        node_of = np.asarray(assignment, dtype=np.int64).copy()
        while time.perf_counter() < deadline:
            if not self._round(node_of):
                break
        return node_of

    def _gains(self, node_of: np.ndarray):
        """Candidate moves (item, node, gain > 0) sorted by gain, and each item's own traffic."""
        problem, m = self.problem, self.problem.n_nodes
        towards = traffic_towards_nodes(self.adjacency, node_of, m)
        item, node, traffic = towards.row.astype(np.int64), towards.col.astype(np.int64), towards.data
        own = np.zeros(problem.n_items)
        home = node == node_of[item]
        own[item[home]] = traffic[home]
        item, node, traffic = item[~home], node[~home], traffic[~home]
        current = problem.current
        if current is not None and problem.migration_cost > 0:
            back = np.flatnonzero((current >= 0) & (node_of != current))  # moving home earns the cost back
            item, node, traffic = np.r_[item, back], np.r_[node, current[back]], np.r_[traffic, np.zeros(back.size)]
        gain = traffic - own[item] - self._migration_delta(item, node, node_of)
        keep = (gain > 1e-9 * max(1.0, float(problem.weight.max(initial=0.0)))) & problem.allowed[item, node]
        order = np.argsort(-gain[keep], kind="stable")
        return item[keep][order], node[keep][order], gain[keep][order], own

    def _migration_delta(self, item: np.ndarray, node: np.ndarray, node_of: np.ndarray) -> np.ndarray:
        current = self.problem.current
        if current is None or self.problem.migration_cost == 0:
            return np.zeros(item.size)
        moved_after = (current[item] >= 0) & (node != current[item])
        moved_before = (current[item] >= 0) & (node_of[item] != current[item])
        return self.problem.migration_cost * (moved_after.astype(float) - moved_before)

    def _round(self, node_of: np.ndarray) -> bool:
        problem = self.problem
        items, nodes, gains, own = self._gains(node_of)
        if items.size == 0:
            return False
        load = np.bincount(node_of, weights=problem.loads, minlength=problem.n_nodes)
        memory = None if problem.memory is None else np.bincount(node_of, weights=problem.memory,
                                                                  minlength=problem.n_nodes)
        count = None if problem.max_items is None else np.bincount(node_of, minlength=problem.n_nodes)
        self.group = None if problem.group_cap is None else problem.group_counts(node_of)
        locked = np.zeros(problem.n_items, dtype=bool)
        indptr, indices = self.adjacency.indptr, self.adjacency.indices
        blocked: list[tuple[int, int, float]] = []
        applied = 0
        for i, k, g in zip(items.tolist(), nodes.tolist(), gains.tolist()):
            if locked[i]:
                continue
            if not self._fits(i, k, load, memory, count):
                if len(blocked) < SWAP_CANDIDATES:
                    blocked.append((i, k, g))
                continue
            self._move(i, k, node_of, load, memory, count)
            locked[i] = True
            locked[indices[indptr[i]:indptr[i + 1]]] = True
            applied += 1
        if applied:
            return True
        return self._swaps(blocked, node_of, own, load, memory, count)

    def _fits(self, i: int, k: int, load, memory, count) -> bool:
        problem = self.problem
        if load[k] + problem.loads[i] > self.room[k]:
            return False
        if memory is not None and memory[k] + problem.memory[i] > self.memory_room[k]:
            return False
        if self.group is not None:
            g = problem.item_group[i]
            if self.group[g, k] >= problem.group_cap[g, k]:
                return False
        return count is None or count[k] < problem.max_items[k]

    def _move(self, i: int, k: int, node_of, load, memory, count) -> None:
        problem, u = self.problem, int(node_of[i])
        load[u] -= problem.loads[i]
        load[k] += problem.loads[i]
        if memory is not None:
            memory[u] -= problem.memory[i]
            memory[k] += problem.memory[i]
        if count is not None:
            count[u] -= 1
            count[k] += 1
        if self.group is not None:
            g = problem.item_group[i]
            self.group[g, u] -= 1
            self.group[g, k] += 1
        node_of[i] = k

    def _swaps(self, blocked, node_of, own, load, memory, count) -> bool:
        """Exchange ``i`` (wanting node v) with the item ``j`` on v whose move to i's node gains
        most, when both fit after the exchange (Kernighan-Lin's pair gain)."""
        problem = self.problem
        if not blocked:
            return False
        adjacency = self.adjacency
        order = np.argsort(node_of, kind="stable")
        starts = np.searchsorted(node_of[order], np.arange(problem.n_nodes + 1))
        locked = np.zeros(problem.n_items, dtype=bool)
        swapped = False
        for i, v, gain_i in blocked:
            u = int(node_of[i])
            if locked[i] or node_of[i] == v:
                continue
            on_v = order[starts[v]:starts[v + 1]]
            on_v = on_v[(node_of[on_v] == v) & ~locked[on_v] & problem.allowed[on_v, u]]
            if on_v.size == 0:
                continue
            fits = (load[v] - problem.loads[on_v] + problem.loads[i] <= self.room[v]) & \
                   (load[u] - problem.loads[i] + problem.loads[on_v] <= self.room[u])
            if memory is not None:
                fits &= (memory[v] - problem.memory[on_v] + problem.memory[i] <= self.memory_room[v]) & \
                        (memory[u] - problem.memory[i] + problem.memory[on_v] <= self.memory_room[u])
            if self.group is not None:  # same group: counts unchanged; else both must have room
                gi, gj = problem.item_group[i], problem.item_group[on_v]
                fits &= (gj == gi) | ((self.group[gi, v] < problem.group_cap[gi, v])
                                      & (self.group[gj, u] < problem.group_cap[gj, u]))
            on_v = on_v[fits]
            if on_v.size == 0:
                continue
            rows = adjacency[on_v]
            to_u = rows @ (node_of == u).astype(np.float64)  # traffic of each j towards the items on u
            shared = np.asarray(rows[:, [i]].todense()).ravel()
            gain = gain_i + to_u - own[on_v] - 2 * shared \
                - self._migration_delta(on_v, np.full(on_v.size, u), node_of)
            best = int(np.argmax(gain))
            if gain[best] <= 1e-9 * max(1.0, float(problem.weight.max(initial=0.0))):
                continue
            j = int(on_v[best])
            self._move(i, v, node_of, load, memory, count)
            self._move(j, u, node_of, load, memory, count)
            for x in (i, j):
                locked[x] = True
                locked[adjacency.indices[adjacency.indptr[x]:adjacency.indptr[x + 1]]] = True
            swapped = True
        return swapped
