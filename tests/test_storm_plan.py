"""Storm plans: Storm's task ids and executors as Nimbus computes them, the plan's JSON Schema,
and a placement exported and read back (docs/engines.md, "Storm").

Storm sources cited (apache/storm): ``storm-client/.../daemon/StormCommon.java``
(``stormTaskInfoImpl``, ``addAcker``, ``metricsConsumerBoltSpecs``), ``storm-server/.../daemon/
nimbus/Nimbus.java`` (``computeExecutors``, ``startTopology``), ``storm-client/.../utils/Utils.java``
(``partitionFixed``, ``integerDivided``), ``conf/defaults.yaml`` (``topology.workers: 1``,
``topology.acker.executors: null``, ``topology.eventlogger.executors: 0``).
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from streamsched import workloads
from streamsched.engines.exports import export, exported_tasks
from streamsched.engines.storm import ui_rest
from streamsched.engines.storm.plan import (
    PLAN_FORMAT, StormExecutor, StormLayout, java_order, layout_from_graph, nimbus_executors, nimbus_task_ids,
    partition_fixed, placement_from_plan, storm_plan, system_components,
)
from streamsched.errors import InputError
from streamsched.model import Cluster, Placement, TaskGraph, Topology
from streamsched.model.topology import Operator, Stream
from streamsched.schedulers import get_scheduler

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "src/streamsched/engines/schemas/storm-plan.schema.json"
SCHEMA = json.loads(SCHEMA_PATH.read_text())
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "storm_ui" / "wordcount"
LOGGING_CONSUMER = "org.apache.storm.metric.LoggingMetricsConsumer"


def validate(document) -> None:
    jsonschema.Draft202012Validator(SCHEMA).validate(json.loads(json.dumps(document)))


def ranges(executors) -> list[tuple[str, int, int]]:
    return [(e.component, e.start, e.end) for e in executors]


# ------------------------------------------------------------------- Nimbus' numbering
def test_partition_fixed_as_utils_partition_fixed():
    # Utils.partitionFixed: integerDivided(n, k) chunk sizes, largest first, empty chunks dropped.
    # Its javadoc's examples (5, [1..9]) and (3, [1..10]); for (5, [1, 2, 3]) the javadoc says
    # [[1, 2, 3]] but the code gives chunks of 1 (integerDivided(3, 5) = {1: 3, 0: 2}).
    assert partition_fixed(5, list(range(1, 10))) == [[1, 2], [3, 4], [5, 6], [7, 8], [9]]
    assert partition_fixed(3, list(range(1, 11))) == [[1, 2, 3, 4], [5, 6, 7], [8, 9, 10]]
    assert partition_fixed(5, [1, 2, 3]) == [[1], [2], [3]]
    assert partition_fixed(0, [1, 2]) == []
    assert partition_fixed(2, []) == []


def test_component_ids_sort_as_java_strings():
    # StormCommon.stormTaskInfoImpl keys a TreeMap by component id: Java's String.compareTo
    # orders UTF-16 code units, so "__" (0x5F) sorts after upper case and before lower case,
    # and a character beyond U+FFFF (a surrogate pair, 0xD800...) before U+FFFF.
    names = ["spout", "__acker", "Zeta", "count", "\uffff", "\U00010000"]
    assert sorted(names, key=java_order) == ["Zeta", "__acker", "count", "spout", "\U00010000", "\uffff"]
    ids = nimbus_task_ids({"spout": 2, "__acker": 1, "Zeta": 3})
    assert {k: (v.start, v.stop - 1) for k, v in ids.items()} == {"Zeta": (1, 3), "__acker": (4, 4), "spout": (5, 6)}


def test_system_components_as_storm_adds_them():
    # addAcker: topology.acker.executors (null) -> topology.workers, tasks = executors;
    # metricsConsumerBoltSpecs: "__metrics" + class, a repeated class "#2"; event loggers 0 by default.
    assert system_components() == {"__acker": (1, 1)}
    assert system_components(workers=3) == {"__acker": (3, 3)}
    assert system_components(workers=3, ackers=0, event_loggers=None,
                             metrics_consumers=[(LOGGING_CONSUMER, 1), (LOGGING_CONSUMER, 2)]) == {
        "__acker": (0, 0), "__eventlogger": (3, 3),
        f"__metrics{LOGGING_CONSUMER}": (1, 1), f"__metrics{LOGGING_CONSUMER}#2": (2, 2)}


def test_wordcount_task_ids_and_executors_as_nimbus():
    # streamsched.workloads' wordcount is storm-starter's WordCountTopology: spout 5, split 8,
    # count 12, one executor per task (parallelism hint = topology.tasks).
    graph = workloads.workload("wordcount")
    layout = layout_from_graph(graph)  # topology.workers 1 -> one acker
    assert ranges(layout.executors) == (
        [("__acker", 1, 1)] + [("count", t, t) for t in range(2, 14)]
        + [("split", t, t) for t in range(14, 22)] + [("spout", t, t) for t in range(22, 27)])
    # WordCountTopology sets topology.workers 3, so three ackers: spout tasks 24-28, 28 tasks and
    # 28 executors, exactly the executors "[24-24]" ... "[28-28]" and tasksTotal 28 of the
    # sample responses in Storm's docs/STORM-UI-REST-API.md.
    layout = layout_from_graph(graph, workers=3)
    assert ranges(layout.component_executors("spout")) == [("spout", t, t) for t in range(24, 29)]
    assert ranges(layout.component_executors("count")) == [("count", t, t) for t in range(4, 16)]
    assert len(layout.executors) == 28 and layout.executors[-1].end == 28


def _hinted_graph() -> TaskGraph:
    topology = Topology("hinted", (
        Operator("spout", 4, "source", source_rate=100.0), Operator("bolt", 7),
        Operator("Alpha", 2, "sink")),
        (Stream("spout", "bolt"), Stream("bolt", "Alpha")))
    return TaskGraph.from_topology(topology)


def test_parallelism_hints_below_task_counts_by_hand():
    # setSpout("spout", .., 2).setNumTasks(4); setBolt("bolt", .., 3).setNumTasks(7);
    # setBolt("Alpha", .., 5).setNumTasks(2); topology.acker.executors 2; a LoggingMetricsConsumer.
    # stormTaskInfoImpl (Java order): Alpha 1-2, __acker 3-4, __metrics... 5, bolt 6-12, spout 13-16.
    # computeExecutors / partitionFixed: Alpha min(5, 2) = [1-1] [2-2]; bolt 7 tasks in 3 = 3,2,2:
    # [6-8] [9-10] [11-12]; spout 4 in 2: [13-14] [15-16]; system components one task each.
    layout = layout_from_graph(_hinted_graph(), executors={"spout": 2, "bolt": 3, "Alpha": 5}, ackers=2,
                               metrics_consumers=[(LOGGING_CONSUMER, 1)])
    assert ranges(layout.executors) == [
        ("Alpha", 1, 1), ("Alpha", 2, 2), ("__acker", 3, 3), ("__acker", 4, 4),
        (f"__metrics{LOGGING_CONSUMER}", 5, 5),
        ("bolt", 6, 8), ("bolt", 9, 10), ("bolt", 11, 12), ("spout", 13, 14), ("spout", 15, 16)]
    assert ranges(nimbus_executors({"b": (7, 3)})) == [("b", 1, 3), ("b", 4, 5), ("b", 6, 7)]


def test_plan_of_tasks_sharing_an_executor():
    graph = _hinted_graph()  # tasks: spout 0-3, bolt 4-10, Alpha 11-12 (declaration order)
    cluster = Cluster.from_types("c", (2, {"capacity": 50, "slots": 2}))
    # bolt's executors hold graph tasks (4, 5, 6), (7, 8), (9, 10); spout's (0, 1), (2, 3)
    node = [0, 0, 1, 1, 0, 0, 0, 1, 1, 0, 0, 1, 0]
    worker = [0, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0]
    options = dict(executors={"spout": 2, "bolt": 3}, ackers=2, topology_id="hinted-1-1714557000")
    document = storm_plan(graph, cluster, Placement.build(node, worker), **options)
    validate(document)
    assert document["topology_id"] == "hinted-1-1714557000" and document["executors_from"] == "nimbus"
    slots = {(s["node"], s["port"]): s["executors"] for s in document["assignments"]}
    # Without a metrics consumer: Alpha 1-2, __acker 3-4, bolt 5-11 = [5-7] [8-9] [10-11],
    # spout 12-15 = [12-13] [14-15]. Alpha's graph tasks 11, 12 are [1-1], [2-2]; the ackers go
    # round robin over the slots the plan uses, in slot order.
    assert slots == {("n1", 6700): [[2, 2], [3, 3], [12, 13]], ("n1", 6701): [[4, 4], [5, 7], [10, 11]],
                     ("n2", 6700): [[1, 1], [8, 9]], ("n2", 6701): [[14, 15]]}
    rows = {(r["start"], r["end"]): r["graph_tasks"] for r in document["executors"]}
    assert rows[(5, 7)] == [4, 5, 6] and rows[(12, 13)] == [0, 1] and rows[(3, 3)] == []
    node[5] = 1  # graph task 5 leaves executor [5-7]'s slot: Storm cannot split an executor
    with pytest.raises(InputError, match=r"executor \[5-7\] of 'bolt'.*several slots"):
        storm_plan(graph, cluster, Placement.build(node, worker), **options)


# ------------------------------------------------------------------- plans and schema
def _alternating(graph: TaskGraph, cluster: Cluster) -> Placement:
    nodes = np.arange(graph.n_tasks) % cluster.n_nodes
    return Placement.build(nodes, (np.arange(graph.n_tasks) // cluster.n_nodes) % 2)


@pytest.mark.parametrize("name", ["wordcount", "diamond-30", "taxi-routes"])
def test_plan_validates_names_every_executor_once_and_reads_back(name):
    graph, cluster = workloads.workload(name), workloads.cluster("high-low-3-3")
    for placement in (get_scheduler("even").schedule(graph, cluster), _alternating(graph, cluster)):
        supervisors = {n.name: f"sup-{n.name}" for n in cluster.nodes}
        document = export("storm", graph, cluster, placement, storm={"supervisors": supervisors, "workers": 3})
        validate(document)
        assert document["format"] == PLAN_FORMAT
        assigned = sorted((s, e) for slot in document["assignments"] for s, e in slot["executors"])
        assert assigned == [(r["start"], r["end"]) for r in document["executors"]]
        tasks = [t for s, e in assigned for t in range(s, e + 1)]
        assert tasks == list(range(1, graph.n_tasks + 3 + 1))  # 3 ackers, ids from 1, no gap
        assert sorted(exported_tasks("storm", document)) == sorted(graph.task_ids.tolist())
        assert {slot["supervisor_id"] for slot in document["assignments"]} <= set(supervisors.values())
        layout = layout_from_graph(graph, supervisors=supervisors)
        back = placement_from_plan(document, graph, cluster, layout)
        assert np.array_equal(back.node_of, placement.node_of)
        assert np.array_equal(back.worker_of, np.where(placement.worker_of < 0, 0, placement.worker_of))


def test_schema_refuses_what_assign_cannot_take():
    graph, cluster = workloads.workload("wordcount"), workloads.cluster("high-low-1-2")
    document = storm_plan(graph, cluster, get_scheduler("even").schedule(graph, cluster))
    validate(document)
    for broken in ({**document, "topology_id": 7},
                   {**document, "assignments": [{**document["assignments"][0], "port": 0}]},
                   {**document, "assignments": [{**document["assignments"][0], "executors": [[1]]}]},
                   {**document, "assignments": [{**document["assignments"][0], "executors": [[0, 1]]}]},
                   {k: v for k, v in document.items() if k != "executors"}):
        with pytest.raises(jsonschema.ValidationError):
            validate(broken)


def test_plan_from_storm_ui_data_reproduces_the_current_assignment():
    reading = ui_rest.estimate(ui_rest.read_dir(FIXTURE))
    document = storm_plan(reading.graph, reading.cluster, reading.placement, layout=reading.layout)
    validate(document)
    assert document["topology_id"] == "wordcount-3-1714557000" and document["executors_from"] == "storm-ui"
    slot_of = {(s, e): (slot["supervisor_id"], slot["port"]) for slot in document["assignments"]
               for s, e in slot["executors"]}
    supervisor = {"node1.example.com": "5c3e4a0e-9b1f-4d7e-8e43-0f1c2d3e4a01-10.0.0.11",
                  "node2.example.com": "b7d1f2a9-2c4e-4b6a-9d8f-1a2b3c4d5e02-10.0.0.12"}
    seen = 0
    for component in ("spout", "split", "count"):
        page = json.loads((FIXTURE / f"component-{component}.json").read_text())
        for row in page["executorStats"]:
            start, end = (int(x) for x in row["id"].strip("[]").split("-"))
            assert slot_of[(start, end)] == (supervisor[row["host"]], row["port"])
            seen += 1
    assert seen == 18 and sorted(slot_of) == [(e.start, e.end) for e in reading.layout.executors]
    back = placement_from_plan(document, reading.graph, reading.cluster, reading.layout)
    assert np.array_equal(back.node_of, reading.placement.node_of)
    assert np.array_equal(back.worker_of, reading.placement.worker_of)


def test_a_new_placement_on_the_observed_cluster_round_trips():
    reading = ui_rest.estimate(ui_rest.read_dir(FIXTURE))
    placement = get_scheduler("i-scheduler").schedule(reading.graph, reading.cluster, seed=1)
    document = storm_plan(reading.graph, reading.cluster, placement, layout=reading.layout)
    validate(document)
    back = placement_from_plan(document, reading.graph, reading.cluster, reading.layout)
    assert np.array_equal(back.node_of, placement.node_of)
    assert np.array_equal(back.worker_of, np.where(placement.worker_of < 0, 0, placement.worker_of))
    ports = {slot["port"] for slot in document["assignments"]}
    assert ports <= {6700, 6701, 6702, 6703}


def test_graph_and_storm_topology_must_match():
    reading = ui_rest.estimate(ui_rest.read_dir(FIXTURE))
    graph, cluster = workloads.workload("exclamation"), workloads.cluster("high-low-1-2")
    placement = get_scheduler("even").schedule(graph, cluster)
    with pytest.raises(InputError, match="not a component of Storm topology 'wordcount'"):
        storm_plan(graph, cluster, placement, layout=reading.layout)
    with pytest.raises(InputError, match="apply only without Storm UI data"):
        storm_plan(reading.graph, reading.cluster, reading.placement, layout=reading.layout, ackers=2)
    # The workload's wordcount has 12 count tasks (graph ids 13-24), the running topology 12
    # count tasks in 5 executors: graph tasks map to Storm tasks, grouped by executor.
    wordcount = workloads.workload("wordcount")
    big = Cluster.from_types("big", (1, {"capacity": 1000.0}))
    plan = storm_plan(wordcount, big, Placement.build(np.zeros(wordcount.n_tasks, int)), layout=reading.layout)
    assert [r["graph_tasks"] for r in plan["executors"] if r["component"] == "count"] == [
        [13, 14, 15], [16, 17, 18], [19, 20], [21, 22], [23, 24]]
    hinted = _hinted_graph()
    with pytest.raises(InputError, match="graph 'hinted' has 7 tasks of it, Storm has 2 executors and 5 tasks"):
        storm_plan(hinted, big, Placement.build(np.zeros(hinted.n_tasks, int)),
                   layout=StormLayout("hinted", None, tuple(nimbus_executors(
                       {"spout": (4, 4), "bolt": (5, 2), "Alpha": (2, 2)}))))
    with pytest.raises(InputError, match="starts with '__'"):
        layout_from_graph(TaskGraph.build("t", ["__x"], [0], [1.0], [], [], []))
    with pytest.raises(InputError, match="is not an operator"):
        layout_from_graph(wordcount, executors={"nope": 2})


def test_executor_dataclass():
    executor = StormExecutor("__acker", 3, 4)
    assert executor.system and list(executor.tasks) == [3, 4]


# --------------------------------------------------------------------------------- the CLI
def test_cli_export_storm_from_storm_ui_data(tmp_path, capsys):
    from streamsched.cli import main

    out = tmp_path / "now"
    assert main(["read-engine", "storm-ui", "--dir", str(FIXTURE), "--out", str(out), "--json"]) == 0
    plan = tmp_path / "plan.json"
    assert main(["export", str(out / "placement.json"), "--graph", str(out / "graph.json"),
                 "--cluster", str(out / "cluster.yaml"), "--format", "storm", "--storm-ui-dir", str(FIXTURE),
                 "-o", str(plan)]) == 0
    document = json.loads(plan.read_text())
    validate(document)
    assert document["topology_id"] == "wordcount-3-1714557000"
    assert len(document["executors"]) == 22  # every executor Nimbus made, ackers and metrics consumer included
    capsys.readouterr()
    assert main(["export", str(out / "placement.json"), "--graph", str(out / "graph.json"), "--cluster",
                 str(out / "cluster.yaml"), "--format", "storm", "--storm-ui-dir", str(FIXTURE), "--ackers", "2"]) == 2
    assert main(["export", str(out / "placement.json"), "--graph", str(out / "graph.json"), "--cluster",
                 str(out / "cluster.yaml"), "--format", "heron", "--ackers", "2"]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 2 and all(line.startswith("error:") for line in errors)


def test_cli_export_storm_with_parallelism_hints(tmp_path, capsys):
    from streamsched.cli import main

    cluster = tmp_path / "c.yaml"
    cluster.write_text("name: one\nnodes:\n  - {name: big, capacity: 1000, slots: 2}\n")
    placement = tmp_path / "p.json"
    assert main(["schedule", "-w", "wordcount", "-c", str(cluster), "-s", "even", "-p", "workers=1",
                 "-o", str(placement)]) == 0
    capsys.readouterr()
    assert main(["export", str(placement), "-w", "wordcount", "-c", str(cluster), "--format", "storm",
                 "--ackers", "3", "--executors", "count=5", "--topology-id", "wordcount-1-1714557000",
                 "--supervisor", "big=sup-1"]) == 0
    document = json.loads(capsys.readouterr().out)
    validate(document)
    counts = [(r["start"], r["end"]) for r in document["executors"] if r["component"] == "count"]
    assert counts == [(4, 6), (7, 9), (10, 11), (12, 13), (14, 15)]  # 12 tasks from 4 (3 ackers first)
    assert {s["supervisor_id"] for s in document["assignments"]} == {"sup-1"}
    assert main(["export", str(placement), "-w", "wordcount", "-c", str(cluster), "--format", "storm",
                 "--executors", "count"]) == 2
