"""Issue 17 item 6, the plumbing: one graph argument everywhere, readable summaries with
``--json``, operator names in placement files, described workloads and clusters, capacity
checked before long work, and ``reproduce edge-cloud``."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from streamsched import workloads
from streamsched.cli import main
from streamsched.model import Placement
from streamsched.model.graph_files import read_graph
from streamsched.pipeline.store import write_snapshot


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _snapshot(tmp_path: Path) -> Path:
    """A snapshot as ingest stores it (the store's own writer, store.write_snapshot): the
    measured-style graph below under the topology name 'app'."""
    (tmp_path / "g.csv").write_text("src,dst,rate,bytes\n1,2,5.5,550\n2,3,1.25,100\n3,4,5.5,550\n")
    (tmp_path / "g.tasks.csv").write_text("id,operator,load\n1,read,0.7\n2,parse,1.3\n3,parse,0.9\n4,write,0.4\n")
    graph = read_graph(tmp_path / "g.csv")
    from dataclasses import replace

    return write_snapshot(tmp_path / "store", replace(graph, name="app"), {"window": {"end": 1_700_000_060.0}})


# ------------------------------------------------------------------ one graph argument
def test_schedule_takes_the_snapshot_directory_its_parquet_and_the_graph_file(tmp_path, capsys):
    """The directory `ingest` prints and the .parquet inside it read as the same graph, named
    after the manifest's topology; the CSV it came from gives the same traffic."""
    snapshot = _snapshot(tmp_path)
    documents = []
    for graph in (snapshot, snapshot / "app.parquet", tmp_path / "g.csv"):
        code, out, err = run(capsys, "schedule", "--graph", str(graph), "-c", "homogeneous-10", "-s", "even", "--json")
        assert code == 0, err
        documents.append(json.loads(out)["metrics"])
    assert documents[0] == documents[1]
    # even on 10 nodes of capacity 4: one task per node, every edge cut (5.5 + 1.25 + 5.5)
    assert documents[0]["inter_node_traffic"] == documents[2]["inter_node_traffic"] == pytest.approx(12.25)
    code, out, _ = run(capsys, "schedule", "--graph", str(snapshot), "-c", "homogeneous-10")
    assert code == 0 and out.startswith("app on homogeneous-10: even placed 4 tasks")


def test_export_and_evaluate_take_the_snapshot_through_graph(tmp_path, capsys):
    snapshot = _snapshot(tmp_path)
    placement = tmp_path / "p.json"
    assert main(["schedule", "--graph", str(snapshot), "-o", str(placement)]) == 0
    capsys.readouterr()
    code, out, err = run(capsys, "export", str(placement), "--graph", str(snapshot), "--format", "heron")
    assert code == 0, err
    assert json.loads(out)["id"] == "app"  # the plan id defaults to the graph name: the manifest's topology
    code, out, err = run(capsys, "evaluate", str(placement), "--graph", str(snapshot / "app.parquet"), "--json")
    assert code == 0 and json.loads(out)["valid"] is True


def test_a_store_or_a_missing_graph_is_one_line_exit_2(tmp_path, capsys):
    snapshot = _snapshot(tmp_path)
    code, _, err = run(capsys, "schedule", "--graph", str(tmp_path / "store"))
    assert code == 2 and err.count("\n") == 1
    assert "a snapshot store" in err and str(snapshot) in err
    code, _, err = run(capsys, "schedule", "--graph", str(tmp_path / "nothing"))
    assert code == 2 and err == f"error: {tmp_path / 'nothing'}: file not found\n"
    (tmp_path / "empty").mkdir()
    code, _, err = run(capsys, "schedule", "--graph", str(tmp_path / "empty"))
    assert code == 2 and "neither a snapshot" in err


@pytest.mark.spark
def test_the_snapshot_ingest_prints_is_a_graph_argument(spark, tmp_path, capsys):
    """The real path: gen-metrics -> Spark ingest -> the printed snapshot directory to schedule."""
    from streamsched.pipeline.ingest import Window, ingest

    assert main(["gen-metrics", "-w", "diamond-12", "--out", str(tmp_path / "m"), "--rows", "300", "--dirty", "0"]) == 0
    report = ingest(spark, [tmp_path / "m"], tmp_path / "store", Window(seconds=3600.0))
    capsys.readouterr()
    code, out, err = run(capsys, "schedule", "--graph", report["snapshots"][0], "-c", "homogeneous-10", "--json")
    assert code == 0, err
    assert json.loads(out)["metrics"]["valid"] is True


# ------------------------------------------------------------------ summaries and --json
def test_schedule_summary_states_hand_computed_traffic_and_nodes(tmp_path, capsys):
    """Chain 1-2-3-4 with rates 5, 1, 5 on two nodes of capacity 2: the best cut is the middle
    edge, 1 of 11 tuples/s (9.1 %); each node holds one operator pair."""
    (tmp_path / "c.yaml").write_text("name: two\nnode_types:\n  - {count: 2, capacity: 2}\n")
    (tmp_path / "g.csv").write_text("src,dst,rate\n1,2,5\n2,3,1\n3,4,5\n")
    (tmp_path / "g.tasks.csv").write_text("id,operator,load\n1,a,1\n2,b,1\n3,c,1\n4,d,1\n")
    argv = ["schedule", "--graph", str(tmp_path / "g.csv"), "-c", str(tmp_path / "c.yaml"), "-s", "optimal"]
    code, out, _ = run(capsys, *argv)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("g on two: optimal placed 4 tasks on 2 of 2 nodes")
    assert "inter-node traffic    1 tuples/s  (9.1 % of 11 tuples/s)" in out
    assert sorted(re.sub(r"^\s*\S+\s+", "", line) for line in lines if "x1" in line) == [
        "2 / 2  a x1, b x1", "2 / 2  c x1, d x1"]
    assert lines[-1] == "  valid placement"
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)
    code, out, _ = run(capsys, *argv, "--json")
    assert code == 0 and json.loads(out)["metrics"]["inter_node_traffic"] == 1.0


