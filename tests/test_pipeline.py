"""The JVM-free half of the monitoring pipeline: snapshot store, generator, exports and the CLI
commands that need no Spark (re-planning: test_replanning.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.csv as pcsv
import pytest

from streamsched import workloads
from streamsched.cli import main
from streamsched.errors import InputError
from streamsched.model.cluster import Cluster
from streamsched.model.graph_files import read_graph
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.pipeline import store as store_module
from streamsched.engines.exports import exported_tasks, export
from streamsched.engines.storm.plan import storm_plan
from streamsched.pipeline.generate import generate_metrics
from streamsched.pipeline.store import list_snapshots, load_snapshot, read_manifest, write_snapshot
from streamsched.schedulers import get_scheduler

SRC = Path(__file__).resolve().parents[1] / "src"


def _by_task(graph: TaskGraph):
    ids = graph.task_ids
    edges = sorted((int(ids[s]), int(ids[d]), float(r), float(b))
                   for s, d, r, b in zip(graph.src, graph.dst, graph.rate, graph.bytes_rate))
    tasks = sorted((int(t), graph.operator_names[o], float(l))
                   for t, o, l in zip(ids, graph.task_operator, graph.load))
    return edges, tasks


# ------------------------------------------------------------------------------------ store
def test_snapshot_written_then_read_gives_the_same_graph(tmp_path):
    graph = workloads.workload("taxi-routes")
    path = write_snapshot(tmp_path, graph, {"window": {"kind": "sliding", "seconds": 60, "end": 1.7e9}})
    again = load_snapshot(path)
    assert again.name == "taxi-routes"
    assert _by_task(again) == _by_task(graph)
    manifest = read_manifest(path)
    assert manifest["n_tasks"] == graph.n_tasks and manifest["n_edges"] == graph.n_edges
    assert path.name.startswith("000001-20231114T")
    # History is kept: a second snapshot gets the next number; the core reader loads it directly.
    second = write_snapshot(tmp_path, graph, {"window": {"end": 1.7e9 + 60}})
    assert list_snapshots(tmp_path, "taxi-routes") == [path, second]
    assert read_graph(second / "taxi-routes.parquet").n_edges == graph.n_edges


def test_failed_write_leaves_no_half_snapshot(tmp_path, monkeypatch):
    graph = workloads.workload("diamond-12")

    def crash(path, data):
        raise OSError("disk full")

    monkeypatch.setattr(store_module, "_write_json", crash)
    with pytest.raises(OSError):
        write_snapshot(tmp_path, graph, {})
    root = store_module.snapshot_root(tmp_path, graph.name)
    assert list_snapshots(tmp_path) == []
    assert list(root.iterdir()) == []  # the temporary directory was removed too


def test_process_killed_mid_write_leaves_no_half_snapshot(tmp_path):
    """A hard crash (os._exit after the edges are written) leaves only a hidden .tmp- directory."""
    script = f"""
import os, sys
sys.path.insert(0, {str(SRC)!r})
from streamsched import workloads
from streamsched.pipeline import store
store._write_json = lambda path, data: os._exit(9)
store.write_snapshot({str(tmp_path)!r}, workloads.workload("diamond-12"), {{}})
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert result.returncode == 9
    root = store_module.snapshot_root(tmp_path, "diamond-12")
    leftovers = list(root.iterdir())
    assert len(leftovers) == 1 and leftovers[0].name.startswith(".tmp-")
    assert (leftovers[0] / "diamond-12.parquet").exists()  # it really crashed mid-write
    assert list_snapshots(tmp_path) == []
    assert load_snapshot(write_snapshot(tmp_path, workloads.workload("diamond-12"), {})).n_tasks == 12
    assert [p.name[:6] for p in list_snapshots(tmp_path)] == ["000001"]


def test_not_a_snapshot_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="not a snapshot"):
        load_snapshot(tmp_path)


