"""Placements: task -> node and task -> worker slot, with the metadata of what produced them."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from streamsched.errors import InputError
from streamsched.model.cluster import Cluster
from streamsched.model.colocation import CoLocationRule
from streamsched.model.io import read_document, validate
from streamsched.model.taskgraph import TaskGraph
from streamsched.model.units import check_units

FORMAT = "streamsched.placement/1"
#: Operator name of a task whose graph file had no tasks table (graph_files); never compared.
UNNAMED_OPERATOR = "task"
#: ``worker_of`` value of a task placed on a node but not (yet) on a worker slot.
NO_WORKER = -1
#: Relative slack when comparing loads with capacities (float sums of loads).
CAPACITY_TOLERANCE = 1e-9


def remaining_capacity(cluster: Cluster) -> np.ndarray:
    """A writable copy of the node capacities with a tenth of the validator's tolerance, so
    that loads summed in another order still pass :meth:`Placement.violations`."""
    return cluster.capacity * (1 + CAPACITY_TOLERANCE / 10) + CAPACITY_TOLERANCE / 10


@dataclass(frozen=True, eq=False)
class Placement:
    """``node_of[t]`` is the node index of task t, ``worker_of[t]`` its slot on that node."""

    node_of: np.ndarray
    worker_of: np.ndarray
    metadata: Mapping[str, Any]

    @classmethod
    def build(cls, node_of, worker_of=None, metadata: Mapping[str, Any] | None = None) -> Placement:
        node_of = np.array(node_of, dtype=np.int32)
        worker_of = np.full(node_of.size, NO_WORKER, np.int32) if worker_of is None else np.array(worker_of, dtype=np.int32)
        if worker_of.shape != node_of.shape:
            raise ValueError("node_of and worker_of differ in length")
        node_of.setflags(write=False)
        worker_of.setflags(write=False)
        return cls(node_of=node_of, worker_of=worker_of, metadata=MappingProxyType(dict(metadata or {})))

    def with_metadata(self, **extra: Any) -> Placement:
        return Placement(self.node_of, self.worker_of, MappingProxyType({**self.metadata, **extra}))

    @property
    def n_tasks(self) -> int:
        return int(self.node_of.size)

    def violations(self, graph: TaskGraph, cluster: Cluster, check_memory: bool = False) -> list[str]:
        """Every way this placement breaks the model's rules (empty when valid); ``InputError``
        when the graph's loads and the cluster's capacities are in different units."""
        check_units(graph, cluster)
        problems: list[str] = []
        if self.n_tasks != graph.n_tasks:
            return [f"placement has {self.n_tasks} tasks, graph {graph.name!r} has {graph.n_tasks}"]
        bad = np.flatnonzero((self.node_of < 0) | (self.node_of >= cluster.n_nodes))
        if bad.size:
            problems.append(f"task {graph.task_ids[bad[0]]} is on unknown node index {self.node_of[bad[0]]}")
            return problems
        slots = cluster.slots[self.node_of]
        bad = np.flatnonzero((self.worker_of < NO_WORKER) | (self.worker_of >= slots))
        if bad.size:
            t = int(bad[0])
            problems.append(
                f"task {graph.task_ids[t]} is on worker {self.worker_of[t]} of node "
                f"{cluster.nodes[self.node_of[t]].name!r}, which has {slots[t]} slots"
            )
        load = np.bincount(self.node_of, weights=graph.load, minlength=cluster.n_nodes)
        over = np.flatnonzero(load > cluster.capacity * (1 + CAPACITY_TOLERANCE) + CAPACITY_TOLERANCE)
        for k in over[:5]:
            problems.append(f"node {cluster.nodes[k].name!r} holds load {load[k]:g} > capacity {cluster.capacity[k]:g}")
        rule = CoLocationRule.of(graph, cluster)
        if rule is not None:
            problems.extend(rule.violations(self.node_of))
        if check_memory:
            ram = np.array([n.ram_mb for n in cluster.nodes])
            mem = np.bincount(self.node_of, weights=graph.memory_mb, minlength=cluster.n_nodes)
            for k in np.flatnonzero(mem > ram * (1 + CAPACITY_TOLERANCE))[:5]:
                problems.append(f"node {cluster.nodes[k].name!r} holds {mem[k]:g} MB > RAM {ram[k]:g} MB")
        return problems

    def is_valid(self, graph: TaskGraph, cluster: Cluster) -> bool:
        return not self.violations(graph, cluster)

    # --------------------------------------------------------------- JSON I/O
    def to_dict(self, graph: TaskGraph, cluster: Cluster) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "graph": graph.name,
            "cluster": cluster.name,
            "cluster_hash": cluster.fingerprint(),
            "metadata": dict(self.metadata),
            "nodes": [n.name for n in cluster.nodes],
            "tasks": graph.task_ids.tolist(),
            "operator": [graph.operator_names[k] for k in graph.task_operator.tolist()],
            "node": self.node_of.tolist(),
            "worker": self.worker_of.tolist(),
        }

    def write(self, path: str | Path, graph: TaskGraph, cluster: Cluster) -> None:
        """Write atomically: a temporary file beside ``path``, then a rename (no half file); the
        document is checked against its schema first; a missing directory of ``path`` is created."""
        path = Path(path)
        document = self.to_dict(graph, cluster)
        validate(document, "placement", str(path), written=True)
        text = json.dumps(document, indent=1, default=_jsonable)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            temporary.write_text(text)
            os.replace(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)

    @classmethod
    def from_dict(cls, data: Any, graph: TaskGraph, cluster: Cluster, where: str = "placement") -> Placement:
        validate(data, "placement", where)
        if not (len(data["tasks"]) == len(data["node"]) == len(data["worker"])):
            raise InputError(f"{where}: 'tasks', 'node' and 'worker' differ in length")
        file_nodes = data["nodes"]
        try:
            node_map = np.array([cluster.node_index(name) for name in file_nodes] + [-1], dtype=np.int64)
        except InputError as exc:
            raise InputError(f"{where}.nodes: {exc}") from None
        try:
            file_node, tasks, worker = (np.asarray(data[key], dtype=np.int64) for key in ("node", "tasks", "worker"))
        except OverflowError:
            raise InputError(f"{where}: 'tasks', 'node' and 'worker' must hold 64-bit integers") from None
        if file_node.size and (file_node.min() < 0 or file_node.max() >= len(file_nodes)):
            raise InputError(f"{where}.node: index out of range of 'nodes'")
        order = np.argsort(graph.task_ids)
        pos = np.searchsorted(graph.task_ids[order], tasks)
        pos = np.minimum(pos, graph.n_tasks - 1)
        index = order[pos]
        unknown = np.flatnonzero(graph.task_ids[index] != tasks)
        if unknown.size:
            raise InputError(f"{where}.tasks: task {tasks[unknown[0]]} is not in graph {graph.name!r}")
        counts = np.bincount(index, minlength=graph.n_tasks)
        if np.any(counts != 1):
            k = int(np.flatnonzero(counts != 1)[0])
            state = "missing" if counts[k] == 0 else "listed twice"
            raise InputError(f"{where}.tasks: task {graph.task_ids[k]} is {state}")
        _check_operators(data.get("operator"), graph, index, where)
        node_of = np.empty(graph.n_tasks, np.int64)
        worker_of = np.empty(graph.n_tasks, np.int64)
        node_of[index] = node_map[file_node]
        worker_of[index] = worker
        return cls.build(node_of, worker_of, data.get("metadata") or {})

    @classmethod
    def read(cls, path: str | Path, graph: TaskGraph, cluster: Cluster) -> Placement:
        return cls.from_dict(read_document(path), graph, cluster, where=str(path))


def _check_operators(names: Any, graph: TaskGraph, index: np.ndarray, where: str) -> None:
    """A file's optional ``operator`` list (one name per entry of ``tasks``; files written
    before it have none) must name each task's operator in ``graph``: a placement of another
    graph with the same task ids is refused. A task of an edge list without a tasks table (on
    either side) has no operator name to compare."""
    if names is None:
        return
    if len(names) != index.size:
        raise InputError(f"{where}.operator: expected one operator name (a string) per entry of 'tasks', "
                         f"got {len(names)} for {index.size}")
    ours = np.asarray(graph.operator_names, dtype=object)[graph.task_operator[index]]
    theirs = np.asarray(names, dtype=object)
    wrong = np.flatnonzero((ours != theirs) & (ours != UNNAMED_OPERATOR) & (theirs != UNNAMED_OPERATOR))
    if wrong.size:
        k = int(wrong[0])
        raise InputError(f"{where}.operator: task {graph.task_ids[index[k]]} is {theirs[k]!r} here but {ours[k]!r} "
                         f"in graph {graph.name!r} (a placement of another graph?)")


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, MappingProxyType):
        return dict(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