def test_predict_and_replan_summaries_agree_with_their_json(tmp_path, capsys):
    placement = tmp_path / "p.json"
    assert main(["schedule", "-w", "linear-12", "-c", "homogeneous-10", "-o", str(placement)]) == 0
    capsys.readouterr()
    code, text, _ = run(capsys, "predict", str(placement), "-w", "linear-12")
    code_json, out, _ = run(capsys, "predict", str(placement), "-w", "linear-12", "--json")
    assert code == code_json == 0
    predicted = json.loads(out)
    shown = re.search(r"throughput  ([\d,.]+) tuples/s", text).group(1)
    assert float(shown.replace(",", "")) == pytest.approx(predicted["throughput_tps"], rel=1e-3, abs=0.5)
    assert f"bottleneck  {predicted['bottleneck']} ({predicted['regime']}-bound)" in text
    code, text, _ = run(capsys, "replan", str(placement), "-w", "linear-12", "-m", "0.5")
    code_json, out, _ = run(capsys, "replan", str(placement), "-w", "linear-12", "-m", "0.5", "--json")
    assert code == code_json == 0
    meta, metrics = json.loads(out)["metadata"], json.loads(out)["metrics"]
    assert f"moves {meta['moved']} of 12 tasks at 0.5 each" in text
    assert f"-> {metrics['inter_node_traffic']:.0f} tuples/s" in text


# ------------------------------------------------------------------ operator names
def test_placement_files_name_each_tasks_operator_and_old_files_still_read(tmp_path, capsys):
    placement = tmp_path / "p.json"
    assert main(["schedule", "-w", "wordcount", "-c", "high-low-1-2", "-o", str(placement)]) == 0
    document = json.loads(placement.read_text())
    # wordcount: spout x5, split x8, count x12 (thesis ch. 4), task ids in that order
    assert document["operator"] == ["spout"] * 5 + ["split"] * 8 + ["count"] * 12
    graph, cluster = workloads.workload("wordcount"), workloads.cluster("high-low-1-2")
    current = Placement.read(placement, graph, cluster)
    older = {k: v for k, v in document.items() if k != "operator"}  # written before the field
    (tmp_path / "old.json").write_text(json.dumps(older))
    assert (Placement.read(tmp_path / "old.json", graph, cluster).node_of == current.node_of).all()


def test_a_placement_of_another_graph_with_the_same_task_ids_is_refused(tmp_path, capsys):
    """linear-12 and diamond-12 both number their tasks 0-11; only the operators tell them apart."""
    placement = tmp_path / "p.json"
    assert main(["schedule", "-w", "linear-12", "-o", str(placement)]) == 0
    capsys.readouterr()
    code, _, err = run(capsys, "evaluate", str(placement), "-w", "diamond-12")
    assert code == 2 and err == (f"error: {placement}.operator: task 0 is 'op0' here but 'source' in graph "
                                 "'diamond-12' (a placement of another graph?)\n")
    document = json.loads(placement.read_text())
    document["operator"] = document["operator"][:-1]
    (tmp_path / "short.json").write_text(json.dumps(document))
    code, _, err = run(capsys, "evaluate", str(tmp_path / "short.json"), "-w", "linear-12")
    assert code == 2 and "short.json.operator: expected one operator name" in err