# -------------------------------------------------------------------------------- generator
def test_generator_counts_and_determinism(tmp_path):
    graph = workloads.workload("star-10")
    a = generate_metrics(graph, tmp_path / "a", rows=1000, dirty=0.07, noise=0.2, skew=0.5, seed=5, rows_per_file=400)
    b = generate_metrics(graph, tmp_path / "b", rows=1000, dirty=0.07, noise=0.2, skew=0.5, seed=5, rows_per_file=400)
    intervals = -(-1000 // graph.n_edges)
    assert a["intervals"] == intervals
    assert a["load_rows"] == intervals * graph.n_tasks
    clean = intervals * graph.n_edges
    assert a["traffic_rows"] == clean + sum(a["dirty"].values())
    assert set(a["dirty"]) == {"malformed", "wrong_type", "negative", "unknown_task", "out_of_range",
                               "duplicate", "missing"}
    lines = sum(len(Path(f).read_text().splitlines()) - 1 for f in a["files"] if "traffic" in Path(f).name)
    assert lines == a["traffic_rows"]
    for fa, fb in zip(a["files"], b["files"]):
        assert Path(fa).read_bytes() == Path(fb).read_bytes()


def test_generator_without_noise_gives_the_graph_rates(tmp_path):
    graph = workloads.workload("linear-10")
    summary = generate_metrics(graph, tmp_path, rows=160, dirty=0.0, noise=0.0, rate_scale=50.0)
    table = pcsv.read_csv(summary["files"][0])
    assert set(table.column("tuples").to_pylist()) == {50.0}  # rate 1 per pair x 50 x 1 s
    assert table.num_rows == summary["traffic_rows"] == 160


def test_generator_parquet_and_bad_arguments(tmp_path):
    graph = workloads.workload("diamond-12")
    summary = generate_metrics(graph, tmp_path, rows=300, fmt="parquet", dirty=0.1)
    assert not set(summary["dirty"]) & {"malformed", "wrong_type"}  # typed columns cannot hold them
    with pytest.raises(InputError, match="--dirty"):
        generate_metrics(graph, tmp_path, dirty=1.5)
    with pytest.raises(InputError, match="--format"):
        generate_metrics(graph, tmp_path, fmt="xml")


# ---------------------------------------------------------------------------------- exports
def _alternating(graph: TaskGraph, cluster: Cluster) -> Placement:
    """Round robin over nodes, two workers each: splits every component across slots."""
    nodes = np.arange(graph.n_tasks) % cluster.n_nodes
    return Placement.build(nodes, (np.arange(graph.n_tasks) // cluster.n_nodes) % 2)


@pytest.mark.parametrize("name", ["diamond-30", "wordcount", "taxi-routes", "star-16"])
@pytest.mark.parametrize("fmt", ["storm", "heron", "kubernetes"])
def test_every_task_exported_exactly_once(name, fmt):
    graph, cluster = workloads.workload(name), workloads.cluster("high-low-3-3")
    for placement in (get_scheduler("even").schedule(graph, cluster), _alternating(graph, cluster)):
        document = export(fmt, graph, cluster, placement)
        assert sorted(exported_tasks(fmt, document, graph)) == sorted(graph.task_ids.tolist())


@pytest.mark.parametrize("name", ["diamond-30", "wordcount", "taxi-routes"])
def test_storm_executors_stay_in_their_component_and_slot(name):
    graph, cluster = workloads.workload(name), workloads.cluster("high-low-3-3")
    placement = _alternating(graph, cluster)
    document = storm_plan(graph, cluster, placement)
    component_of = {int(t): graph.operator_names[o] for t, o in zip(graph.task_ids, graph.task_operator)}
    index = {int(t): k for k, t in enumerate(graph.task_ids)}
    rows = {(r["start"], r["end"]): r for r in document["executors"]}
    for row in rows.values():
        assert {component_of[t] for t in row["graph_tasks"]} <= {row["component"]}
    node_index = {n.name: k for k, n in enumerate(cluster.nodes)}
    for slot in document["assignments"]:
        for start, end in slot["executors"]:
            for t in rows[(start, end)]["graph_tasks"]:
                assert node_index[slot["node"]] == placement.node_of[index[t]]
                assert slot["port"] == 6700 + placement.worker_of[index[t]]


def test_storm_plan_numbers_tasks_as_nimbus_by_hand():
    # Components sorted as strings: __acker (1 task: topology.workers defaults to 1) = task 1,
    # a = 2..5, b = 6; one executor per task. The acker goes to the first slot the plan uses.
    graph = TaskGraph.build("t", ["a", "b"], [0, 0, 0, 0, 1], np.ones(5), [0], [4], [1.0])
    cluster = Cluster.from_types("c", (2, {"capacity": 5}))
    placement = Placement.build([0, 0, 1, 0, 1], [0, 0, 0, 0, 1])
    document = storm_plan(graph, cluster, placement)
    assert [(s["node"], s["port"], s["executors"]) for s in document["assignments"]] == [
        ("n1", 6700, [[1, 1], [2, 2], [3, 3], [5, 5]]),
        ("n2", 6700, [[4, 4]]),
        ("n2", 6701, [[6, 6]]),
    ]
    assert [(r["component"], r["graph_tasks"]) for r in document["executors"]] == [
        ("__acker", []), ("a", [0]), ("a", [1]), ("a", [2]), ("a", [3]), ("b", [4])]


def test_heron_and_kubernetes_by_worker():
    graph = workloads.workload("linear-10")
    cluster = workloads.cluster("homogeneous-10")
    placement = Placement.build(np.arange(10) // 4, np.zeros(10))
    plan = export("heron", graph, cluster, placement)  # Heron's task ids: ours + 1
    assert [[i["taskId"] for i in c["instancePlans"]] for c in plan["containerPlans"]] == [
        [1, 2, 3, 4], [5, 6, 7, 8], [9, 10]]
    assert plan["containerPlans"][0]["requiredResource"]["cpu"] == 4.0 + 1.0  # 1 core per unit load + padding
    manifests = export("kubernetes", graph, cluster, placement, per="worker")
    items = manifests["items"]
    assert [i["metadata"]["name"] for i in items] == ["linear-10-n1-w0", "linear-10-n2-w0", "linear-10-n3-w0"]
    term = items[2]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["n3"]
    assert exported_tasks("kubernetes", manifests) == list(range(10))


def test_invalid_placement_is_not_exported():
    graph = workloads.workload("linear-10")
    cluster = Cluster.from_types("tiny", (2, {"capacity": 3}))
    with pytest.raises(InputError, match="cannot be exported"):
        export("storm", graph, cluster, Placement.build(np.zeros(10)))


# -------------------------------------------------------------------------------------- CLI
def test_cli_gen_metrics_and_export(tmp_path, capsys):
    assert main(["gen-metrics", "-w", "diamond-12", "--out", str(tmp_path / "m"), "--rows", "200"]) == 0
    assert (tmp_path / "m" / "traffic-00000.csv").exists()
    placement = tmp_path / "p.json"
    assert main(["schedule", "-w", "diamond-12", "-c", "homogeneous-10", "-o", str(placement)]) == 0
    capsys.readouterr()
    out = tmp_path / "storm.json"
    assert main(["export", str(placement), "-w", "diamond-12", "-c", "homogeneous-10", "--format", "storm",
                 "-o", str(out)]) == 0
    assert sorted(exported_tasks("storm", json.loads(out.read_text()))) == list(range(12))
    snapshot = write_snapshot(tmp_path / "store", workloads.workload("diamond-12"), {})
    assert main(["export", str(placement), "--graph", str(snapshot), "-c", "homogeneous-10",
                 "--format", "kubernetes"]) == 0
    manifests = json.loads(capsys.readouterr().out)
    assert manifests["kind"] == "List" and sorted(exported_tasks("kubernetes", manifests)) == list(range(12))


def test_cli_bad_input_is_one_line_exit_2(tmp_path, capsys):
    assert main(["export", str(tmp_path / "none.json"), "-w", "diamond-12", "--format", "storm"]) == 2
    assert main(["gen-metrics", "-w", "diamond-12", "--out", str(tmp_path), "--dirty", "2"]) == 2
    assert main(["ingest", str(tmp_path / "missing"), "--store", str(tmp_path / "s")]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 3 and all(line.startswith("error:") for line in errors)
