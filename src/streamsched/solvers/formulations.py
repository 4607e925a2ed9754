"""Two exact integer programs of one :class:`PlacementProblem`, as solver-neutral MILPs.

Both exploit the symmetry of the papers' instances (identical nodes; tasks of one operator with
identical traffic):

- *Interchangeable items* (twin classes): items with the same load, memory, allowed nodes,
  current node and the same weighted neighbours. Two twin classes A, B exchange one weight per
  pair (twins of twins), so a node's internal traffic depends only on how many items of each
  class it holds.
- *Identical nodes* (node types): same capacity, memory, item limit and allowed classes.

Equation numbers are those of Eskandari et al. [1]_ section 3.

``configurations`` (Gilmore-Gomory style [2]_): a configuration is a count vector ``q`` of class
items that fits one node of a type; an integer ``x[t, q]`` counts the nodes of type t that use
it. Each class is covered exactly (eq. 5), each type's nodes are counted exactly, and every
configuration respects eq. 4 by construction. Node and twin symmetry vanish entirely and the LP
bound is strong. Built only while the number of configurations stays small.

``cut`` (the plain model): the binaries ``P[i,u]`` of eq. 1, capacities as knapsack rows (eq. 4)
and one binary ``c[a,b]`` per communicating pair with ``P[a,u] - P[b,u] <= c[a,b]`` (both
ways, every node): eq. 3 is ``sum w_ab c[a,b]``. Its objective has one term per pair (not one
per pair and node), which CP-SAT's core-based and LP-based lower bounding work on directly;
no symmetry rows (CP-SAT finds the identical nodes itself; fixing one task's node slowed the
proof on the demo graph from 2.6 to 11 deterministic seconds).

``assignment``: the task-by-node binaries ``P[i,u]`` of eq. 1 with a co-location variable per
edge and node (``y <= P[a,u]``, ``y <= P[b,u]``, maximise co-located weight = minimise eq. 3),
plus symmetry breaking: twins take non-decreasing node indices, and among identical nodes a
node is used only if the previous one holds an item of lower index; and neighbourhood cuts
(``_neighbourhood_rows``) that tighten its otherwise empty LP bound.

References
----------
.. [1] Eskandari, L.; Mair, J.; Huang, Z.; Eyers, D. (2020) "I-Scheduler: Iterative scheduling for
   distributed stream processing systems", Future Generation Computer Systems,
   doi:10.1016/j.future.2020.11.011.
.. [2] Gilmore, P. C.; Gomory, R. E. (1961) "A linear programming approach to the cutting-stock
   problem", Operations Research 9(6), pp. 849-859.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import scipy.sparse as sp

from streamsched.solvers.problem import TOLERANCE, PlacementProblem

#: Above this many configurations in total the configuration model is not built.
MAX_CONFIGURATIONS = 100_000
#: Above this many twin classes neither (classes x classes weights, configurations x classes).
MAX_CONFIGURATION_CLASSES = 400
#: Symmetry-breaking rows between identical nodes cover their first this many candidate items
#: (all of them would take quadratically many entries; fewer rows only relax the breaking).
ORDERED_ITEMS = 64


@dataclass(frozen=True, eq=False)
class Milp:
    """minimise ``cost @ x + offset`` s.t. ``row_lower <= rows @ x <= row_upper``, bounds, integrality."""

    name: str
    cost: np.ndarray
    offset: float
    lower: np.ndarray
    upper: np.ndarray
    integer: np.ndarray
    rows: sp.csr_matrix
    row_lower: np.ndarray
    row_upper: np.ndarray
    decode: Callable[[np.ndarray], np.ndarray] = field(repr=False)
    encode: Callable[[np.ndarray], np.ndarray | None] = field(repr=False)
    #: True when every feasible objective value is an integer (bounds may be rounded up).
    integral_objective: bool = False

    @property
    def n_vars(self) -> int:
        return int(self.cost.size)

    @property
    def n_rows(self) -> int:
        return int(self.rows.shape[0])


@dataclass(frozen=True, eq=False)
class Symmetry:
    """Twin classes of items and types of nodes (see the module docstring)."""

    item_class: np.ndarray  # class index per item
    class_items: list[np.ndarray]
    class_weight: np.ndarray | None  # classes x classes, weight of ONE pair of items (symmetric);
    # None above MAX_CONFIGURATION_CLASSES classes
    node_type: np.ndarray
    type_nodes: list[np.ndarray]


def find_symmetry(problem: PlacementProblem) -> Symmetry:
    """Group items by (load, memory, allowed nodes, current node, weighted neighbour set)."""
    n = problem.n_items
    adjacency = sp.coo_matrix((np.r_[problem.weight, problem.weight],
                               (np.r_[problem.pair_a, problem.pair_b], np.r_[problem.pair_b, problem.pair_a])),
                              shape=(n, n)).tocsr()
    adjacency.sort_indices()
    keys: dict[tuple, int] = {}
    item_class = np.empty(n, dtype=np.int64)
    for i in range(n):
        lo, hi = adjacency.indptr[i], adjacency.indptr[i + 1]
        key = (problem.loads[i], None if problem.memory is None else problem.memory[i],
               problem.allowed[i].tobytes(), None if problem.current is None else int(problem.current[i]),
               None if problem.item_group is None else int(problem.item_group[i]),
               adjacency.indices[lo:hi].tobytes(), adjacency.data[lo:hi].tobytes())
        item_class[i] = keys.setdefault(key, len(keys))
    n_classes = len(keys)
    by_class = np.argsort(item_class, kind="stable")
    class_items = np.split(by_class, np.searchsorted(item_class[by_class], np.arange(1, n_classes)))
    representative = np.array([items[0] for items in class_items], dtype=np.int64)
    class_weight = None  # only the configuration model reads it; dense, so only when small
    if n_classes <= MAX_CONFIGURATION_CLASSES:
        # weight of one (a in A, b in B) pair: twins are never adjacent to each other (same row)
        class_weight = np.zeros((n_classes, n_classes))
        rep_rows = adjacency[representative].tocoo()
        class_weight[rep_rows.row, item_class[rep_rows.col]] = rep_rows.data
    node_keys: dict[tuple, int] = {}
    node_type = np.empty(problem.n_nodes, dtype=np.int64)
    holds_current = np.zeros(problem.n_nodes, dtype=bool)
    if problem.current is not None:
        holds_current[problem.current[problem.current >= 0]] = True
    for k in range(problem.n_nodes):
        key = (problem.capacity[k], None if problem.node_memory is None else problem.node_memory[k],
               None if problem.max_items is None else int(problem.max_items[k]),
               None if problem.group_cap is None else problem.group_cap[:, k].tobytes(),
               problem.allowed[representative, k].tobytes(), k if holds_current[k] else -1)
        node_type[k] = node_keys.setdefault(key, len(node_keys))
    type_nodes = [np.flatnonzero(node_type == t) for t in range(len(node_keys))]
    return Symmetry(item_class, class_items, class_weight, node_type, type_nodes)


def _integral(values: np.ndarray) -> bool:
    return bool(np.all(np.abs(values - np.round(values)) < 1e-9))


# ------------------------------------------------------------ configurations
def _configurations(problem: PlacementProblem, sym: Symmetry, node: int, limit: int) -> np.ndarray | None:
    """Every count vector of classes that fits ``node`` (rows), or None above ``limit``."""
    n_classes = len(sym.class_items)
    reps = np.array([items[0] for items in sym.class_items])
    cap = problem.capacity[node] * (1 + TOLERANCE) + TOLERANCE
    mem_cap = None if problem.memory is None else problem.node_memory[node] * (1 + TOLERANCE) + TOLERANCE
    count_cap = None if problem.max_items is None else int(problem.max_items[node])
    group_of = None if problem.group_cap is None else problem.item_group[reps]
    configs = np.zeros((1, n_classes), dtype=np.int16)
    load = np.zeros(1)
    mem = np.zeros(1)
    count = np.zeros(1, dtype=np.int64)
    for c in range(n_classes):
        if not problem.allowed[reps[c], node]:
            continue
        item_load = problem.loads[reps[c]]
        blocks_c, blocks_l, blocks_m, blocks_n = [configs], [load], [mem], [count]
        for copies in range(1, sym.class_items[c].size + 1):
            new_load = load + copies * item_load
            keep = new_load <= cap
            new_mem = mem
            if mem_cap is not None:
                new_mem = mem + copies * problem.memory[reps[c]]
                keep &= new_mem <= mem_cap
            if count_cap is not None:
                keep &= count + copies <= count_cap
            if group_of is not None:  # items of the class's group already in the configuration
                same = group_of == group_of[c]
                keep &= configs[:, same].sum(axis=1) + copies <= problem.group_cap[group_of[c], node]
            if not keep.any():
                break
            block = configs[keep].copy()
            block[:, c] = copies
            blocks_c.append(block)
            blocks_l.append(new_load[keep])
            blocks_m.append(new_mem[keep] if mem_cap is not None else mem[keep])
            blocks_n.append(count[keep] + copies)
            if configs.shape[0] + sum(b.shape[0] for b in blocks_c[1:]) > limit:
                return None
        configs, load = np.concatenate(blocks_c), np.concatenate(blocks_l)
        mem, count = np.concatenate(blocks_m), np.concatenate(blocks_n)
        if configs.shape[0] > limit:
            return None
    return configs


def configuration_model(problem: PlacementProblem, sym: Symmetry,
                        limit: int = MAX_CONFIGURATIONS) -> Milp | None:
    """The configuration MILP (module docstring), or None when it would exceed ``limit`` columns."""
    n_classes, n_types = len(sym.class_items), len(sym.type_nodes)
    if sym.class_weight is None:
        return None
    class_size = np.array([items.size for items in sym.class_items])
    per_type, budget = [], limit
    for nodes in sym.type_nodes:
        configs = _configurations(problem, sym, int(nodes[0]), budget)
        if configs is None:
            return None
        per_type.append(configs)
        budget -= configs.shape[0]
    reps = np.array([items[0] for items in sym.class_items])
    current_class = None if problem.current is None else problem.current[reps]
    costs, uppers, type_of = [], [], []
    for t, configs in enumerate(per_type):
        q = configs.astype(np.float64)
        internal = 0.5 * ((q @ sym.class_weight) * q).sum(axis=1)
        cost = -internal
        if current_class is not None and problem.migration_cost > 0:
            arriving = (current_class >= 0) & (current_class != sym.type_nodes[t][0])
            cost = cost + problem.migration_cost * q[:, arriving].sum(axis=1)
        with np.errstate(divide="ignore"):
            room = np.where(configs > 0, class_size[None, :] // np.maximum(configs, 1), np.iinfo(np.int64).max)
        costs.append(cost)
        uppers.append(np.minimum(room.min(axis=1), sym.type_nodes[t].size))
        type_of.append(np.full(configs.shape[0], t))
    cost = np.concatenate(costs)
    type_of = np.concatenate(type_of)
    stacked = np.concatenate(per_type).astype(np.float64)
    n_vars = cost.size
    type_rows = sp.csr_matrix((np.ones(n_vars), (type_of, np.arange(n_vars))), shape=(n_types, n_vars))
    rows = sp.vstack([type_rows, sp.csr_matrix(stacked.T)]).tocsr()
    bounds = np.r_[[nodes.size for nodes in sym.type_nodes], class_size].astype(np.float64)
    starts = np.r_[0, np.cumsum([c.shape[0] for c in per_type])]
    lookup: list[dict[bytes, int] | None] = [None] * n_types

    def decode(x: np.ndarray) -> np.ndarray:
        pools = [list(items) for items in sym.class_items]
        assignment = np.full(problem.n_items, -1, dtype=np.int64)
        for t, nodes in enumerate(sym.type_nodes):
            chosen = np.repeat(np.arange(starts[t], starts[t + 1]), np.round(x[starts[t]:starts[t + 1]]).astype(np.int64))
            for node, column in zip(nodes.tolist(), chosen.tolist()):
                for c in np.flatnonzero(stacked[column]).tolist():
                    for _ in range(int(stacked[column, c])):
                        assignment[pools[c].pop(0)] = node
        return assignment

    def encode(assignment: np.ndarray) -> np.ndarray | None:
        x = np.zeros(n_vars)
        counts = np.zeros((problem.n_nodes, n_classes), dtype=np.int16)
        np.add.at(counts, (assignment, sym.item_class), 1)
        for node in range(problem.n_nodes):
            t = int(sym.node_type[node])
            if lookup[t] is None:
                lookup[t] = {row.tobytes(): j for j, row in enumerate(per_type[t])}
            j = lookup[t].get(counts[node].tobytes())
            if j is None:
                return None
            x[starts[t] + j] += 1
        return x

    return Milp(
        name="configurations", cost=cost, offset=problem.total_weight, lower=np.zeros(n_vars),
        upper=np.concatenate(uppers).astype(np.float64), integer=np.ones(n_vars, dtype=bool), rows=rows,
        row_lower=bounds, row_upper=bounds, decode=decode, encode=encode,
        integral_objective=_integral(sym.class_weight) and _integral(np.array([problem.migration_cost])),
    )


# ----------------------------------------------------------------- assignment
def assignment_model(problem: PlacementProblem, sym: Symmetry) -> Milp:
    """The task-by-node MILP with co-location variables and symmetry breaking (module docstring)."""
    n, m = problem.n_items, problem.n_nodes
    item_idx, node_idx = np.nonzero(problem.allowed)
    x_index = np.full((n, m), -1, dtype=np.int64)
    x_index[item_idx, node_idx] = np.arange(item_idx.size)
    n_x = item_idx.size
    both = problem.allowed[problem.pair_a] & problem.allowed[problem.pair_b]
    pair_idx, pair_node = np.nonzero(both)
    n_y = pair_idx.size
    y_ids = n_x + np.arange(n_y)
    cost = np.r_[np.zeros(n_x), -problem.weight[pair_idx]]
    offset = problem.total_weight
    if problem.current is not None and problem.migration_cost > 0:
        movable = np.flatnonzero(problem.current >= 0)
        offset += problem.migration_cost * movable.size
        stay = x_index[movable, problem.current[movable]]
        cost[stay[stay >= 0]] -= problem.migration_cost
    entries: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    lowers, uppers = [], []
    n_rows = 0

    def add(row: np.ndarray, col: np.ndarray, val: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
        nonlocal n_rows
        entries.append((row + n_rows, col, val))
        lowers.append(lo)
        uppers.append(hi)
        n_rows += lo.size

    add(item_idx, np.arange(n_x), np.ones(n_x), np.ones(n), np.ones(n))  # eq. 5
    add(node_idx, np.arange(n_x), problem.loads[item_idx], np.full(m, -np.inf), problem.capacity)  # eq. 4
    if problem.memory is not None:
        add(node_idx, np.arange(n_x), problem.memory[item_idx], np.full(m, -np.inf), problem.node_memory)
    if problem.max_items is not None:
        add(node_idx, np.arange(n_x), np.ones(n_x), np.full(m, -np.inf), problem.max_items.astype(np.float64))
    if problem.group_cap is not None:  # at most group_cap[g, u] items of group g on node u
        n_groups = problem.group_cap.shape[0]
        add(problem.item_group[item_idx] * m + node_idx, np.arange(n_x), np.ones(n_x), np.full(n_groups * m, -np.inf),
            problem.group_cap.ravel().astype(np.float64))
    for end in (problem.pair_a, problem.pair_b):  # y[p,u] <= P[end(p),u]
        r = np.arange(n_y)
        add(np.r_[r, r], np.r_[y_ids, x_index[end[pair_idx], pair_node]], np.r_[np.ones(n_y), -np.ones(n_y)],
            np.full(n_y, -np.inf), np.zeros(n_y))
    star = _neighbourhood_rows(problem, pair_idx, pair_node, y_ids, x_index)
    if star is not None:
        add(*star)
    twin_rows = []
    for items in sym.class_items:  # twins: node(i) <= node(i') for i < i'
        for first, second in zip(items[:-1].tolist(), items[1:].tolist()):
            cols_f, cols_s = x_index[first][x_index[first] >= 0], x_index[second][x_index[second] >= 0]
            twin_rows.append((np.r_[cols_f, cols_s], np.r_[node_idx[cols_f], -node_idx[cols_s]].astype(np.float64)))
    if twin_rows:
        add(np.concatenate([np.full(c.size, k) for k, (c, _) in enumerate(twin_rows)]),
            np.concatenate([c for c, _ in twin_rows]), np.concatenate([v for _, v in twin_rows]),
            np.full(len(twin_rows), -np.inf), np.zeros(len(twin_rows)))
    order_rows, order_cols, order_vals, count = [], [], [], 0
    for nodes in sym.type_nodes:  # identical nodes: P[i,k'] <= sum_{i'<i} P[i',k]
        for k, k_next in zip(nodes[:-1].tolist(), nodes[1:].tolist()):
            users = np.flatnonzero(x_index[:, k] >= 0)
            for pos, i in enumerate(users[:ORDERED_ITEMS].tolist()):
                earlier = x_index[users[:pos], k]
                order_rows.append(np.full(earlier.size + 1, count))
                order_cols.append(np.r_[x_index[i, k_next], earlier])
                order_vals.append(np.r_[1.0, -np.ones(earlier.size)])
                count += 1
    if count:
        add(np.concatenate(order_rows), np.concatenate(order_cols), np.concatenate(order_vals),
            np.full(count, -np.inf), np.zeros(count))
    rows = sp.csr_matrix((np.concatenate([e[2] for e in entries]),
                          (np.concatenate([e[0] for e in entries]), np.concatenate([e[1] for e in entries]))),
                         shape=(n_rows, n_x + n_y))
    integer = np.r_[np.ones(n_x, dtype=bool), np.zeros(n_y, dtype=bool)]

    decode = _item_node_decoder(item_idx, node_idx, n)

    def encode(assignment: np.ndarray) -> np.ndarray | None:
        canonical = canonical_assignment(assignment, sym)
        if np.any(x_index[np.arange(n), canonical] < 0):
            return None
        x = np.zeros(n_x + n_y)
        x[x_index[np.arange(n), canonical]] = 1
        x[n_x:] = (canonical[problem.pair_a[pair_idx]] == pair_node) & (canonical[problem.pair_b[pair_idx]] == pair_node)
        return x

    weights = np.r_[problem.weight, problem.migration_cost]
    return Milp(
        name="assignment", cost=cost, offset=offset, lower=np.zeros(n_x + n_y), upper=np.ones(n_x + n_y),
        integer=integer, rows=rows, row_lower=np.concatenate(lowers), row_upper=np.concatenate(uppers),
        decode=decode, encode=encode, integral_objective=_integral(weights),
    )


def _item_node_decoder(item_idx: np.ndarray, node_idx: np.ndarray, n: int):
    """The assignment a solution of one 0/1 variable per allowed (item, node) encodes: its first
    ``item_idx.size`` entries (the assignment and cut models)."""
    n_x = item_idx.size

    def decode(x: np.ndarray) -> np.ndarray:
        chosen = np.flatnonzero(np.round(x[:n_x]) > 0.5)
        assignment = np.full(n, -1, dtype=np.int64)
        assignment[item_idx[chosen]] = node_idx[chosen]
        return assignment

    return decode


def cut_model(problem: PlacementProblem) -> Milp:
    """The plain model (module docstring): ``P[i,u]`` per allowed (item, node), ``c`` per pair."""
    n, m, n_pairs = problem.n_items, problem.n_nodes, problem.weight.size
    item_idx, node_idx = np.nonzero(problem.allowed)
    x_index = np.full((n, m), -1, dtype=np.int64)
    x_index[item_idx, node_idx] = np.arange(item_idx.size)
    n_x = item_idx.size
    cost = np.r_[np.zeros(n_x), problem.weight]
    offset = 0.0
    if problem.current is not None and problem.migration_cost > 0:
        movable = np.flatnonzero(problem.current >= 0)
        offset += problem.migration_cost * movable.size
        stay = x_index[movable, problem.current[movable]]
        cost[stay[stay >= 0]] -= problem.migration_cost
    blocks = [(item_idx, np.arange(n_x), np.ones(n_x), np.ones(n), np.ones(n)),  # eq. 5
              (node_idx, np.arange(n_x), problem.loads[item_idx], np.full(m, -np.inf), problem.capacity)]  # eq. 4
    if problem.memory is not None:
        blocks.append((node_idx, np.arange(n_x), problem.memory[item_idx], np.full(m, -np.inf), problem.node_memory))
    if problem.max_items is not None:
        blocks.append((node_idx, np.arange(n_x), np.ones(n_x), np.full(m, -np.inf),
                       problem.max_items.astype(np.float64)))
    if problem.group_cap is not None:  # at most group_cap[g, u] items of group g on node u
        n_groups = problem.group_cap.shape[0]
        blocks.append((problem.item_group[item_idx] * m + node_idx, np.arange(n_x), np.ones(n_x),
                       np.full(n_groups * m, -np.inf), problem.group_cap.ravel().astype(np.float64)))
    for one, other in ((problem.pair_a, problem.pair_b), (problem.pair_b, problem.pair_a)):
        pair, node = np.nonzero(problem.allowed[one])  # P[one,u] - P[other,u] - c <= 0
        row = np.arange(pair.size)
        theirs = x_index[other[pair], node]
        has = theirs >= 0
        blocks.append((np.r_[row, row[has], row], np.r_[x_index[one[pair], node], theirs[has], n_x + pair],
                       np.r_[np.ones(pair.size), -np.ones(int(has.sum())), -np.ones(pair.size)],
                       np.full(pair.size, -np.inf), np.zeros(pair.size)))
    starts = np.cumsum([0] + [b[3].size for b in blocks])
    rows = sp.csr_matrix((np.concatenate([b[2] for b in blocks]),
                          (np.concatenate([b[0] + s0 for b, s0 in zip(blocks, starts)]),
                           np.concatenate([b[1] for b in blocks]))), shape=(int(starts[-1]), n_x + n_pairs))

    decode = _item_node_decoder(item_idx, node_idx, n)

    def encode(assignment: np.ndarray) -> np.ndarray | None:
        assignment = np.asarray(assignment, dtype=np.int64)
        if np.any(x_index[np.arange(n), assignment] < 0):
            return None
        x = np.zeros(n_x + n_pairs)
        x[x_index[np.arange(n), assignment]] = 1
        x[n_x:] = assignment[problem.pair_a] != assignment[problem.pair_b]
        return x

    return Milp(
        name="cut", cost=cost, offset=offset, lower=np.zeros(n_x + n_pairs), upper=np.ones(n_x + n_pairs),
        integer=np.ones(n_x + n_pairs, dtype=bool), rows=rows, row_lower=np.concatenate([b[3] for b in blocks]),
        row_upper=np.concatenate([b[4] for b in blocks]), decode=decode, encode=encode,
        integral_objective=_integral(np.r_[problem.weight, problem.migration_cost]),
    )


def cut_model_size(problem: PlacementProblem) -> int:
    """Non-zeros of :func:`cut_model` without building it: per (item, node) variable its
    assignment and capacity entries (memory, count), per (pair, node) two rows of three."""
    n_x = int(problem.allowed.sum())
    per_x = 2 + (problem.memory is not None) + (problem.max_items is not None) + (problem.group_cap is not None)
    return per_x * n_x + 6 * problem.weight.size * problem.n_nodes


def _neighbourhood_rows(problem: PlacementProblem, pair_idx, pair_node, y_ids, x_index):
    """Cuts ``sum_b w_ab y[ab,u] <= T[a,u] P[a,u]``: with a on u, at most K neighbours of a fit
    beside it (capacity, item limit; lightest first), so at most its K heaviest edges stay on u.
    Added only where T is below a's total edge weight (elsewhere the cut is implied)."""
    n, m = problem.n_items, problem.n_nodes
    if pair_idx.size == 0:
        return None
    ends = np.r_[problem.pair_a[pair_idx], problem.pair_b[pair_idx]]
    nodes = np.r_[pair_node, pair_node]
    ys = np.r_[y_ids, y_ids]
    weights = np.r_[problem.weight[pair_idx], problem.weight[pair_idx]]
    neighbours: list[list[tuple[float, float]]] = [[] for _ in range(n)]
    for a, b, w in zip(problem.pair_a.tolist(), problem.pair_b.tolist(), problem.weight.tolist()):
        neighbours[a].append((w, problem.loads[b]))
        neighbours[b].append((w, problem.loads[a]))
    rows, cols, vals, n_rows = [], [], [], 0
    order = np.lexsort((nodes, ends))
    ends, nodes, ys, weights = ends[order], nodes[order], ys[order], weights[order]
    starts = np.flatnonzero(np.r_[True, (ends[1:] != ends[:-1]) | (nodes[1:] != nodes[:-1])])
    stops = np.r_[starts[1:], ends.size]
    kept_at_most: dict[tuple[int, float, float], tuple[float, float]] = {}  # same item, same room
    for lo, hi in zip(starts.tolist(), stops.tolist()):
        a, u = int(ends[lo]), int(nodes[lo])
        room = problem.capacity[u] * (1 + TOLERANCE) + TOLERANCE - problem.loads[a]
        slots = np.inf if problem.max_items is None else problem.max_items[u] - 1
        key = (a, room, slots)
        if key not in kept_at_most:
            lightest = np.sort([load for _, load in neighbours[a]])
            fit = int(min(np.searchsorted(np.cumsum(lightest), room, side="right"), slots))
            heaviest = np.sort([w for w, _ in neighbours[a]])[::-1]
            kept_at_most[key] = (float(heaviest[:fit].sum()), float(heaviest.sum()))
        cap, total = kept_at_most[key]
        if cap >= total - 1e-12:
            continue
        rows.append(np.full(hi - lo + 1, n_rows))
        cols.append(np.r_[ys[lo:hi], x_index[a, u]])
        vals.append(np.r_[weights[lo:hi], -cap])
        n_rows += 1
    if not n_rows:
        return None
    return (np.concatenate(rows), np.concatenate(cols), np.concatenate(vals),
            np.full(n_rows, -np.inf), np.zeros(n_rows))


def canonical_assignment(assignment: np.ndarray, sym: Symmetry) -> np.ndarray:
    """The symmetric image of ``assignment`` that satisfies the symmetry-breaking rows.

    Alternately relabels identical nodes by first use and sorts twins' nodes; each step makes
    the vector lexicographically smaller or leaves it, so the loop ends at a fixpoint.
    """
    out = np.asarray(assignment, dtype=np.int64).copy()
    while True:
        before = out.copy()
        for nodes in sym.type_nodes:
            first_use = [np.flatnonzero(out == k) for k in nodes.tolist()]
            order = sorted(range(nodes.size), key=lambda j: first_use[j][0] if first_use[j].size else np.inf)
            mapping = {int(nodes[j]): int(nodes[new]) for new, j in enumerate(order)}
            out = np.array([mapping.get(int(k), int(k)) for k in out], dtype=np.int64)
        for items in sym.class_items:
            out[items] = np.sort(out[items])
        if np.array_equal(out, before):
            return out
