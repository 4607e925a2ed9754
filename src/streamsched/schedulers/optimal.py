"""The optimal scheduler of Eskandari et al. [1]_ section 3 (eqs. 1-5) and [2]_ section 5.

``objective=contention`` instead minimises CAPSys's contention (the bottleneck node's compute,
state and network cost, lexicographically or weighted) with :mod:`streamsched.solvers.contention`,
under optional ceilings on each bottleneck and on the total network cost.
``objective=throughput`` maximises the sustainable throughput under back-pressure
(:mod:`streamsched.model.throughput`: the busiest CPU or link direction) with
:mod:`streamsched.solvers.throughput`; ties go to fewer moved tasks (replan), then fewer remote bytes.

Minimises inter-node traffic (eq. 3) subject to node capacity (eq. 4) and one node per task
(eq. 5), and the co-location rule where one is stated (per-operator caps per node,
``operator_caps``), with an exact solver (:func:`streamsched.solvers.solve_placement`). By default
the search stops by ``work_limit`` deterministic seconds (CP-SAT's measure), so a run gives the
same placement, bound and proof on any machine load; ``time_limit`` > 0 sets a wall-clock limit
for the whole call instead (theta of [1]_ Algorithm 1).
The placement's metadata carries ``status`` (optimal / feasible), the proven lower ``bound``
and the relative ``gap``. All tasks of a node share its first worker slot (no inter-worker
traffic inside a node).

Warm starts: the other registered cluster schedulers (I-Scheduler, METIS, R-Storm and T3
first, then the rest) run with the same seed and their default parameters in a forked child
process for at most ``WARM_START_SHARE`` of the time limit (without one: each to its end, at most
``WARM_START_CAP_S`` in all); each placement that arrives in time
is a candidate start, so ``optimal`` never returns a placement worse than one of them. A
scheduler that fails is skipped (``warm_starts`` in the metadata says what each one gave).

:meth:`OptimalScheduler.replan` re-plans from a current placement, minimising traffic plus a
cost per migrated task (Storm restarts what moves; Ghosh et al. [3]_ section 3 count migrations),
and reports how many tasks move.

References
----------
.. [1] Eskandari, L.; Mair, J.; Huang, Z.; Eyers, D. (2020) "I-Scheduler: Iterative scheduling for
   distributed stream processing systems", Future Generation Computer Systems,
   doi:10.1016/j.future.2020.11.011.
.. [2] Eskandari, L.; Mair, J.; Huang, Z.; Eyers, D. (2018) "T3-Scheduler: A topology and traffic
   aware two-level scheduler for stream processing systems in a heterogeneous cluster", Future
   Generation Computer Systems 89, pp. 617-632, doi:10.1016/j.future.2018.07.011.
.. [3] Ghosh, R.; Komma, S. P. R.; Simmhan, Y. (2018) "Adaptive energy-aware scheduling of dynamic
   event analytics across edge and cloud resources", 18th IEEE/ACM International Symposium on
   Cluster, Cloud and Grid Computing (CCGRID 2018); arXiv:1801.01087 [cs.DC].
"""

from __future__ import annotations

import itertools
import math
import multiprocessing
import time
from typing import Any

import numpy as np

from streamsched.errors import InfeasibleError, InputError, ParameterError
from streamsched.metrics import cut_traffic, inter_node_traffic
from streamsched.model.cluster import Cluster
from streamsched.model.colocation import CoLocationRule
from streamsched.model.placement import NO_WORKER, Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.native_output import captured_native_output
from streamsched.schedulers import register
from streamsched.schedulers.base import Param, Scheduler, check_fits, keep_colocation_rule
from streamsched.schedulers.limits import WORK_LIMIT_MAX
from streamsched.solvers import BACKENDS, DEFAULT_MEMORY_LIMIT_MB, FORMULATIONS, solve_placement

