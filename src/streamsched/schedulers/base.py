"""The scheduler interface: declared parameters, ``schedule(graph, cluster, seed) -> Placement``.

Failure contract (stated once, here): bad parameters raise ``ParameterError`` naming the
parameter (exit 2); a graph that cannot fit raises ``InfeasibleError`` saying what was needed
and what was available (exit 3). A scheduler never mutates its inputs or its parameters, and
every randomised choice comes from ``seed``.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
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
    #: True when ``place`` uses its seed; the battery then checks seed determinism harder.
    randomised: ClassVar[bool] = False

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
    """A writable copy of the node capacities, with the validator's tolerance added."""
    return cluster.capacity * (1 + CAPACITY_TOLERANCE) + CAPACITY_TOLERANCE
