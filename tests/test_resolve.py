"""The one resolver (streamsched.resolve): every command, the experiments and the main job turn
names and paths into graphs and clusters the same way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamsched import resolve, workloads
from streamsched.cli import main
from streamsched.errors import InputError
from streamsched.model.cluster import Cluster

FLINK_CAPTURE = Path(__file__).parent / "fixtures" / "flink" / "live-job"


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_demo_names_work_in_every_command(capsys, tmp_path):
    """``fischer-payload-10`` / ``fischer-11`` were known to the demo only (issue 28)."""
    code, out, _ = _run(capsys, "compare", "-w", "fischer-payload-10", "-c", "fischer-11", "--schedulers",
                        "even,metis", "--json")
    assert code == 0
    document = json.loads(out)
    assert document["workload"] == "fischer-payload-10" and document["cluster"] == "fischer-11"
    even = next(r for r in document["results"] if r["scheduler"] == "even")
    # 80 tasks, 70 pairs of 1000 tuples/s; round robin over 11 single-slot iMacs keeps no pair
    # together unless both ends land on one machine
    graph, cluster = workloads.workload("fischer-payload-10"), workloads.cluster("fischer-11")
    assert graph.n_tasks == 80 and graph.n_edges == 70 and cluster.n_nodes == 11
    assert 0 < even["inter_node_traffic"] <= 70_000
    code, out, _ = _run(capsys, "list", "workloads")
    assert code == 0 and "fischer-payload-P" in out
    code, out, _ = _run(capsys, "list", "clusters")
    assert code == 0 and "fischer-N" in out
    code, _, _ = _run(capsys, "schedule", "-w", "fischer-payload-10", "-c", "fischer-11", "-s", "metis",
                      "-o", str(tmp_path / "p.json"))
    assert code == 0 and (tmp_path / "p.json").is_file()


def test_a_read_engine_directory_brings_its_cluster(capsys, tmp_path):
    out_dir = tmp_path / "now"
    code, _, _ = _run(capsys, "read-engine", "flink", "--dir", str(FLINK_CAPTURE), "--out", str(out_dir))
    assert code == 0
    brought = Cluster.load(out_dir / "cluster.yaml")
    graph, cluster = resolve.inputs(None, out_dir, None)
    assert cluster.capacity_unit == "cores" and [n.name for n in cluster.nodes] == [n.name for n in brought.nodes]
    code, out, _ = _run(capsys, "schedule", "--graph", str(out_dir), "-s", "even", "-o", str(tmp_path / "p.json"))
    assert code == 0, out
    assert json.loads((tmp_path / "p.json").read_text())["cluster"] == brought.name
    # naming the default cluster explicitly fails on units, and says how to fix it
    code, _, err = _run(capsys, "schedule", "--graph", str(out_dir), "-c", "homogeneous-10", "-s", "even")
    assert code == 2 and err.count("\n") == 1 and "omit --cluster" in err and str(out_dir / "cluster.yaml") in err


def test_without_a_graph_directory_the_default_cluster_is_used(tmp_path):
    graph, cluster = resolve.inputs("linear-10", None, None)
    assert cluster.name == resolve.DEFAULT_CLUSTER and graph.n_tasks == 10
    with pytest.raises(InputError, match="exactly one of"):
        resolve.graph("linear-10", tmp_path)
    with pytest.raises(InputError, match="unknown cluster 'fischer-0'"):
        resolve.cluster("fischer-0")


def test_a_cyclic_graph_compares_alike_with_and_without_a_report(capsys, tmp_path):
    """One run_schedulers with one prediction code: a cycle is a row's ``prediction_error``
    either way (it used to exit 2 only with --report)."""
    edges = tmp_path / "cycle.csv"
    edges.write_text("src,dst,rate\n0,1,10\n1,2,10\n2,0,10\n")
    code, out, _ = _run(capsys, "compare", "--graph", str(edges), "--schedulers", "even,metis", "--json")
    assert code == 0
    plain = {r["scheduler"]: r for r in json.loads(out)["results"]}
    report = tmp_path / "r" / "report.html"
    report.parent.mkdir()
    code, out, _ = _run(capsys, "compare", "--graph", str(edges), "--schedulers", "even,metis", "--json",
                        "--report", str(report))
    assert code == 0 and report.is_file()
    reported = {r["scheduler"]: r for r in json.loads(out)["results"]}
    for name in ("even", "metis"):
        assert plain[name]["inter_node_traffic"] == reported[name]["inter_node_traffic"]
        assert ("prediction_error" in plain[name]) == ("prediction_error" in reported[name])
