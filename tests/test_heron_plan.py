"""Heron export (issue 13, item 5): the placement as Heron's ``PackingPlan`` protobuf message in
the JSON mapping, parsed by protobuf against a message definition written here from the fields
of Heron's ``heron/proto/packing_plan.proto``, and checked against our JSON Schema."""

from __future__ import annotations

import json
from dataclasses import replace
from importlib import resources

import jsonschema
import numpy as np
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

from streamsched import workloads
from streamsched.cli import main
from streamsched.engines.heron import GIB, heron_packing_plan, heron_plan_tasks, heron_task_numbers
from streamsched.errors import InputError
from streamsched.model.cluster import Cluster
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.schedulers import get_scheduler

_F = descriptor_pb2.FieldDescriptorProto
#: heron/proto/packing_plan.proto as field tables: (name, number, label, type, message type).
PROTO = {
    "Resource": [("cpu", 1, "required", "double", None), ("ram", 2, "required", "int64", None),
                 ("disk", 3, "required", "int64", None)],
    "InstancePlan": [("component_name", 1, "required", "string", None), ("task_id", 2, "required", "int32", None),
                     ("component_index", 3, "required", "int32", None),
                     ("resource", 4, "required", "message", "Resource")],
    "ContainerPlan": [("id", 1, "required", "int32", None),
                      ("instance_plans", 2, "repeated", "message", "InstancePlan"),
                      ("requiredResource", 3, "required", "message", "Resource"),
                      ("scheduledResource", 4, "optional", "message", "Resource")],
    "PackingPlan": [("id", 1, "required", "string", None),
                    ("container_plans", 2, "repeated", "message", "ContainerPlan")],
}


def _packing_plan_class():
    proto = descriptor_pb2.FileDescriptorProto(name="heron/proto/packing_plan.proto",
                                               package="heron.proto.system", syntax="proto2")
    for message, fields in PROTO.items():
        out = proto.message_type.add(name=message)
        for name, number, label, kind, type_name in fields:
            field = out.field.add(name=name, number=number, label=getattr(_F, f"LABEL_{label.upper()}"),
                                  type=getattr(_F, f"TYPE_{kind.upper()}"))
            if type_name:
                field.type_name = f".heron.proto.system.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("heron.proto.system.PackingPlan"))


PackingPlan = _packing_plan_class()
SCHEMA = json.loads(resources.files("streamsched.engines").joinpath("schemas/heron-packing-plan.schema.json").read_text())


def parse(document: dict):
    """The plan as protobuf parses it: unknown or mistyped fields fail, required ones must be set,
    and printing it back gives the document unchanged (it is the canonical JSON mapping)."""
    message = json_format.Parse(json.dumps(document), PackingPlan(), ignore_unknown_fields=False)
    assert message.IsInitialized(), message.FindInitializationErrors()
    assert json_format.MessageToDict(message) == document
    jsonschema.validate(document, SCHEMA)
    return message