#: Share of ``time_limit`` the warm-start schedulers may use, and the ones tried first.
WARM_START_SHARE = 0.3
#: Without ``time_limit``, the warm starts all run to their end (deterministic) unless together
#: they take longer than this (a safety for very large graphs: wall clock).
WARM_START_CAP_S = 120.0
FIRST_WARM_STARTS = ("i-scheduler", "metis", "r-storm", "t3")
#: ``contention`` values: every order of the three dimensions (lexicographic), or a weighted sum,
#: or the total network cost.
CONTENTION_OBJECTIVES = tuple(",".join(p) for p in itertools.permutations(("compute", "state", "network"))) + (
    "weighted", "network-total")


@register
class OptimalScheduler(Scheduler):
    name = "optimal"
    summary = "exact minimum inter-node traffic (MILP: CP-SAT, HiGHS or CPLEX) with proven bound and gap"
    objective = "traffic"
    exact = True
    params = (
        Param("time_limit", float, 0.0, "wall-clock seconds for the whole call (theta; 0 = none: work_limit "
              "alone stops the search, the same result on any machine load)", low=0.0,
              high=WORK_LIMIT_MAX),
        Param("work_limit", float, 10.0, "deterministic seconds (CP-SAT's measure) of search when time_limit "
              "is 0", low=0.01,
              high=WORK_LIMIT_MAX),
        Param("backend", str, "cp-sat", "solver", choices=tuple(BACKENDS)),
        Param("workers", int, 1, "solver threads (1 keeps runs reproducible)", low=1, high=64),
        Param("formulation", str, "auto", "integer program", choices=FORMULATIONS),
        Param("respect_memory", bool, False, "also keep task memory within node RAM"),
        Param("tasks_per_slot", int, 0, "at most slots x this many tasks per node (0 = no limit)", low=0),
        Param("memory_limit_mb", float, DEFAULT_MEMORY_LIMIT_MB,
              "above this estimated model size, a smaller model or local search alone", low=1.0),
        Param("warm_starts", bool, True, "start from the other cluster schedulers' placements"),
        Param("objective", str, "traffic", "traffic, contention (CAPSys's bottleneck compute, state, network) "
              "or throughput (busiest CPU or link direction, docs/model.md)",
              choices=("traffic", "contention", "throughput")),
        Param("net_cpu_per_record", float, 0.0, "throughput: cores per remote record/s at each end (network stack)",
              low=0.0, high=1.0),
        Param("contention", str, "compute,state,network", "contention objective: an order of dimensions "
              "(lexicographic), weighted or network-total", choices=CONTENTION_OBJECTIVES),
        Param("contention_weights", str, "1,1,1", "weighted: weights of compute,state,network (each over CAPS's span)"),
        Param("compute_ceiling", float, -1.0, "contention: largest node compute cost allowed (-1: none)", low=-1.0),
        Param("state_ceiling", float, -1.0, "contention: largest node state cost allowed (-1: none)", low=-1.0),
        Param("network_ceiling", float, -1.0, "contention: largest node network cost allowed (-1: none)", low=-1.0),
        Param("traffic_ceiling", float, -1.0, "contention: largest total network cost, summed over nodes (-1: none)",
              low=-1.0),
    )
    randomised = True

    def place(self, graph: TaskGraph, cluster: Cluster, params: dict[str, Any], seed: int) -> Placement:
        if params["objective"] == "contention":
            return _contention(graph, cluster, params, seed)
        if params["objective"] == "throughput":
            return _throughput(graph, cluster, params, seed)
        return self._solve(graph, cluster, params, seed)

    replan_options = (Param("migration_cost", float, 1.0, "cost per moved task, in rate units", low=0.0),)

    def replan(self, graph: TaskGraph, cluster: Cluster, current: Placement, seed: int = 0,
               **options: Any) -> Placement:
        """The exact form of :meth:`Scheduler.replan`: minimise traffic + ``migration_cost`` x
        moved tasks (instead of the threshold rule).

        ``current`` gives each task's node now (``node_of`` -1 for a new task); the metadata
        adds ``moved`` and ``migration_cost``. Pinned tasks or excluded nodes: ``schedule_with``.
        """
        settings = self.replan_settings(options)
        if current.n_tasks != graph.n_tasks:
            raise InputError(f"current placement has {current.n_tasks} tasks, graph {graph.name!r} has {graph.n_tasks}")
        return self.schedule_with(graph, cluster, seed, current=np.asarray(current.node_of),
                                  migration_cost=settings["migration_cost"])

    def schedule_with(self, graph: TaskGraph, cluster: Cluster, seed: int = 0, **constraints) -> Placement:
        """:meth:`schedule` with solver constraints: ``pinned`` ({task index: node index}),
        ``excluded`` ((task, node) pairs), ``current`` + ``migration_cost``."""
        params = self.resolved_params()
        check_fits(graph, cluster)
        started = time.perf_counter()
        placement = keep_colocation_rule(graph, cluster, self._solve(graph, cluster, params, int(seed), **constraints),
                                         strict=False)
        return placement.with_metadata(scheduler=self.name, params=params, seed=int(seed),
                                       wall_time_s=time.perf_counter() - started,
                                       cost=inter_node_traffic(graph, placement), **dict(placement.metadata))

    def _solve(self, graph: TaskGraph, cluster: Cluster, params: dict[str, Any], seed: int, **constraints) -> Placement:
        if params["objective"] == "throughput":
            return _throughput(graph, cluster, params, seed, **constraints)
        started = time.perf_counter()
        starts: list[np.ndarray] = []
        report: dict[str, Any] = {}
        if params["warm_starts"] and "current" not in constraints and not constraints.get("pinned") \
                and constraints.get("excluded") is None:
            window = params["time_limit"] * WARM_START_SHARE if params["time_limit"] else WARM_START_CAP_S
            starts, report = heuristic_placements(graph, cluster, seed, window)
        if params["respect_memory"]:
            constraints.update(memory=graph.memory_mb, node_memory=[n.ram_mb for n in cluster.nodes])
        if params["tasks_per_slot"]:
            constraints["max_items"] = cluster.slots * params["tasks_per_slot"]
        rule = CoLocationRule.of(graph, cluster)
        if rule is not None:  # the whole rule with one slot sharing group; per-operator caps otherwise
            constraints["operator_caps"] = (graph.task_operator, rule.operator_node_caps())
        if params["time_limit"]:
            remaining = max(params["time_limit"] - (time.perf_counter() - started), 0.01)
            work = params["time_limit"] * (1 - WARM_START_SHARE)
        else:
            remaining, work = None, params["work_limit"]
        result = solve_placement(graph.load, graph.src, graph.dst, graph.rate, cluster.capacity,
                                 time_limit=remaining, backend=params["backend"], seed=seed,
                                 workers=params["workers"], formulation=params["formulation"],
                                 memory_limit_mb=params["memory_limit_mb"], groups=graph.task_operator,
                                 warm_start=starts or None, work_limit=work,
                                 **constraints)
        if result.status == "infeasible":
            raise InfeasibleError(f"optimal: graph {graph.name!r} cannot be placed on cluster {cluster.name!r} "
                                  f"under its capacity (and other) constraints")
        if result.status == "unknown":
            limit = f"time_limit={params['time_limit']:g} s" if params["time_limit"] else \
                f"work_limit={params['work_limit']:g}"
            raise InfeasibleError(f"optimal: no placement of {graph.name!r} found within {limit} (none may exist)")
        node_of = result.assignment
        worker_of = np.where(cluster.slots[node_of] > 0, 0, NO_WORKER)
        metadata = {"status": result.status, "bound": result.bound, "gap": result.gap,
                    "backend": result.backend, "formulation": result.formulation,
                    "solver_time_s": result.wall_time_s, "bound_source": result.bound_source,
                    "start_cost": result.start_objective}
        if report:
            metadata["warm_starts"] = report
        if result.note:
            metadata["note"] = result.note
        if "current" in constraints:
            # bound and gap then refer to this objective: traffic + migration_cost x moved
            metadata.update(moved=result.moved, migration_cost=constraints.get("migration_cost", 0.0),
                            objective=result.objective)
        return Placement.build(node_of, worker_of, metadata)


