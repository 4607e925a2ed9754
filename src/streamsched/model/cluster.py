"""Clusters of nodes: capacity (in ``tasks`` or ``cores``), worker slots, hardware, rack and kind."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from streamsched.errors import InputError
from streamsched.model.io import Fields, read_document
from streamsched.model.limits import check_nodes
from streamsched.model.units import CORES, TASKS, check_unit

KINDS = ("cloud", "edge")


@dataclass(frozen=True)
class Node:
    """One machine. ``capacity`` is in its cluster's ``capacity_unit`` (the papers: tasks it can
    host; or cores). ``slots`` are worker processes (Storm workers; a Flink TaskManager is one);
    ``task_slots`` is Flink's ``taskmanager.numberOfTaskSlots``: at most that many tasks of an
    operator per slot sharing group on the node (0 = no limit; :mod:`streamsched.model.colocation`)."""

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
        top = Fields(data, where)
        name = top.str("name", "cluster")
        unit = top.str("capacity_unit", TASKS)
        check_unit(unit, f"{where}.capacity_unit")
        nodes: list[Node] = []
        for i, raw in enumerate(top.list("nodes")):
            nodes.append(_node(Fields(raw, f"{where}.nodes[{i}]"), None, unit=unit))
        counter = 0
        for i, raw in enumerate(top.list("node_types")):
            f = Fields(raw, f"{where}.node_types[{i}]")
            count = f.integer("count", 1, minimum=0)
            check_nodes(len(nodes) + count, f"{where}.node_types[{i}].count={count}")
            prefix = f.str("prefix", None)
            template = _node(f, "template", allow=("count", "prefix"), unit=unit)
            for _ in range(count):
                counter += 1
                label = f"{prefix}{_ + 1}" if prefix else f"n{counter}"
                nodes.append(Node(**{**template.__dict__, "name": label}))
        top.reject_unknown()
        if not nodes:
            raise InputError(f"{where}: no nodes (give 'nodes' or 'node_types')")
        try:
            return cls(name=name, nodes=tuple(nodes), capacity_unit=unit)
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


def _node(f: Fields, name: str | None, allow: tuple[str, ...] = (), unit: str = TASKS) -> Node:
    defaults = {fl.name: fl.default for fl in fields(Node)}
    cores = f.integer("cores", None, minimum=0)
    if unit == CORES:
        capacity = f.number("capacity", None, minimum=0)
        if capacity is None and cores is None:
            raise InputError(f"{f.where}.capacity: missing (a cores cluster takes capacity or cores)")
        if capacity is None:
            capacity = float(cores)
        elif cores is not None and capacity > cores:
            raise InputError(f"{f.where}.capacity: {capacity:g} cores exceeds the node's cores ({cores})")
    else:
        capacity = f.number("capacity", required=True, minimum=0)
    node = Node(
        name=name if name is not None else f.str("name", required=True),
        capacity=capacity,
        slots=f.integer("slots", defaults["slots"], minimum=0),
        cores=defaults["cores"] if cores is None else cores,
        ghz=f.number("ghz", defaults["ghz"], minimum=0),
        flops_per_cycle=f.number("flops_per_cycle", defaults["flops_per_cycle"], minimum=0),
        ram_mb=f.number("ram_mb", defaults["ram_mb"], minimum=0),
        bandwidth_mbps=f.number("bandwidth_mbps", defaults["bandwidth_mbps"], minimum=0),
        rack=f.str("rack", defaults["rack"]),
        kind=f.str("kind", defaults["kind"], choices=KINDS),
        task_slots=f.integer("task_slots", defaults["task_slots"], minimum=0),
    )
    for key in allow:
        f._used.add(key)
    f.reject_unknown()
    return node
