"""Kubernetes: a placement as workload manifests whose pods are pinned to their nodes.

One Deployment (or StatefulSet) with one replica per used worker (``per="worker"``, the default:
a worker process hosts its tasks) or per task (``per="task"``). Its pod template carries
``affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`` on the node label
``kubernetes.io/hostname`` (the cluster file's node names must be the nodes' hostname labels),
a container running ``image`` with the tasks in its environment, and CPU and memory requests
where they are known. The affinity of a running Pod cannot be changed, so a new placement is
applied as new pod templates (``kubectl apply``), never as a patch to Pods.

The result is one ``v1 List`` document (what ``kubectl apply -f`` takes in JSON), or with
:func:`manifests_yaml` a multi-document YAML of the same objects. Docs: docs/engines.md,
"Kubernetes"; the objects validate against Kubernetes' own schemas (``kubernetes-validate``,
strict) and ``engines/schemas/kubernetes-manifests.schema.json`` states our conventions.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import numpy as np
import yaml

from streamsched.engines.heron import cores_per_load
from streamsched.engines.placement_check import check_exportable, worker_slots
from streamsched.errors import InputError
from streamsched.model.cluster import Cluster
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.model.units import CORES

#: A placeholder: the image of the application's worker process, given with ``--image``.
DEFAULT_IMAGE = "streamsched/worker:latest"
HOSTNAME_LABEL = "kubernetes.io/hostname"
KINDS = ("Deployment", "StatefulSet")
PER = ("worker", "task")
#: Annotation (on the object and its pod template) listing the streamsched task ids it runs.
TASKS_ANNOTATION = "streamsched/tasks"
NODE_ANNOTATION = "streamsched/node"
#: Names stay short enough for the pods a StatefulSet derives from them (controller-revision-hash
#: label = name + "-" + 10 characters, at most 63).
MAX_NAME = 52
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def kubernetes_manifests(graph: TaskGraph, cluster: Cluster, placement: Placement, per: str = "worker",
                         image: str = DEFAULT_IMAGE, kind: str = "Deployment", cpu_per_load: float | None = None,
                         namespace: str | None = None, hostname_label: str = HOSTNAME_LABEL) -> dict[str, Any]:
    """A ``v1 List`` of one ``kind`` object (one replica) per used worker or per task, each pinned
    to its node by required node affinity on ``hostname_label``.

    CPU requests are in cores: a ``cores`` graph's loads; a ``tasks`` graph's loads x
    ``cpu_per_load`` when it is given, else no CPU request (unit loads are no CPU amount).
    Memory requests are the tasks' ``memory_mb`` when the graph has them.
    """
    if per not in PER:
        raise InputError(f"--per: {per!r} is not one of {', '.join(PER)}")
    if kind not in KINDS:
        raise InputError(f"--kind: {kind!r} is not one of {', '.join(KINDS)}")
    if not isinstance(image, str) or not image.strip() or any(c.isspace() for c in image):
        raise InputError(f"--image: {image!r} is not an image reference")
    check_exportable(graph, cluster, placement)
    scale = None if cpu_per_load is None and graph.load_unit != CORES else cores_per_load(graph, cpu_per_load)
    worker = worker_slots(placement)
    groups: dict[tuple, list[int]] = {}
    for t in np.argsort(graph.task_ids, kind="stable").tolist():
        node = int(placement.node_of[t])
        key = (node, int(worker[t])) if per == "worker" else (node, t)
        groups.setdefault(key, []).append(t)
    keys = sorted(groups) if per == "worker" else list(groups)
    raw_names = [f"{graph.name}-{cluster.nodes[node].name}-w{second}" if per == "worker" else
                 f"{graph.name}-{graph.task_label(second).replace('[', '-').rstrip(']')}" for node, second in keys]
    names = unique_names(raw_names)
    app = _label_value(_dns(graph.name))
    items = []
    for key, name in zip(keys, names):
        node_index, slot = key
        tasks = groups[key]
        node = cluster.nodes[node_index].name
        if len(node) > 63 or not _LABEL_VALUE.match(node):
            raise InputError(f"cluster {cluster.name!r}: node {node!r} is not a valid value of label "
                             f"{hostname_label} (at most 63 of [A-Za-z0-9-_.], alphanumeric at both ends)")
        task_list = ",".join(str(int(graph.task_ids[t])) for t in tasks)
        labels = {"app.kubernetes.io/name": app, "app.kubernetes.io/component": per,
                  "app.kubernetes.io/managed-by": "streamsched", "streamsched/worker": name}
        annotations = {TASKS_ANNOTATION: task_list, NODE_ANNOTATION: node}
        container: dict[str, Any] = {
            "name": per,
            "image": image,
            "env": [
                {"name": "STREAMSCHED_TOPOLOGY", "value": graph.name},
                {"name": "STREAMSCHED_TASKS", "value": task_list},
                {"name": "STREAMSCHED_NODE", "value": node},
            ],
        }
        if per == "worker":
            container["env"].append({"name": "STREAMSCHED_WORKER", "value": str(slot)})
        requests = _requests(graph, tasks, scale)
        if requests:
            container["resources"] = {"requests": requests}
        spec: dict[str, Any] = {
            "replicas": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": app, "streamsched/worker": name}},
            "template": {
                "metadata": {"labels": dict(labels), "annotations": dict(annotations)},
                "spec": {
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [
                            {"key": hostname_label, "operator": "In", "values": [node]}]}]}}},
                    "containers": [container],
                },
            },
        }
        if kind == "Deployment":
            spec["strategy"] = {"type": "Recreate"}  # never two copies of a worker's tasks at once
        else:
            spec["serviceName"] = name
        metadata: dict[str, Any] = {"name": name, "labels": labels, "annotations": annotations}
        if namespace is not None:
            metadata["namespace"] = namespace
        items.append({"apiVersion": "apps/v1", "kind": kind, "metadata": metadata, "spec": spec})
    return {"apiVersion": "v1", "kind": "List", "items": items}


def manifests_yaml(document: dict[str, Any]) -> str:
    """The List's objects as a multi-document YAML stream (``---`` between objects)."""
    return yaml.safe_dump_all(document["items"], sort_keys=False, default_flow_style=False)


