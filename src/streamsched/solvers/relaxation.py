"""LP relaxation and reduced-cost fixing for the configuration model.

The configuration LP is strong (Gilmore-Gomory [1]_), so its value ``z`` and reduced costs ``rc``
shrink the integer program: any integer solution ``x`` costs at least ``z + sum_j rc_j x_j``
(``rc_j >= 0`` for columns at their lower bound 0), so a solution cheaper than ``target`` uses
only columns with ``rc_j <= target - z``. Solving the restricted program exactly therefore
proves optimality, and a restricted program over ``rc <= tau`` gives the global bound
``min(restricted bound, z + tau)``.

References
----------
.. [1] Gilmore, P. C.; Gomory, R. E. (1961) "A linear programming approach to the cutting-stock
   problem", Operations Research 9(6), pp. 849-859.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from streamsched.solvers.formulations import Milp


@dataclass(frozen=True)
class Relaxation:
    value: float  # LP optimum including the model's offset
    reduced_cost: np.ndarray  # per column, >= 0 (lower-bound marginals)
    infeasible: bool = False


#: Columns added per pricing round of the column generation.
COLUMNS_PER_ROUND = 200


def lp_relaxation(milp: Milp, time_limit: float, start: np.ndarray | None = None) -> Relaxation | None:
    """The LP relaxation; None if it did not finish in ``time_limit``.

    With ``start`` (values of a feasible solution) and only equality rows, by column generation:
    solve the LP over the columns used so far (at first those of ``start``, so it is feasible),
    price every column (``c - A^T y``, one sparse product), add the most negative, repeat until
    none is negative; the last duals then hold for the whole program. Otherwise one full LP.
    """
    if start is None or not np.all(milp.row_lower == milp.row_upper):
        return _full_lp(milp, time_limit)
    deadline = time.perf_counter() + time_limit
    active = np.asarray(start) > 0
    columns_t = milp.rows.T.tocsr()
    while True:
        cols = np.flatnonzero(active)
        result = linprog(milp.cost[cols], A_eq=milp.rows[:, cols], b_eq=milp.row_lower,
                         bounds=np.c_[milp.lower[cols], milp.upper[cols]], method="highs-ds",
                         options={"time_limit": float(max(deadline - time.perf_counter(), 0.01))})
        if result.status != 0:
            return None
        reduced = milp.cost - columns_t @ result.eqlin.marginals
        entering = np.flatnonzero((reduced < -1e-9) & ~active)
        if entering.size == 0:
            return Relaxation(float(result.fun) + milp.offset, np.maximum(reduced, 0.0))
        active[entering[np.argsort(reduced[entering], kind="stable")[:COLUMNS_PER_ROUND]]] = True


def _full_lp(milp: Milp, time_limit: float) -> Relaxation | None:
    equal = milp.row_lower == milp.row_upper
    upper_rows = ~equal & np.isfinite(milp.row_upper)
    lower_rows = ~equal & np.isfinite(milp.row_lower)
    rows = milp.rows
    a_ub = None
    if upper_rows.any() or lower_rows.any():
        import scipy.sparse as sp

        a_ub = sp.vstack([rows[upper_rows], -rows[lower_rows]]).tocsr()
        b_ub = np.r_[milp.row_upper[upper_rows], -milp.row_lower[lower_rows]]
    result = linprog(milp.cost, A_ub=a_ub, b_ub=None if a_ub is None else b_ub,
                     A_eq=rows[equal] if equal.any() else None, b_eq=milp.row_lower[equal] if equal.any() else None,
                     bounds=np.c_[milp.lower, milp.upper], method="highs-ds",
                     options={"time_limit": float(max(time_limit, 0.01))})
    if result.status == 2:
        return Relaxation(np.inf, np.zeros(milp.n_vars), infeasible=True)
    if result.status != 0:
        return None
    return Relaxation(float(result.fun) + milp.offset, np.maximum(result.lower.marginals, 0.0))


def restrict(milp: Milp, keep: np.ndarray) -> Milp:
    """The same program over the columns in ``keep`` (the others fixed to 0)."""
    columns = np.flatnonzero(keep)

    def decode(values: np.ndarray) -> np.ndarray:
        full = np.zeros(milp.n_vars)
        full[columns] = values
        return milp.decode(full)

    def encode(assignment: np.ndarray) -> np.ndarray | None:
        full = milp.encode(assignment)
        if full is None or np.any(full[~keep] != 0):
            return None
        return full[columns]

    return Milp(name=milp.name, cost=milp.cost[columns], offset=milp.offset, lower=milp.lower[columns],
                upper=milp.upper[columns], integer=milp.integer[columns], rows=milp.rows[:, columns].tocsr(),
                row_lower=milp.row_lower, row_upper=milp.row_upper, decode=decode, encode=encode,
                integral_objective=milp.integral_objective)
