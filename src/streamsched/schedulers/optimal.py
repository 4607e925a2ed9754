"""The optimal scheduler of i-scheduler.txt section 3 (eqs. 1-5) and t3-scheduler.txt section 5.

Minimises inter-node traffic (eq. 3) subject to node capacity (eq. 4) and one node per task
(eq. 5) with an exact solver (:func:`streamsched.solvers.solve_placement`), within
``time_limit`` seconds (theta of i-scheduler.txt Algorithm 1). The placement's metadata carries
``status`` (optimal / feasible), the proven lower ``bound`` and the relative ``gap``. All tasks
of a node share its first worker slot (no inter-worker traffic inside a node).

:meth:`OptimalScheduler.replan` re-plans from a current placement, minimising traffic plus a
cost per migrated task (Storm restarts what moves; edge-cloud-topset.txt counts migrations),
and reports how many tasks move.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from streamsched.errors import InfeasibleError, InputError
from streamsched.metrics import inter_node_traffic
from streamsched.model.cluster import Cluster
from streamsched.model.placement import NO_WORKER, Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.schedulers import register
from streamsched.schedulers.base import Param, Scheduler, check_fits
from streamsched.solvers import BACKENDS, FORMULATIONS, solve_placement


@register
class OptimalScheduler(Scheduler):
    name = "optimal"
    summary = "exact minimum inter-node traffic (MILP: CP-SAT, HiGHS or CPLEX) with proven bound and gap"
    params = (
        Param("time_limit", float, 10.0, "seconds (theta); the best placement found is returned", low=0.01),
        Param("backend", str, "cp-sat", "solver", choices=tuple(BACKENDS)),
        Param("workers", int, 1, "solver threads (1 keeps runs reproducible)", low=1, high=64),
        Param("formulation", str, "auto", "integer program", choices=FORMULATIONS),
        Param("respect_memory", bool, False, "also keep task memory within node RAM"),
        Param("tasks_per_slot", int, 0, "at most slots x this many tasks per node (0 = no limit)", low=0),
    )
    randomised = True

    def place(self, graph: TaskGraph, cluster: Cluster, params: dict[str, Any], seed: int) -> Placement:
        return self._solve(graph, cluster, params, seed)

    def replan(self, graph: TaskGraph, cluster: Cluster, current: Placement, migration_cost: float,
               seed: int = 0, pinned: dict[int, int] | None = None, excluded=None) -> Placement:
        """Re-place ``graph`` minimising traffic + ``migration_cost`` x moved tasks.

        ``current`` gives each task's node now (``node_of`` -1 for a new task); the metadata
        adds ``moved`` and ``migration_cost``. ``pinned``/``excluded`` as in ``schedule_with``.
        """
        if current.n_tasks != graph.n_tasks:
            raise InputError(f"current placement has {current.n_tasks} tasks, graph {graph.name!r} has {graph.n_tasks}")
        return self.schedule_with(graph, cluster, seed, pinned=pinned, excluded=excluded,
                                  current=np.asarray(current.node_of), migration_cost=float(migration_cost))

    def schedule_with(self, graph: TaskGraph, cluster: Cluster, seed: int = 0, **constraints) -> Placement:
        """:meth:`schedule` with solver constraints: ``pinned`` ({task index: node index}),
        ``excluded`` ((task, node) pairs), ``current`` + ``migration_cost``."""
        params = self.resolved_params()
        check_fits(graph, cluster)
        started = time.perf_counter()
        placement = self._solve(graph, cluster, params, int(seed), **constraints)
        return placement.with_metadata(scheduler=self.name, params=params, seed=int(seed),
                                       wall_time_s=time.perf_counter() - started,
                                       cost=inter_node_traffic(graph, placement), **dict(placement.metadata))

    def _solve(self, graph: TaskGraph, cluster: Cluster, params: dict[str, Any], seed: int, **constraints) -> Placement:
        if params["respect_memory"]:
            constraints.update(memory=graph.memory_mb, node_memory=[n.ram_mb for n in cluster.nodes])
        if params["tasks_per_slot"]:
            constraints["max_items"] = cluster.slots * params["tasks_per_slot"]
        result = solve_placement(graph.load, graph.src, graph.dst, graph.rate, cluster.capacity,
                                 time_limit=params["time_limit"], backend=params["backend"], seed=seed,
                                 workers=params["workers"], formulation=params["formulation"], **constraints)
        if result.status == "infeasible":
            raise InfeasibleError(f"optimal: graph {graph.name!r} cannot be placed on cluster {cluster.name!r} "
                                  f"under its capacity (and other) constraints")
        if result.status == "unknown":
            raise InfeasibleError(f"optimal: no placement of {graph.name!r} found within "
                                  f"time_limit={params['time_limit']:g} s (none may exist)")
        node_of = result.assignment
        worker_of = np.where(cluster.slots[node_of] > 0, 0, NO_WORKER)
        metadata = {"status": result.status, "bound": result.bound, "gap": result.gap,
                    "backend": result.backend, "formulation": result.formulation,
                    "solver_time_s": result.wall_time_s}
        if "current" in constraints:
            # bound and gap then refer to this objective: traffic + migration_cost x moved
            metadata.update(moved=result.moved, migration_cost=constraints.get("migration_cost", 0.0),
                            objective=result.objective)
        return Placement.build(node_of, worker_of, metadata)
