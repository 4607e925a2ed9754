"""Kubernetes: pods pinned to nodes by node affinity (../shared/reference/formats.md, "Outputs")."""

from __future__ import annotations

from typing import Any

import numpy as np

from streamsched.engines.placement_check import check_exportable, worker_slots
from streamsched.errors import InputError
from streamsched.model.cluster import Cluster
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph


def kubernetes_patches(graph: TaskGraph, cluster: Cluster, placement: Placement, per: str = "task",
                       hostname_label: str = "kubernetes.io/hostname") -> list[dict[str, Any]]:
    """Strategic-merge patches pinning each pod (one per task, or one per worker) to its node by
    ``affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution``."""
    if per not in ("task", "worker"):
        raise InputError(f"--per: {per!r} is not one of task, worker")
    check_exportable(graph, cluster, placement)
    worker = worker_slots(placement)
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
