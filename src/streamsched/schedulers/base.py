"""The scheduler interface: declared parameters and tags, ``schedule(graph, cluster, seed) ->
Placement`` and ``replan(graph, cluster, current, seed) -> Placement``.

Failure contract (stated once, here): bad parameters raise ``ParameterError`` naming the
parameter (exit 2); a graph that cannot fit raises ``InfeasibleError`` saying what was needed
and what was available (exit 3). A scheduler never mutates its inputs or its parameters, and
every randomised choice comes from ``seed``.

Capacity repair (stated once, here): a heuristic whose paper's packing step fails (fixed
executor groups or first fit on fractional loads, too few worker slots) raises
:class:`PackingFailed` with the partial assignment it reached; :meth:`Scheduler.schedule`
finishes it with :func:`~streamsched.schedulers.replanning.repair` (the one capacity repair:
best fit decreasing where needed, then moves that cost least traffic) and records
``repaired: true``, ``repair_moved`` (ids of the tasks whose node the repair chose) and
``repair_reason`` (what the paper's step could not do) in the metadata. Heuristics declare
:data:`STRICT`; ``strict=true`` keeps the paper's behaviour (``InfeasibleError``) for
reproductions. ``InfeasibleError`` otherwise means no placement exists (total load, a task
larger than every node: :func:`check_fits`) or the repair found none either, and says which.

Co-location rule (stated once, here): where the graph or cluster states one (at most k tasks of
an operator per node: Storm's ``maxNodeCoLocationCnt``, Flink's task slots per slot sharing
group; :mod:`streamsched.model.colocation`), :meth:`Scheduler.schedule` checks every
scheduler's placement against it and finishes one that breaks it with the same repair
(``repaired: true``, ``repair_reason`` naming the rule); ``strict=true`` refuses instead. The
exact solver keeps the per-operator caps as constraints, so its placements need no repair with
one slot sharing group.

Tags are class attributes, like scikit-learn's estimator tags [2]_ or the extension points a
Kubernetes scheduling plugin opts into [3]_: ``family``, ``objective``, ``exact``, ``randomised``
and ``needs_edge_nodes`` say what a scheduler optimises and what it needs; the registry refuses
unknown values, and ``compare`` runs a scheduler only where it serves (:meth:`Scheduler.skip_reason`).
``replan`` is Heron's ``repack`` [1]_: a new placement from the running one
(:mod:`streamsched.schedulers.replanning`).

References
----------
.. [1] Kulkarni, S.; Bhagat, N.; Fu, M.; Kedigehalli, V.; Kellogg, C.; Mittal, S.; Patel, J. M.;
   Ramasamy, K.; Taneja, S. (2015) "Twitter Heron: Stream processing at scale", Proceedings of
   the 2015 ACM SIGMOD International Conference on Management of Data, pp. 239-250.
.. [2] Buitinck, L.; Louppe, G.; Blondel, M.; et al. (2013) "API design for machine learning
   software: experiences from the scikit-learn project", ECML PKDD Workshop: Languages for
   Data Mining and Machine Learning, pp. 108-122.
.. [3] Kubernetes documentation (2024) "Scheduling Framework", kubernetes.io/docs/concepts/
   scheduling-eviction/scheduling-framework.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import Any, Callable, ClassVar

import numpy as np

from streamsched.errors import InfeasibleError, ParameterError
from streamsched.metrics import inter_node_traffic
from streamsched.model.cluster import Cluster
from streamsched.model.colocation import CoLocationRule
from streamsched.model.placement import CAPACITY_TOLERANCE, NO_WORKER, Placement, remaining_capacity
from streamsched.model.taskgraph import TaskGraph
from streamsched.model.units import check_units
from streamsched.schedulers.replanning import DEFAULT_THRESHOLD_PCT, adopt_if_better, repair

__all__ = ["FAMILIES", "OBJECTIVES", "STRICT", "PackingFailed", "Param", "ResidualCluster", "Scheduler", "check_fits",
           "has_edge_nodes", "remaining_capacity", "reschedule_each", "residual_cluster", "schedule_many"]

#: Values of the ``family`` and ``objective`` tags the registry accepts.
FAMILIES = ("cluster", "edge")
OBJECTIVES = ("traffic", "balance", "resources", "makespan", "contention")

_PARSERS = {int: int, float: float, str: str}


@dataclass(frozen=True)
class Param:
    """One declared hyper-parameter with its domain."""

    name: str
    kind: type
    default: Any
    help: str = ""
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] | None = None

    def validate(self, value: Any, owner: str) -> Any:
        """Coerce (strings from the CLI included) and check bounds; errors name the parameter."""
        where = f"{owner}.params.{self.name}"
        if isinstance(value, str) and self.kind is not str:
            try:
                value = _parse_bool(value) if self.kind is bool else _PARSERS[self.kind](value)
            except ValueError:
                raise ParameterError(f"{where}: {value!r} is not a valid {self.kind.__name__}") from None
        if self.kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, self.kind) or (self.kind is not bool and isinstance(value, bool)):
            raise ParameterError(f"{where}: expected {self.kind.__name__}, got {value!r}")
        if self.kind is float and not math.isfinite(value):
            raise ParameterError(f"{where}: must be a finite number, got {value!r}")
        if self.choices is not None and value not in self.choices:
            raise ParameterError(f"{where}: {value!r} is not one of {', '.join(map(str, self.choices))}")
        if self.low is not None and value < self.low or self.high is not None and value > self.high:
            raise ParameterError(f"{where}: {value!r} not in valid range [{self.low}, {self.high}]")
        return value

    def describe(self) -> str:
        """``name=default (what it takes) help``, written as one gives it with ``--param``."""
        if self.choices:
            *head, last = [str(c) for c in self.choices]
            takes = f"{', '.join(head)} or {last}" if head else last
        else:
            takes = {bool: "true or false", int: "integer", float: "number"}.get(self.kind, "text")
            low, high = (None if v is None else f"{v:g}" for v in (self.low, self.high))
            takes += (f" from {low} to {high}" if low and high else f" >= {low}" if low
                      else f" <= {high}" if high else "")
        return f"{self.name}={_typed(self.default)} ({takes}) {self.help}".rstrip()


def _typed(value: Any) -> str:
    """A parameter value as one types it: ``true``, ``0.8``, ``cpu``; ``none`` for no value."""
    if value is None or isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)


#: The parameter every heuristic declares: ``strict=true`` refuses where the paper's packing
#: fails instead of finishing with the capacity repair (module docstring).
STRICT = Param("strict", bool, False, "keep the paper's packing: refuse (exit 3) where it fails instead of "
               "finishing with the capacity repair")


class PackingFailed(InfeasibleError):
    """A paper's packing step could not place every task; carries how far it got.

    ``node_of[t]`` is task t's node or -1 (unplaced; a node may also be over capacity),
    ``worker_of`` its slot (default none), ``nodes`` the node indices the scheduler may use
    (default all; Isolation's dedicated machines), ``metadata`` what the placement would carry,
    ``workers_for`` the scheduler's second level (tasks of each node onto its worker slots),
    run on the repaired ``node_of`` when given.
    """

    def __init__(self, message: str, node_of, worker_of=None, nodes=None, metadata: dict[str, Any] | None = None,
                 workers_for: Callable[[np.ndarray], np.ndarray] | None = None):
        super().__init__(message)
        self.workers_for = workers_for
        self.node_of = np.asarray(node_of, dtype=np.int64)
        self.worker_of = (np.full(self.node_of.size, NO_WORKER, np.int64) if worker_of is None
                          else np.asarray(worker_of, dtype=np.int64))
        self.nodes = None if nodes is None else np.asarray(nodes, dtype=np.int64)
        self.metadata = dict(metadata or {})


def repair_failed_packing(graph: TaskGraph, cluster: Cluster, failure: PackingFailed) -> Placement:
    """``failure``'s partial assignment completed by :func:`~streamsched.schedulers.replanning.repair`
    on the nodes it allows; ``InfeasibleError`` naming both failures when the repair finds none."""
    nodes = np.arange(cluster.n_nodes) if failure.nodes is None else failure.nodes
    local = np.full(cluster.n_nodes, -1, np.int64)
    local[nodes] = np.arange(nodes.size)
    partial = np.where(failure.node_of >= 0, local[np.maximum(failure.node_of, 0)], -1)
    allowed = cluster if failure.nodes is None else Cluster(cluster.name, tuple(cluster.nodes[k] for k in nodes),
                                                            cluster.capacity_unit)
    try:
        repaired = repair(graph, allowed, Placement.build(partial, failure.worker_of))
    except InfeasibleError as exc:
        raise InfeasibleError(f"{failure}; the capacity repair found no placement either: {exc}") from None
    node_of = nodes[repaired.node_of]
    moved = np.flatnonzero(node_of != failure.node_of)
    worker_of = repaired.worker_of if failure.workers_for is None else failure.workers_for(node_of)
    return Placement.build(node_of, worker_of, {
        **failure.metadata, "repaired": True, "repair_moved": graph.task_ids[moved].tolist(),
        "repair_reason": str(failure)})


def keep_colocation_rule(graph: TaskGraph, cluster: Cluster, placement: Placement, strict: bool) -> Placement:
    """``placement`` if it keeps the co-location rule (or there is none), else repaired by
    :func:`~streamsched.schedulers.replanning.repair` with ``repaired``, ``repair_moved`` and
    ``repair_reason`` in its metadata; ``strict`` refuses (``InfeasibleError``) instead."""
    rule = CoLocationRule.of(graph, cluster)
    broken = [] if rule is None else rule.violations(placement.node_of, limit=1)
    if not broken:
        return placement
    if strict:
        raise InfeasibleError(f"the placement breaks the co-location rule ({broken[0]}); strict=true refuses "
                              f"instead of repairing it")
    try:
        fixed = repair(graph, cluster, placement)
    except InfeasibleError as exc:
        raise InfeasibleError(f"the placement breaks the co-location rule ({broken[0]}) and the repair found no "
                              f"placement that keeps it: {exc}") from None
    moved = np.flatnonzero(fixed.node_of != placement.node_of)
    earlier = list(placement.metadata.get("repair_moved", []))
    reason = f"co-location rule: {broken[0]}"
    if placement.metadata.get("repair_reason"):
        reason = f"{placement.metadata['repair_reason']}; {reason}"
    return Placement.build(fixed.node_of, fixed.worker_of, {
        **placement.metadata, "repaired": True, "repair_moved": sorted(set(earlier) | set(graph.task_ids[moved].tolist())),
        "repair_reason": reason})


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(text)


class Scheduler(ABC):
    """Base class: subclasses declare ``name``, ``summary``, ``params`` and implement ``place``."""

    name: ClassVar[str]
    summary: ClassVar[str]
    params: ClassVar[tuple[Param, ...]] = ()
    #: Tags (class level, like scikit-learn estimator tags and Kubernetes extension points):
    #: ``family`` is ``"cluster"`` (minimise inter-node traffic under node capacity) or
    #: ``"edge"`` (edge + cloud strategies: makespan under energy and compute constraints).
    family: ClassVar[str] = "cluster"
    #: What the scheduler optimises: ``"traffic"`` (inter-node traffic), ``"balance"`` (spread
    #: load evenly, Storm's defaults), ``"resources"`` (R-Storm's resource fit), ``"makespan"``
    #: or ``"contention"`` (CAPSys's bottleneck compute, state and network per node).
    objective: ClassVar[str] = "traffic"
    #: True when the result is proven optimal (or carries a proven bound and gap).
    exact: ClassVar[bool] = False
    #: True when ``place`` uses its seed; the battery then checks seed determinism harder.
    randomised: ClassVar[bool] = False
    #: True when the scheduler only makes sense on a cluster with ``kind: edge`` nodes.
    needs_edge_nodes: ClassVar[bool] = False
    #: Options of :meth:`replan`, declared like ``params``.
    replan_options: ClassVar[tuple[Param, ...]] = (
        Param("threshold_pct", float, DEFAULT_THRESHOLD_PCT,
              "adopt a fresh placement only when it cuts inter-node traffic by at least this %", low=0.0, high=100.0),
    )

    def __init__(self, **params: Any):
        known = {p.name for p in self.params}
        for key in params:
            if key not in known:
                choices = ", ".join(sorted(known)) or "none"
                raise ParameterError(f"{self.name}.params.{key}: unknown parameter (known: {choices})")
        self._given = dict(params)
        # every given value checked now, before any work of the command (defaults are valid as
        # declared: tests/test_scheduler_families.py)
        self._resolved = {p.name: p.validate(self._given[p.name], self.name) if p.name in self._given else p.default
                          for p in self.params}

    def get_params(self) -> dict[str, Any]:
        """Every parameter as it will be used (given value, else the default)."""
        return {p.name: self._given.get(p.name, p.default) for p in self.params}

    def resolved_params(self) -> dict[str, Any]:
        """Every parameter validated and coerced (checked once, when the scheduler is made)."""
        return dict(self._resolved)

    def schedule(self, graph: TaskGraph, cluster: Cluster, seed: int = 0) -> Placement:
        """Place ``graph`` on ``cluster``; the result carries scheduler, params, seed, wall time, cost."""
        params = self.resolved_params()
        check_fits(graph, cluster)
        start = time.perf_counter()
        try:
            placement = self.place(graph, cluster, params, int(seed))
        except PackingFailed as failure:
            if params.get(STRICT.name, True):
                raise
            placement = repair_failed_packing(graph, cluster, failure)
        placement = keep_colocation_rule(graph, cluster, placement, params.get(STRICT.name, False))
        wall = time.perf_counter() - start
        return placement.with_metadata(
            scheduler=self.name,
            params=params,
            seed=int(seed),
            wall_time_s=wall,
            cost=inter_node_traffic(graph, placement),
            **dict(placement.metadata),
        )

    def replan(self, graph: TaskGraph, cluster: Cluster, current: Placement, seed: int = 0,
               **options: Any) -> Placement:
        """A new placement of ``graph`` on ``cluster`` from the running one (Heron's ``repack``).

        ``current.node_of[t]`` is task t's node on ``cluster``, -1 for a new task or one whose
        node is gone. Default: :func:`~streamsched.schedulers.replanning.repair` keeps every task
        it can where it is, and a fresh :meth:`schedule` replaces that only when it cuts the
        inter-node traffic by ``threshold_pct`` percent (Aniello et al.'s rule,
        :func:`~streamsched.schedulers.replanning.adopt_if_better`). The metadata adds ``moved``
        (tasks whose node changed) and ``replan`` ("kept" or "rescheduled"). With an unchanged
        graph and cluster and ``current`` this scheduler's own placement, nothing moves.
        """
        settings = self.replan_settings(options)
        check_units(graph, cluster)
        kept = repair(graph, cluster, current)
        fresh = self.schedule(graph, cluster, seed=seed)
        return adopt_if_better(graph, current, kept, fresh, settings["threshold_pct"]).with_metadata(
            scheduler=self.name, seed=int(seed))

    def replan_settings(self, options: dict[str, Any]) -> dict[str, Any]:
        """``options`` checked against :attr:`replan_options`, defaults filled in."""
        known = {p.name: p for p in self.replan_options}
        for key in options:
            if key not in known:
                choices = ", ".join(sorted(known)) or "none"
                raise ParameterError(f"{self.name}.replan.{key}: unknown option (known: {choices})")
        return {p.name: p.validate(options.get(p.name, p.default), f"{self.name}.replan") for p in self.replan_options}

    def skip_reason(self, graph: TaskGraph, cluster: Cluster) -> str | None:
        """Why ``compare`` should not run this scheduler on ``graph`` and ``cluster`` (its
        placement would be another scheduler's fallback), or None: an edge strategy needs nodes
        of kind ``edge`` (without them every edge strategy is TopSet on cloud nodes)."""
        if self.needs_edge_nodes and not has_edge_nodes(cluster):
            return f"needs nodes of kind 'edge'; cluster {cluster.name!r} has none"
        return None

    @abstractmethod
    def place(self, graph: TaskGraph, cluster: Cluster, params: dict[str, Any], seed: int) -> Placement:
        """Compute the placement; extra metadata (status, bound, gap) goes in its metadata."""


def has_edge_nodes(cluster: Cluster) -> bool:
    """True when some node of ``cluster`` is of kind ``edge``."""
    return any(node.kind == "edge" for node in cluster.nodes)


def check_fits(graph: TaskGraph, cluster: Cluster) -> None:
    """Refuse early what no scheduler can place: loads and capacities in different units
    (``InputError``), total load, or one task larger than any node."""
    check_units(graph, cluster)
    need, have = graph.total_load, cluster.total_capacity
    if need > have * (1 + CAPACITY_TOLERANCE) + CAPACITY_TOLERANCE:
        raise InfeasibleError(
            f"graph {graph.name!r} needs load {need:g} but cluster {cluster.name!r} has capacity {have:g}"
        )
    rule = CoLocationRule.of(graph, cluster)
    if rule is not None and graph.n_tasks:
        _check_rule_fits(graph, rule)
    if graph.n_tasks:
        biggest = float(graph.load.max())
        if biggest > cluster.capacity.max() * (1 + CAPACITY_TOLERANCE) + CAPACITY_TOLERANCE:
            raise InfeasibleError(
                f"task {graph.task_ids[int(graph.load.argmax())]} needs load {biggest:g}; "
                f"the largest node of {cluster.name!r} has capacity {cluster.capacity.max():g}"
            )


def _check_rule_fits(graph: TaskGraph, rule: CoLocationRule) -> None:
    """What the co-location rule alone makes impossible: an operator with more tasks than its
    caps allow over all nodes, or (every node having task slots) more slots needed than exist."""
    sizes = np.bincount(graph.task_operator, minlength=len(graph.operator_names))
    room = np.minimum(rule.operator_node_caps(), sizes[:, None]).sum(axis=1)
    short = np.flatnonzero(room < sizes)
    if short.size:
        v = int(short[0])
        raise InfeasibleError(f"operator {graph.operator_names[v]!r} has {sizes[v]} tasks but the co-location rule "
                              f"allows at most {room[v]} over the nodes of {rule.cluster.name!r}")
    limited = rule.node_slots < np.iinfo(np.int64).max // 8
    if limited.all():
        needed = np.zeros(rule.n_groups, dtype=np.int64)
        np.maximum.at(needed, rule.operator_group, sizes)
        if needed.sum() > rule.node_slots.sum():
            raise InfeasibleError(f"graph {graph.name!r} needs {needed.sum()} task slots (one per task of its largest "
                                  f"operator, per slot sharing group) but cluster {rule.cluster.name!r} has "
                                  f"{rule.node_slots.sum()}")


# ------------------------------------------------------------------ several topologies
@dataclass(frozen=True, eq=False)
class ResidualCluster(Cluster):
    """What earlier topologies left of a cluster: ``occupied[k]`` when node k hosts one of them,
    ``used_load[k]`` the load they put there (R-Storm charges CPU for it)."""

    occupied: tuple[bool, ...] = ()
    used_load: tuple[float, ...] = ()


def residual_cluster(cluster: Cluster, used_load: np.ndarray, used_memory: np.ndarray,
                     used_slots: list[set[int]], dedicated: np.ndarray) -> ResidualCluster:
    """``cluster`` minus what is used: capacity, RAM and slots shrink; a dedicated node
    (Isolation) keeps nothing."""
    nodes = []
    for k, node in enumerate(cluster.nodes):
        if not (used_load[k] or used_memory[k] or used_slots[k] or dedicated[k]):
            nodes.append(node)
            continue
        capacity = 0.0 if dedicated[k] else max(node.capacity - float(used_load[k]), 0.0)
        nodes.append(replace(
            node, capacity=capacity, slots=0 if dedicated[k] else node.slots - len(used_slots[k]),
            ram_mb=0.0 if dedicated[k] else max(node.ram_mb - float(used_memory[k]), 0.0),
        ))
    occupied = tuple(bool(used_slots[k]) or bool(used_load[k] > 0) or bool(dedicated[k]) for k in range(cluster.n_nodes))
    return ResidualCluster(name=cluster.name, nodes=tuple(nodes), capacity_unit=cluster.capacity_unit,
                           occupied=occupied, used_load=tuple(float(x) for x in used_load))


class _Occupancy:
    """What placed topologies hold on each node of ``cluster``: load, memory, worker slots and
    dedicated nodes, per topology so that one can be taken off again."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        n = cluster.n_nodes
        self.load, self.memory = np.zeros(n), np.zeros(n)
        self.slots: list[set[int]] = [set() for _ in range(n)]
        self.dedicated = np.zeros(n, dtype=int)
        self.held: dict[int, tuple[np.ndarray, np.ndarray, list[tuple[int, int]], list[int]]] = {}

    def residual(self) -> ResidualCluster:
        return residual_cluster(self.cluster, self.load, self.memory, self.slots, self.dedicated > 0)

    def add(self, key: int, graph: TaskGraph, placement: Placement) -> Placement:
        """Record ``placement`` (made on :meth:`residual`) with its workers mapped to the nodes'
        free slot numbers; returns the placement on ``cluster``'s slot numbers."""
        node_of, worker_of = placement.node_of, placement.worker_of.astype(np.int64)
        mapped = worker_of.copy()
        for k in np.unique(node_of[worker_of >= 0]).tolist():
            free = np.array(sorted(set(range(self.cluster.nodes[k].slots)) - self.slots[k]), dtype=np.int64)
            on = (node_of == k) & (worker_of >= 0)
            mapped[on] = free[worker_of[on]]
        return self.hold(key, graph, Placement.build(node_of, mapped, placement.metadata))

    def hold(self, key: int, graph: TaskGraph, placement: Placement) -> Placement:
        """Record ``placement``, already on ``cluster``'s slot numbers."""
        n = self.cluster.n_nodes
        node_of, worker_of = placement.node_of, placement.worker_of
        pairs = sorted(set(zip(node_of[worker_of >= 0].tolist(), worker_of[worker_of >= 0].tolist())))
        load = np.bincount(node_of, weights=graph.load, minlength=n)
        memory = np.bincount(node_of, weights=graph.memory_mb, minlength=n)
        dedicated = list(placement.metadata.get("dedicated_nodes", []))
        self.load += load
        self.memory += memory
        for k, w in pairs:
            self.slots[k].add(w)
        self.dedicated[dedicated] += 1
        self.held[key] = (load, memory, pairs, dedicated)
        return placement

    def remove(self, key: int) -> None:
        load, memory, pairs, dedicated = self.held.pop(key)
        self.load = np.maximum(self.load - load, 0.0)
        self.memory = np.maximum(self.memory - memory, 0.0)
        for k, w in pairs:
            self.slots[k].discard(w)
        self.dedicated[dedicated] -= 1


def schedule_many(scheduler: Scheduler | list[Scheduler], graphs: list[TaskGraph], cluster: Cluster, seed: int = 0,
                  skip_infeasible: bool | dict[int, str] = False, order: list[int] | None = None
                  ) -> list[Placement | None]:
    """Place several topologies on one cluster, in order (``order``: the graphs' indices in the
    order to place them, e.g. Storm's priority order; the result stays in graph order), each on
    what the earlier ones left (``scheduler`` one for all, or a list of one per graph: Storm's
    ``even`` with each topology's ``topology.workers``).

    Works for every scheduler: each graph is scheduled on a :class:`ResidualCluster`, and its
    worker numbers are mapped back to the node's free slot numbers. Nodes a placement lists in
    ``metadata["dedicated_nodes"]`` are withheld from every later graph (Isolation). A graph
    that does not fit raises ``InfeasibleError``, or with ``skip_infeasible`` gets ``None`` and
    takes nothing (``skip_infeasible`` a dict: the reason is put there under its index).
    """
    occupancy = _Occupancy(cluster)
    out: list[Placement | None] = [None] * len(graphs)
    if order is not None and sorted(order) != list(range(len(graphs))):
        raise ValueError(f"order {order} is no ordering of the {len(graphs)} graphs")
    for k in range(len(graphs)) if order is None else order:
        try:
            placement = _nth(scheduler, k).schedule(graphs[k], occupancy.residual(), seed=seed)
        except InfeasibleError as exc:
            if skip_infeasible is False:
                raise
            if isinstance(skip_infeasible, dict):
                skip_infeasible[k] = str(exc)
            continue
        out[k] = occupancy.add(k, graphs[k], placement)
    return out


def _nth(scheduler: Scheduler | list[Scheduler], k: int) -> Scheduler:
    return scheduler[k] if isinstance(scheduler, list) else scheduler


def reschedule_each(scheduler: Scheduler | list[Scheduler], graphs: list[TaskGraph], cluster: Cluster,
                    placements: list[Placement | None], seed: int = 0) -> list[tuple[Placement | None, str | None, float]]:
    """Storm's second phase of ``TestLargeCluster``: with every placed topology on ``cluster``,
    take each in turn off (``Cluster.unassign``) and schedule it again on what the others hold,
    keeping the new placement for the following steps. Per graph: (new placement or None, why
    not, seconds). A graph that was not placed is tried on what the others hold as well."""
    occupancy = _Occupancy(cluster)
    for k, (graph, placement) in enumerate(zip(graphs, placements)):
        if placement is not None:
            occupancy.hold(k, graph, placement)
    out: list[tuple[Placement | None, str | None, float]] = []
    for k, graph in enumerate(graphs):
        start = time.perf_counter()
        if k in occupancy.held:
            occupancy.remove(k)
        try:
            placement = occupancy.add(k, graph, _nth(scheduler, k).schedule(graph, occupancy.residual(), seed=seed))
            reason = None
        except InfeasibleError as exc:
            placement, reason = None, str(exc)
        out.append((placement, reason, time.perf_counter() - start))
    return out
