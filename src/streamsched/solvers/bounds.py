"""Lower bounds on the inter-node traffic that hold on asymmetric graphs (fractional loads, every
rate different), where exact twin classes do not exist.

- :func:`neighbourhood_bound` (per-item knapsack): with item ``a`` on any node, the neighbours
  that stay beside it fit in that node's room (and item limit), so at most the fractional-
  knapsack value of its edges stays internal; every cut edge is counted from both ends, so
  ``cost >= 1/2 sum_a (W_a - T_a)``. Cheap (sorting the sparse rows), any size, often weak.
- :func:`grouped_configuration_bound` (approximate twin classes): items are grouped (by
  operator, or by identical neighbour sets) and nodes by capacity and item limit, ignoring
  everything else. A relaxed configuration (count vector ``q`` per group) fits a node when the
  ``q_c`` *smallest* loads of each group fit; the internal weight of any node holding ``q_c``
  items of group c is at most ``F(q) = sum_{c<=d} F_cd(q_c, q_d)``, where ``F_cd`` is the
  smallest of three upper bounds on the weight among ``q_c`` rows and ``q_d`` columns of the
  c-d weight block (the ``q_c q_d`` heaviest entries; the ``q_c`` largest row sums of the
  ``q_d`` heaviest entries of a row; the same by columns). Every placement maps to a solution
  of the configuration program (Gilmore-Gomory, as in :mod:`.formulations`) over these columns
  with an objective no higher than its cost, so the program's LP value (column generation,
  :mod:`.relaxation`) and its integer bound are lower bounds. With equal loads and rates the
  groups are exact twin classes and the program is the exact configuration model.

References
----------
- P. C. Gilmore, R. E. Gomory, 1961. A linear programming approach to the cutting-stock
  problem. Operations Research 9(6) (configuration columns, pricing).
- M. E. Luebbecke, J. Desrosiers, 2005. Selected topics in column generation. Operations
  Research 53(6) (section 2: LP bounds of a restricted master; reduced-cost arguments).
- L. Eskandari, J. Mair, Z. Huang, D. Eyers, 2020. I-Scheduler: Iterative scheduling for distributed
  stream processing systems. Future Generation Computer Systems, doi:10.1016/j.future.2020.11.011
  (section 3, eqs. 1-5: the exact model these relax, :mod:`.formulations`).
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp

from streamsched.solvers.formulations import Milp
from streamsched.solvers.problem import TOLERANCE, PlacementProblem

#: Largest number of groups, group-pair block size and configurations the relaxed program uses.
MAX_GROUPS = 40
MAX_BLOCK = 4_000_000
MAX_CONFIGURATIONS = 200_000


def neighbourhood_bound(problem: PlacementProblem, adjacency: sp.csr_matrix) -> float:
    """``1/2 sum_a max(0, W_a - T_a)`` (module docstring), vectorised over the CSR rows."""
    n = problem.n_items
    if n == 0 or adjacency.nnz == 0:
        return 0.0
    room = problem.capacity * (1 + TOLERANCE) + TOLERANCE
    best_room = np.empty(n)
    for lo in range(0, n, 4096):  # chunks: no dense items x nodes float matrix
        best_room[lo:lo + 4096] = np.where(problem.allowed[lo:lo + 4096], room, -np.inf).max(axis=1)
    budget = best_room - problem.loads
    rows = np.repeat(np.arange(n), np.diff(adjacency.indptr))
    weight, load = adjacency.data, problem.loads[adjacency.indices]
    kept = _fractional_knapsack(rows, weight, load, budget, n)
    if problem.max_items is not None:
        most = np.empty(n)
        for lo in range(0, n, 4096):
            most[lo:lo + 4096] = np.where(problem.allowed[lo:lo + 4096], problem.max_items, -1).max(axis=1) - 1
        kept = np.minimum(kept, _heaviest(rows, weight, most, n))
    total = np.bincount(rows, weights=weight, minlength=n)
    return float(0.5 * np.maximum(total - kept, 0.0).sum())


def _within_row_cumsum(rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Cumulative sums restarting at each row (``rows`` sorted)."""
    total = np.cumsum(values)
    first = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
    offset = np.repeat(total[first] - values[first], np.diff(np.r_[first, rows.size]))
    return total - offset


