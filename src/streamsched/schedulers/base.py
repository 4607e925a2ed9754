"""The scheduler interface: declared parameters, ``schedule(graph, cluster, seed) -> Placement``.

Failure contract (stated once, here): bad parameters raise ``ParameterError`` naming the
parameter (exit 2); a graph that cannot fit raises ``InfeasibleError`` saying what was needed
and what was available (exit 3). A scheduler never mutates its inputs or its parameters, and
every randomised choice comes from ``seed``.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from streamsched.errors import InfeasibleError, ParameterError
from streamsched.metrics import inter_node_traffic
from streamsched.model.cluster import Cluster
from streamsched.model.placement import CAPACITY_TOLERANCE, Placement
from streamsched.model.taskgraph import TaskGraph

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
        if self.choices is not None and value not in self.choices:
            raise ParameterError(f"{where}: {value!r} is not one of {', '.join(map(str, self.choices))}")
        if self.low is not None and value < self.low or self.high is not None and value > self.high:
            raise ParameterError(f"{where}: {value!r} not in valid range [{self.low}, {self.high}]")
        return value

    def describe(self) -> str:
        domain = f" one of {self.choices}" if self.choices else (
            f" in [{self.low}, {self.high}]" if self.low is not None or self.high is not None else "")
        return f"{self.name}={self.default!r} ({self.kind.__name__}{domain}) {self.help}".rstrip()


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
    #: load evenly, Storm's defaults), ``"resources"`` (R-Storm's resource fit) or ``"makespan"``.
    objective: ClassVar[str] = "traffic"
    #: True when the result is proven optimal (or carries a proven bound and gap).
    exact: ClassVar[bool] = False
    #: True when ``place`` uses its seed; the battery then checks seed determinism harder.
    randomised: ClassVar[bool] = False
    #: True when the scheduler only makes sense on a cluster with ``kind: edge`` nodes.
    needs_edge_nodes: ClassVar[bool] = False

    def __init__(self, **params: Any):
        known = {p.name for p in self.params}
        for key in params:
            if key not in known:
                choices = ", ".join(sorted(known)) or "none"
                raise ParameterError(f"{self.name}.params.{key}: unknown parameter (known: {choices})")
        self._given = dict(params)

    def get_params(self) -> dict[str, Any]:
        """Every parameter as it will be used (given value, else the default)."""
        return {p.name: self._given.get(p.name, p.default) for p in self.params}

    def resolved_params(self) -> dict[str, Any]:
        return {p.name: p.validate(self._given.get(p.name, p.default), self.name) for p in self.params}

    def schedule(self, graph: TaskGraph, cluster: Cluster, seed: int = 0) -> Placement:
        """Place ``graph`` on ``cluster``; the result carries scheduler, params, seed, wall time, cost."""
        params = self.resolved_params()
        check_fits(graph, cluster)
        start = time.perf_counter()
        placement = self.place(graph, cluster, params, int(seed))
        wall = time.perf_counter() - start
        return placement.with_metadata(
            scheduler=self.name,
            params=params,
            seed=int(seed),
            wall_time_s=wall,
            cost=inter_node_traffic(graph, placement),
            **dict(placement.metadata),
        )

    @abstractmethod
    def place(self, graph: TaskGraph, cluster: Cluster, params: dict[str, Any], seed: int) -> Placement:
        """Compute the placement; extra metadata (status, bound, gap) goes in its metadata."""


def check_fits(graph: TaskGraph, cluster: Cluster) -> None:
    """Refuse early what no scheduler can place: total load, or one task larger than any node."""
    need, have = graph.total_load, cluster.total_capacity
    if need > have * (1 + CAPACITY_TOLERANCE) + CAPACITY_TOLERANCE:
        raise InfeasibleError(
            f"graph {graph.name!r} needs load {need:g} but cluster {cluster.name!r} has capacity {have:g}"
        )
    if graph.n_tasks:
        biggest = float(graph.load.max())
        if biggest > cluster.capacity.max() * (1 + CAPACITY_TOLERANCE) + CAPACITY_TOLERANCE:
            raise InfeasibleError(
                f"task {graph.task_ids[int(graph.load.argmax())]} needs load {biggest:g}; "
                f"the largest node of {cluster.name!r} has capacity {cluster.capacity.max():g}"
            )


def remaining_capacity(cluster: Cluster) -> np.ndarray:
    """A writable copy of the node capacities with a tenth of the validator's tolerance, so
    that loads summed in another order still pass ``Placement.violations``."""
    return cluster.capacity * (1 + CAPACITY_TOLERANCE / 10) + CAPACITY_TOLERANCE / 10


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
        capacity = 0.0 if dedicated[k] else max(node.capacity - float(used_load[k]), 0.0)
        nodes.append(replace(
            node, capacity=capacity, slots=0 if dedicated[k] else node.slots - len(used_slots[k]),
            ram_mb=0.0 if dedicated[k] else max(node.ram_mb - float(used_memory[k]), 0.0),
        ))
    occupied = tuple(bool(used_slots[k]) or bool(used_load[k] > 0) or bool(dedicated[k]) for k in range(cluster.n_nodes))
    return ResidualCluster(name=cluster.name, nodes=tuple(nodes), occupied=occupied,
                           used_load=tuple(float(x) for x in used_load))


def schedule_many(scheduler: Scheduler, graphs: list[TaskGraph], cluster: Cluster, seed: int = 0,
                  skip_infeasible: bool = False) -> list[Placement | None]:
    """Place several topologies on one cluster, in order, each on what the earlier ones left.

    Works for every scheduler: each graph is scheduled on a :class:`ResidualCluster`, and its
    worker numbers are mapped back to the node's free slot numbers. Nodes a placement lists in
    ``metadata["dedicated_nodes"]`` are withheld from every later graph (Isolation). A graph
    that does not fit raises ``InfeasibleError``, or with ``skip_infeasible`` gets ``None`` and
    takes nothing.
    """
    n = cluster.n_nodes
    used_load, used_memory = np.zeros(n), np.zeros(n)
    used_slots: list[set[int]] = [set() for _ in range(n)]
    dedicated = np.zeros(n, dtype=bool)
    out: list[Placement | None] = []
    for graph in graphs:
        residual = residual_cluster(cluster, used_load, used_memory, used_slots, dedicated)
        try:
            placement = scheduler.schedule(graph, residual, seed=seed)
        except InfeasibleError:
            if not skip_infeasible:
                raise
            out.append(None)
            continue
        free = [sorted(set(range(node.slots)) - used_slots[k]) for k, node in enumerate(cluster.nodes)]
        worker_of = np.array([free[k][w] if w >= 0 else w for k, w in
                              zip(placement.node_of.tolist(), placement.worker_of.tolist())], dtype=np.int32)
        for k, w in zip(placement.node_of.tolist(), worker_of.tolist()):
            if w >= 0:
                used_slots[k].add(w)
        used_load += np.bincount(placement.node_of, weights=graph.load, minlength=n)
        used_memory += np.bincount(placement.node_of, weights=graph.memory_mb, minlength=n)
        dedicated[list(placement.metadata.get("dedicated_nodes", []))] = True
        out.append(Placement.build(placement.node_of, worker_of, placement.metadata))
    return out
