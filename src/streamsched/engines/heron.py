"""Heron: a placement as Heron's ``PackingPlan`` message, in the protobuf JSON mapping.

The message is ``heron.proto.system.PackingPlan`` of Heron's ``heron/proto/packing_plan.proto``
(proto2)::

    PackingPlan   { required string id; repeated ContainerPlan container_plans; }
    ContainerPlan { required int32 id; repeated InstancePlan instance_plans;
                    required Resource requiredResource; optional Resource scheduledResource; }
    InstancePlan  { required string component_name; required int32 task_id;
                    required int32 component_index; required Resource resource; }
    Resource      { required double cpu; required int64 ram; required int64 disk; }

written the way protobuf's canonical JSON printers write it (Java's ``JsonFormat.printer()``,
Python's ``json_format.MessageToDict``): field names in lowerCamelCase (``containerPlans``,
``instancePlans``, ``componentName``, ``taskId``, ``componentIndex``), int64 values (``ram``,
``disk``) as decimal strings, cpu in cores, ram and disk in bytes. Heron's own tools print no
protobuf JSON (the dry-run renderer and the tracker have their own shapes), so the mapping's
default is the one a custom ``IPacking`` reads back with ``JsonFormat.parser().merge`` (which
also accepts the proto field names and int64 numbers). JSON Schema:
``engines/schemas/heron-packing-plan.schema.json``; docs/engines.md, "Heron".

Numbering as Heron's packers number: container ids from 1 (Heron keeps container 0 for the
topology manager), task ids global from 1, component indexes from 0 within each component.
Tasks are numbered in increasing streamsched task id (for a built-in workload Heron's task id
is streamsched's + 1). One container per used (node, worker slot), in node order then slot.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamsched.engines.placement_check import check_exportable, worker_slots
from streamsched.errors import InputError
from streamsched.model.cluster import Cluster
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.model.units import CORES

GIB = 1 << 30
MIB = 1 << 20
#: Largest int64 (protobuf ``int64`` of ``ram`` and ``disk``).
INT64_MAX = 2**63 - 1
#: Heron's instance defaults (``heron.resources.instance.ram`` / ``.disk``): 1 GiB each.
DEFAULT_INSTANCE_RAM = GIB
DEFAULT_INSTANCE_DISK = GIB
#: Heron's container padding defaults (``PackingUtils``): 1 core, 1 GiB RAM, 1 GiB disk, for the
#: container's stream manager and metrics manager beside the instances.
DEFAULT_PADDING = {"cpu": 1.0, "ram": GIB, "disk": GIB}


def heron_task_numbers(graph: TaskGraph) -> tuple[np.ndarray, np.ndarray]:
    """(Heron task id, component index) of every task: ids 1..n in increasing streamsched task
    id, indexes 0..p-1 within each component in the same order."""
    order = np.argsort(graph.task_ids, kind="stable")
    task_id = np.empty(graph.n_tasks, np.int64)
    task_id[order] = np.arange(1, graph.n_tasks + 1)
    by_component = order[np.argsort(graph.task_operator[order], kind="stable")]
    ops = graph.task_operator[by_component]
    starts = np.r_[0, np.flatnonzero(ops[1:] != ops[:-1]) + 1] if ops.size else np.zeros(0, np.int64)
    counts = np.diff(np.r_[starts, ops.size])
    index = np.empty(graph.n_tasks, np.int64)
    index[by_component] = np.arange(ops.size) - np.repeat(starts, counts)
    return task_id, index


def cores_per_load(graph: TaskGraph, cpu_per_load: float | None) -> float:
    """Cores one unit of load stands for: 1 for a ``cores`` graph; ``cpu_per_load`` (default 1)
    for a ``tasks`` graph."""
    if graph.load_unit == CORES:
        if cpu_per_load not in (None, 1, 1.0):
            raise InputError(f"--cpu-per-load: graph {graph.name!r} has loads in cores already; "
                             f"the conversion applies to a graph in tasks only")
        return 1.0
    value = 1.0 if cpu_per_load is None else cpu_per_load
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or not np.isfinite(value):
        raise InputError(f"--cpu-per-load: must be a number > 0, got {cpu_per_load!r}")
    return float(value)


def heron_packing_plan(graph: TaskGraph, cluster: Cluster, placement: Placement, cpu_per_load: float | None = None,
                       topology_id: str | None = None, instance_ram: int = DEFAULT_INSTANCE_RAM,
                       instance_disk: int = DEFAULT_INSTANCE_DISK,
                       padding: dict[str, float] | None = None) -> dict[str, Any]:
    """``PackingPlan`` (protobuf JSON mapping) of ``placement``: one container per used
    (node, worker slot), each instance's cpu = its load in cores (a ``tasks`` graph: load x
    ``cpu_per_load``, default 1 core per unit load), ram = its ``memory_mb`` in bytes (else
    ``instance_ram``), disk = ``instance_disk``; a container's ``requiredResource`` = the sum of
    its instances plus ``padding`` (Heron's defaults). ``scheduledResource`` is left out: Heron's
    scheduler sets it once it has allocated the container. The plan's ``id`` is
    ``topology_id`` (default: the graph's name)."""
    check_exportable(graph, cluster, placement)
    scale = cores_per_load(graph, cpu_per_load)
    pad = {**DEFAULT_PADDING, **(padding or {})}
    for key, value in (("instance_ram", instance_ram), ("instance_disk", instance_disk),
                       ("padding.ram", pad["ram"]), ("padding.disk", pad["disk"])):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise InputError(f"heron.{key}: must be a whole number of bytes >= 0, got {value!r}")
    if not pad["cpu"] >= 0:
        raise InputError(f"heron.padding.cpu: must be >= 0, got {pad['cpu']!r}")
    task_id, component_index = heron_task_numbers(graph)
    worker = worker_slots(placement)
    ram_bytes = np.where(graph.memory_mb > 0, np.round(graph.memory_mb * MIB), float(instance_ram))
    too_big = np.flatnonzero(~(ram_bytes < 2.0**63))
    if too_big.size:
        t = int(too_big[0])
        raise InputError(f"task {graph.task_ids[t]} ({graph.operator_names[graph.task_operator[t]]}): memory_mb "
                         f"{graph.memory_mb[t]:g} is {ram_bytes[t]:g} bytes, above Heron's int64 ram ({INT64_MAX} bytes)")
    ram = [int(r) for r in ram_bytes]
    cpu = graph.load * scale
    containers: dict[tuple[int, int], list[int]] = {}
    for t in np.lexsort((task_id, worker, placement.node_of)).tolist():
        containers.setdefault((int(placement.node_of[t]), int(worker[t])), []).append(t)
    plans = []
    for container_id, key in enumerate(sorted(containers), start=1):
        tasks = containers[key]
        for what, total in (("ram", sum(ram[t] for t in tasks) + int(pad["ram"])),
                            ("disk", int(instance_disk) * len(tasks) + int(pad["disk"]))):
            if total > INT64_MAX:
                raise InputError(f"container {container_id} (node {cluster.nodes[key[0]].name}, worker {key[1]}): "
                                 f"required {what} {total} bytes is above Heron's int64 ({INT64_MAX})")
        plans.append({
            "id": container_id,
            "instancePlans": [{
                "componentName": graph.operator_names[graph.task_operator[t]],
                "taskId": int(task_id[t]),
                "componentIndex": int(component_index[t]),
                "resource": _resource(float(cpu[t]), int(ram[t]), int(instance_disk)),
            } for t in tasks],
            "requiredResource": _resource(float(cpu[tasks].sum()) + float(pad["cpu"]),
                                          sum(ram[t] for t in tasks) + int(pad["ram"]),
                                          int(instance_disk) * len(tasks) + int(pad["disk"])),
        })
    return {"id": topology_id or graph.name, "containerPlans": plans}


def _resource(cpu: float, ram: int, disk: int) -> dict[str, Any]:
    """A ``Resource`` in the JSON mapping: double as a number, int64 as a decimal string."""
    return {"cpu": cpu, "ram": str(ram), "disk": str(disk)}


def heron_plan_tasks(document: dict[str, Any], graph: TaskGraph | None = None) -> list[int]:
    """Every task a plan names, in order: Heron task ids, or with ``graph`` the streamsched task
    ids they stand for (by component name and component index)."""
    instances = [i for c in document["containerPlans"] for i in c["instancePlans"]]
    if graph is None:
        return [int(i["taskId"]) for i in instances]
    _, component_index = heron_task_numbers(graph)
    by_key = {(graph.operator_names[o], int(k)): int(t)
              for o, k, t in zip(graph.task_operator, component_index, graph.task_ids)}
    return [by_key[(i["componentName"], int(i["componentIndex"]))] for i in instances]
