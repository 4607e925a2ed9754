"""One entry point for every engine's plan: :func:`export` by format name."""

from __future__ import annotations

from typing import Any

from streamsched.engines.heron import heron_packing_plan
from streamsched.engines.kubernetes import kubernetes_patches
from streamsched.engines.storm.plan import storm_assignment
from streamsched.errors import InputError
from streamsched.model.cluster import Cluster
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph

FORMATS = ("storm", "heron", "kubernetes")


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
