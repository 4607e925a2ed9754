"""solve_placement: the phases of :mod:`streamsched.solvers` (module docstring there) and their
result."""

from __future__ import annotations

import importlib
import math
import time
from dataclasses import dataclass

import numpy as np

from streamsched.errors import InputError
from streamsched.solvers.bounds import grouped_configuration_bound, neighbourhood_bound, structural_groups
from streamsched.solvers.formulations import (MAX_CONFIGURATIONS, ORDERED_ITEMS, assignment_model, configuration_model,
                                              cut_model, cut_model_size, find_symmetry)
from streamsched.solvers.local_search import LocalSearch, adjacency_matrix
from streamsched.solvers.neighbourhoods import NeighbourhoodSearch
from streamsched.solvers.problem import PlacementProblem, build_problem, greedy_assignment

BACKENDS = {"cp-sat": "cpsat", "highs": "highs", "cplex": "cplex"}
FORMULATIONS = ("auto", "configurations", "cut", "assignment")
STATUSES = ("optimal", "feasible", "infeasible", "unknown")
_CONSTRAINTS = ("memory", "node_memory", "max_items", "pinned", "excluded", "current", "migration_cost",
                "operator_caps")


class UnsoundBoundError(RuntimeError):
    """A lower bound above a feasible assignment's cost: the argument behind it is wrong, and a
    proof built on it would be false. Never clipped away; the message names the bound's source."""


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
    start_objective: float = math.inf  # best start (warm starts, greedy) before any search
    bound_source: str = ""  # which argument gave ``bound`` (named in every result)
    note: str = ""  # why a smaller model (or none) was used, when it was

    @property
    def gap(self) -> float:
        """Relative gap (objective - bound) / objective; 0 when proven, inf without a solution."""
        if self.status == "optimal":
            return 0.0
        if not math.isfinite(self.objective):
            return math.inf
        return (self.objective - self.bound) / self.objective if self.objective > 0 else 0.0


#: Memory the process may use for the models, by default (the machine has 24 GiB).
DEFAULT_MEMORY_LIMIT_MB = 4096.0
#: Conservative cost of one non-zero of an integer program in CP-SAT (Python objects, proto,
#: solver copies), measured on random DAGs at 0.5-0.8 kB and 0.5-2.6 us per non-zero.
BYTES_PER_NONZERO = 1500.0
SECONDS_PER_NONZERO = 5e-6
#: Shares of the work budget (``work_limit``): neighbourhood search before the whole model (the
#: assignment model only; the cut model has this share too), the whole model, the grouped lower
#: bound; neighbourhood search again has the rest. Local search
#: on the start stops when no move helps (or after LOCAL_SHARE of the wall time).
FIRST_NEIGHBOURHOOD_SHARE, MODEL_SHARE, BOUND_SHARE = 0.25, 0.4, 0.15
LOCAL_SHARE = 0.1
#: The whole model may take at most this share of the remaining time to build.
BUILD_SHARE = 0.3
#: With a start to begin its column generation from, the configuration model may have up to
#: this many columns (instead of formulations.MAX_CONFIGURATIONS) when its estimated build time
#: (at most CONFIGURATION_SHARE of the time left: an enumeration that overflows is time lost)
#: and memory fit: on measured graphs every task is its own class and a configuration is a
#: subset of tasks; the measured 26-32-task micro-benchmarks have 87k-361k of them (built in
#: at most 1.8 s, 0.6 GB), and the configuration LP then proves them optimal in seconds.
MAX_LARGE_CONFIGURATIONS = 1_000_000
CONFIGURATION_SHARE = 0.1
SECONDS_PER_CONFIGURATION = 6e-6
BYTES_PER_CONFIGURATION_CLASS = 40.0
#: Building a restricted configuration program costs about this per column (CP-SAT's Python
#: model building: 67,829 columns took 7.4 s on the loaded 2-core machine), so a program that
#: could not even be built in its share of the time left is not started.
SECONDS_PER_RESTRICTED_COLUMN = 1e-4


#: Deterministic work (CP-SAT deterministic seconds) of a call that sets no limit.
DEFAULT_WORK_LIMIT = 10.0


