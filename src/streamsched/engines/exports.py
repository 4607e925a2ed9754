"""One entry point for every engine's plan: :func:`export` by format name."""

from __future__ import annotations

from typing import Any, Mapping

from streamsched.engines.heron import heron_packing_plan, heron_plan_tasks
from streamsched.engines.kubernetes import kubernetes_manifests, manifest_tasks
from streamsched.engines.storm.plan import plan_graph_tasks, storm_plan
from streamsched.errors import InputError
from streamsched.model.cluster import Cluster
from streamsched.model.io import validate
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph

FORMATS = ("storm", "heron", "kubernetes")
#: The JSON Schema of each plan, ``engines/schemas/<name>.schema.json``.
SCHEMAS = {"storm": "storm-plan", "heron": "heron-packing-plan", "kubernetes": "kubernetes-manifests"}


def exported_tasks(fmt: str, document: Any, graph: TaskGraph | None = None) -> list[int]:
    """Every task id an export names, in order (to check each appears exactly once). A Heron
    plan numbers tasks Heron's way (from 1): with ``graph`` they are mapped back to its ids."""
    if fmt == "storm":
        return plan_graph_tasks(document)
    if fmt == "heron":
        return heron_plan_tasks(document, graph)
    return manifest_tasks(document)


def export(fmt: str, graph: TaskGraph, cluster: Cluster, placement: Placement, per: str = "worker",
           storm: Mapping[str, Any] | None = None, heron: Mapping[str, Any] | None = None,
           kubernetes: Mapping[str, Any] | None = None) -> Any:
    """``storm``: keyword options of :func:`~.storm.plan.storm_plan` (``layout`` from the Storm
    UI, ``topology_id``, ``supervisors``, ``ackers``, ``executors``, ...); ``heron``: of
    :func:`~.heron.heron_packing_plan` (``cpu_per_load``, ``topology_id``, ...); ``kubernetes``:
    of :func:`~.kubernetes.kubernetes_manifests` (``image``, ``kind``, ``cpu_per_load``, ...);
    ``per``: Kubernetes objects per ``worker`` or per ``task``. The plan is checked against its
    schema (:data:`SCHEMAS`) before it is returned: one that does not validate is a bug
    (:class:`~streamsched.errors.OutputSchemaError`), never written."""
    if fmt == "storm":
        document = storm_plan(graph, cluster, placement, **dict(storm or {}))
    elif fmt == "heron":
        document = heron_packing_plan(graph, cluster, placement, **dict(heron or {}))
    elif fmt == "kubernetes":
        document = kubernetes_manifests(graph, cluster, placement, per=per, **dict(kubernetes or {}))
    else:
        raise InputError(f"--format {fmt!r}: not one of {', '.join(FORMATS)}")
    validate(document, SCHEMAS[fmt], f"{fmt} plan", package="streamsched.engines", written=True)
    return document
