"""Kubernetes export (issue 13, item 5): every object validates, strict and offline, against the
official schemas of a pinned Kubernetes version (``kubernetes-validate``); the document is a
``v1 List`` (or multi-document YAML); pods are pinned by required node affinity in the pod
template, never by patching a running Pod."""

from __future__ import annotations

import json
from dataclasses import replace
from importlib import resources

import jsonschema
import kubernetes_validate
import numpy as np
import pytest
import yaml

from streamsched import workloads
from streamsched.cli import main
from streamsched.engines.exports import export, exported_tasks
from streamsched.engines.kubernetes import (DEFAULT_IMAGE, kubernetes_manifests, manifest_tasks, manifests_yaml,
                                            unique_names)
from streamsched.errors import InputError
from streamsched.model.cluster import Cluster
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.schedulers import get_scheduler

#: The Kubernetes version the manifests are checked against (schemas shipped by kubernetes-validate).
KUBERNETES_VERSION = "1.32.0"
SCHEMA = json.loads(resources.files("streamsched.engines").joinpath("schemas/kubernetes-manifests.schema.json").read_text())


def validate(document: dict) -> None:
    """The List envelope (kubectl's client-side type: no server schema) and our conventions by
    our JSON Schema; every object by Kubernetes' own schema, strict (no unknown field)."""
    assert document["apiVersion"] == "v1" and document["kind"] == "List"
    jsonschema.validate(document, SCHEMA)
    for kind in {item["kind"] for item in document["items"]}:  # one call per kind: the schemas load once
        items = [item for item in document["items"] if item["kind"] == kind]
        kubernetes_validate.validate({"apiVersion": "apps/v1", "kind": f"{kind}List", "items": items},
                                     KUBERNETES_VERSION, strict=True)
        assert kubernetes_validate.validate(items[0], KUBERNETES_VERSION, strict=True) == "1.32"
    for item in document["items"]:
        spec = item["spec"]
        # The API server's own rules the schema cannot state: the selector selects the template.
        assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
        assert item["kind"] != "Pod"