# ------------------------------------------------------------------ list
def test_list_describes_every_workload_and_cluster(capsys):
    names = set(workloads.WORKLOAD_DESCRIPTIONS)
    # the sized micro-benchmarks and CAPSys's profiles are described as families
    fixed = {n for n in workloads.workload_names() if not re.fullmatch(r"(linear|diamond|star)-\d+|caps-.+", n)}
    assert fixed <= names and any(n.startswith("caps-") for n in names) and list(workloads.CLUSTER_DESCRIPTIONS) == workloads.cluster_names()
    rows = {name: (tasks, source) for name, tasks, _, source in workloads.workload_descriptions()}
    assert rows["wordcount"][0] == "25" and rows["payload"][0] == "80"  # 5+8+12; 10 chains of 8
    assert rows["payload"][1] == "fischer-metis-scheduler.txt IV-C"
    code, out, _ = run(capsys, "list", "workloads")
    assert code == 0 and "Payload: Parallel with 3 KB tuples" in out and "linear-N" in out
    code, out, _ = run(capsys, "list", "clusters")
    assert code == 0 and "thesis Table 4.1" in out


def test_list_json_holds_every_registered_scheduler_with_its_tags(capsys):
    from streamsched.schedulers import available, scheduler_class

    code, out, _ = run(capsys, "list", "--json")
    listing = json.loads(out)
    assert code == 0 and set(listing) == {"schedulers", "workloads", "clusters"}
    by_name = {entry["scheduler"]: entry for entry in listing["schedulers"]}
    assert list(by_name) == available()
    assert by_name["optimal"]["tags"] == ["exact", "randomised"] and by_name["even"]["tags"] == []
    assert by_name["topset"]["family"] == "edge" and "needs_edge_nodes" in by_name["topset"]["tags"]
    assert all(len(by_name[n]["parameters"]) == len(scheduler_class(n).params) for n in by_name)
    assert {e["workload"]: e["tasks"] for e in listing["workloads"]}["wordcount"] == "25"
    assert [e["cluster"] for e in json.loads(run(capsys, "list", "clusters", "--json")[1])["clusters"]] \
        == workloads.cluster_names()


# ------------------------------------------------------------------ reproduce edge-cloud
def test_reproduce_edge_cloud_puts_the_papers_statements_beside_the_simulation(tmp_path, capsys):
    """edge-cloud-topset.txt section 5 on the small setup (quick: RW 2 +/- 0.5, 30 intervals),
    without the GAs to stay fast. Each row is the simulation `edge simulate` runs for that cell,
    and the comparison's verdicts follow from those rows."""
    from streamsched.edge.simulation import simulate, summarise

    out = tmp_path / "edge"
    code, text, err = run(capsys, "reproduce", "edge-cloud", "--quick", "--schedulers",
                          "topset,topset-p,edge-only,cloud-only", "-o", str(out))
    assert code == 0, err
    rows = json.loads((out / "results.json").read_text())
    rebalanced = [f"{s}{'' if r == 'none' else '+' + r}" for s in ("topset", "topset-p")
                  for r in ("none", "vertex", "edge", "both")]
    assert sorted(r["label"] for r in rows) == sorted(rebalanced + ["edge-only", "cloud-only"])
    direct = summarise(simulate("small", "rw-0.5", "topset-p", "edge", 0, 30))[0]
    row = next(r for r in rows if r["label"] == "topset-p+edge")
    assert row["intervals"] == 30 and len(row["interval_rows"]) == 30
    for key in ("mean_sum_makespan_s", "total_migrations", "failed", "mean_stabilization_s"):
        assert row[key] == direct[key], key
    assert "interval_rows" not in (out / "results.csv").read_text().splitlines()[0]

    table = (out / "comparison.md").read_text()
    means = {r["label"]: r["mean_sum_makespan_s"] for r in rows if "+" not in r["label"]}
    lowest = min(means, key=means.get)
    assert (f"| Cloud-Only has the least sum of makespans | Fig. 3: 'in all the cases' | lowest mean | "
            f"{lowest} ({means[lowest]:.3g} s) | {'1' if lowest == 'cloud-only' else '0'} of 1 |") in table
    assert f"x{means['topset-p'] / means['topset']:.3f}; <= in" in table
    assert "return no solution beyond" not in table  # a statement about the large setup only
    assert (out / "small-rw-0.5" / "intervals.csv").is_file() and (out / "small-rw-0.5" / "fig3_makespan.png").is_file()
    assert text.startswith("edge-cloud: 10 rows")


