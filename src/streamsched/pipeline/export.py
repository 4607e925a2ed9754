"""Assignments engines can apply: Storm executor -> slot lists, Heron packing plans, Kubernetes
node-affinity patches (../shared/reference/formats.md, "Outputs"). Plain Python.

A worker slot is (node, worker); a task without a worker (``NO_WORKER``) goes to the node's
first worker. Storm port = ``base_port + worker``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamsched.errors import InputError
from streamsched.model.cluster import Cluster
from streamsched.model.placement import NO_WORKER, Placement
from streamsched.model.taskgraph import TaskGraph

FORMATS = ("storm", "heron", "kubernetes")
STORM_BASE_PORT = 6700


def _slots(placement: Placement) -> np.ndarray:
    return np.where(placement.worker_of == NO_WORKER, 0, placement.worker_of)


def _check(graph: TaskGraph, cluster: Cluster, placement: Placement) -> None:
    problems = placement.violations(graph, cluster)
    if problems:
        raise InputError(f"placement cannot be exported: {problems[0]}")


def storm_assignment(graph: TaskGraph, cluster: Cluster, placement: Placement,
                     base_port: int = STORM_BASE_PORT) -> dict[str, Any]:
    """Executors as Storm names them, ``[start_task, end_task]`` ranges, per ``node:port`` slot.

    A task-level plan is lifted to executors: the tasks of one component, in task id order,
    form one executor per maximal run of consecutive ids on the same slot, so every executor is a
    contiguous range within its component (what an ``IScheduler`` passes to
    ``cluster.assign(slot, topologyId, executors)``).
    """
    _check(graph, cluster, placement)
    worker = _slots(placement)
    slots: dict[tuple[str, int], list[list[int]]] = {}
    components: dict[str, list[list[int]]] = {}
    for op, name in enumerate(graph.operator_names):
        tasks = np.flatnonzero(graph.task_operator == op)
        tasks = tasks[np.argsort(graph.task_ids[tasks], kind="stable")]
        runs: list[list[int]] = []
        previous = None
        for t in tasks.tolist():
            slot = (cluster.nodes[placement.node_of[t]].name, base_port + int(worker[t]))
            tid = int(graph.task_ids[t])
            if previous is not None and previous[0] == slot and tid == previous[1] + 1:
                runs[-1][1] = tid
            else:
                runs.append([tid, tid])
                slots.setdefault(slot, []).append(runs[-1])
            previous = (slot, tid)
        components[name] = runs
    return {
        "topology": graph.name,
        "assignments": [
            {"node": node, "port": port, "executors": sorted(execs)}
            for (node, port), execs in sorted(slots.items())
        ],
        "components": {name: runs for name, runs in components.items()},
    }


def heron_packing_plan(graph: TaskGraph, cluster: Cluster, placement: Placement, cpu_per_load: float = 1.0,
                       disk_bytes: int = 1 << 30) -> dict[str, Any]:
    """Heron packing plan JSON: one container per used (node, worker); instance cpu = task load x
    ``cpu_per_load``, ram = task memory (bytes, 512 MB when the graph has none)."""
    _check(graph, cluster, placement)
    worker = _slots(placement)
    containers: dict[tuple[int, int], list[int]] = {}
    for t in np.lexsort((graph.task_ids, worker, placement.node_of)).tolist():
        containers.setdefault((int(placement.node_of[t]), int(worker[t])), []).append(t)
    plans = []
    for cid, ((node, w), tasks) in enumerate(sorted(containers.items()), start=1):
        instances = []
        for t in tasks:
            ram = int((graph.memory_mb[t] or 512.0) * 1024 * 1024)
            instances.append({
                "component_name": graph.operator_names[graph.task_operator[t]],
                "task_id": int(graph.task_ids[t]),
                "component_index": int(graph.task_rank[t]),
                "instance_resources": {"cpu": float(graph.load[t]) * cpu_per_load, "ram": ram, "disk": disk_bytes},
            })
        plans.append({
            "id": cid, "node": cluster.nodes[node].name, "worker": w, "instances": instances,
            "required_resources": {
                "cpu": sum(i["instance_resources"]["cpu"] for i in instances),
                "ram": sum(i["instance_resources"]["ram"] for i in instances),
                "disk": disk_bytes * len(instances),
            },
        })
    return {"id": f"{graph.name}-packing-plan", "container_plans": plans}


def kubernetes_patches(graph: TaskGraph, cluster: Cluster, placement: Placement, per: str = "task",
                       hostname_label: str = "kubernetes.io/hostname") -> list[dict[str, Any]]:
    """Strategic-merge patches pinning each pod (one per task, or one per worker) to its node by
    ``affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution``."""
    if per not in ("task", "worker"):
        raise InputError(f"--per: {per!r} is not one of task, worker")
    _check(graph, cluster, placement)
    worker = _slots(placement)
    pods: dict[str, tuple[str, list[int]]] = {}
    for t in np.argsort(graph.task_ids, kind="stable").tolist():
        node = cluster.nodes[placement.node_of[t]].name
        if per == "task":
            name = f"{graph.name}-{graph.operator_names[graph.task_operator[t]]}-{graph.task_rank[t]}"
        else:
            name = f"{graph.name}-{node}-worker-{worker[t]}"
        pods.setdefault(_dns(name), (node, []))[1].append(int(graph.task_ids[t]))
    return [{
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": {"streamsched/tasks": ",".join(map(str, tasks))}},
        "spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": hostname_label, "operator": "In", "values": [node]}]}]}}}},
    } for name, (node, tasks) in pods.items()]


def _dns(name: str) -> str:
    """An RFC 1123 label-ish pod name: lower case, [a-z0-9-], at most 63 characters."""
    out = "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")
    return out[:63].rstrip("-") or "pod"


def exported_tasks(fmt: str, document: Any) -> list[int]:
    """Every task id an export names, in order (to check each appears exactly once)."""
    if fmt == "storm":
        return [t for a in document["assignments"] for s, e in a["executors"] for t in range(s, e + 1)]
    if fmt == "heron":
        return [i["task_id"] for c in document["container_plans"] for i in c["instances"]]
    return [int(t) for p in document for t in p["metadata"]["annotations"]["streamsched/tasks"].split(",")]


def export(fmt: str, graph: TaskGraph, cluster: Cluster, placement: Placement, per: str = "task") -> Any:
    if fmt == "storm":
        return storm_assignment(graph, cluster, placement)
    if fmt == "heron":
        return heron_packing_plan(graph, cluster, placement)
    if fmt == "kubernetes":
        return kubernetes_patches(graph, cluster, placement, per=per)
    raise InputError(f"--format {fmt!r}: not one of {', '.join(FORMATS)}")
