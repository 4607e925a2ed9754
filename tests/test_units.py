"""Units of loads and capacities (issue 13, item 4): ``tasks`` or ``cores`` on both sides,
round-tripped through every graph file format and a snapshot; a graph and a cluster in
different units are one InputError naming both, wherever they meet, never "infeasible"."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pyarrow.csv as pcsv
import pytest

from streamsched import metrics, workloads
from streamsched.cli import main
from streamsched.evaluation.comparison import compare, resolve_names
from streamsched.engines.heron import heron_packing_plan
from streamsched.errors import InputError
from streamsched.model.cluster import Cluster
from streamsched.model.graph_files import read_graph, tasks_path_for, write_graph
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.model.units import check_units
from streamsched.pipeline.store import MANIFEST, load_snapshot, read_manifest, write_snapshot
from streamsched.schedulers import get_scheduler
from streamsched.schedulers.base import schedule_many

BOTH_UNITS = "graph 'measured' has loads in cores but cluster 'heterogeneous-10' has capacity in tasks"


def measured(total: float = 22.4) -> TaskGraph:
    """A measured graph shaped like the issue's example: 30 tasks, 22.4 busy cores in all."""
    n = 30
    load = np.full(n, total / n)
    src, dst = np.arange(n - 1), np.arange(1, n)
    return TaskGraph.build("measured", ["a", "b", "c"], np.arange(n) // 10, load, src, dst,
                           np.full(n - 1, 100.0), task_ids=np.arange(1, n + 1), load_unit="cores")


def cores_cluster() -> Cluster:
    return Cluster.from_dict({"name": "cores-4", "capacity_unit": "cores",
                              "node_types": [{"count": 4, "cores": 8, "slots": 2}]})


# ------------------------------------------------------------------------------ the model
def test_defaults_are_tasks_and_builtins_keep_working():
    for name in ("diamond-30", "wordcount", "linear-10"):
        assert workloads.workload(name).load_unit == "tasks"
    for name in ("homogeneous-10", "heterogeneous-10", "high-low-2-4", "thesis-9", "thesis-9-s4"):
        assert workloads.cluster(name).capacity_unit == "tasks"
    graph, cluster = workloads.workload("diamond-30"), workloads.cluster("heterogeneous-10")
    placement = get_scheduler("even").schedule(graph, cluster)
    assert placement.violations(graph, cluster) == []
    assert graph.summary()["load_unit"] == "tasks"


def test_bad_units_are_named():
    with pytest.raises(InputError, match=r"graph 'g': load_unit: 'watts' is not one of tasks, cores"):
        TaskGraph.build("g", ["a"], [0], [1.0], [], [], [], load_unit="watts")
    with pytest.raises(InputError, match=r"c.yaml.capacity_unit: 'cpu' is not one of tasks, cores"):
        Cluster.from_dict({"capacity_unit": "cpu", "nodes": [{"name": "a", "capacity": 1}]}, where="c.yaml")


def test_cores_cluster_capacity_follows_cores(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: edge\ncapacity_unit: cores\nnodes:\n  - {name: a, cores: 8}\n"
                    "  - {name: b, cores: 4, capacity: 3.5}\nnode_types:\n  - {count: 2, cores: 2}\n")
    cluster = Cluster.load(path)
    assert cluster.capacity_unit == "cores"
    assert cluster.capacity.tolist() == [8.0, 3.5, 2.0, 2.0]
    assert Cluster.from_dict(cluster.to_dict()).capacity_unit == "cores"
    # A tasks cluster still needs its capacities, whatever the cores.
    with pytest.raises(InputError, match=r"nodes\[0\]\.capacity: missing"):
        Cluster.from_dict({"nodes": [{"name": "a", "cores": 4}]})


@pytest.mark.parametrize("node, message", [
    ({"name": "a"}, r"c.yaml.nodes\[0\].capacity: missing \(a cores cluster takes capacity or cores\)"),
    ({"name": "a", "cores": 4, "capacity": 6}, r"c.yaml.nodes\[0\].capacity: 6 cores exceeds the node's cores \(4\)"),
])
def test_bad_cores_nodes(node, message):
    with pytest.raises(InputError, match=message):
        Cluster.from_dict({"capacity_unit": "cores", "nodes": [node]}, where="c.yaml")


def test_in_cores_takes_capacity_from_cores():
    het = workloads.cluster("high-low-1-2").in_cores(0.5)
    assert het.capacity_unit == "cores"
    assert het.capacity.tolist() == [n.cores * 0.5 for n in het.nodes] == [2.0, 1.0, 1.0]


# ------------------------------------------------------------------------------ files
@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".json"])
@pytest.mark.parametrize("unit", ["tasks", "cores"])
def test_unit_round_trips_through_every_graph_format(tmp_path, suffix, unit):
    graph = replace(measured(), load_unit=unit)
    path = tmp_path / f"g{suffix}"
    write_graph(graph, path)
    again = read_graph(path)
    assert again.load_unit == unit
    assert np.allclose(again.load, graph.load) and again.total_load == pytest.approx(22.4)