# ------------------------------------------------------------------ capacity before long work
def test_demo_checks_the_cluster_before_starting_spark(tmp_path, capsys, monkeypatch):
    """Payload (10 chains of 8 tasks, load 1 each: 80) cannot fit one high VM (capacity 16):
    exit 3 in one line, and Spark is never started (its starter raises here)."""
    import streamsched.cli.pipeline as pipeline_cli

    def no_spark(master):
        raise AssertionError("Spark started before the capacity check")

    monkeypatch.setattr(pipeline_cli, "_spark", no_spark)
    out = tmp_path / "demo"
    code, _, err = run(capsys, "demo", "-w", "fischer-payload-10", "-c", "high-low-1-0", "--out", str(out))
    assert code == 3 and err == ("error: graph 'fischer-payload-10' needs load 80 but cluster 'high-low-1-0' has "
                                 "capacity 16\n")
    code, _, err = run(capsys, "demo", "--schedulers", "even,no-such", "--out", str(out))
    assert code == 2 and err.startswith("error: unknown scheduler 'no-such'") and err.count("\n") == 1
    code, _, err = run(capsys, "demo", "--schedulers", "i-scheduler", "-p", "theta=-1", "--out", str(out))
    assert code == 2 and "theta" in err and err.count("\n") == 1
    code, _, err = run(capsys, "demo", "--model", "no-such-set", "--out", str(out))
    assert code == 2 and "no-such-set" in err and err.count("\n") == 1
    code, _, err = run(capsys, "demo", "--plan-format", "yarn", "--out", str(out))
    assert code == 2 and "--plan-format 'yarn'" in err and err.count("\n") == 1
    assert not out.exists()


def test_gen_metrics_summary_and_json_agree(tmp_path, capsys):
    code, text, _ = run(capsys, "gen-metrics", "-w", "diamond-12", "--out", str(tmp_path / "a"), "--rows", "200")
    assert code == 0
    code, out, _ = run(capsys, "gen-metrics", "-w", "diamond-12", "--out", str(tmp_path / "b"), "--rows", "200", "--json")
    assert code == 0
    summary = json.loads(out)
    assert text.splitlines()[0] == (f"diamond-12: {summary['traffic_rows']} traffic rows and {summary['load_rows']} "
                                    f"load rows over {summary['intervals']} intervals of 1 s (csv, rates x1, seed 0)")
    assert ", ".join(f"{k} {v}" for k, v in summary["dirty"].items()) in text


def test_read_engine_and_edge_simulate_print_summaries_and_take_json(tmp_path, capsys):
    fixture = Path(__file__).parent / "fixtures" / "storm_ui" / "wordcount"
    code, text, _ = run(capsys, "read-engine", "storm-ui", "--dir", str(fixture), "--out", str(tmp_path / "a"))
    assert code == 0
    code, out, _ = run(capsys, "read-engine", "storm-ui", "--dir", str(fixture), "--out", str(tmp_path / "b"), "--json")
    assert code == 0
    graph = json.loads(out)["graph"]
    assert text.startswith(f"storm-ui: {graph['name']}, {graph['tasks']} tasks of {graph['operators']} operators")
    assert f"wrote {tmp_path / 'a' / 'graph.json'}" in text
    metrics = []
    for graph_argument in (tmp_path / "a", tmp_path / "a" / "graph.json"):  # read-engine's OUTDIR is a graph too
        code, out, err = run(capsys, "schedule", "--graph", str(graph_argument), "-c", str(tmp_path / "a" / "cluster.yaml"),
                             "-s", "ols", "--json")
        assert code == 0, err
        metrics.append(json.loads(out)["metrics"])
    assert metrics[0] == metrics[1] and metrics[0]["valid"]
    code, out, _ = run(capsys, "edge", "simulate", "--strategy", "topset,cloud-only", "--intervals", "5",
                       "--no-figures", "--out", str(tmp_path / "e"), "--json")
    assert code == 0
    summary = {row["strategy"]: row for row in json.loads(out)["summary"]}
    assert summary.keys() == {"topset", "cloud-only"} and summary["topset"]["intervals"] == 5