def solve_placement(loads, src, dst, rate, capacity, *, time_limit: float | None = None, backend: str = "cp-sat",
                    warm_start=None, seed: int = 0, workers: int = 2, formulation: str = "auto",
                    memory_limit_mb: float = DEFAULT_MEMORY_LIMIT_MB, groups=None, work_limit: float | None = None,
                    **constraints) -> SolveResult:
    """Minimise inter-node traffic (eq. 3) s.t. capacity (eq. 4) and one node per item (eq. 5).

    Parameters
    ----------
    loads, capacity : item loads and node capacities (same units).
    src, dst, rate : directed edges between items and their weights (pairs are summed).
    time_limit : wall-clock seconds for the whole call, model building included (theta of
        [1]_ Algorithm 1), only when given: phases then also check the clock and the best
        assignment so far is returned. Default: no wall clock, the work budget alone stops
        the search, so that a run returns the same assignment and proof on any machine load.
    work_limit : the budget the phases share, in CP-SAT deterministic seconds (default
        ``time_limit``, else :data:`DEFAULT_WORK_LIMIT`). HiGHS and CPLEX have no deterministic
        measure: without ``time_limit`` they get ``work_limit`` wall-clock seconds.
    warm_start : a feasible assignment to start from, or a list of candidate assignments (the
        infeasible ones are skipped); a greedy one is always tried as well.
    formulation : ``configurations``, ``cut``, ``assignment`` or ``auto`` (the first when it is
        small, else ``cut``; :mod:`.formulations`).
    memory_limit_mb : the whole model is built only when its estimated size stays below this;
        otherwise local and neighbourhood search alone improve the start (``note`` says so).
    groups : group per item for the grouped lower bound (e.g. the task's operator); default:
        items with the same neighbours.
    constraints : ``memory`` + ``node_memory``, ``max_items`` (per node), ``pinned``
        ({item: node}), ``excluded`` ((item, node) pairs or items x nodes bool matrix),
        ``current`` (node per item, -1 = new) + ``migration_cost`` (per moved item),
        ``operator_caps`` ((group per item, groups x nodes caps): at most so many items of a
        group per node, the co-location rule).

    Phases: best start (warm starts, greedy), local search (:mod:`.local_search`); then the
    configuration model with reduced-cost fixing when it is small (exact twin classes), else
    the plain cut model hinted with the incumbent (``assignment``: neighbourhood search
    (:mod:`.neighbourhoods`) first, then the assignment model), when its estimated size fits
    time and memory; the grouped lower bound (:mod:`.bounds`) and neighbourhood search until
    the work budget (or deadline) is spent.
    """
    unknown = sorted(set(constraints) - set(_CONSTRAINTS))
    if unknown:
        raise InputError(f"solve_placement: unknown constraint {unknown[0]!r} (known: {', '.join(_CONSTRAINTS)})")
    if backend not in BACKENDS:
        raise InputError(f"backend: {backend!r} is not one of {', '.join(BACKENDS)}")
    if formulation not in FORMULATIONS:
        raise InputError(f"formulation: {formulation!r} is not one of {', '.join(FORMULATIONS)}")
    if time_limit is not None and not time_limit > 0:
        raise InputError(f"time_limit: must be > 0, got {time_limit!r}")
    work = float(work_limit if work_limit is not None else time_limit if time_limit is not None
                 else DEFAULT_WORK_LIMIT)
    if not work > 0:
        raise InputError(f"work_limit: must be > 0, got {work_limit!r}")
    if time_limit is None and backend != "cp-sat":
        time_limit = work
    if not memory_limit_mb > 0:
        raise InputError(f"memory_limit_mb: must be > 0, got {memory_limit_mb!r}")
    started = time.perf_counter()
    deadline = math.inf if time_limit is None else started + time_limit
    module = importlib.import_module(f"streamsched.solvers.{BACKENDS[backend]}")
    importlib.import_module("streamsched.solvers.relaxation")  # scipy.optimize: ~1 s on a first call
    problem = build_problem(loads, src, dst, rate, capacity, **constraints)
    n = problem.n_items
    done = lambda *args, **kw: SolveResult(*args, wall_time_s=time.perf_counter() - started, backend=backend, **kw)
    if n == 0:
        return done(np.zeros(0, dtype=np.int64), 0.0, 0.0, "optimal", bound_source="no items")
    if problem.loads.sum() > problem.capacity.sum() * (1 + 1e-9) + 1e-9:
        return done(np.full(n, -1, dtype=np.int64), math.inf, math.inf, "infeasible",
                    bound_source="total load above total capacity")
    adjacency = adjacency_matrix(problem)
    start = _best_start(problem, warm_start)
    start_objective = math.inf if start is None else problem.cost(start)
    if start is not None:
        start = LocalSearch(problem, adjacency).improve(start, _share(deadline, LOCAL_SHARE))
    symmetry = find_symmetry(problem)
    milp, note = None, ""
    if formulation in ("auto", "configurations"):
        milp = configuration_model(problem, symmetry,
                                   configuration_limit(symmetry, start, deadline, memory_limit_mb))
    if milp is None and formulation == "configurations":
        raise InputError("formulation: the configuration model is too large here; use 'assignment' or 'auto'")
    search = _Search(problem, None, module, seed, workers, deadline, start, work)
    if milp is not None:
        search.milp = milp
        search.with_reduced_costs()
        if not search.proven and not search.infeasible and milp.n_vars > MAX_CONFIGURATIONS:
            # a large model the LP or its restricted programs did not finish: the grouped bound
            # (cheap) may still be the better bound
            search.grouped_bound(adjacency, groups, BOUND_SHARE * work)
        if not search.proven and not search.infeasible:
            search.improve(adjacency, work)
    else:
        # Each phase also ends by its share of the wall time left now: the work budget alone
        # (CP-SAT deterministic seconds) ran 5x longer than its share on the loaded machine and
        # left the whole model and the bound no time at all.
        window_start, window = time.perf_counter(), max(0.0, deadline - time.perf_counter())
        phase_end = lambda share: window_start + share * window
        # The plain cut model runs first (it often proves the optimum outright: the demo graph,
        # docs/benchmarks.md); the papers' assignment model only after a neighbourhood search
        # has improved the start it is hinted with.
        plain = formulation != "assignment"
        spent = 0.0
        if not plain:
            search.improve(adjacency, FIRST_NEIGHBOURHOOD_SHARE * work, phase_end(FIRST_NEIGHBOURHOOD_SHARE))
            spent = FIRST_NEIGHBOURHOOD_SHARE
        nonzeros = cut_model_size(problem) if plain else assignment_model_size(problem)
        kind = "cut" if plain else "assignment"
        megabytes = nonzeros * BYTES_PER_NONZERO / 2**20
        build_seconds = nonzeros * SECONDS_PER_NONZERO
        if megabytes > memory_limit_mb:
            note = (f"{kind} model estimated at {megabytes:,.0f} MB > memory_limit_mb={memory_limit_mb:g}: "
                    f"local and neighbourhood search alone")
        elif build_seconds > BUILD_SHARE * min(work, deadline - time.perf_counter()):
            note = (f"{kind} model would take about {build_seconds:.1f} s to build, more than "
                    f"{BUILD_SHARE:.0%} of the time (or work) left: local and neighbourhood search alone")
        elif not search.proven:
            search.milp = cut_model(problem) if plain else assignment_model(problem, symmetry)
            share = MODEL_SHARE + (FIRST_NEIGHBOURHOOD_SHARE if plain else 0.0)
            search.run_full(share * work, phase_end(spent + share))
            spent += share
        if not search.proven and not search.infeasible:
            search.grouped_bound(adjacency, groups, BOUND_SHARE * work, phase_end(spent + BOUND_SHARE))
            spent += BOUND_SHARE
        if not search.proven and not search.infeasible:
            search.improve(adjacency, (1 - spent) * work)
    name = milp.name if milp is not None else search.milp.name if search.milp is not None else "neighbourhoods"
    search.neighbourhood_bound(adjacency)
    if search.infeasible:
        return done(np.full(n, -1, dtype=np.int64), math.inf, math.inf, "infeasible", formulation=name, note=note,
                    bound_source=search.bound_source)
    if search.best is None:
        return done(np.full(n, -1, dtype=np.int64), math.inf, search.bound, "unknown", formulation=name, note=note,
                    bound_source=search.bound_source)
    objective = problem.cost(search.best)
    search.check_bound()
    status = "optimal" if search.proven else "feasible"
    return done(search.best, objective, search.bound, status, formulation=name, moved=problem.moved(search.best),
                start_objective=start_objective, bound_source=search.bound_source, note=note)