def _alternating(graph: TaskGraph, cluster: Cluster) -> Placement:
    nodes = np.arange(graph.n_tasks) % cluster.n_nodes
    return Placement.build(nodes, (np.arange(graph.n_tasks) // cluster.n_nodes) % 2)


def _node_of(item: dict) -> str:
    term = item["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    (expression,) = term["nodeSelectorTerms"][0]["matchExpressions"]
    assert expression["key"] == "kubernetes.io/hostname" and expression["operator"] == "In"
    (node,) = expression["values"]
    return node


def test_the_validator_refuses_what_the_api_server_would():
    graph, cluster = workloads.workload("linear-10"), workloads.cluster("homogeneous-10")
    document = kubernetes_manifests(graph, cluster, Placement.build(np.arange(10) // 4, np.zeros(10)))
    validate(document)
    item = document["items"][0]
    broken = json.loads(json.dumps(item))
    del broken["spec"]["template"]["spec"]["containers"]
    with pytest.raises(kubernetes_validate.ValidationError, match="containers"):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)
    with pytest.raises(kubernetes_validate.ValidationError, match="containers"):  # inside a List too
        kubernetes_validate.validate({"apiVersion": "apps/v1", "kind": "DeploymentList",
                                      "items": [document["items"][1], broken]}, KUBERNETES_VERSION, strict=True)
    unknown = json.loads(json.dumps(item))
    unknown["spec"]["template"]["spec"]["node"] = "n1"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(unknown, KUBERNETES_VERSION, strict=True)
    with pytest.raises(jsonschema.ValidationError):  # our schema: pods pinned by affinity only
        pinned = json.loads(json.dumps(document))
        pinned["items"][0]["spec"]["template"]["spec"]["nodeName"] = "n1"
        jsonschema.validate(pinned, SCHEMA)


@pytest.mark.parametrize("name", ["diamond-30", "wordcount", "taxi-routes", "star-16"])
@pytest.mark.parametrize("per", ["worker", "task"])
def test_manifests_validate_and_run_every_task_once_where_placed(name, per):
    graph, cluster = workloads.workload(name), workloads.cluster("high-low-3-3")
    for placement in (get_scheduler("even").schedule(graph, cluster), _alternating(graph, cluster)):
        document = kubernetes_manifests(graph, cluster, placement, per=per)
        validate(document)
        assert sorted(manifest_tasks(document)) == sorted(graph.task_ids.tolist())
        index = {int(t): k for k, t in enumerate(graph.task_ids)}
        workers = set()
        for item in document["items"]:
            tasks = [index[int(t)] for t in item["metadata"]["annotations"]["streamsched/tasks"].split(",")]
            node = _node_of(item)
            assert {cluster.nodes[placement.node_of[t]].name for t in tasks} == {node}
            assert len({int(placement.worker_of[t]) for t in tasks}) == 1
            workers.add((node, int(placement.worker_of[tasks[0]])))
            assert item["spec"]["replicas"] == 1 and item["spec"]["strategy"] == {"type": "Recreate"}
            (container,) = item["spec"]["template"]["spec"]["containers"]
            assert container["image"] == DEFAULT_IMAGE
        if per == "worker":
            assert len(document["items"]) == len(workers)
        else:
            assert len(document["items"]) == graph.n_tasks


def test_by_worker_by_hand():
    graph = workloads.workload("linear-10")
    cluster = workloads.cluster("homogeneous-10")
    placement = Placement.build(np.arange(10) // 4, np.zeros(10))
    document = export("kubernetes", graph, cluster, placement, kubernetes={"image": "registry.local/app:1.2"})
    validate(document)
    items = document["items"]
    assert [i["metadata"]["name"] for i in items] == ["linear-10-n1-w0", "linear-10-n2-w0", "linear-10-n3-w0"]
    assert [_node_of(i) for i in items] == ["n1", "n2", "n3"]
    assert exported_tasks("kubernetes", document) == list(range(10))
    env = {e["name"]: e["value"] for e in items[2]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env == {"STREAMSCHED_TOPOLOGY": "linear-10", "STREAMSCHED_TASKS": "8,9", "STREAMSCHED_NODE": "n3",
                   "STREAMSCHED_WORKER": "0"}
    container = items[2]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.local/app:1.2"
    memory = f"{int(graph.memory_mb[8:].sum())}Mi"
    assert container["resources"] == {"requests": {"memory": memory}}  # unit loads (tasks) are no CPU amount
    quarter = kubernetes_manifests(graph, cluster, placement, cpu_per_load=0.25)
    assert quarter["items"][2]["spec"]["template"]["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "500m", "memory": memory}}


def test_requests_in_cores_and_statefulsets():
    graph = replace(workloads.workload("linear-10"), load=np.full(10, 0.3), load_unit="cores",
                    memory_mb=np.full(10, 100.0))
    cluster = workloads.cluster("homogeneous-10").in_cores()
    placement = Placement.build(np.arange(10) // 4, np.arange(10) % 2)
    document = kubernetes_manifests(graph, cluster, placement, kind="StatefulSet", namespace="streams")
    validate(document)
    first = document["items"][0]
    assert first["kind"] == "StatefulSet" and first["spec"]["serviceName"] == first["metadata"]["name"]
    assert first["metadata"]["namespace"] == "streams"
    assert first["spec"]["template"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "600m", "memory": "200Mi"}}
    with pytest.raises(InputError, match="--kind: 'Pod' is not one of Deployment, StatefulSet"):
        kubernetes_manifests(graph, cluster, placement, kind="Pod")
    with pytest.raises(InputError, match="--per: 'node'"):
        kubernetes_manifests(graph, cluster, placement, per="node")
    with pytest.raises(InputError, match="--image"):
        kubernetes_manifests(graph, cluster, placement, image="two words")


def test_yaml_stream_holds_the_same_objects():
    graph, cluster = workloads.workload("wordcount"), workloads.cluster("high-low-1-2")
    document = kubernetes_manifests(graph, cluster, get_scheduler("even").schedule(graph, cluster))
    objects = list(yaml.safe_load_all(manifests_yaml(document)))
    assert objects == document["items"]
    for item in objects:
        assert kubernetes_validate.validate(item, KUBERNETES_VERSION, strict=True)
    assert manifest_tasks(objects) == manifest_tasks(document)


def test_names_are_dns_labels_and_unique():
    names = unique_names(["Top_1-n1-w0", "top-1-n1-w0", "x" * 80, "9lives"])
    assert names[0] != names[1] and all(len(n) <= 52 for n in names)
    assert names[3] == "s-9lives"
    for name in names:
        assert name[0].isalpha() and name.replace("-", "").isalnum() and name == name.lower()
    graph = TaskGraph.build("My Topology!", ["op_a", "op-a"], [0, 1], np.ones(2), [0], [1], [1.0])
    cluster = Cluster.from_types("c", (1, {"capacity": 4}))
    document = kubernetes_manifests(graph, cluster, Placement.build([0, 0], [0, 0]), per="task")
    validate(document)
    assert len({i["metadata"]["name"] for i in document["items"]}) == 2
    bad = Cluster.from_dict({"nodes": [{"name": "node one", "capacity": 4}]})
    with pytest.raises(InputError, match="node 'node one' is not a valid value of label kubernetes.io/hostname"):
        kubernetes_manifests(graph, bad, Placement.build([0, 0], [0, 0]))


def test_cli_export_kubernetes_list_and_yaml(tmp_path, capsys):
    placement = tmp_path / "p.json"
    assert main(["schedule", "-w", "diamond-12", "-c", "homogeneous-10", "-o", str(placement)]) == 0
    capsys.readouterr()
    assert main(["export", str(placement), "-w", "diamond-12", "-c", "homogeneous-10", "--format", "kubernetes",
                 "--image", "example.org/worker:2", "--kind", "statefulset"]) == 0
    document = json.loads(capsys.readouterr().out)
    validate(document)
    assert {i["kind"] for i in document["items"]} == {"StatefulSet"}
    out = tmp_path / "manifests.yaml"
    assert main(["export", str(placement), "-w", "diamond-12", "-c", "homogeneous-10", "--format", "kubernetes",
                 "--yaml", "--per", "task", "-o", str(out)]) == 0
    objects = list(yaml.safe_load_all(out.read_text()))
    assert len(objects) == 12 and sorted(manifest_tasks(objects)) == list(range(12))
    for argv, message in ((["--format", "heron", "--yaml"], "--yaml: only for --format kubernetes, not heron"),
                          (["--format", "kubernetes", "--kind", "job"], "--kind: 'job' is not one of")):
        assert main(["export", str(placement), "-w", "diamond-12", "-c", "homogeneous-10", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and err.count("\n") == 0
