"""IBM CPLEX back-end (the papers' own solver, Eskandari et al. [1]_ section 5): the only module
importing ``cplex``. The free Community Edition from PyPI stops at 1000 variables and 1000
constraints; a larger model raises :class:`SolverLimitError` saying so.

References
----------
.. [1] Eskandari, L.; Mair, J.; Huang, Z.; Eyers, D. (2020) "I-Scheduler: Iterative scheduling for
   distributed stream processing systems", Future Generation Computer Systems,
   doi:10.1016/j.future.2020.11.011.
"""

from __future__ import annotations

import time

import numpy as np

from streamsched.native_output import captured_native_output
from streamsched.solvers.backend import MilpSolution, SolverLimitError
from streamsched.solvers.formulations import Milp

#: Size limits of the CPLEX Community Edition (error 1016 when exceeded).
COMMUNITY_LIMIT = 1000
_PROMOTIONAL_LIMIT_ERROR = 1016


def _cplex():
    try:
        import cplex
    except ImportError:
        raise SolverLimitError("backend cplex: the 'cplex' package is not installed "
                               "(pip install 'streamsched[cplex]' for the Community Edition)") from None
    return cplex


def solve(milp: Milp, *, time_limit: float, seed: int, workers: int, hint: np.ndarray | None,
          work_limit: float | None = None) -> MilpSolution:
    """Solve ``milp`` with CPLEX's MIP optimiser (relative gap 0). ``work_limit`` (CP-SAT's
    deterministic time) is read as seconds here."""
    if work_limit is not None:
        time_limit = min(time_limit, work_limit)
    entered = time.perf_counter()
    cplex = _cplex()
    c = cplex.Cplex()
    for stream in (c.set_log_stream, c.set_results_stream, c.set_warning_stream, c.set_error_stream):
        stream(None)
    c.parameters.threads.set(int(workers))
    c.parameters.randomseed.set(int(seed) % 2**31)
    c.parameters.mip.tolerances.mipgap.set(0.0)
    c.parameters.mip.tolerances.absmipgap.set(1e-6)
    c.objective.set_sense(c.objective.sense.minimize)
    types = ["I" if flag else "C" for flag in milp.integer]
    c.variables.add(obj=milp.cost.tolist(), lb=milp.lower.tolist(), ub=milp.upper.tolist(), types=types)
    rows = milp.rows
    senses, rhs, ranges, exprs = [], [], [], []
    for r in range(milp.n_rows):
        lo, hi = milp.row_lower[r], milp.row_upper[r]
        span = slice(rows.indptr[r], rows.indptr[r + 1])
        exprs.append(cplex.SparsePair(rows.indices[span].tolist(), rows.data[span].tolist()))
        if lo == hi:
            senses.append("E"), rhs.append(float(lo)), ranges.append(0.0)
        elif not np.isfinite(lo):
            senses.append("L"), rhs.append(float(hi)), ranges.append(0.0)
        elif not np.isfinite(hi):
            senses.append("G"), rhs.append(float(lo)), ranges.append(0.0)
        else:
            senses.append("R"), rhs.append(float(lo)), ranges.append(float(hi - lo))
    c.linear_constraints.add(lin_expr=exprs, senses=senses, rhs=rhs, range_values=ranges)
    if hint is not None:
        c.MIP_starts.add(cplex.SparsePair(list(range(milp.n_vars)), hint.tolist()), c.MIP_starts.effort_level.repair)
    c.parameters.timelimit.set(max(0.01, float(time_limit) - (time.perf_counter() - entered)))
    try:
        with captured_native_output("CPLEX"):
            c.solve()
    except cplex.exceptions.CplexSolverError as exc:
        if exc.args[2] == _PROMOTIONAL_LIMIT_ERROR:
            raise SolverLimitError(
                f"backend cplex: the Community Edition is limited to {COMMUNITY_LIMIT} variables and "
                f"{COMMUNITY_LIMIT} constraints; the {milp.name} model has {milp.n_vars} variables and "
                f"{milp.n_rows} constraints (use backend cp-sat or highs, or a full CPLEX licence)"
            ) from None
        raise
    status = c.solution.get_status()
    codes = c.solution.status
    if status in (codes.MIP_infeasible, codes.infeasible):
        return MilpSolution(None, np.inf, np.inf, "infeasible")
    try:
        bound = float(c.solution.MIP.get_best_objective())
    except cplex.exceptions.CplexError:
        bound = -np.inf
    if not c.solution.is_primal_feasible():
        return MilpSolution(None, np.inf, bound, "unknown")
    values = np.array(c.solution.get_values())
    objective = float(c.solution.get_objective_value())
    proven = status in (codes.MIP_optimal, codes.optimal_tolerance)
    return MilpSolution(values, objective, objective if proven and not np.isfinite(bound) else bound,
                        "optimal" if proven else "feasible")