def configuration_limit(symmetry, start, deadline: float, memory_limit_mb: float) -> int:
    """Most columns the configuration model may have (:data:`MAX_LARGE_CONFIGURATIONS`)."""
    if start is None:  # the LP would be one large solve instead of a column generation
        return MAX_CONFIGURATIONS
    by_time = CONFIGURATION_SHARE * max(0.0, deadline - time.perf_counter()) / SECONDS_PER_CONFIGURATION
    by_memory = memory_limit_mb * 2**20 / (BYTES_PER_CONFIGURATION_CLASS * max(1, len(symmetry.class_items)))
    return int(max(MAX_CONFIGURATIONS, min(MAX_LARGE_CONFIGURATIONS, by_time, by_memory)))


def _share(deadline: float, share: float) -> float:
    """The moment ``share`` of the time left until ``deadline`` has passed."""
    now = time.perf_counter()
    return now + max(0.0, deadline - now) * share


def assignment_model_size(problem: PlacementProblem) -> int:
    """Estimated non-zeros of :func:`assignment_model` without building it (counted in chunks:
    no items x nodes or pairs x nodes array is made): per (item, node) variable its assignment,
    capacity (memory, count) and twin entries; per (pair, node) variable two linking rows and
    its neighbourhood cut; the symmetry-breaking rows between identical nodes."""
    n_x = int(problem.allowed.sum())
    n_y = 0
    for lo in range(0, problem.pair_a.size, 4096):
        n_y += int((problem.allowed[problem.pair_a[lo:lo + 4096]] & problem.allowed[problem.pair_b[lo:lo + 4096]]).sum())
    per_x = 4 + (problem.memory is not None) + (problem.max_items is not None) + (problem.group_cap is not None)
    ordered = min(ORDERED_ITEMS, problem.n_items)
    return per_x * n_x + 6 * n_y + problem.n_nodes * (ordered * (ordered + 3) // 2)


class _Search:
    """Incumbent, global bound and remaining time of one :func:`solve_placement` call."""

    #: Share of the remaining time a restricted program may use when it cannot be the last one.
    STAGE_SHARE = 0.5

    def __init__(self, problem: PlacementProblem, milp, module, seed: int, workers: int,
                 deadline: float, start: np.ndarray | None, work: float):
        self.problem, self.milp, self.seed, self.workers, self.deadline = problem, milp, seed, workers, deadline
        self.work_left = work  # deterministic seconds the whole programs may still use
        self.module = module
        self.best = start
        self.bound = 0.0  # traffic and migration costs are never negative
        self.bound_source = "non-negative costs"
        self.infeasible = False
        weights = np.r_[problem.weight, problem.migration_cost]
        self.integral = bool(np.all(np.abs(weights - np.round(weights)) < 1e-9))

    @property
    def best_cost(self) -> float:
        return math.inf if self.best is None else self.problem.cost(self.best)

    @property
    def step(self) -> float:
        """Smallest improvement that counts: 1 when every objective value is an integer, else
        half the relative tolerance of :attr:`proven` (with the full tolerance, a search that
        covered every column that could still help ended with a gap of exactly the tolerance
        and, by rounding, was not proven: measured graphs ran to the time limit)."""
        return 1.0 if self.integral else 0.5e-6 * max(1.0, abs(self.best_cost))

    def raise_bound(self, value: float, source: str) -> None:
        """Keep ``value`` (from ``source``) when it beats the bound; never clipped to the
        incumbent: :meth:`check_bound` raises when it passes it."""
        if self.integral and math.isfinite(value):
            value = math.ceil(value - 1e-6)  # every objective value is an integer
        if value > self.bound:
            self.bound, self.bound_source = value, source
            self.check_bound()

    def check_bound(self) -> None:
        """:class:`UnsoundBoundError` when the bound exceeds the incumbent's cost by more than
        the tolerance of :attr:`proven` (float noise of an LP stays inside it)."""
        if self.best is not None and self.bound - self.best_cost > self.tolerance:
            raise UnsoundBoundError(f"lower bound {self.bound!r} from {self.bound_source} exceeds the cost "
                                    f"{self.best_cost!r} of a feasible assignment")

    @property
    def tolerance(self) -> float:
        return 1e-6 * max(1.0, abs(self.best_cost))

    @property
    def proven(self) -> bool:
        return self.best is not None and self.best_cost - self.bound <= self.tolerance

    def offer(self, assignment: np.ndarray) -> None:
        """Keep ``assignment`` if it is feasible and cheaper than the incumbent."""
        problems = self.problem.violations(assignment)
        if problems:
            raise RuntimeError(f"{self.module.__name__} returned an invalid assignment: {problems[0]}")
        if self.problem.cost(assignment) < self.best_cost:
            self.best = assignment
            self.check_bound()

    def run(self, milp, share: float, work: float | None = None) -> tuple[str, float]:
        """Solve ``milp`` with ``share`` of the remaining time (and ``work`` deterministic
        seconds); keep a better assignment; return the back-end's status and its bound on
        ``milp`` (-inf when it has none)."""
        remaining = max(0.05, (self.deadline - time.perf_counter()) * share)
        hint = None if self.best is None else milp.encode(self.best)
        work = max(0.001, self.work_left if work is None else min(work, self.work_left))
        raw = self.module.solve(milp, time_limit=remaining, seed=self.seed, workers=self.workers, hint=hint,
                                work_limit=work)
        self.work_left -= raw.work
        if raw.values is not None:
            self.offer(milp.decode(raw.values))
        if raw.status == "infeasible":
            return raw.status, math.inf
        if raw.status in ("optimal", "feasible"):
            return raw.status, raw.bound + milp.offset
        return raw.status, -math.inf

    def run_full(self, work: float, until: float | None = None) -> None:
        """The whole program with ``work`` deterministic seconds, until ``until`` (default: the
        deadline)."""
        left = self.deadline - time.perf_counter()
        share = 1.0 if until is None or left <= 0 else min(1.0, max(0.0, until - time.perf_counter()) / left)
        status, bound = self.run(self.milp, share, work)
        self.infeasible = status == "infeasible"
        self.raise_bound(bound, f"{self.milp.name} model ({self.module.__name__.rsplit('.', 1)[-1]})")

    def improve(self, adjacency, work: float, until: float | None = None) -> None:
        """Neighbourhood search (CP-SAT on a few nodes) for ``work``, then local search, until
        ``until`` (default: the deadline)."""
        until = self.deadline if until is None else min(until, self.deadline)
        if self.best is None or self.proven or time.perf_counter() >= until:
            return
        from streamsched.solvers import cpsat

        search = NeighbourhoodSearch(self.problem, adjacency, cpsat, self.seed)
        found = search.improve(self.best, until, work)
        self.offer(LocalSearch(self.problem, adjacency).improve(found, until))

    def grouped_bound(self, adjacency, groups, work: float, until: float | None = None) -> None:
        """The grouped configuration bound (:mod:`streamsched.solvers.bounds`)."""
        # the wall clock caps the bound's LP and tables at ``work`` seconds only when a deadline is set
        cap = time.perf_counter() + work if math.isfinite(self.deadline) else math.inf
        until = min(self.deadline, cap, math.inf if until is None else until)
        if time.perf_counter() >= until:
            return
        if groups is None:
            groups = structural_groups(adjacency)
        elif np.asarray(groups).shape != (self.problem.n_items,):
            raise InputError(f"groups: expected {self.problem.n_items} group labels, got {np.shape(groups)}")
        from streamsched.solvers import cpsat

        value = grouped_configuration_bound(self.problem, adjacency, groups, self.best, cpsat, until, self.seed,
                                            work)
        if value is not None:
            self.raise_bound(value, "grouped configurations")

    def neighbourhood_bound(self, adjacency) -> None:
        self.raise_bound(neighbourhood_bound(self.problem, adjacency), "per-item knapsack")

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
        self.raise_bound(lp.value, "configuration LP")
        tau = 1e-7  # first the LP-optimal face, then doubling thresholds up to what can still help
        while not self.proven and time.perf_counter() < self.deadline and self.work_left > 0:
            needed = self.best_cost - self.step - lp.value  # columns a better solution may use
            threshold = min(tau, needed)
            keep = lp.reduced_cost <= threshold + 1e-9
            final = threshold >= needed or bool(keep.all())
            share = 1.0 if final else self.STAGE_SHARE
            if int(keep.sum()) * SECONDS_PER_RESTRICTED_COLUMN > share * (self.deadline - time.perf_counter()):
                return  # building that program alone would overrun: the search phases take the rest
            status, restricted_bound = self.run(restrict(self.milp, keep), share)
            if status == "infeasible" and keep.all():
                self.infeasible = True
                return
            outside = lp.value + threshold  # a solution using another column costs strictly more
            if self.milp.integral_objective:
                outside = math.floor(outside + 1e-9) + 1
            self.raise_bound(min(restricted_bound, outside), "configuration model (reduced-cost fixing)")
            if final:
                return
            base = 1.0 if self.milp.integral_objective else max(needed / 8, 1e-6)
            tau = base if tau < base else 2 * tau


def _best_start(problem: PlacementProblem, warm_start) -> np.ndarray | None:
    """The cheapest of the greedy assignment and the warm start(s); a single warm start must be
    feasible, in a list the infeasible ones are skipped."""
    candidates = [greedy_assignment(problem)]
    if warm_start is not None:
        given = np.asarray(warm_start, dtype=np.int64)
        if given.ndim == 1:
            problems = problem.violations(given)
            if problems:
                raise InputError(f"warm_start: not a feasible assignment ({problems[0]})")
            candidates.append(given)
        else:
            candidates += [row for row in given if not problem.violations(row)]
    feasible = [c for c in candidates if c is not None]
    return min(feasible, key=problem.cost).copy() if feasible else None

