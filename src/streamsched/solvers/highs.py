"""HiGHS MIP back-end: the only module importing ``highspy``.

``highspy`` and OR-Tools each ship their own build of HiGHS, and the two clash when loaded into
one process (undefined-symbol ImportError, whichever comes second). So HiGHS always runs in a
child interpreter (``python -m streamsched.solvers.highs IN OUT``), which also lets us enforce
the time limit: HiGHS can overrun it inside a long root LP, and the child is then stopped.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from streamsched.solvers.backend import MilpSolution, SolverLimitError
from streamsched.solvers.formulations import Milp

#: Seconds granted past the time limit (model transfer, HiGHS overrun) before the child is stopped.
GRACE_S = 3.0
_STATUSES = ("optimal", "feasible", "infeasible", "unknown")


def solve(milp: Milp, *, time_limit: float, seed: int, workers: int, hint: np.ndarray | None,
          work_limit: float | None = None) -> MilpSolution:
    """Solve ``milp`` with HiGHS branch-and-cut in a child process (relative gap 0).
    ``work_limit`` (CP-SAT's deterministic time) is read as seconds here."""
    if work_limit is not None:
        time_limit = min(time_limit, work_limit)
    if importlib.util.find_spec("highspy") is None:
        raise SolverLimitError("backend highs: the 'highspy' package is not installed")
    with tempfile.TemporaryDirectory(prefix="streamsched-highs-") as tmp:
        given, answer = Path(tmp) / "model.npz", Path(tmp) / "solution.npz"
        rows = milp.rows
        np.savez(given, cost=milp.cost, lower=milp.lower, upper=milp.upper, integer=milp.integer,
                 data=rows.data, indices=rows.indices, indptr=rows.indptr, shape=np.array(rows.shape),
                 row_lower=milp.row_lower, row_upper=milp.row_upper,
                 hint=np.zeros(0) if hint is None else hint,
                 options=np.array([time.time() + time_limit, seed, workers], dtype=np.float64))
        try:
            subprocess.run([sys.executable, "-m", __name__, str(given), str(answer)], check=True,
                           timeout=time_limit + GRACE_S, capture_output=True, text=True)
        except subprocess.TimeoutExpired:
            return MilpSolution(None, np.inf, -np.inf, "unknown")
        except subprocess.CalledProcessError as exc:
            last = (exc.stderr or "").strip().splitlines()[-1:] or ["no message"]
            raise RuntimeError(f"backend highs: the solver process failed: {last[0]}") from None
        with np.load(answer) as out:
            values = out["values"] if out["has_values"] else None
            return MilpSolution(values, float(out["objective"]), float(out["bound"]), _STATUSES[int(out["status"])])


def _child(given: str, answer: str) -> None:
    with np.load(given) as m:
        rows = sp.csr_matrix((m["data"], m["indices"], m["indptr"]), shape=tuple(m["shape"]))
        hint = m["hint"] if m["hint"].size else None
        deadline, seed, workers = m["options"]
        args = (m["cost"], m["lower"], m["upper"], m["integer"], rows, m["row_lower"], m["row_upper"])
    result = _solve_here(*args, time_limit=max(0.05, deadline - time.time()), seed=int(seed), workers=int(workers), hint=hint)
    np.savez(answer, values=np.zeros(0) if result.values is None else result.values,
             has_values=result.values is not None, objective=result.objective, bound=result.bound,
             status=_STATUSES.index(result.status))


def _solve_here(cost, lower, upper, integer, rows, row_lower, row_upper, *, time_limit, seed, workers, hint):
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit))
    h.setOptionValue("random_seed", int(seed))
    h.setOptionValue("threads", int(workers))
    h.setOptionValue("mip_rel_gap", 0.0)
    h.setOptionValue("mip_abs_gap", 1e-6)
    inf = highspy.kHighsInf
    clip = lambda a: np.where(np.isfinite(a), a, np.sign(a) * inf)
    n = cost.size
    h.addVars(n, lower, upper)
    h.changeColsCost(n, np.arange(n, dtype=np.int32), cost)
    h.changeColsIntegrality(int(integer.sum()), np.flatnonzero(integer).astype(np.int32),
                            np.full(int(integer.sum()), highspy.HighsVarType.kInteger))
    h.addRows(rows.shape[0], clip(row_lower), clip(row_upper), rows.nnz,
              rows.indptr[:-1].astype(np.int32), rows.indices.astype(np.int32), rows.data)
    if hint is not None:
        solution = highspy.HighsSolution()
        solution.col_value = list(map(float, hint))
        solution.value_valid = True
        h.setSolution(solution)
    h.run()
    status = h.getModelStatus()
    info = h.getInfo()
    has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
    if status == highspy.HighsModelStatus.kInfeasible:
        return MilpSolution(None, np.inf, np.inf, "infeasible")
    bound = float(info.mip_dual_bound) if np.isfinite(info.mip_dual_bound) else -np.inf
    if not has_solution:
        return MilpSolution(None, np.inf, bound, "unknown")
    values = np.array(h.getSolution().col_value)
    objective = float(info.objective_function_value)
    if status == highspy.HighsModelStatus.kOptimal:
        return MilpSolution(values, objective, objective if bound == -np.inf else bound, "optimal")
    return MilpSolution(values, objective, bound, "feasible")


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])