def _fractional_knapsack(rows, weight, load, budget, n) -> np.ndarray:
    """Per row: the most weight that entries of total load <= budget (fractions allowed) carry."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(load > 0, weight / load, np.inf)
    order = np.lexsort((-ratio, rows))
    rows, weight, load = rows[order], weight[order], load[order]
    cap = budget[rows]
    after = _within_row_cumsum(rows, load)
    before = after - load
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(after <= cap, 1.0, np.where(load > 0, np.clip((cap - before) / load, 0.0, 1.0), 0.0))
    share = np.where(cap < 0, 0.0, share)
    return np.bincount(rows, weights=weight * share, minlength=n)


def _heaviest(rows, weight, count, n) -> np.ndarray:
    """Per row: the summed weight of its ``count`` heaviest entries."""
    order = np.lexsort((-weight, rows))
    rows, weight = rows[order], weight[order]
    rank = _within_row_cumsum(rows, np.ones(rows.size))
    return np.bincount(rows, weights=np.where(rank <= count[rows], weight, 0.0), minlength=n)


# ------------------------------------------------------------------ grouped configurations
def structural_groups(adjacency: sp.csr_matrix) -> np.ndarray:
    """Items with the same set of neighbours (weights ignored) share a group."""
    keys: dict[bytes, int] = {}
    indptr, indices = adjacency.indptr, adjacency.indices
    out = np.empty(adjacency.shape[0], dtype=np.int64)
    for i in range(adjacency.shape[0]):
        out[i] = keys.setdefault(np.sort(indices[indptr[i]:indptr[i + 1]]).tobytes(), len(keys))
    return out


def grouped_configuration_model(problem: PlacementProblem, adjacency: sp.csr_matrix, groups: np.ndarray,
                                deadline: float) -> tuple[Milp, callable] | None:
    """The relaxed configuration program (module docstring) and an encoder of assignments into
    it, or None when the groups, blocks or configurations are too many or time runs out."""
    groups = np.unique(np.asarray(groups), return_inverse=True)[1].ravel()
    n_groups = int(groups.max()) + 1 if groups.size else 0
    if n_groups == 0 or n_groups > MAX_GROUPS:
        return None
    members = [np.flatnonzero(groups == c) for c in range(n_groups)]
    sizes = np.array([items.size for items in members])
    smallest = [np.r_[0.0, np.cumsum(np.sort(problem.loads[items]))] for items in members]
    tables = _internal_tables(adjacency, members, deadline)
    if tables is None:
        return None
    type_keys: dict[tuple, int] = {}
    node_type = np.array([type_keys.setdefault((problem.capacity[k], None if problem.max_items is None
                                                else int(problem.max_items[k])), len(type_keys))
                          for k in range(problem.n_nodes)])
    per_type, budget = [], MAX_CONFIGURATIONS
    for t in range(len(type_keys)):
        k = int(np.flatnonzero(node_type == t)[0])
        limit = None if problem.max_items is None else int(problem.max_items[k])
        configs = _relaxed_configurations(smallest, sizes, problem.capacity[k] * (1 + TOLERANCE) + TOLERANCE,
                                          limit, budget, deadline)
        if configs is None:
            return None
        per_type.append(configs)
        budget -= configs.shape[0]
    stacked = np.concatenate(per_type)
    internal = np.zeros(stacked.shape[0])
    for (c, d), table in tables.items():
        internal += table[stacked[:, c], stacked[:, d]]
    n_vars = stacked.shape[0]
    type_of = np.concatenate([np.full(cfg.shape[0], t) for t, cfg in enumerate(per_type)])
    type_count = np.bincount(node_type, minlength=len(per_type))
    type_rows = sp.csr_matrix((np.ones(n_vars), (type_of, np.arange(n_vars))), shape=(len(per_type), n_vars))
    rows = sp.vstack([type_rows, sp.csr_matrix(stacked.T.astype(np.float64))]).tocsr()
    bounds = np.r_[type_count, sizes].astype(np.float64)
    with np.errstate(divide="ignore"):
        room = np.where(stacked > 0, sizes[None, :] // np.maximum(stacked, 1), np.iinfo(np.int64).max)
    upper = np.minimum(room.min(axis=1), type_count[type_of]).astype(np.float64)
    starts = np.r_[0, np.cumsum([cfg.shape[0] for cfg in per_type])]
    lookup = [{row.tobytes(): j for j, row in enumerate(cfg)} for cfg in per_type]

    def encode(assignment: np.ndarray) -> np.ndarray | None:
        counts = np.zeros((problem.n_nodes, n_groups), dtype=stacked.dtype)
        np.add.at(counts, (assignment, groups), 1)
        x = np.zeros(n_vars)
        for node in range(problem.n_nodes):
            t = int(node_type[node])
            j = lookup[t].get(counts[node].tobytes())
            if j is None:
                return None
            x[starts[t] + j] += 1
        return x

    weights = np.r_[problem.weight]
    milp = Milp(name="grouped-configurations", cost=-internal, offset=problem.total_weight,
                lower=np.zeros(n_vars), upper=upper, integer=np.ones(n_vars, dtype=bool), rows=rows,
                row_lower=bounds, row_upper=bounds, decode=lambda x: None, encode=encode,
                integral_objective=bool(np.all(np.abs(weights - np.round(weights)) < 1e-9)))
    return milp, encode


def _internal_tables(adjacency: sp.csr_matrix, members: list[np.ndarray], deadline: float):
    """``F_cd`` for every pair of groups joined by an edge, as (|c|+1) x (|d|+1) tables."""
    n_groups = len(members)
    group_of = np.empty(adjacency.shape[0], dtype=np.int64)
    for c, items in enumerate(members):
        group_of[items] = c
    coo = sp.triu(adjacency, k=1).tocoo()
    pair_c, pair_d = group_of[coo.row], group_of[coo.col]
    low, high = np.minimum(pair_c, pair_d), np.maximum(pair_c, pair_d)
    tables = {}
    for key in np.unique(low * n_groups + high).tolist():
        if time.perf_counter() > deadline:
            return None
        c, d = divmod(key, n_groups)
        if members[c].size * members[d].size > MAX_BLOCK:
            return None
        block = adjacency[members[c]][:, members[d]].toarray()
        tables[(c, d)] = _within_group_table(block) if c == d else _between_groups_table(block)
    return tables


def _between_groups_table(block: np.ndarray) -> np.ndarray:
    """Upper bounds on the weight among q_c rows and q_d columns of ``block``, for all q_c, q_d."""
    rows_n, cols_n = block.shape
    q_c, q_d = np.arange(rows_n + 1)[:, None], np.arange(cols_n + 1)[None, :]
    heaviest = np.r_[0.0, np.cumsum(np.sort(block.ravel())[::-1])]
    by_entries = heaviest[np.minimum(q_c * q_d, block.size)]
    by_rows = _best_lines(block)  # (rows+1) x (cols+1)
    by_cols = _best_lines(block.T).T
    return np.minimum(np.minimum(by_entries, by_rows), by_cols)


def _best_lines(block: np.ndarray) -> np.ndarray:
    """[q_r, q_c] = sum of the q_r largest values of (sum of the q_c largest entries of a row)."""
    rows_n, cols_n = block.shape
    per_row = np.c_[np.zeros(rows_n), np.cumsum(-np.sort(-block, axis=1), axis=1)]  # rows x (cols+1)
    ranked = -np.sort(-per_row, axis=0)
    return np.r_[np.zeros((1, cols_n + 1)), np.cumsum(ranked, axis=0)]


def _within_group_table(block: np.ndarray) -> np.ndarray:
    """Upper bounds on the weight among q items of one group, as a (size+1) x (size+1) table
    indexed [q, q] (only the diagonal is read)."""
    size = block.shape[0]
    q = np.arange(size + 1)
    upper = block[np.triu_indices(size, k=1)]
    heaviest = np.r_[0.0, np.cumsum(np.sort(upper)[::-1])]
    by_entries = heaviest[np.minimum(q * (q - 1) // 2, upper.size)]
    lines = _best_lines(block)  # [q, q-1]: q items, each with its q-1 heaviest partners
    by_rows = 0.5 * lines[q, np.maximum(q - 1, 0)]
    table = np.zeros((size + 1, size + 1))
    table[q, q] = np.minimum(by_entries, by_rows)
    return table


def _relaxed_configurations(smallest, sizes, capacity: float, item_limit: int | None, limit: int,
                            deadline: float) -> np.ndarray | None:
    """Count vectors whose groups' smallest loads fit ``capacity`` (and ``item_limit``)."""
    dtype = np.int16 if sizes.max(initial=0) < 2**15 else np.int32
    configs = np.zeros((1, sizes.size), dtype=dtype)
    load = np.zeros(1)
    count = np.zeros(1, dtype=np.int64)
    for c, size in enumerate(sizes.tolist()):
        blocks_c, blocks_l, blocks_n, total = [configs], [load], [count], configs.shape[0]
        for copies in range(1, size + 1):
            keep = load + smallest[c][copies] <= capacity
            if item_limit is not None:
                keep &= count + copies <= item_limit
            if not keep.any():
                break
            total += int(keep.sum())
            if total > limit or time.perf_counter() > deadline:
                return None
            block = configs[keep].copy()
            block[:, c] = copies
            blocks_c.append(block)
            blocks_l.append(load[keep] + smallest[c][copies])
            blocks_n.append(count[keep] + copies)
        configs, load, count = np.concatenate(blocks_c), np.concatenate(blocks_l), np.concatenate(blocks_n)
    return configs


