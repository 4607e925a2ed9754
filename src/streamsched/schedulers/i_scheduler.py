"""I-Scheduler (Eskandari et al. [1]_ section 4, Algorithm 1, eqs. 6-9).

K-way partitioning is METIS's multilevel k-way scheme [2]_.

FIRST_LEVEL (lines 22-54): nodes are grouped into capacity classes N = [(c_1, q_1), ...],
largest first (line 12). While the graph has more than phi items (unfused tasks t plus fused
tasks f, line 26), the unfused tasks are K-way partitioned into ``k_i = ceil(t / c_i)`` parts
of at most c_i (eq. 6, line 36); ``alpha = min(beta, q_i)`` of them are fused into single items
(eq. 9, line 42), beta being the fewest fusions that bring t + f down to phi (eqs. 7-8), and the
graph is rebuilt from the original connectivity (line 45). The reduced graph then goes to the
exact solver (:func:`streamsched.solvers.solve_placement`, line 49) with limit theta: a
deterministic work budget (CP-SAT deterministic seconds, not the paper's wall-clock seconds),
so the placement does not depend on the machine's load; ``wall_limit`` adds a wall-clock stop.

The fallback heuristic (theta = 0, or as soon as ``k_i > phi``, lines 32-35) fuses
``alpha = min(k_i, q_i)`` parts per class (line 40) until no task is left and maps each fused
part to its own node of that class (DIRECT_MAPPING, line 51). SECOND_LEVEL (lines 55-62) is
:func:`streamsched.partitioning.assign_workers`.

phi comes from theta through FIND_THRESHOLD (line 4): the calibration table
``data/i_scheduler_calibration.json``, measured with the exact solver on this machine
(regenerate: ``nice .venv/bin/python benchmarks/partitioning_calibrate.py``).

Where the paper is loose, we choose:

- Capacities and part sizes are in load units (the paper: tasks; micro-benchmarks have load 1),
  so ``t`` in eq. 6 is the load of the unfused tasks; phi counts items.
- Eq. 8 as printed omits f; Fig. 2's second iteration (t = 8, f = 1, phi = 8 fuses one part)
  needs it, so beta is the fewest parts whose fusion makes ``t + f <= phi``, counted with the
  parts' actual sizes (eq. 7 solved exactly; eq. 8 when each part holds c tasks).
- Eq. 6's k_i parts are asked of METIS as k_i - 1 parts of size c_i plus one of the remainder
  (``tpwgts``), not k_i equal parts: equal parts of t / k_i < c_i would leave every fused node
  part-empty (this alone took the micro-benchmark misses from 5 to 0 against the optimum).
- Parts to fuse are taken largest (load) first, then most internal traffic, then lowest task.
- t is the actual unfused count after each fusion (line 43 subtracts alpha x c, which
  overstates it when a part holds fewer than c tasks).
- Tasks still unfused when the classes run out (parts smaller than c leave room on the nodes)
  go, each, to the node with room holding most of its traffic.
- If the solver finds nothing for the reduced graph, the fallback heuristic is used instead.
- When the partitioning finds no parts within the class capacity, or a task left unfused fits
  on no node, the packing fails (:class:`~streamsched.schedulers.base.PackingFailed`: repaired,
  or refused with ``strict``).

References
----------
.. [1] Eskandari, L.; Mair, J.; Huang, Z.; Eyers, D. (2020) "I-Scheduler: Iterative scheduling for
   distributed stream processing systems", Future Generation Computer Systems,
   doi:10.1016/j.future.2020.11.011.
.. [2] Karypis, G.; Kumar, V. (1998) "Multilevel k-way partitioning scheme for irregular graphs",
   Journal of Parallel and Distributed Computing 48(1), pp. 96-129.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from streamsched.errors import InfeasibleError
from streamsched.model.cluster import Cluster
from streamsched.model.placement import CAPACITY_TOLERANCE, Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.partitioning import assign_workers, partition
from streamsched.schedulers import register
from streamsched.schedulers.base import STRICT, PackingFailed, Param, Scheduler
from streamsched.schedulers.limits import WORK_LIMIT_MAX

CALIBRATION_FILE = "i_scheduler_calibration.json"
UNFUSED = -1


@dataclass(frozen=True)
class FusionStep:
    """One iteration of FIRST_LEVEL: class capacity c_i, k_i parts (their sizes in tasks), alpha fused."""

    iteration: int
    capacity: float
    k: int
    part_sizes: tuple[int, ...]
    fused: int
    unfused_after: int
    fused_total: int
    fallback: bool


@dataclass(frozen=True)
class Reduction:
    """FIRST_LEVEL's result before the final mapping: each task's fused group (or ``UNFUSED``)."""

    group_of: np.ndarray
    group_class: tuple[int, ...]
    steps: tuple[FusionStep, ...]
    use_solver: bool
    phi: int

    @property
    def n_groups(self) -> int:
        return len(self.group_class)

    def item_of(self) -> np.ndarray:
        """Items of the reduced graph: groups 0..G-1, then the unfused tasks in task order."""
        item = self.group_of.astype(np.int64).copy()
        unfused = np.flatnonzero(item == UNFUSED)
        item[unfused] = self.n_groups + np.arange(unfused.size)
        return item


# ------------------------------------------------------------ FIND_THRESHOLD
@lru_cache(maxsize=1)
def calibration() -> dict[str, Any]:
    """The stored table: solver seconds by item count, and the command that measured it."""
    text = resources.files("streamsched").joinpath("data", CALIBRATION_FILE).read_text()
    return json.loads(text)


def find_threshold(theta: float, table: dict[str, Any] | None = None) -> int:
    """phi for theta (Algorithm 1 line 4): the largest measured size n such that every
    measured size up to n was solved within theta seconds (0 if none)."""
    table = table or calibration()
    phi = 0
    for size, seconds in sorted(zip(table["sizes"], table["seconds"])):
        if seconds > theta:
            break
        phi = int(size)
    return phi


# --------------------------------------------------------------- FIRST_LEVEL
def first_level(graph: TaskGraph, cluster: Cluster, phi: int, use_solver: bool, seed: int = 0,
                backend: str = "metis") -> Reduction:
    """Iterative K-way partitioning and fusion (Algorithm 1 lines 23-47)."""
    classes = [(c, q) for c, q in cluster.capacity_classes() if c > 0]
    n = graph.n_tasks
    group_of = np.full(n, UNFUSED, np.int64)
    group_class: list[int] = []
    steps: list[FusionStep] = []
    adjacency = graph.undirected
    load = graph.load
    i = 0
    while i < len(classes):
        unfused = np.flatnonzero(group_of == UNFUSED)
        t, f = unfused.size, len(group_class)
        if t == 0 or (use_solver and t + f <= phi):
            break
        c, q = classes[i]
        k = max(1, math.ceil(float(load[unfused].sum()) / c - CAPACITY_TOLERANCE))  # eq. 6
        if k == 1:  # lines 28-31: the rest fits one node of this class
            group_of[unfused] = len(group_class)
            group_class.append(i)
            steps.append(FusionStep(i + 1, c, 1, (t,), 1, 0, f + 1, not use_solver))
            break
        if use_solver and k > phi:  # lines 32-35
            use_solver, phi = False, 0
        sub = adjacency[unfused][:, unfused]
        parts, k = _parts_of_capacity(sub, load[unfused], c, k, seed, backend)
        order = _fusion_order(sub, parts, load[unfused], k)
        sizes = np.bincount(parts, minlength=k)
        fused = 0
        for p in order:  # eqs. 7-9 (lines 37-42)
            if fused == q or (use_solver and t + f <= phi):
                break
            members = unfused[parts == p]
            group_of[members] = len(group_class)
            group_class.append(i)
            t, f, fused = t - members.size, f + 1, fused + 1
        steps.append(FusionStep(i + 1, c, k, tuple(int(s) for s in sizes[order]), fused, t, f, not use_solver))
        i += 1
    return Reduction(group_of, tuple(group_class), tuple(steps), use_solver, phi)


def _parts_of_capacity(sub, load: np.ndarray, c: float, k: int, seed: int, backend: str) -> tuple[np.ndarray, int]:
    """K-way partitioning into parts of load <= c: k - 1 parts of size c and one of the remainder
    ("parts of roughly size N[i].c"; KaHIP has no part targets, so it gets equal parts). With
    real-valued loads ceil(load / c) parts (eq. 6) may not pack, so k grows (equal parts) until
    they do."""
    while True:
        remainder = float(load.sum()) - c * (k - 1)
        targets = [c] * (k - 1) + [remainder] if backend == "metis" and remainder > 0 else None
        try:
            return partition(sub, k, vertex_weights=load, seed=seed, backend=backend, imbalance=1.001,
                             target_fractions=targets, part_capacity=np.full(k, c)), k
        except InfeasibleError:
            if k >= load.size:
                raise
            k += 1


def _fusion_order(sub, parts: np.ndarray, load: np.ndarray, k: int) -> list[int]:
    """Non-empty parts, largest load first, then most internal traffic, then lowest member."""
    coo = sub.tocoo()
    same = parts[coo.row] == parts[coo.col]
    internal = np.bincount(parts[coo.row[same]], weights=coo.data[same], minlength=k)
    held = np.bincount(parts, weights=load, minlength=k)
    first = np.full(k, parts.size)
    np.minimum.at(first, parts, np.arange(parts.size))
    return [int(p) for p in np.lexsort((first, -internal, -held)) if first[p] < parts.size]


# ------------------------------------------------------------ final mapping
def direct_mapping(graph: TaskGraph, cluster: Cluster, reduction: Reduction) -> np.ndarray:
    """DIRECT_MAPPING (line 51): the j-th fused part of class i on the j-th node of capacity c_i;
    tasks left unfused go where they have most traffic, among nodes with room (-1 when none has)."""
    classes = [(c, q) for c, q in cluster.capacity_classes() if c > 0]
    node_of = np.full(graph.n_tasks, -1, np.int64)
    used = [0] * len(classes)
    for group, i in enumerate(reduction.group_class):
        nodes = np.flatnonzero(cluster.capacity == classes[i][0])
        node_of[reduction.group_of == group] = nodes[used[i]]
        used[i] += 1
    room = cluster.capacity * (1 + CAPACITY_TOLERANCE) + CAPACITY_TOLERANCE
    room = room - np.bincount(node_of[node_of >= 0], weights=graph.load[node_of >= 0], minlength=cluster.n_nodes)
    adjacency = graph.undirected
    for task in np.flatnonzero(node_of < 0).tolist():
        row = adjacency.getrow(task)
        placed = node_of[row.indices] >= 0
        towards = np.bincount(node_of[row.indices[placed]], weights=row.data[placed], minlength=cluster.n_nodes)
        fits = room >= graph.load[task]
        if not fits.any():
            continue
        score = np.where(fits, towards, -np.inf)
        best = np.flatnonzero(score == score.max())
        k = int(best[np.argmax(room[best])])
        node_of[task] = k
        room[k] -= graph.load[task]
    return node_of


def solve_reduced(graph: TaskGraph, cluster: Cluster, reduction: Reduction, theta: float, seed: int,
                  solver: str, workers: int, wall_limit: float = 0.0):
    """SOLVE_MODEL (line 49) on the reduced graph: items = fused parts + unfused tasks. theta is
    the solver's work budget (CP-SAT deterministic seconds), so a rerun gives the same
    placement on a quiet or a busy machine; ``wall_limit`` > 0 adds a wall-clock stop."""
    from streamsched.solvers import solve_placement

    item = reduction.item_of()
    n_items = int(item.max()) + 1 if item.size else 0
    loads = np.bincount(item, weights=graph.load, minlength=n_items)
    result = solve_placement(loads, item[graph.src], item[graph.dst], graph.rate, cluster.capacity,
                             time_limit=wall_limit or None, work_limit=theta, backend=solver, seed=seed,
                             workers=workers)
    return item, result


@register
class IScheduler(Scheduler):
    name = "i-scheduler"
    summary = "I-Scheduler: iterative K-way partitioning and fusion, then the exact solver (or fallback)"
    objective = "traffic"
    randomised = True
    params = (
        Param("theta", float, 1.0, "solver work budget in CP-SAT deterministic seconds, the same result on any "
              "machine load (0 = fallback heuristic only)", low=0.0, high=WORK_LIMIT_MAX),
        Param("wall_limit", float, 0.0, "also stop the solver after these wall-clock seconds (0 = no wall-clock "
              "stop; a wall-clock stop makes the result depend on the machine's load)", low=0.0, high=WORK_LIMIT_MAX),
        Param("phi", int, 0, "item threshold for the solver (0 = from theta via the calibration table)", low=0),
        Param("max_tasks_per_worker", int, 5, "second level: T, tasks per worker", low=1),
        Param("solver", str, "cp-sat", "exact solver back-end", choices=("cp-sat", "highs", "cplex")),
        Param("solver_workers", int, 1, "solver threads (more than 1: CP-SAT's parallel search is not "
              "deterministic)", low=1, high=64),
        Param("backend", str, "metis", "partitioner (kahip: KaHIP eco, kahip-fast: KaHIP fast)",
              choices=("metis", "kahip", "kahip-fast")),
        STRICT,
    )

    def place(self, graph, cluster, params, seed):
        theta = params["theta"]
        use_solver = theta > 0
        phi = (params["phi"] or find_threshold(theta)) if use_solver else 0
        use_solver = use_solver and phi > 0

        def second_level(node_of: np.ndarray) -> np.ndarray:
            return assign_workers(graph, cluster, node_of, params["max_tasks_per_worker"], seed, params["backend"])

        reduction = self._first_level(graph, cluster, phi, use_solver, seed, params["backend"], second_level)
        meta: dict[str, Any] = {"phi": phi, "steps": [asdict(s) for s in reduction.steps]}
        node_of = None
        if reduction.use_solver:
            item, result = solve_reduced(graph, cluster, reduction, theta, seed, params["solver"],
                                         params["solver_workers"], params["wall_limit"])
            meta.update(items=int(item.max()) + 1, solver_status=result.status, solver_objective=result.objective,
                        solver_bound=result.bound, solver_time_s=result.wall_time_s)
            if result.status in ("optimal", "feasible"):
                node_of = np.asarray(result.assignment)[item]
                meta["mode"] = "solver"
        if node_of is None:
            if reduction.use_solver:
                reduction = self._first_level(graph, cluster, 0, False, seed, params["backend"], second_level)
                meta["steps"] = [asdict(s) for s in reduction.steps]
            node_of = direct_mapping(graph, cluster, reduction)
            meta["mode"] = "fallback"
            left = np.flatnonzero(node_of < 0)
            if left.size:
                raise PackingFailed(
                    f"i-scheduler: {left.size} tasks (load {graph.load[left].sum():g}; task {graph.task_ids[left[0]]}: "
                    f"{graph.load[left[0]]:g}) fit on no node after the fused parts were mapped",
                    node_of, metadata=meta, workers_for=second_level)
        return Placement.build(node_of, second_level(node_of), meta)

    @staticmethod
    def _first_level(graph, cluster, phi, use_solver, seed, backend, second_level) -> Reduction:
        """:func:`first_level`; a partitioning that finds no parts within capacity fails the packing."""
        try:
            return first_level(graph, cluster, phi, use_solver, seed, backend)
        except InfeasibleError as exc:
            raise PackingFailed(f"i-scheduler: {exc}", np.full(graph.n_tasks, -1),
                                workers_for=second_level) from None
