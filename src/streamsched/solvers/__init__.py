"""Exact task placement: one model (i-scheduler.txt section 3, eqs. 1-5), several MILP back-ends.

:func:`solve_placement` takes plain arrays (items with loads, directed weighted edges, node
capacities), so it serves the ``optimal`` scheduler on task graphs and I-Scheduler on reduced
graphs of fused tasks alike. Back-ends: ``cp-sat`` (OR-Tools, default), ``highs``, ``cplex``
(Community Edition size limits are reported as :class:`SolverLimitError`).
"""

from __future__ import annotations

import importlib
import math
import time
from dataclasses import dataclass

import numpy as np

from streamsched.errors import InputError
from streamsched.solvers.backend import SolverLimitError
from streamsched.solvers.formulations import assignment_model, configuration_model, find_symmetry
from streamsched.solvers.problem import PlacementProblem, build_problem, greedy_assignment

BACKENDS = {"cp-sat": "cpsat", "highs": "highs", "cplex": "cplex"}
FORMULATIONS = ("auto", "configurations", "assignment")
STATUSES = ("optimal", "feasible", "infeasible", "unknown")
_CONSTRAINTS = ("memory", "node_memory", "max_items", "pinned", "excluded", "current", "migration_cost")


@dataclass(frozen=True)
class SolveResult:
    """Best assignment found, its inter-node traffic, the proven lower bound and the status."""

    assignment: np.ndarray  # node index per item (-1 everywhere when none was found)
    objective: float  # inter-node traffic of the assignment (plus migration cost, if any)
    bound: float  # proven lower bound on the objective
    status: str  # "optimal" | "feasible" | "infeasible" | "unknown"
    wall_time_s: float
    backend: str
    formulation: str = ""
    moved: int = 0  # items that leave their current node (re-planning)

    @property
    def gap(self) -> float:
        """Relative gap (objective - bound) / objective; 0 when proven, inf without a solution."""
        if self.status == "optimal":
            return 0.0
        if not math.isfinite(self.objective):
            return math.inf
        return (self.objective - self.bound) / self.objective if self.objective > 0 else 0.0


def solve_placement(loads, src, dst, rate, capacity, *, time_limit: float = 10.0, backend: str = "cp-sat",
                    warm_start=None, seed: int = 0, workers: int = 2, formulation: str = "auto",
                    **constraints) -> SolveResult:
    """Minimise inter-node traffic (eq. 3) s.t. capacity (eq. 4) and one node per item (eq. 5).

    Parameters
    ----------
    loads, capacity : item loads and node capacities (same units).
    src, dst, rate : directed edges between items and their weights (pairs are summed).
    time_limit : seconds for the whole call (theta of i-scheduler.txt Algorithm 1).
    warm_start : a feasible assignment to start from (else a greedy one is used).
    formulation : ``configurations``, ``assignment`` or ``auto`` (the first when it is small).
    constraints : ``memory`` + ``node_memory``, ``max_items`` (per node), ``pinned``
        ({item: node}), ``excluded`` ((item, node) pairs or items x nodes bool matrix),
        ``current`` (node per item, -1 = new) + ``migration_cost`` (per moved item).
    """
    unknown = sorted(set(constraints) - set(_CONSTRAINTS))
    if unknown:
        raise InputError(f"solve_placement: unknown constraint {unknown[0]!r} (known: {', '.join(_CONSTRAINTS)})")
    if backend not in BACKENDS:
        raise InputError(f"backend: {backend!r} is not one of {', '.join(BACKENDS)}")
    if formulation not in FORMULATIONS:
        raise InputError(f"formulation: {formulation!r} is not one of {', '.join(FORMULATIONS)}")
    if not time_limit > 0:
        raise InputError(f"time_limit: must be > 0, got {time_limit!r}")
    module = importlib.import_module(f"streamsched.solvers.{BACKENDS[backend]}")  # before the clock
    importlib.import_module("streamsched.solvers.relaxation")  # scipy.optimize: ~1 s on a first call
    started = time.perf_counter()
    problem = build_problem(loads, src, dst, rate, capacity, **constraints)
    n = problem.n_items
    done = lambda *args, **kw: SolveResult(*args, wall_time_s=time.perf_counter() - started, backend=backend, **kw)
    if n == 0:
        return done(np.zeros(0, dtype=np.int64), 0.0, 0.0, "optimal")
    if problem.loads.sum() > problem.capacity.sum() * (1 + 1e-9) + 1e-9:
        return done(np.full(n, -1, dtype=np.int64), math.inf, math.inf, "infeasible")
    start = _warm_start(problem, warm_start)
    symmetry = find_symmetry(problem)
    milp = configuration_model(problem, symmetry) if formulation != "assignment" else None
    if milp is None:
        if formulation == "configurations":
            raise InputError("formulation: the configuration model is too large here; use 'assignment' or 'auto'")
        milp = assignment_model(problem, symmetry)
    search = _Search(problem, milp, module, seed, workers, started + time_limit, start)
    if milp.name == "configurations":
        search.with_reduced_costs()
    else:
        search.run_full()
    if search.infeasible:
        return done(np.full(n, -1, dtype=np.int64), math.inf, math.inf, "infeasible", formulation=milp.name)
    if search.best is None:
        return done(np.full(n, -1, dtype=np.int64), math.inf, search.bound, "unknown", formulation=milp.name)
    objective = problem.cost(search.best)
    bound = min(search.bound, objective)
    status = "optimal" if objective - bound <= 1e-6 * max(1.0, abs(objective)) else "feasible"
    return done(search.best, objective, bound, status, formulation=milp.name, moved=problem.moved(search.best))