def grouped_configuration_bound(problem: PlacementProblem, adjacency: sp.csr_matrix, groups: np.ndarray,
                                incumbent: np.ndarray | None, module, deadline: float, seed: int,
                                work: float | None = None) -> float | None:
    """LP value of the relaxed program (column generation from the incumbent's columns), then
    its integer program over the columns that can still matter (reduced cost <= incumbent - LP)
    with the remaining time: ``min(integer bound, LP + threshold)``. None when not built."""
    from streamsched.solvers.relaxation import lp_relaxation, restrict

    built = grouped_configuration_model(problem, adjacency, groups, deadline)
    if built is None:
        return None
    milp, encode = built
    start = None if incumbent is None else encode(incumbent)
    lp = lp_relaxation(milp, deadline - time.perf_counter(), start)
    if lp is None or lp.infeasible:
        return None
    bound = lp.value
    remaining = deadline - time.perf_counter()
    if incumbent is None or remaining < 0.2:
        return bound
    threshold = problem.cost(incumbent) - lp.value
    keep = lp.reduced_cost <= threshold + 1e-9
    restricted = restrict(milp, keep)
    raw = module.solve(restricted, time_limit=remaining, seed=seed, workers=1,
                       hint=None if start is None else start[keep], work_limit=work)
    if raw.status in ("optimal", "feasible") and math.isfinite(raw.bound):  # 'unknown' bounds are not kept
        integer_bound = raw.bound + milp.offset
        bound = max(bound, min(integer_bound, lp.value + threshold))
    return bound