def test_files_without_a_unit_are_tasks(tmp_path):
    (tmp_path / "g.csv").write_text("src,dst,rate\n1,2,5\n")
    (tmp_path / "g.tasks.csv").write_text("id,operator,load\n1,a,0.5\n2,b,0.7\n")
    assert read_graph(tmp_path / "g.csv").load_unit == "tasks"
    (tmp_path / "h.csv").write_text("src,dst,rate\n1,2,5\n")
    assert read_graph(tmp_path / "h.csv").load_unit == "tasks"  # no tasks table at all
    (tmp_path / "g.json").write_text(json.dumps({"edges": [{"src": 1, "dst": 2, "rate": 1}]}))
    assert read_graph(tmp_path / "g.json").load_unit == "tasks"
    (tmp_path / "s.json").write_text(json.dumps({"nodes": [{"name": "1"}], "links": [{"source": 1, "target": 2, "value": 3}]}))
    assert read_graph(tmp_path / "s.json").load_unit == "tasks"


def test_bad_units_in_files_name_file_and_line(tmp_path):
    write_graph(measured(), tmp_path / "g.csv")
    tasks = tasks_path_for(tmp_path / "g.csv")
    lines = tasks.read_text().splitlines()
    lines[3] = lines[3].replace('"cores"', '"tasks"')
    tasks.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"g.tasks.csv: line 4: load_unit 'tasks' differs from the first row's 'cores'"):
        read_graph(tmp_path / "g.csv")
    table = pcsv.read_csv(tasks)
    pcsv.write_csv(table.set_column(table.column_names.index("load_unit"), "load_unit",
                                    [["ghz"] * table.num_rows]), tasks)
    with pytest.raises(InputError, match=r"g.tasks.csv: line 2: load_unit: 'ghz' is not one of tasks, cores"):
        read_graph(tmp_path / "g.csv")
    doc = {"load_unit": "cores", "tasks": [{"id": 1, "load": 1, "load_unit": "tasks"}],
           "edges": [{"src": 1, "dst": 1, "rate": 1}]}
    (tmp_path / "x.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"x.json: load_unit 'cores' but the tasks table says 'tasks'"):
        read_graph(tmp_path / "x.json")
    (tmp_path / "y.json").write_text(json.dumps({**doc, "load_unit": 3, "tasks": None}))
    with pytest.raises(InputError, match=r"y.json.load_unit: 3 is not one of tasks, cores$"):
        read_graph(tmp_path / "y.json")


def test_unit_round_trips_through_a_snapshot(tmp_path):
    snapshot = write_snapshot(tmp_path / "store", measured(), {"window": {"end": 0.0}})
    assert read_manifest(snapshot)["load_unit"] == "cores"
    assert load_snapshot(snapshot).load_unit == "cores"
    # A snapshot written before units (no manifest field, no column) reads as tasks.
    old = write_snapshot(tmp_path / "store", workloads.workload("linear-10"), {})
    manifest = read_manifest(old)
    del manifest["load_unit"]
    (old / MANIFEST).write_text(json.dumps(manifest))
    assert load_snapshot(old).load_unit == "tasks"
    manifest["load_unit"] = "cores"
    (old / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(InputError, match=r"manifest.json.load_unit: 'cores' but the tasks table says 'tasks'"):
        load_snapshot(old)


# ------------------------------------------------------------------------------ where graph meets cluster
def test_every_meeting_point_refuses_mixed_units():
    graph, cluster = measured(), workloads.cluster("heterogeneous-10")
    placement = Placement.build(np.arange(graph.n_tasks) % cluster.n_nodes)
    calls = {
        "check": lambda: check_units(graph, cluster),
        "schedule": lambda: get_scheduler("even").schedule(graph, cluster),
        "optimal": lambda: get_scheduler("optimal").schedule(graph, cluster),
        "replan": lambda: get_scheduler("metis").replan(graph, cluster, placement),
        "replan-optimal": lambda: get_scheduler("optimal").replan(graph, cluster, placement),
        "compare": lambda: compare(graph, cluster, ["even", "r-storm"]),
        "evaluate": lambda: metrics.evaluate(graph, placement, cluster),
        "violations": lambda: placement.violations(graph, cluster),
        "export": lambda: heron_packing_plan(graph, cluster, placement),
        "schedule-many": lambda: schedule_many(get_scheduler("even"), [graph], cluster),
    }
    for what, call in calls.items():
        with pytest.raises(InputError) as caught:
            call()
        assert str(caught.value).startswith(BOTH_UNITS), what
        assert "\n" not in str(caught.value)
    # The reverse mix too.
    with pytest.raises(InputError, match="has loads in tasks but cluster 'cores-4' has capacity in cores"):
        get_scheduler("even").schedule(workloads.workload("linear-10"), cores_cluster())


def test_same_units_schedule_evaluate_and_stack():
    graph, cluster = measured(), cores_cluster()
    placement = get_scheduler("metis").schedule(graph, cluster, seed=1)
    assert placement.violations(graph, cluster) == []
    assert metrics.evaluate(graph, placement, cluster)["valid"] is True
    # Several topologies: the residual cluster keeps the unit.
    placements = schedule_many(get_scheduler("even", workers=4), [graph, measured(5.0)], cluster)
    assert all(p is not None for p in placements)
    # The measured graph on a built-in cluster counted in cores.
    het = workloads.cluster("heterogeneous-10").in_cores()
    assert get_scheduler("even").schedule(graph, het).violations(graph, het) == []


def test_every_cluster_scheduler_places_a_measured_graph_in_cores():
    graph, cluster = measured(), cores_cluster()
    rows = compare(graph, cluster, resolve_names("all", cluster), params={"time_limit": 2}, seed=1)
    assert {r["scheduler"] for r in rows} >= {"even", "metis", "i-scheduler", "r-storm", "optimal", "isolation"}
    for row in rows:
        assert row["status"] in ("ok", "skipped", "optimal", "feasible"), row
        assert row.get("valid", True), row


def test_cli_mixed_units_exit_2_not_infeasible(tmp_path, capsys):
    """The issue's example: a topology ingested as native CSV (22.4 busy cores) against the
    papers' cluster, which counts tasks."""
    graph_file = tmp_path / "measured.csv"
    write_graph(measured(), graph_file)
    snapshot = write_snapshot(tmp_path / "store", measured(), {})
    for argv in (["schedule", "--graph", str(graph_file), "-c", "heterogeneous-10"],
                 ["compare", "--graph", str(graph_file), "-c", "heterogeneous-10", "--schedulers", "all"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and BOTH_UNITS in err and "Traceback" not in err
    cluster_file = tmp_path / "cores.yaml"
    cluster_file.write_text("name: cores-4\ncapacity_unit: cores\nnode_types:\n  - {count: 4, cores: 8, slots: 2}\n")
    placement = tmp_path / "p.json"
    assert main(["schedule", "--graph", str(graph_file), "-c", str(cluster_file), "-o", str(placement)]) == 0
    capsys.readouterr()
    for argv in (["evaluate", str(placement), "--graph", str(graph_file), "-c", str(cluster_file)],
                 ["export", str(placement), "--graph", str(snapshot), "-c", str(cluster_file), "--format", "heron"]):
        assert main(argv) == 0
    capsys.readouterr()
    het = tmp_path / "het.yaml"
    het.write_text("name: heterogeneous-10\nnodes:\n" + "".join(
        f"  - {{name: n{k}, capacity: 8, slots: 2}}\n" for k in range(1, 5)))
    for argv in (["evaluate", str(placement), "--graph", str(graph_file), "-c", str(het)],
                 ["export", str(placement), "--graph", str(snapshot), "-c", str(het), "--format", "kubernetes"],
                 ["replan", str(placement), "--graph", str(graph_file), "-c", str(het)]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        # The placement's cluster fingerprint is checked first (a placement made for another
        # cluster, issue 16); the units only meet where the placement fits the cluster.
        assert err.count("\n") == 0 and "made for cluster 'cores-4'" in err, argv
    with pytest.raises(InputError, match=BOTH_UNITS):
        Placement.read(placement, measured(), Cluster.load(het)).violations(measured(), Cluster.load(het))


def test_the_unit_of_an_ingest_follows_its_sources():
    """Storm metrics measure busy cores; native rows are in tasks unless ``--load-unit`` says
    otherwise; both at once need it said (issue 13: 22.4 "cores" from native CSV against the
    papers' task capacities was a silent infeasible)."""
    from streamsched.pipeline.ingest import _load_unit

    storm, native = {"storm-log": []}, {"native-load": [], "native-traffic": []}
    assert _load_unit(storm, None, 1.0) == ("cores", None)  # spouts: the median measured load
    assert _load_unit(native, None, 1.0) == ("tasks", 1.0)
    assert _load_unit(native, "cores", 1.0) == ("cores", 1.0)
    with pytest.raises(InputError, match="--load-unit tasks: Storm metrics measure busy cores"):
        _load_unit(storm, "tasks", 1.0)
    with pytest.raises(InputError, match="Storm metrics \\(loads in cores\\) and other sources in one ingest"):
        _load_unit({**storm, **native}, None, 1.0)
    with pytest.raises(InputError, match="--load-unit: 'watts' is not one of tasks, cores"):
        _load_unit(native, "watts", 1.0)