# ------------------------------------------------------------------ watch and collect summaries
def test_watch_summary_adds_up_its_report():
    """watch's readable lines restate the report's accounting: read = accepted + quarantined +
    dropped late (12 = 8 + 3 + 1), one line per window, one per decision."""
    from streamsched.cli.summaries import watch_lines

    report = {"rows_read": 12, "rows_accepted": 8, "rows_quarantined": {"bad_header": 2, "negative_count": 1},
              "rows_dropped_late": 1, "assignments_emitted": 1, "windows_open": 1, "watermark": 1_700_000_020.0,
              "windows": [{"end": 1_700_000_010.0, "read": 12, "accepted": 8, "dropped_late": 1,
                           "quarantined": {"bad_header": 2, "negative_count": 1}, "snapshots": ["s/app/1"]}],
              "decisions": [{"topology": "app", "why": "initial", "moved": 4, "improvement_pct": None,
                             "emitted": True, "assignment": "a/app-1.placement.json"}]}
    assert watch_lines(report) == [
        "read 12 rows = 8 accepted + 3 quarantined (bad_header 2, negative_count 1) + 1 dropped late",
        "  window ending 2023-11-14 22:13:30 UTC: 12 read, 8 accepted, 3 quarantined, 1 late; snapshot s/app/1",
        "  app: initial, 4 tasks moved: emitted a/app-1.placement.json",
        "1 assignments emitted; 1 windows still open (watermark 2023-11-14 22:13:40 UTC)"]


def test_collect_log_once_prints_a_line_or_json(tmp_path, capsys):
    log = tmp_path / "traffic.log"
    log.write_text("ts,topology,src_task,dst_task,tuples,bytes\n1700000000,app,0,1,5,50\n1700000001,app,0")
    code, out, _ = run(capsys, "collect", "log", str(log), "--out", str(tmp_path / "c"), "--once")
    assert code == 0 and out.startswith(f"2 lines into chunks from {log}; next: line 3 at byte 67, chunk 2")
    with log.open("a") as handle:
        handle.write(",1,7,70\n")  # the half line completed
    code, out, _ = run(capsys, "collect", "log", str(log), "--out", str(tmp_path / "c"), "--once", "--json")
    document = json.loads(out)
    assert code == 0 and document["lines"] == 1 and document["line"] == 4 and document["seq"] == 3


@pytest.mark.parametrize("engine, fixture", [("storm-ui", "storm_ui/wordcount"), ("flink", "flink/live-job")])
def test_read_engine_summary_leads_with_the_current_placements_remote_traffic(engine, fixture, tmp_path, capsys):
    """The first figure after what was read: what the running placement sends between nodes and
    between workers, summed here edge by edge from the files the command wrote."""
    out = tmp_path / "read"
    code, text, _ = run(capsys, "read-engine", engine, "--dir", str(Path(__file__).parent / "fixtures" / fixture),
                        "--out", str(out))
    assert code == 0
    graph = json.loads((out / "graph.json").read_text())
    placement = json.loads((out / "placement.json").read_text())
    where = {task: (node, worker) for task, node, worker in zip(placement["tasks"], placement["node"],
                                                                 placement["worker"])}
    total = cross_nodes = cross_workers = 0.0
    for edge in graph["edges"]:
        (a_node, a_worker), (b_node, b_worker) = where[edge["src"]], where[edge["dst"]]
        total += edge["rate"]
        cross_nodes += edge["rate"] * (a_node != b_node)
        cross_workers += edge["rate"] * ((a_node, a_worker) != (b_node, b_worker))
    assert 0 < cross_nodes < total
    second = text.splitlines()[1]
    assert second == (f"  current placement: {cross_nodes:,.0f} of {total:,.0f} tuples/s cross nodes "
                      f"({100 * cross_nodes / total:.1f} %), {cross_workers:,.0f} cross workers")
    code, out_json, _ = run(capsys, "read-engine", engine, "--dir", str(Path(__file__).parent / "fixtures" / fixture),
                            "--out", str(tmp_path / "again"), "--json")
    assert json.loads(out_json)["current"]["inter_node_traffic"] == pytest.approx(cross_nodes)


@pytest.mark.parametrize("epoch, text", [(1_700_000_010, "2023-11-14 22:13:30 UTC"), (0, "1970-01-01 00:00:00 UTC"),
                                         (1_795_627_110.25, "2026-11-25 17:18:30.250 UTC"), (None, "-")])
def test_epoch_times_print_as_utc_dates(epoch, text):
    from streamsched.cli.summaries import when

    assert when(epoch) == text


def test_verbose_logs_during_its_command_only(capsys):
    """``--verbose`` logs DEBUG to the stderr of its own call; the next call in the same process
    (the tests run hundreds) keeps no handler on that stream, which may be closed by then."""
    import logging

    logger = logging.getLogger("streamsched")
    assert main(["--verbose", "schedule", "-s", "even", "-w", "linear-10", "-c", "homogeneous-10"]) == 0
    assert logger.handlers == [] and logger.level == logging.NOTSET
    logging.getLogger("streamsched.check").debug("after the command")
    assert "after the command" not in capsys.readouterr().err