def _contention(graph: TaskGraph, cluster: Cluster, params: dict[str, Any], seed: int) -> Placement:
    """``objective=contention``: :func:`streamsched.schedulers.caps.exact_contention_placement`."""
    from streamsched.schedulers.caps import exact_contention_placement

    try:
        weights = tuple(float(w) for w in params["contention_weights"].split(","))
    except ValueError:
        weights = ()
    if len(weights) != 3 or not all(math.isfinite(w) and w >= 0 for w in weights):
        raise ParameterError(f"optimal.params.contention_weights: {params['contention_weights']!r} is not three "
                             f"numbers >= 0 separated by commas")
    ceilings = {d: params[f"{d}_ceiling"] for d in ("compute", "state", "network") if params[f"{d}_ceiling"] >= 0}
    traffic = params["traffic_ceiling"] if params["traffic_ceiling"] >= 0 else None
    return exact_contention_placement(graph, cluster, objective=params["contention"], weights=weights,
                                      ceilings=ceilings, network_ceiling=traffic,
                                      time_limit=params["time_limit"] or None,
                                      work_limit=None if params["time_limit"] else params["work_limit"], seed=seed, workers=params["workers"],
                                      warm_start=params["warm_starts"])


def _throughput(graph: TaskGraph, cluster: Cluster, params: dict[str, Any], seed: int,
                current: np.ndarray | None = None, migration_cost: float = 0.0, **constraints) -> Placement:
    """``objective=throughput``: :func:`streamsched.solvers.throughput.solve_throughput`; with
    ``current`` (replan) moves break ties between plans of equal throughput (``migration_cost`` unused)."""
    from streamsched.model.throughput import predict_throughput
    from streamsched.solvers.throughput import TIE_TOLERANCE, solve_throughput

    if constraints:
        raise ParameterError(f"optimal: objective=throughput takes no {', '.join(sorted(constraints))}")
    result = solve_throughput(
        graph, cluster, net_cpu_per_record=params["net_cpu_per_record"], current=current,
        max_items=cluster.slots * params["tasks_per_slot"] if params["tasks_per_slot"] else None,
        memory=graph.memory_mb if params["respect_memory"] else None,
        node_memory=np.array([n.ram_mb for n in cluster.nodes]) if params["respect_memory"] else None,
        time_limit=params["time_limit"] or None, work_limit=None if params["time_limit"] else params["work_limit"],
        seed=seed, workers=params["workers"])
    if result.node_of is None:
        limit = f"time_limit={params['time_limit']:g} s" if params["time_limit"] else f"work_limit={params['work_limit']:g}"
        raise InfeasibleError(f"optimal: no placement of {graph.name!r} on {cluster.name!r} keeps the slot rule"
                              + ("" if result.status == "infeasible" else f" found within {limit}"))
    predicted = predict_throughput(graph, cluster, result.node_of, params["net_cpu_per_record"])
    unbounded = lambda value: value if math.isfinite(value) else None  # noqa: E731 - JSON has no inf
    metadata = {"status": result.status, "objective": "throughput", "bound": result.bound, "gap": result.gap,
                "bound_source": "cp-sat (peak utilisation U; throughput = source rate / U)",
                "peak_utilisation": result.peak, "predicted_throughput": unbounded(predicted.throughput),
                "predicted_bottleneck": predicted.bottleneck,
                "throughput_bound": unbounded(predicted.source_rate / result.bound if result.bound > 0 else math.inf),
                "remote_bytes": result.remote_bytes, "tie_tolerance": TIE_TOLERANCE, "stages": result.stages,
                "solver_time_s": result.wall_time_s}
    if current is not None:
        metadata["moved"] = result.moved
    node_of = result.node_of
    return Placement.build(node_of, np.where(cluster.slots[node_of] > 0, 0, NO_WORKER), metadata)


