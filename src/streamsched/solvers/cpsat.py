"""OR-Tools CP-SAT back-end (the default) of the placement MILP, and :data:`STATUS`, the statuses
CP-SAT's other models here (:mod:`~streamsched.solvers.contention`,
:mod:`~streamsched.solvers.throughput`) report."""

from __future__ import annotations

import time

import numpy as np
from ortools.sat.python import cp_model

from streamsched.native_output import captured_native_output
from streamsched.solvers.backend import MilpSolution, integer_rows
from streamsched.solvers.formulations import Milp

#: CP-SAT's solve status as the status of a solution.
STATUS = {
    cp_model.OPTIMAL: "optimal",
    cp_model.FEASIBLE: "feasible",
    cp_model.INFEASIBLE: "infeasible",
    cp_model.MODEL_INVALID: "unknown",
    cp_model.UNKNOWN: "unknown",
}


def solve(milp: Milp, *, time_limit: float, seed: int, workers: int, hint: np.ndarray | None,
          work_limit: float | None = None) -> MilpSolution:
    """Solve ``milp`` with CP-SAT (all variables integer; rows scaled to integers). Building the
    model counts against ``time_limit`` (wall clock); ``work_limit`` caps CP-SAT's deterministic
    time, so that a search stopped by it ends at the same point on every run."""
    entered = time.perf_counter()
    model = cp_model.CpModel()
    lower, upper = np.ceil(milp.lower - 1e-9).astype(np.int64), np.floor(milp.upper + 1e-9).astype(np.int64)
    xs = [model.new_int_var(lo, hi, "") for lo, hi in zip(lower.tolist(), upper.tolist())]
    rows = milp.rows
    coefficients, row_lower, row_upper = integer_rows(rows, milp.row_lower, milp.row_upper)
    indptr, indices = rows.indptr.tolist(), rows.indices.tolist()
    coefficients = coefficients.astype(np.int64).tolist()
    big = cp_model.INT_MAX
    lows = [int(v) if np.isfinite(v) else -big for v in np.ceil(row_lower - 1e-9).tolist()]
    highs = [int(v) if np.isfinite(v) else big for v in np.floor(row_upper + 1e-9).tolist()]
    for r in range(milp.n_rows):
        lo, hi = indptr[r], indptr[r + 1]
        expr = cp_model.LinearExpr.weighted_sum([xs[c] for c in indices[lo:hi]], coefficients[lo:hi])
        model.add_linear_constraint(expr, lows[r], highs[r])
    used = np.flatnonzero(milp.cost)
    cost = milp.cost[used]
    scale = 1.0
    if milp.integral_objective:
        cost = np.round(cost).astype(np.int64)
    elif cost.size:
        # fractional costs: scaled to integers ourselves and rounded down, so that CP-SAT's bound
        # (divided back) stays a bound (variables are >= 0) instead of relying on its float scaling
        scale = 2.0**30 / float(np.abs(cost).max())
        cost = np.floor(cost * scale).astype(np.int64)
    model.minimize(cp_model.LinearExpr.weighted_sum([xs[j] for j in used.tolist()], cost.tolist()))
    if hint is not None:
        for var, value in zip(xs, np.round(hint).astype(np.int64).tolist()):
            model.add_hint(var, value)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.01, float(time_limit) - (time.perf_counter() - entered))
    solver.parameters.num_workers = int(workers)
    solver.parameters.random_seed = int(seed)
    if work_limit is not None:
        solver.parameters.max_deterministic_time = max(0.001, float(work_limit))
    with captured_native_output("CP-SAT"):
        status = STATUS.get(solver.solve(model), "unknown")
    if status in ("optimal", "feasible"):
        values = np.array([solver.value(v) for v in xs], dtype=np.float64)
        objective = float(milp.cost @ values)
        # the bound of the floored costs, divided back, stays below every solution's true cost
        return MilpSolution(values, objective, float(solver.best_objective_bound) / scale, status,
                            work=float(solver.response_proto.deterministic_time))
    bound = float(solver.best_objective_bound) / scale if status == "unknown" else np.inf
    return MilpSolution(None, np.inf, bound, status, work=float(solver.response_proto.deterministic_time))
