"""Heron: packing plans (../shared/reference/formats.md, "Apache Heron")."""

from __future__ import annotations

from typing import Any

import numpy as np

from streamsched.engines.placement_check import check_exportable, worker_slots
from streamsched.model.cluster import Cluster
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph


def heron_packing_plan(graph: TaskGraph, cluster: Cluster, placement: Placement, cpu_per_load: float = 1.0,
                       disk_bytes: int = 1 << 30) -> dict[str, Any]:
    """Heron packing plan JSON: one container per used (node, worker); instance cpu = task load x
    ``cpu_per_load``, ram = task memory (bytes, 512 MB when the graph has none)."""
    check_exportable(graph, cluster, placement)
    worker = worker_slots(placement)
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
