"""The streamsched CLI, run in-process: outputs, files, exit codes and one-line errors."""

from __future__ import annotations

import json

import pytest

from streamsched import workloads
from streamsched.cli import main
from streamsched.model import Placement


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_compare_json_lists_each_scheduler(capsys):
    code, out, _ = run(capsys, "compare", "--workload", "diamond-30", "--cluster", "heterogeneous-10",
                       "--schedulers", "even", "--json")
    assert code == 0
    data = json.loads(out)
    (row,) = data["results"]
    assert row["scheduler"] == "even" and row["valid"] is True
    assert row["nodes_used"] == 10 and row["inter_node_traffic"] == 160.0 and row["wall_time_s"] >= 0


def test_schedule_then_evaluate(tmp_path, capsys):
    out_file = tmp_path / "p.json"
    code, out, _ = run(capsys, "schedule", "-w", "wordcount", "-c", "high-low-1-2", "-s", "even",
                       "--param", "workers=3", "--seed", "4", "--out", str(out_file), "--json")
    assert code == 0
    meta = json.loads(out)["metadata"]
    assert meta["params"] == {"workers": 3, "strict": False} and meta["seed"] == 4
    saved = json.loads(out_file.read_text())["metadata"]
    for key in ("scheduler", "params", "seed", "wall_time_s", "cost"):
        assert key in saved
    graph, cluster = workloads.workload("wordcount"), workloads.cluster("high-low-1-2")
    assert Placement.read(out_file, graph, cluster).violations(graph, cluster) == []
    code, out, _ = run(capsys, "evaluate", str(out_file), "-w", "wordcount", "-c", "high-low-1-2", "--json")
    assert code == 0 and json.loads(out)["inter_node_traffic"] == saved["cost"]


def test_graph_and_cluster_files(tmp_path, capsys):
    (tmp_path / "c.yaml").write_text("name: two\nnode_types:\n  - {count: 2, capacity: 3}\n")
    (tmp_path / "g.csv").write_text("src,dst,rate\n1,2,5\n2,3,1\n3,4,5\n")
    code, out, _ = run(capsys, "schedule", "--graph", str(tmp_path / "g.csv"), "--cluster", str(tmp_path / "c.yaml"),
                       "--json")
    assert code == 0 and json.loads(out)["metrics"]["valid"] is True


def test_list(capsys):
    code, out, _ = run(capsys, "list")
    assert code == 0 and "even" in out and "diamond-N" in out and "heterogeneous-10" in out


@pytest.mark.parametrize("files, argv, message", [
    ({"c.yaml": "nodes: [\n"}, ["schedule", "-w", "linear-10", "-c", "{c.yaml}"], "invalid YAML"),
    ({}, ["schedule", "-w", "no-such-workload"], "unknown workload 'no-such-workload'"),
    ({"c.yaml": "nodes:\n  - {name: a, capacity: -4}\n"}, ["schedule", "-w", "linear-10", "-c", "{c.yaml}"],
     "nodes[0].capacity: must be >= 0"),
    ({"g.csv": "src,dst,rate\n1,2,1\n", "g.tasks.csv": "id,operator,load\n1,a,1\n"},
     ["schedule", "--graph", "{g.csv}"], "line 2: dst 2 is not a known task"),
    ({}, ["schedule", "-w", "linear-10", "--param", "workers=-2"], "even.params.workers"),
    ({}, ["schedule", "-w", "linear-10", "--param", "workers"], "expected k=v"),
    ({}, ["compare", "-w", "linear-10", "--schedulers", "even,nope"], "unknown scheduler 'nope'"),
    ({}, ["schedule", "-w", "linear-10", "--graph", "x.csv"], "exactly one of --workload"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, files, argv, message):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    for name in files:
        argv = [a.replace("{" + name + "}", str(tmp_path / name)) for a in argv]
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert message in err
    assert err.strip().count("\n") == 0 and "Traceback" not in err


def test_infeasible_exits_3(tmp_path, capsys):
    (tmp_path / "c.yaml").write_text("node_types:\n  - {count: 2, capacity: 3}\n")
    code, _, err = run(capsys, "schedule", "-w", "linear-10", "-c", str(tmp_path / "c.yaml"))
    assert code == 3 and "needs load 10" in err and "capacity 6" in err


def test_unknown_option_is_a_usage_error(capsys):
    code, _, err = run(capsys, "schedule", "--frobnicate")
    assert code == 2 and "No such option" in err