def manifest_tasks(document: Any) -> list[int]:
    """Every task id the manifests run, in order (a List, or the objects of a YAML stream)."""
    items = document["items"] if isinstance(document, dict) else document
    return [int(t) for item in items for t in item["metadata"]["annotations"][TASKS_ANNOTATION].split(",")]


def _requests(graph: TaskGraph, tasks: list[int], scale: float | None) -> dict[str, str]:
    out = {}
    if scale is not None:
        millicores = int(round(float(graph.load[tasks].sum()) * scale * 1000))
        if millicores > 0:
            out["cpu"] = f"{millicores}m"
    memory = float(graph.memory_mb[tasks].sum())
    if memory > 0:
        out["memory"] = f"{int(np.ceil(memory))}Mi"
    return out


def _dns(name: str) -> str:
    """A DNS-1123 label: lower case [a-z0-9-], starting with a letter, ending alphanumeric."""
    out = re.sub(r"-+", "-", "".join(c if c.isascii() and c.isalnum() else "-" for c in name.lower())).strip("-")
    if not out or not out[0].isalpha():
        out = f"s-{out}".rstrip("-")
    return out


def _label_value(text: str) -> str:
    return text[:63].rstrip("-._")


def unique_names(raw: list[str], limit: int = MAX_NAME) -> list[str]:
    """DNS-1123 names of at most ``limit`` characters, one per raw name; where cleaning or
    shortening makes two equal (or a name is too long), a hash of the raw name tells them apart."""
    cleaned = [_dns(r) for r in raw]
    counts: dict[str, int] = {}
    for c in cleaned:
        counts[c] = counts.get(c, 0) + 1
    out = []
    for r, c in zip(raw, cleaned):
        if len(c) > limit or counts[c] > 1:
            digest = hashlib.sha1(r.encode()).hexdigest()[:8]
            c = f"{c[:limit - 9].rstrip('-')}-{digest}"
        out.append(c)
    if len(set(out)) != len(out):  # a raw name listed twice: the caller's mistake
        raise InputError(f"two manifests would be named {sorted(n for n in out if out.count(n) > 1)[0]!r}")
    return out