def _alternating(graph: TaskGraph, cluster: Cluster) -> Placement:
    nodes = np.arange(graph.n_tasks) % cluster.n_nodes
    return Placement.build(nodes, (np.arange(graph.n_tasks) // cluster.n_nodes) % 2)


def test_the_harness_refuses_what_heron_would():
    good = {"id": "t", "containerPlans": [{"id": 1, "requiredResource": {"cpu": 1.0, "ram": "1", "disk": "1"}}]}
    parse(good)
    with pytest.raises(json_format.ParseError, match="no field named"):
        json_format.Parse(json.dumps({**good, "container_plan": []}), PackingPlan(), ignore_unknown_fields=False)
    bad = {"id": "t", "containerPlans": [{"id": 1, "node": "n1", "requiredResource": good["containerPlans"][0]["requiredResource"]}]}
    with pytest.raises(json_format.ParseError, match='no field named "node"'):
        json_format.Parse(json.dumps(bad), PackingPlan(), ignore_unknown_fields=False)
    missing = json_format.Parse(json.dumps({"id": "t", "containerPlans": [{"id": 1}]}), PackingPlan())
    assert missing.FindInitializationErrors() == ["container_plans[0].requiredResource"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"id": "t", "containerPlans": [{"id": 0, "requiredResource": good["containerPlans"][0]["requiredResource"]}]}, SCHEMA)


@pytest.mark.parametrize("name", ["diamond-30", "wordcount", "taxi-routes", "star-16"])
def test_plans_parse_and_name_every_task_once(name):
    graph, cluster = workloads.workload(name), workloads.cluster("high-low-3-3")
    for placement in (get_scheduler("even").schedule(graph, cluster), _alternating(graph, cluster)):
        plan = heron_packing_plan(graph, cluster, placement)
        message = parse(plan)
        ids = [i.task_id for c in message.container_plans for i in c.instance_plans]
        assert sorted(ids) == list(range(1, graph.n_tasks + 1))
        assert sorted(heron_plan_tasks(plan, graph)) == sorted(graph.task_ids.tolist())
        assert [c.id for c in message.container_plans] == list(range(1, len(message.container_plans) + 1))
        per_component: dict[str, list[int]] = {}
        for c in message.container_plans:
            for i in c.instance_plans:
                per_component.setdefault(i.component_name, []).append(i.component_index)
        for component, indexes in per_component.items():
            assert sorted(indexes) == list(range(graph.operator_tasks(component).size))


def test_containers_follow_the_placement_by_hand():
    # Tasks 10..14 (ids not from 0): a = 10, 11, 12; b = 13, 14. Node n1 worker 0: 10, 13;
    # n1 worker 1: 11; n2 worker 0: 12, 14.
    graph = TaskGraph.build("t", ["a", "b"], [0, 0, 0, 1, 1], [0.5, 0.25, 1.0, 2.0, 0.125], [0, 1], [3, 4],
                            [1.0, 1.0], task_ids=[10, 11, 12, 13, 14], memory_mb=[0, 0, 0, 256, 0],
                            load_unit="cores")
    cluster = Cluster.from_types("c", (2, {"capacity": 4, "slots": 2}), capacity_unit="cores")
    placement = Placement.build([0, 0, 1, 0, 1], [0, 1, 0, 0, 0])
    plan = heron_packing_plan(graph, cluster, placement, topology_id="t-1-1714557600")
    parse(plan)
    assert plan["id"] == "t-1-1714557600"
    instances = [[(i["componentName"], i["taskId"], i["componentIndex"]) for i in c["instancePlans"]]
                 for c in plan["containerPlans"]]
    assert instances == [[("a", 1, 0), ("b", 4, 0)], [("a", 2, 1)], [("a", 3, 2), ("b", 5, 1)]]
    first = plan["containerPlans"][0]
    assert [i["resource"] for i in first["instancePlans"]] == [
        {"cpu": 0.5, "ram": str(GIB), "disk": str(GIB)},
        {"cpu": 2.0, "ram": str(256 << 20), "disk": str(GIB)},
    ]
    # Required = the instances + Heron's default padding (1 core, 1 GiB RAM, 1 GiB disk).
    assert first["requiredResource"] == {"cpu": 3.5, "ram": str(2 * GIB + (256 << 20)), "disk": str(3 * GIB)}
    assert "scheduledResource" not in first
    assert heron_plan_tasks(plan, graph) == [10, 13, 11, 12, 14]
    assert heron_plan_tasks(plan) == [1, 4, 2, 3, 5]
    unpadded = heron_packing_plan(graph, cluster, placement, padding={"cpu": 0.0, "ram": 0, "disk": 0})
    assert unpadded["containerPlans"][2]["requiredResource"] == {"cpu": 1.125, "ram": str(2 * GIB), "disk": str(2 * GIB)}


def test_cpu_is_in_cores():
    graph = workloads.workload("linear-10")  # ten unit loads, in tasks
    cluster = workloads.cluster("homogeneous-10")
    placement = Placement.build(np.arange(10) // 4, np.zeros(10))
    plan = heron_packing_plan(graph, cluster, placement, padding={"cpu": 0.0})
    assert [len(c["instancePlans"]) for c in plan["containerPlans"]] == [4, 4, 2]
    assert plan["containerPlans"][0]["requiredResource"]["cpu"] == 4.0  # default: 1 core per unit load
    quarter = heron_packing_plan(graph, cluster, placement, cpu_per_load=0.25, padding={"cpu": 0.0})
    assert {i["resource"]["cpu"] for c in quarter["containerPlans"] for i in c["instancePlans"]} == {0.25}
    measured = replace(graph, load=np.full(10, 0.3), load_unit="cores")
    cores = heron_packing_plan(measured, cluster.in_cores(), placement)
    assert {i["resource"]["cpu"] for c in cores["containerPlans"] for i in c["instancePlans"]} == {0.3}
    with pytest.raises(InputError, match="--cpu-per-load: graph 'linear-10' has loads in cores already"):
        heron_packing_plan(measured, cluster.in_cores(), placement, cpu_per_load=0.5)
    with pytest.raises(InputError, match="--cpu-per-load: must be a number > 0"):
        heron_packing_plan(graph, cluster, placement, cpu_per_load=0)


def test_task_numbers_follow_task_ids():
    graph = TaskGraph.build("g", ["x", "y"], [1, 0, 1, 0], np.ones(4), [], [], [], task_ids=[7, 3, 5, 9])
    task_id, index = heron_task_numbers(graph)
    assert task_id.tolist() == [3, 1, 2, 4]
    assert index.tolist() == [1, 0, 0, 1]


def test_cli_export_heron(tmp_path, capsys):
    placement = tmp_path / "p.json"
    assert main(["schedule", "-w", "wordcount", "-c", "high-low-1-2", "-o", str(placement)]) == 0
    capsys.readouterr()
    out = tmp_path / "plan.json"
    assert main(["export", str(placement), "-w", "wordcount", "-c", "high-low-1-2", "--format", "heron",
                 "--cpu-per-load", "0.25", "--topology-id", "wordcount-7", "-o", str(out)]) == 0
    plan = json.loads(out.read_text())
    parse(plan)
    assert plan["id"] == "wordcount-7"
    graph = workloads.workload("wordcount")
    load = dict(zip(graph.task_ids.tolist(), graph.load.tolist()))
    cpus = [i["resource"]["cpu"] for c in plan["containerPlans"] for i in c["instancePlans"]]
    assert cpus == pytest.approx([0.25 * load[t] for t in heron_plan_tasks(plan, graph)])