def heuristic_placements(graph: TaskGraph, cluster: Cluster, seed: int,
                         seconds: float) -> tuple[list[np.ndarray], dict[str, Any]]:
    """Node per task of every other cluster scheduler that finishes within ``seconds``.

    They run one after another in a forked child (so that one running long is stopped at the
    deadline), which sends each placement as it is found. Returns the placements and, per
    scheduler, its cost or why it gave none.
    """
    from streamsched.schedulers import available, scheduler_class

    names = [name for name in available() if name != OptimalScheduler.name
             and scheduler_class(name).family == "cluster" and not scheduler_class(name).exact
             and not scheduler_class(name).needs_edge_nodes and scheduler_class(name).objective != "contention"]
    names = [n for n in FIRST_WARM_STARTS if n in names] + [n for n in names if n not in FIRST_WARM_STARTS]
    report: dict[str, Any] = {name: "not run (time)" for name in names}
    found: list[np.ndarray] = []
    _import_heavy_libraries()  # once per process, so that a first call's imports do not use the share
    deadline = time.perf_counter() + seconds
    if "fork" not in multiprocessing.get_all_start_methods():
        for name in names:  # no fork (Windows): in this process, stopping when time is up
            if time.perf_counter() >= deadline:
                break
            outcome = _run_one(name, graph, cluster, seed)
            _record(outcome, graph, report, found)
        return found, report
    receiver, sender = multiprocessing.get_context("fork").Pipe(duplex=False)
    child = multiprocessing.get_context("fork").Process(target=_run_all, args=(names, graph, cluster, seed, sender),
                                                        daemon=True)
    child.start()
    sender.close()
    try:
        while True:
            left = deadline - time.perf_counter()
            if left <= 0 or not receiver.poll(left):
                break
            try:
                outcome = receiver.recv()
            except EOFError:
                break
            if outcome is None:
                break
            _record(outcome, graph, report, found)
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        receiver.close()
    return found, report


