"""Make a partition respect hard part capacities, moving as little communication as possible.

Partitioners balance only approximately (METIS: max part weight <= ``ufactor`` x target, and not
even that is guaranteed). Schedulers need hard limits (node capacity, tasks per worker), so
overfull parts shed vertices: each vertex of an overfull part is scored by its best move, gain =
weight of its edges into the target part minus its edges into its own part (the FM gain of
Fiduccia and Mattheyses [1]_), among parts with room for it; the best-scoring moves are applied until the
part fits. Rounds repeat until every part fits.

References
----------
.. [1] Fiduccia, C. M.; Mattheyses, R. M. (1982) "A linear-time heuristic for improving network
   partitions", Proceedings of the 19th Design Automation Conference, pp. 175-181.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from streamsched.errors import InfeasibleError
from streamsched.model.placement import CAPACITY_TOLERANCE


def part_weights(parts: np.ndarray, weights: np.ndarray, n_parts: int) -> np.ndarray:
    return np.bincount(parts, weights=weights, minlength=n_parts)


def fit_parts(adjacency: sp.csr_matrix, parts: np.ndarray, weights: np.ndarray,
              capacity: np.ndarray) -> np.ndarray:
    """A copy of ``parts`` in which part k holds weight <= ``capacity[k]``.

    When single moves get stuck (no vertex of an overfull part fits anywhere else), every vertex
    is re-packed, heaviest first, into its own part if it still has room, else into the part with
    most room (first fit decreasing that keeps the partition where it can); ``InfeasibleError``
    if a vertex then fits nowhere.
    """
    parts = np.array(parts, dtype=np.int64)
    adjacency = sp.csr_matrix(adjacency)
    weights = np.asarray(weights, dtype=np.float64)
    capacity = np.asarray(capacity, dtype=np.float64) * (1 + CAPACITY_TOLERANCE) + CAPACITY_TOLERANCE
    n_parts = capacity.size
    held = part_weights(parts, weights, n_parts)
    while True:
        overfull = np.flatnonzero(held > capacity)
        if overfull.size == 0:
            return parts
        moved = 0
        for p in overfull.tolist():
            moved += _shed(adjacency, parts, weights, capacity, held, p)
        if moved == 0:
            return _sticky_first_fit_decreasing(parts, weights, capacity)


def _shed(adjacency, parts, weights, capacity, held, p) -> int:
    """Move vertices out of part ``p`` (best FM gain first) until it fits; returns how many moved."""
    members = np.flatnonzero(parts == p)
    n_parts = capacity.size
    room = capacity - held
    row, col, data = _rows_of(adjacency, members)
    to_part = parts[col]
    inner = to_part == p
    own = np.bincount(row[inner], weights=data[inner], minlength=members.size)
    # candidate moves along edges: (member row, target part, summed weight towards it), in
    # (row, part) order, each sum taken in the rows' own order
    keep = ~inner & (room[to_part] >= weights[members[row]])
    key, inverse = np.unique(row[keep] * n_parts + to_part[keep], return_inverse=True)
    pair_row, pair_col = key // n_parts, key % n_parts
    pair_data = np.bincount(inverse, weights=data[keep], minlength=key.size)
    # plus, for every member, the part with most room (gain = -own, no edges gained)
    roomiest = np.where(np.arange(n_parts) == p, -np.inf, room)
    spare = int(np.argmax(roomiest))
    cand_rows = np.concatenate([pair_row, np.arange(members.size)])
    cand_targets = np.concatenate([pair_col, np.full(members.size, spare)])
    cand_gain = np.concatenate([pair_data, np.zeros(members.size)]) - own[cand_rows]
    need = weights[members[cand_rows]]
    fits = (room[cand_targets] >= need) & (need > 0)
    cand_rows, cand_targets, cand_gain = cand_rows[fits], cand_targets[fits], cand_gain[fits]
    if cand_rows.size == 0:
        return 0
    # best candidate per member, then members by gain (desc), ties by vertex index
    order = np.lexsort((cand_targets, -cand_gain, cand_rows))
    first = np.r_[True, cand_rows[order][1:] != cand_rows[order][:-1]]
    best = order[first]
    best = best[np.lexsort((members[cand_rows[best]], -cand_gain[best]))]
    moved = 0
    for k in best.tolist():
        if held[p] <= capacity[p]:
            break
        v, q = int(members[cand_rows[k]]), int(cand_targets[k])
        if held[q] + weights[v] > capacity[q]:
            continue
        parts[v] = q
        held[p] -= weights[v]
        held[q] += weights[v]
        moved += 1
    return moved


def _rows_of(adjacency: sp.csr_matrix, members: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The entries of rows ``members`` of a CSR matrix: (index into ``members``, column, value),
    row by row in stored order (``adjacency[members].tocoo()`` without building matrices)."""
    start = adjacency.indptr[members].astype(np.int64)
    length = adjacency.indptr[members + 1].astype(np.int64) - start
    row = np.repeat(np.arange(members.size), length)
    at = np.arange(row.size) - np.repeat(np.cumsum(length) - length, length) + np.repeat(start, length)
    return row, adjacency.indices[at], adjacency.data[at]


def _sticky_first_fit_decreasing(parts, weights, capacity) -> np.ndarray:
    held = np.zeros(capacity.size)
    out = np.empty_like(parts)
    for v in np.lexsort((np.arange(parts.size), -weights)).tolist():
        p = int(parts[v])
        if held[p] + weights[v] > capacity[p]:
            p = int(np.argmax(capacity - held))
            if held[p] + weights[v] > capacity[p]:
                raise InfeasibleError(
                    f"cannot pack item {v} (weight {weights[v]:g}): the emptiest part has room "
                    f"{capacity[p] - held[p]:g}"
                )
        out[v] = p
        held[p] += weights[v]
    return out
