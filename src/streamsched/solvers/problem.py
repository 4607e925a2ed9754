"""The placement problem every back-end solves: Eskandari et al. [1]_ section 3, eqs. 1-5, plus
options.

Items (tasks, or fused groups of tasks) have a load; directed weighted edges join items; nodes
have a capacity. Minimise the summed weight of edges whose endpoints sit on different nodes
(eq. 3) such that each item is on one node (eq. 5) and no node's load exceeds its capacity
(eq. 4, read as ``<=``: the worked example of Fig. 1 puts 3 unit tasks on a node of capacity 3).

Optional constraints: item memory against node memory, a maximum number of items per node,
a maximum number of items of each group per node (``operator_caps``: the co-location rule of
:mod:`streamsched.model.colocation`, groups being operators), items pinned to a node, (item, node) pairs excluded, and re-planning from a current placement
with a cost per migrated item (Ghosh et al. [2]_ section 3.2 count migrations when
re-planning).

References
----------
.. [1] Eskandari, L.; Mair, J.; Huang, Z.; Eyers, D. (2020) "I-Scheduler: Iterative scheduling for
   distributed stream processing systems", Future Generation Computer Systems,
   doi:10.1016/j.future.2020.11.011.
.. [2] Ghosh, R.; Komma, S. P. R.; Simmhan, Y. (2018) "Adaptive energy-aware scheduling of dynamic
   event analytics across edge and cloud resources", 18th IEEE/ACM International Symposium on
   Cluster, Cloud and Grid Computing (CCGRID 2018); arXiv:1801.01087 [cs.DC].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from streamsched.errors import InputError
from streamsched.metrics import cut_traffic

#: Relative slack on capacities, the same as the placement validator's.
TOLERANCE = 1e-9


@dataclass(frozen=True, eq=False)
class PlacementProblem:
    """Validated arrays of one instance; ``weight`` holds undirected pairs ``a < b`` (summed)."""

    loads: np.ndarray
    capacity: np.ndarray
    pair_a: np.ndarray
    pair_b: np.ndarray
    weight: np.ndarray
    allowed: np.ndarray  # bool, items x nodes (pins and exclusions folded in)
    memory: np.ndarray | None
    node_memory: np.ndarray | None
    max_items: np.ndarray | None
    current: np.ndarray | None
    migration_cost: float
    item_group: np.ndarray | None = None  # group per item (operator_caps)
    group_cap: np.ndarray | None = None   # groups x nodes: most items of a group on a node

    @property
    def n_items(self) -> int:
        return int(self.loads.size)

    @property
    def n_nodes(self) -> int:
        return int(self.capacity.size)

    @property
    def total_weight(self) -> float:
        return float(self.weight.sum())

    def cost(self, assignment: np.ndarray) -> float:
        """Inter-node traffic (eq. 3) plus migration cost of ``assignment``."""
        return cut_traffic(self.pair_a, self.pair_b, self.weight, assignment) + \
            self.migration_cost * self.moved(assignment)

    def moved(self, assignment: np.ndarray) -> int:
        """How many items leave their current node (0 without a current placement)."""
        if self.current is None:
            return 0
        return int(np.count_nonzero((self.current >= 0) & (assignment != self.current)))

    def group_counts(self, assignment: np.ndarray) -> np.ndarray:
        """Groups x nodes: items of each group on each node (``operator_caps``)."""
        held = np.zeros(self.group_cap.shape, dtype=np.int64)
        np.add.at(held, (self.item_group, assignment), 1)
        return held

    def violations(self, assignment: np.ndarray) -> list[str]:
        """Every constraint ``assignment`` breaks (empty when it is feasible)."""
        a = np.asarray(assignment)
        if a.shape != (self.n_items,) or (a.size and (a.min() < 0 or a.max() >= self.n_nodes)):
            return ["assignment does not give every item a node"]
        problems = []
        load = np.bincount(a, weights=self.loads, minlength=self.n_nodes)
        for k in np.flatnonzero(load > self.capacity * (1 + TOLERANCE) + TOLERANCE):
            problems.append(f"node {k} holds load {load[k]:g} > capacity {self.capacity[k]:g}")
        if self.memory is not None:
            mem = np.bincount(a, weights=self.memory, minlength=self.n_nodes)
            for k in np.flatnonzero(mem > self.node_memory * (1 + TOLERANCE) + TOLERANCE):
                problems.append(f"node {k} holds memory {mem[k]:g} > {self.node_memory[k]:g}")
        if self.max_items is not None:
            count = np.bincount(a, minlength=self.n_nodes)
            for k in np.flatnonzero(count > self.max_items):
                problems.append(f"node {k} holds {count[k]} items > max_items {self.max_items[k]}")
        if self.group_cap is not None:
            held = self.group_counts(a)
            for g, k in zip(*np.nonzero(held > self.group_cap)):
                problems.append(f"node {k} holds {held[g, k]} items of group {g} > {self.group_cap[g, k]}")
        for i in np.flatnonzero(~self.allowed[np.arange(self.n_items), a]):
            problems.append(f"item {i} is on node {a[i]}, which it may not use")
        return problems


def build_problem(loads, src, dst, rate, capacity, *, memory=None, node_memory=None,
                  max_items=None, pinned: Mapping[int, int] | None = None,
                  excluded=None, current=None, migration_cost: float = 0.0,
                  operator_caps=None) -> PlacementProblem:
    """Check and normalise the inputs of :func:`streamsched.solvers.solve_placement`.

    ``pinned`` maps item -> node; ``excluded`` is an iterable of (item, node) pairs or a boolean
    items x nodes matrix (True = forbidden); ``current`` gives each item's node (-1 = new item);
    ``operator_caps`` is (group per item, groups x nodes matrix of the most items of a group a
    node may hold).
    """
    loads = _vector("loads", loads)
    capacity = _vector("capacity", capacity)
    n, m = loads.size, capacity.size
    if m == 0:
        raise InputError("capacity: no nodes")
    src = np.asarray(src, dtype=np.int64).ravel()
    dst = np.asarray(dst, dtype=np.int64).ravel()
    rate = _vector("rate", rate)
    if not (src.shape == dst.shape == rate.shape):
        raise InputError(f"src, dst and rate differ in length ({src.size}, {dst.size}, {rate.size})")
    bad = np.flatnonzero((src < 0) | (src >= n) | (dst < 0) | (dst >= n))
    if bad.size:
        k = int(bad[0])
        raise InputError(f"edge {k}: names item {src[k]} -> {dst[k]}, but there are {n} items")
    keep = (src != dst) & (rate > 0)
    a, b = np.minimum(src, dst)[keep], np.maximum(src, dst)[keep]
    key, inverse = np.unique(a * max(n, 1) + b, return_inverse=True)
    weight = np.bincount(inverse, weights=rate[keep], minlength=key.size)
    allowed = np.ones((n, m), dtype=bool)
    if excluded is not None:
        allowed &= ~_excluded_matrix(excluded, n, m)
    for item, node in (pinned or {}).items():
        item, node = _index("pinned item", item, n), _index(f"pinned[{item}] node", node, m)
        row = np.zeros(m, dtype=bool)
        row[node] = allowed[item, node]
        allowed[item] = row
    item_group, group_cap = _operator_caps(operator_caps, n, m)
    if group_cap is not None:
        allowed &= group_cap[item_group] > 0
    lonely = np.flatnonzero(~allowed.any(axis=1))
    if lonely.size:
        raise InputError(f"item {lonely[0]}: pins and exclusions leave it no node")
    if (memory is None) != (node_memory is None):
        raise InputError("memory and node_memory must be given together")
    if memory is not None:
        memory, node_memory = _vector("memory", memory, n), _vector("node_memory", node_memory, m)
    if max_items is not None:
        max_items = np.broadcast_to(np.asarray(max_items, dtype=np.int64), (m,)).copy()
        if max_items.min() < 0:
            raise InputError("max_items: must be >= 0")
    if current is not None:
        current = np.asarray(current, dtype=np.int64).ravel()
        if current.shape != (n,) or (n and (current.min() < -1 or current.max() >= m)):
            raise InputError(f"current: expected {n} node indices in [-1, {m - 1}]")
    if not np.isfinite(migration_cost) or migration_cost < 0:
        raise InputError(f"migration_cost: must be a number >= 0, got {migration_cost!r}")
    if migration_cost > 0 and current is None:
        raise InputError("migration_cost: needs the current placement ('current')")
    return PlacementProblem(loads=loads, capacity=capacity, pair_a=key // max(n, 1), pair_b=key % max(n, 1),
                            weight=weight, allowed=allowed, memory=memory, node_memory=node_memory,
                            max_items=max_items, current=current, migration_cost=float(migration_cost),
                            item_group=item_group, group_cap=group_cap)


def _operator_caps(value, n: int, m: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    if value is None:
        return None, None
    try:
        item_group, group_cap = value
        item_group = np.asarray(item_group, dtype=np.int64).ravel()
        group_cap = np.array(group_cap, dtype=np.int64, ndmin=2)
    except (TypeError, ValueError):
        raise InputError("operator_caps: expected (group per item, groups x nodes caps)") from None
    if item_group.shape != (n,) or group_cap.shape[1] != m or (n and (item_group.min() < 0
                                                                    or item_group.max() >= group_cap.shape[0])):
        raise InputError(f"operator_caps: expected {n} group indices and a groups x {m} matrix")
    if group_cap.size and group_cap.min() < 0:
        raise InputError("operator_caps: caps must be >= 0")
    return item_group, np.minimum(group_cap, max(n, 1))


def _vector(name: str, values: Any, size: int | None = None) -> np.ndarray:
    try:
        out = np.asarray(values, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise InputError(f"{name}: must be numbers") from None
    if size is not None and out.size != size:
        raise InputError(f"{name}: expected {size} values, got {out.size}")
    bad = np.flatnonzero(~(np.isfinite(out) & (out >= 0)))
    if bad.size:
        raise InputError(f"{name}[{bad[0]}]: {float(out[bad[0]])!r}; must be a finite number >= 0")
    return out


def _index(name: str, value: Any, size: int) -> int:
    if not isinstance(value, (int, np.integer)) or not 0 <= value < size:
        raise InputError(f"{name}: {value!r} is not an index in [0, {size - 1}]")
    return int(value)


def _excluded_matrix(excluded: Any, n: int, m: int) -> np.ndarray:
    matrix = np.asarray(excluded)
    if matrix.dtype == bool:
        if matrix.shape != (n, m):
            raise InputError(f"excluded: boolean matrix must be {n} x {m}, got {matrix.shape}")
        return matrix
    out = np.zeros((n, m), dtype=bool)
    for pair in excluded:
        item, node = pair
        out[_index("excluded item", item, n), _index("excluded node", node, m)] = True
    return out


def greedy_assignment(problem: PlacementProblem) -> np.ndarray | None:
    """A quick feasible start (or None): heaviest-communicating items first, each onto the
    allowed node that fits and already holds the most weight towards it (ties: more free room)."""
    n, m = problem.n_items, problem.n_nodes
    neighbours: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for a, b, w in zip(problem.pair_a.tolist(), problem.pair_b.tolist(), problem.weight.tolist()):
        neighbours[a].append((b, w))
        neighbours[b].append((a, w))
    strength = np.array([sum(w for _, w in row) for row in neighbours])
    free = problem.capacity * (1 + TOLERANCE) + TOLERANCE
    free_mem = None if problem.memory is None else problem.node_memory * (1 + TOLERANCE) + TOLERANCE
    free_count = None if problem.max_items is None else problem.max_items.astype(np.int64).copy()
    free_group = None if problem.group_cap is None else problem.group_cap.copy()
    assignment = np.full(n, -1, dtype=np.int64)
    pull = np.zeros((n, m))
    constrained = problem.allowed.sum(axis=1)
    for item in np.lexsort((-problem.loads, -strength, constrained)).tolist():
        fits = problem.allowed[item] & (free >= problem.loads[item])
        if free_mem is not None:
            fits &= free_mem >= problem.memory[item]
        if free_count is not None:
            fits &= free_count > 0
        if free_group is not None:
            fits &= free_group[problem.item_group[item]] > 0
        if not fits.any():
            return None
        score = np.where(fits, pull[item] * 1e6 + free, -np.inf)
        if problem.current is not None and problem.current[item] >= 0 and fits[problem.current[item]]:
            score[problem.current[item]] += problem.migration_cost * 1e6
        node = int(np.argmax(score))
        assignment[item] = node
        free[node] -= problem.loads[item]
        if free_mem is not None:
            free_mem[node] -= problem.memory[item]
        if free_count is not None:
            free_count[node] -= 1
        if free_group is not None:
            free_group[problem.item_group[item], node] -= 1
        for other, w in neighbours[item]:
            pull[other, node] += w
    return assignment
