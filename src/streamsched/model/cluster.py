"""Clusters of nodes: capacity (in ``tasks`` or ``cores``), worker slots, hardware, rack and kind."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, fields, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from streamsched.errors import InputError
from streamsched.model.io import present, read_document, validate
from streamsched.model.limits import check_nodes
from streamsched.model.units import CORES, TASKS, check_unit

KINDS = ("cloud", "edge")
NET_FIELDS = ("net_in", "net_out")


@dataclass(frozen=True)
class Node:
    """One machine. ``capacity`` is in its cluster's ``capacity_unit`` (the papers: tasks it can
    host; or cores). ``slots`` are worker processes (Storm workers; a Flink TaskManager is one);
    ``task_slots`` is Flink's ``taskmanager.numberOfTaskSlots``: at most that many tasks of an
    operator per slot sharing group on the node (0 = no limit; :mod:`streamsched.model.colocation`).
    ``net_in``/``net_out`` are the node's network capacity into and out of it in bytes/s (``None``
    = unknown); with them known on every node, :mod:`streamsched.model.throughput` finds the busiest
    link direction."""

    name: str
    capacity: float
    slots: int = 4
    cores: int = 4
    ghz: float = 2.7
    flops_per_cycle: float = 8.0
    ram_mb: float = 4096.0
    bandwidth_mbps: float = 1000.0
    rack: str = "rack-0"
    kind: str = "cloud"
    task_slots: int = 0
    net_in: float | None = None
    net_out: float | None = None

    def __post_init__(self) -> None:
        where = f"node {self.name!r}"
        if self.capacity < 0:
            raise InputError(f"{where}.capacity: must be >= 0, got {self.capacity}")
        for name in ("slots", "cores", "task_slots"):
            if getattr(self, name) < 0:
                raise InputError(f"{where}.{name}: must be >= 0, got {getattr(self, name)}")
        for name in ("ghz", "flops_per_cycle", "ram_mb", "bandwidth_mbps"):
            if getattr(self, name) < 0:
                raise InputError(f"{where}.{name}: must be >= 0, got {getattr(self, name)}")
        for name in NET_FIELDS:
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise InputError(f"{where}.{name}: must be a finite number of bytes/s > 0, got {value!r}")
        if self.kind not in KINDS:
            raise InputError(f"{where}.kind: {self.kind!r} is not one of {', '.join(KINDS)}")

    @property
    def gflops(self) -> float:
        """Peak GFLOPs, thesis eq. 3.1: cores x GHz x flops/cycle."""
        return self.cores * self.ghz * self.flops_per_cycle


NODE_FIELDS = tuple(f.name for f in fields(Node))


@dataclass(frozen=True, eq=False)
class Cluster:
    """An ordered tuple of nodes; node index ``k`` is what placements store.

    ``capacity_unit`` is what every node's capacity counts: ``tasks`` (default) or ``cores``;
    a graph is placed only on a cluster whose unit is its ``load_unit``
    (:func:`streamsched.model.units.check_units`).
    """

    name: str
    nodes: tuple[Node, ...]
    capacity_unit: str = TASKS

    def __post_init__(self) -> None:
        check_unit(self.capacity_unit, f"cluster {self.name!r}: capacity_unit")
        if not self.nodes:
            raise InputError(f"cluster {self.name!r}: no nodes")
        seen: set[str] = set()
        for node in self.nodes:
            if node.name in seen:
                raise InputError(f"cluster {self.name!r}: node {node.name!r} defined twice")
            seen.add(node.name)

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    @cached_property
    def capacity(self) -> np.ndarray:
        out = np.array([n.capacity for n in self.nodes], dtype=np.float64)
        out.setflags(write=False)
        return out

    @cached_property
    def slots(self) -> np.ndarray:
        out = np.array([n.slots for n in self.nodes], dtype=np.int64)
        out.setflags(write=False)
        return out

    @property
    def has_links(self) -> bool:
        """Every node's ``net_in`` and ``net_out`` known (bytes/s): the throughput model's link terms apply."""
        return all(n.net_in is not None and n.net_out is not None for n in self.nodes)

    @property
    def total_capacity(self) -> float:
        return float(self.capacity.sum())

    @cached_property
    def index(self) -> dict[str, int]:
        return {n.name: k for k, n in enumerate(self.nodes)}

    def node_index(self, name: str) -> int:
        try:
            return self.index[name]
        except KeyError:
            raise InputError(f"cluster {self.name!r}: unknown node {name!r}") from None

    def capacity_classes(self) -> list[tuple[float, int]]:
        """``[(capacity, count), ...]`` largest first: the array N of i-scheduler.txt section 4.3."""
        values, counts = np.unique(self.capacity, return_counts=True)
        return [(float(v), int(c)) for v, c in zip(values[::-1], counts[::-1])]

    def to_dict(self) -> dict[str, Any]:
        defaults = {f.name: f.default for f in fields(Node)}
        return {
            "name": self.name,
            "capacity_unit": self.capacity_unit,
            "nodes": [
                {k: getattr(n, k) for k in NODE_FIELDS if k in ("name", "capacity") or getattr(n, k) != defaults[k]}
                for n in self.nodes
            ],
        }

    def fingerprint(self) -> str:
        """16 hex digits of SHA-256 over the cluster's canonical JSON: a placement file carries
        it, so that a placement made for another cluster with the same node names is noticed."""
        text = json.dumps(self.to_dict(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @classmethod
    def from_dict(cls, data: Any, where: str = "cluster") -> Cluster:
        """Nodes listed one by one (``nodes``) and/or by type with a count (``node_types``).

        ``capacity_unit: cores`` makes capacities count cores; a node of such a cluster that
        gives ``cores`` and no ``capacity`` gets capacity = cores. A capacity above the node's
        stated ``cores`` is refused there (a node cannot be busier than its cores).
        """
        validate(data, "cluster", where)
        top = present(data)
        unit = top.get("capacity_unit", TASKS)
        nodes: list[Node] = []
        for i, raw in enumerate(top.get("nodes", ())):
            nodes.append(_node(present(raw), f"{where}.nodes[{i}]", unit))
        counter = 0
        for i, raw in enumerate(top.get("node_types", ())):
            values = present(raw)
            count, prefix = int(values.pop("count", 1)), values.pop("prefix", None)
            check_nodes(len(nodes) + count, f"{where}.node_types[{i}].count={count}")
            template = _node({**values, "name": "template"}, f"{where}.node_types[{i}]", unit)
            for _ in range(count):
                counter += 1
                label = f"{prefix}{_ + 1}" if prefix else f"n{counter}"
                nodes.append(Node(**{**template.__dict__, "name": label}))
        if not nodes:
            raise InputError(f"{where}: no nodes (give 'nodes' or 'node_types')")
        try:
            return cls(name=top.get("name", "cluster"), nodes=tuple(nodes), capacity_unit=unit)
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None

    @classmethod
    def load(cls, path: str | Path) -> Cluster:
        return cls.from_dict(read_document(path), where=str(path))

    @classmethod
    def from_types(cls, name: str, *types: tuple[int, dict[str, Any]], capacity_unit: str = TASKS) -> Cluster:
        """``Cluster.from_types("het", (3, {"capacity": 6}), (4, {"capacity": 2}))``."""
        check_nodes(sum(count for count, _ in types), f"cluster {name!r}")
        nodes = []
        for count, spec in types:
            for _ in range(count):
                nodes.append(Node(name=f"n{len(nodes) + 1}", **spec))
        return cls(name=name, nodes=tuple(nodes), capacity_unit=capacity_unit)

    def in_cores(self, fraction: float = 1.0) -> Cluster:
        """The same machines with capacity in cores: ``fraction`` x each node's ``cores`` (for a
        measured graph on a built-in cluster, whose capacities count tasks)."""
        if not fraction > 0:
            raise InputError(f"cluster {self.name!r}: cores fraction must be > 0, got {fraction!r}")
        nodes = tuple(replace(n, capacity=n.cores * float(fraction)) for n in self.nodes)
        return Cluster(name=self.name, nodes=nodes, capacity_unit=CORES)


def _node(values: dict[str, Any], where: str, unit: str) -> Node:
    """A node of a validated document (nulls dropped): capacity is required, except in a cores
    cluster, where ``cores`` stands for it; there it may not exceed the node's cores."""
    capacity, cores = values.get("capacity"), values.get("cores")
    if capacity is None and (unit != CORES or cores is None):
        raise InputError(f"{where}.capacity: missing" + (" (a cores cluster takes capacity or cores)" if unit == CORES else ""))
    if unit == CORES and capacity is not None and cores is not None and capacity > cores:
        raise InputError(f"{where}.capacity: {capacity:g} cores exceeds the node's cores ({cores})")
    return Node(**{**values, "capacity": float(cores if capacity is None else capacity),
                   **{k: int(values[k]) for k in ("slots", "cores", "task_slots") if k in values},
                   **{k: float(values[k]) for k in ("ghz", "flops_per_cycle", "ram_mb", "bandwidth_mbps", *NET_FIELDS)
                      if k in values}})