def _import_heavy_libraries() -> None:
    """Import what the warm-start schedulers load lazily (OR-Tools, scipy.optimize, METIS) in
    this process, before forking: the child inherits them, and every run sees the same share."""
    import importlib
    import importlib.util

    for module in ("streamsched.solvers.cpsat", "streamsched.solvers.relaxation", "pymetis"):
        if importlib.util.find_spec(module) is not None:
            importlib.import_module(module)
    from streamsched.schedulers.i_scheduler import calibration

    calibration()  # I-Scheduler's table, read once (cached)


def _run_all(names, graph, cluster, seed, sender) -> None:
    with captured_native_output("warm-start schedulers"):
        for name in names:
            sender.send(_run_one(name, graph, cluster, seed))
        sender.send(None)


def _run_one(name: str, graph: TaskGraph, cluster: Cluster, seed: int) -> tuple[str, Any]:
    from streamsched.schedulers import get_scheduler

    try:
        return name, np.asarray(get_scheduler(name).schedule(graph, cluster, seed=seed).node_of)
    except Exception as exc:  # noqa: BLE001 - a failing warm start is skipped, its reason kept
        return name, f"failed: {str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}"


def _record(outcome: tuple[str, Any], graph: TaskGraph, report: dict[str, Any], found: list[np.ndarray]) -> None:
    name, value = outcome
    if isinstance(value, str):
        report[name] = value
        return
    report[name] = cut_traffic(graph.src, graph.dst, graph.rate, value)
    found.append(value)