class _Search:
    """Incumbent, global bound and remaining time of one :func:`solve_placement` call."""

    #: Share of the remaining time a restricted program may use when it cannot be the last one.
    STAGE_SHARE = 0.5

    def __init__(self, problem: PlacementProblem, milp, module, seed: int, workers: int,
                 deadline: float, start: np.ndarray | None):
        self.problem, self.milp, self.seed, self.workers, self.deadline = problem, milp, seed, workers, deadline
        self.module = module
        self.best = start
        self.bound = 0.0  # traffic and migration costs are never negative
        self.infeasible = False

    @property
    def best_cost(self) -> float:
        return math.inf if self.best is None else self.problem.cost(self.best)

    @property
    def step(self) -> float:
        """Smallest improvement that counts: 1 when every objective value is an integer."""
        return 1.0 if self.milp.integral_objective else 1e-6 * max(1.0, abs(self.best_cost))

    def raise_bound(self, value: float) -> None:
        if self.milp.integral_objective and math.isfinite(value):
            value = math.ceil(value - 1e-6)
        self.bound = max(self.bound, value)

    @property
    def proven(self) -> bool:
        return self.best is not None and self.best_cost - self.bound <= 1e-6 * max(1.0, self.best_cost)

    def run(self, milp, share: float) -> tuple[str, float]:
        """Solve ``milp`` with ``share`` of the remaining time; keep a better assignment; return
        the back-end's status and its bound on ``milp`` (-inf when it has none)."""
        remaining = max(0.05, (self.deadline - time.perf_counter()) * share)
        hint = None if self.best is None else milp.encode(self.best)
        raw = self.module.solve(milp, time_limit=remaining, seed=self.seed, workers=self.workers, hint=hint)
        if raw.values is not None:
            found = milp.decode(raw.values)
            problems = self.problem.violations(found)
            if problems:
                raise RuntimeError(f"{self.module.__name__} returned an invalid assignment: {problems[0]}")
            if self.problem.cost(found) < self.best_cost:
                self.best = found
        if raw.status == "infeasible":
            return raw.status, math.inf
        if raw.status in ("optimal", "feasible"):
            return raw.status, raw.bound + milp.offset
        return raw.status, -math.inf

    def run_full(self) -> None:
        """The whole program with all the remaining time."""
        status, bound = self.run(self.milp, 1.0)
        self.infeasible = status == "infeasible"
        self.raise_bound(bound)

    def with_reduced_costs(self) -> None:
        """LP bound, then restricted programs (:mod:`streamsched.solvers.relaxation`) over the
        columns of reduced cost <= tau, tau doubling until it covers every column that could
        still improve the incumbent; that last program, solved, proves optimality."""
        # imported here: scipy.optimize would slow every HiGHS child process's start-up by ~1 s
        from streamsched.solvers.relaxation import lp_relaxation, restrict

        start = None if self.best is None else self.milp.encode(self.best)
        lp = lp_relaxation(self.milp, self.deadline - time.perf_counter(), start)
        if lp is None:  # out of time: keep the incumbent, bound 0
            return
        if lp.infeasible:
            self.infeasible, self.bound = True, math.inf
            return
        self.raise_bound(lp.value)
        tau = 1e-7  # first the LP-optimal face, then doubling thresholds up to what can still help
        while not self.proven and time.perf_counter() < self.deadline:
            needed = self.best_cost - self.step - lp.value  # columns a better solution may use
            threshold = min(tau, needed)
            keep = lp.reduced_cost <= threshold + 1e-9
            final = threshold >= needed or bool(keep.all())
            status, restricted_bound = self.run(restrict(self.milp, keep), 1.0 if final else self.STAGE_SHARE)
            if status == "infeasible" and keep.all():
                self.infeasible = True
                return
            outside = lp.value + threshold  # a solution using another column costs strictly more
            if self.milp.integral_objective:
                outside = math.floor(outside + 1e-9) + 1
            self.raise_bound(min(restricted_bound, outside))
            if final:
                return
            base = 1.0 if self.milp.integral_objective else max(needed / 8, 1e-6)
            tau = base if tau < base else 2 * tau


def _warm_start(problem: PlacementProblem, warm_start) -> np.ndarray | None:
    if warm_start is None:
        return greedy_assignment(problem)
    start = np.asarray(warm_start, dtype=np.int64).ravel()
    problems = problem.violations(start)
    if problems:
        raise InputError(f"warm_start: not a feasible assignment ({problems[0]})")
    return start


__all__ = ["BACKENDS", "FORMULATIONS", "STATUSES", "SolveResult", "SolverLimitError", "solve_placement"]
