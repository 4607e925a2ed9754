"""The Spark half of the monitoring pipeline, on the shared session fixture.

Fixtures in tests/fixtures/pipeline/ are made by us; every expected value below is computed by
hand from them (T0 = 1700000000).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamsched import workloads
from streamsched.errors import InputError
from streamsched.model.cluster import Cluster
from streamsched.pipeline.blocks import BLOCK, blobs
from streamsched.pipeline.generate import generate_metrics
from streamsched.pipeline.ingest import Window, ingest, window_rates
from streamsched.pipeline.merge import MergeWindow, merge_group
from streamsched.schedulers.base import Scheduler
from streamsched.schedulers.replanning import Replanner
from streamsched.pipeline.sources import Options
from streamsched.pipeline.store import list_snapshots, load_snapshot, read_manifest
from streamsched.pipeline.watch import Watch

pytestmark = pytest.mark.spark

FIXTURES = Path(__file__).parent / "fixtures" / "pipeline"
T0 = 1_700_000_000


def _rates(graph) -> dict[tuple[int, int], tuple[float, float]]:
    ids = graph.task_ids
    return {(int(ids[s]), int(ids[d])): (float(r), float(b))
            for s, d, r, b in zip(graph.src, graph.dst, graph.rate, graph.bytes_rate)}


def _loads(graph) -> dict[int, tuple[str, float]]:
    return {int(t): (graph.operator_names[o], float(l))
            for t, o, l in zip(graph.task_ids, graph.task_operator, graph.load)}


def _quarantine_reasons(path: str) -> dict[str, int]:
    table = pq.read_table(path)
    reasons, counts = np.unique(np.asarray(table.column("reason").to_pylist()), return_counts=True)
    return dict(zip(reasons.tolist(), counts.tolist()))


@pytest.fixture()
def spark_small(spark):
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    return spark


def test_native_csv_jsonl_parquet_rates_and_quarantine(spark_small, tmp_path):
    inputs = tmp_path / "in"
    shutil.copytree(FIXTURES / "native", inputs)
    pq.write_table(pa.table({
        "timestamp": [T0 + 1.0, T0 + 2.0], "topology": ["beta", "beta"], "src_task": [7, 8],
        "dst_task": [8, 7], "tuples": [6.0, 4.0], "bytes": [60.0, 40.0]}), inputs / "traffic-beta.parquet")
    report = ingest(spark_small, [inputs], tmp_path / "store", Window(seconds=10))

    # 12 alpha traffic lines + 5 alpha load rows + 3 beta JSON lines + 2 beta Parquet rows.
    assert report["rows_read"] == 22
    assert report["rows_accepted"] == 11
    assert report["rows_quarantined"] == {
        "duplicate": 3, "malformed": 3, "missing_field": 1, "negative_count": 1, "timestamp_out_of_range": 1,
        "unknown_task": 1, "wrong_type": 1}
    assert report["rows_read"] == report["rows_accepted"] + sum(report["rows_quarantined"].values())
    assert _quarantine_reasons(report["quarantine"]) == report["rows_quarantined"]

    by_topology = {read_manifest(p)["topology"]: p for p in report["snapshots"]}
    alpha = load_snapshot(by_topology["alpha"])
    # Window (T0, T0+10]: R(1,2) = (30 + 50) / 10; R(1,3) = 20 / 10 (its duplicate and the row at
    # T0, age 10, are out); a missing byte count is 0.
    assert _rates(alpha) == {(1, 2): (8.0, 80.0), (1, 3): (2.0, 0.0)}
    assert _loads(alpha) == {1: ("src", 1.0), 2: ("dst", 2.0), 3: ("dst", 3.0)}
    beta = load_snapshot(by_topology["beta"])
    # End T0+2, window (T0-8, T0+2]: (6 + 9) / 10 and 4 / 10; no load samples -> load 1, "task".
    assert _rates(beta) == {(7, 8): (1.5, 15.0), (8, 7): (0.4, 4.0)}
    assert _loads(beta) == {7: ("task", 1.0), 8: ("task", 1.0)}
    manifest = read_manifest(by_topology["alpha"])
    assert manifest["window"] == {"kind": "sliding", "seconds": 10, "start": T0, "end": T0 + 10}
    assert manifest["schema_version"] == 1 and manifest["tasks_with_default_load"] == 0


def test_storm_log_sendgraph_and_aniello_tables(spark_small, tmp_path):
    inputs = tmp_path / "in"
    shutil.copytree(FIXTURES / "foreign", inputs)
    os.utime(inputs / "aniello-load-1.csv", (T0 + 20, T0 + 20))  # no timestamp column: file time
    # Storm's loads are busy cores: the other sources' loads are said to be cores too.
    options = Options(topology="wc", storm_interval_s=10, rate_interval_s=20, load_unit="cores")
    report = ingest(spark_small, [inputs], tmp_path / "store", Window(seconds=20), options)

    # Storm: 11 lines (7 used, 4 bad); sendgraph: 9 records (8 links + 1 broken file);
    # Aniello: 4 traffic + 2 load rows.
    assert report["rows_read"] == 26
    assert report["rows_accepted"] == 17
    assert report["rows_quarantined"] == {
        "duplicate": 1, "malformed": 2, "negative_count": 2, "unknown_task": 1, "wrong_type": 3}
    assert _quarantine_reasons(report["quarantine"]) == report["rows_quarantined"]
    graphs = {read_manifest(p)["topology"]: load_snapshot(p) for p in report["snapshots"]}
    assert sorted(graphs) == ["ani", "fischer", "wc"]

    # Storm: split tasks 3 and 4 each executed 200 tuples from "spout"; spout tasks 1 and 2
    # transferred 300 and 100, so shares 3/4 and 1/4; window 20 s.
    assert _rates(graphs["wc"]) == {(1, 3): (7.5, 0.0), (2, 3): (2.5, 0.0), (1, 4): (7.5, 0.0), (2, 4): (2.5, 0.0)}
    # Load = 200 tuples x 2.5 ms / 1000 / 10 s bucket = 0.05 (task 4: 5 ms -> 0.1) busy cores;
    # spouts report no busy time: the median measured load, 0.075.
    assert _loads(graphs["wc"]) == {1: ("spout", pytest.approx(0.075)), 2: ("spout", pytest.approx(0.075)),
                                    3: ("split", 0.05), 4: ("split", 0.1)}
    assert {g.load_unit for g in graphs.values()} == {"cores"}

    # Sendgraph deltas: 5->6: 300 + 300; 6->7: 20 (restart, 50 -> 20) + 60; over 20 s.
    assert _rates(graphs["fischer"]) == {(5, 6): (30.0, 0.0), (6, 7): (4.0, 0.0)}
    assert sorted(_loads(graphs["fischer"])) == [5, 6, 7, 8]

    # Aniello: rates as exported; executor [10-11] load 4 split over two tasks.
    assert _rates(graphs["ani"]) == {(10, 11): (5.0, 0.0), (11, 12): (2.5, 0.0)}
    assert _loads(graphs["ani"]) == {10: ("task", 2.0), 11: ("task", 2.0), 12: ("task", 1.5)}


def test_generated_metrics_round_trip_exactly(spark_small, tmp_path):
    graph = workloads.workload("diamond-12")
    summary = generate_metrics(graph, tmp_path / "gen", rows=640, dirty=0.05, noise=0.0, seed=3, rows_per_file=320)
    span = summary["intervals"] * summary["interval_s"]
    report = ingest(spark_small, [tmp_path / "gen"], tmp_path / "store", Window(seconds=span))
    assert report["rows_quarantined"] == summary["expected_quarantine"]
    assert report["rows_read"] == summary["traffic_rows"] + summary["load_rows"]
    measured = load_snapshot(report["snapshots"][0])
    expected = {(s, d): r for s, d, r in zip(*summary["expected_rate"].values())}
    got = {k: r for k, (r, _) in _rates(measured).items()}
    assert got.keys() == expected.keys()
    assert all(np.isclose(got[k], expected[k]) for k in got)
    assert np.array_equal(measured.load, np.ones(12))


def _block(kind: str, a: int, b: int | None, ts: list[float], v1: list[float]) -> pa.RecordBatch:
    fields = {"part": ["block"], "kind": [kind], "topology": ["t"], "a": [a], "b": [b], "checked": [True],
              "operator": [None if kind == "traffic" else "op"], "source": ["f"], "rows": [len(ts)]}
    arrays = [blobs(np.asarray(v, float), [0, len(ts)]) for v in (ts, v1, [0.0] * len(ts))]
    columns = {f.name: pa.array(fields.get(f.name, [None]), f.type) for f in BLOCK}
    columns.update(zip(("ts", "v1", "v2"), arrays))
    return pa.RecordBatch.from_pydict(columns, schema=BLOCK)


def test_exponential_weighting_matches_hand_formula():
    h = 4.0
    checks = MergeWindow(60.0, half_life_s=h)
    pair = pa.Table.from_batches([_block("traffic", 1, 2, [float(T0 + k) for k in range(5)], [10.0] * 5)])
    # A second block of the same task: the two samples merge (weights from the task's latest).
    task = pa.Table.from_batches([_block("load", 1, None, [float(T0)], [2.0]), _block("load", 1, None, [float(T0 + 4)], [4.0])])
    summaries = pa.concat_tables([merge_group(pair, checks, None), merge_group(task, checks, None)])
    ends, rates, loads = window_rates(summaries, Window(half_life_s=h))
    weights = 2.0 ** (-np.arange(5) / h)
    assert ends == {"t": T0 + 4}
    assert rates[0]["rate"] == pytest.approx(10.0 * weights.sum() / (h / np.log(2)))
    assert loads[0]["load"] == pytest.approx((2.0 * 2 ** -1 + 4.0) / (2 ** -1 + 1))
    # An explicit end 2 s later scales every weight by 2^(-2/h).
    _, later, _ = window_rates(summaries, Window(half_life_s=h, end=T0 + 6))
    assert later[0]["rate"] == pytest.approx(rates[0]["rate"] * 2 ** (-2 / h))


class _BruteForce(Scheduler):
    """Optimal placement of a tiny graph (what the threshold rule of the default ``replan`` is
    checked against)."""

    name = "brute-force"
    summary = "every placement tried"

    def place(self, graph, cluster, params, seed):
        import itertools

        from streamsched.metrics import inter_node_traffic
        from streamsched.model.placement import Placement

        best = None
        for nodes in itertools.product(range(cluster.n_nodes), repeat=graph.n_tasks):
            p = Placement.build(nodes)
            if p.is_valid(graph, cluster):
                cost = inter_node_traffic(graph, p)
                if best is None or cost < best[0]:
                    best = (cost, p)
        return best[1]


def _write_window(directory: Path, name: str, start: int, pairs) -> None:
    rows = ["timestamp,topology,src_task,dst_task,tuples,bytes"]
    rows += [f"{t},app,{s},{d},{n},{n * 10}" for t in range(start, start + 10) for s, d, n in pairs]
    rows.append(f"{start + 1},app,0,1,-1,0")  # dirty: quarantined, not counted
    (directory / f"traffic-{name}.csv").write_text("\n".join(rows) + "\n")
    loads = ["timestamp,topology,task,operator,load"]
    loads += [f"{t},app,{k},op{k % 2},1" for t in range(start, start + 10) for k in range(4)]
    (directory / f"load-{name}.csv").write_text("\n".join(loads) + "\n")


def test_watch_snapshot_per_window_and_threshold(spark_small, tmp_path):
    arriving = tmp_path / "arriving"
    arriving.mkdir()
    cluster_file = tmp_path / "cluster.json"
    cluster_file.write_text(json.dumps({"name": "pair", "nodes": [
        {"name": "a", "capacity": 2}, {"name": "b", "capacity": 2}, {"name": "c", "capacity": 2}]}))
    planner = Replanner(_BruteForce(), Cluster.load(cluster_file), {"threshold_pct": 10}, out_dir=tmp_path / "plans")
    store = tmp_path / "store"
    # Windows 1 and 2: 0->1 and 2->3 carry 100 tuples/s, 0->2 10 (one row per pair per second).
    _write_window(arriving, "w1", T0, [(0, 1, 100), (2, 3, 100), (0, 2, 10)])
    _write_window(arriving, "w2", T0 + 10, [(0, 1, 100), (2, 3, 100), (0, 2, 10)])
    first = Watch(spark_small, arriving, store, planner, window_s=10, cluster_file=cluster_file).run(available_now=True)
    # No later event yet for window 2: only window 1 is final.
    assert len(first["snapshots"]) == 1
    # Window 3 swaps the partners; the flush event (window 10) closes windows 2 and 3.
    _write_window(arriving, "w3", T0 + 20, [(0, 2, 100), (1, 3, 100), (0, 1, 10)])
    (arriving / "traffic-flush.csv").write_text(f"timestamp,topology,src_task,dst_task,tuples,bytes\n{T0 + 100},app,0,1,1,1\n")
    # A node leaves: the cluster file changes before the next run.
    cluster_file.write_text(json.dumps({"name": "pair", "nodes": [
        {"name": "a", "capacity": 2}, {"name": "b", "capacity": 2}]}))
    os.utime(cluster_file, (T0, T0))
    second = Watch(spark_small, arriving, store, planner, window_s=10, cluster_file=cluster_file)
    second.cluster_mtime = None  # as if the file changed since the last look
    result = second.run(available_now=True)

    snapshots = list_snapshots(store, "app")
    assert len(snapshots) == 3
    assert [read_manifest(s)["window"]["end"] for s in snapshots] == [T0 + 10, T0 + 20, T0 + 30]
    assert _rates(load_snapshot(snapshots[2])) == {(0, 2): (100.0, 1000.0), (1, 3): (100.0, 1000.0),
                                                   (0, 1): (10.0, 100.0)}
    decisions = [(d.trigger, d.why, d.emitted) for d in planner.decisions]
    assert decisions[0] == ("snapshot", "initial", True)
    # Window 2 has the same traffic: the optimum cuts nothing more -> no new assignment.
    assert ("snapshot", "below-threshold", False) in decisions
    # Window 3: keeping {0,1},{2,3} cuts 200 tuples/s, the new optimum {0,2},{1,3} cuts 10:
    # 95 % >= the 10 % threshold -> emitted.
    improvement = [d for d in planner.decisions if d.why == "improvement"]
    assert len(improvement) == 1 and improvement[0].improvement_pct == pytest.approx(95.0)
    assert (improvement[0].traffic_current, improvement[0].traffic_proposed) == (200.0, 10.0)
    assert ("cluster", "cluster-change", True) in decisions
    # Node c left: the repair moves exactly the tasks the current (initial) plan had on c (none
    # here: the optimum pairs 0,1 and 2,3 on two nodes), nothing else.
    [change] = [d for d in planner.decisions if d.trigger == "cluster"]
    initial = json.loads(Path(planner.decisions[0].assignment).read_text())
    assert change.moved == sum(initial["nodes"][n] == "c" for n in initial["node"])
    assert result["assignments_emitted"] == sum(d.emitted for d in planner.decisions)
    assert len(list((tmp_path / "plans").glob("*.placement.json"))) == result["assignments_emitted"]
    assert _quarantine_reasons(str(store / "quarantine" / "watch")) == {"negative_count": 3}


def test_the_main_job_is_one_call_from_monitoring_data_to_plan(spark_small, tmp_path, capsys):
    """``demo``: generate -> ingest -> snapshot -> compare with verdict -> report -> plan, in one
    command; every stage's output is checked against the workload it was generated from."""
    from streamsched.cli import main
    from streamsched.engines.exports import exported_tasks

    out = tmp_path / "demo"
    assert main(["demo", "-w", "diamond-12", "-c", "homogeneous-10", "--schedulers", "even,metis,i-scheduler",
                 "--model", "default", "--rows", "640", "--no-flink", "--out", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    snapshot = list_snapshots(out / "store", "diamond-12")
    assert [str(s) for s in snapshot] == [result["snapshot"]]
    graph = load_snapshot(snapshot[0])
    assert graph.n_tasks == 12 and graph.n_edges == workloads.workload("diamond-12").n_edges
    report = read_manifest(snapshot[0])["rows"]
    assert report["read"] == report["accepted"] + sum(report["quarantined"].values())
    assert sorted(r["scheduler"] for r in result["results"]) == ["even", "i-scheduler", "metis"]
    best = result["verdict"]["best"]
    assert [r["scheduler"] for r in result["results"] if r.get("best")] == [best]
    placement = json.loads((out / "placement.json").read_text())
    assert sorted(placement["tasks"]) == list(range(12))
    plan = json.loads((out / "plan-storm.json").read_text())
    assert sorted(exported_tasks("storm", plan)) == list(range(12))
    assert json.loads((out / "report.json").read_text())["verdict"]["best"] == best


def test_a_file_that_cannot_be_read_is_one_input_error(spark_small, tmp_path):
    (tmp_path / "traffic-x.csv").write_bytes(b"timestamp,topology,src_task,dst_task,tuples,bytes\n"
                                             b"1700000000,t\xff\xfe,1,2,3,4\n")
    with pytest.raises(InputError, match=r"^\S*traffic-x.csv: .*(?i:utf-?8)"):
        ingest(spark_small, [tmp_path], tmp_path / "store")


def test_a_main_job_failing_midway_leaves_the_last_results_as_they_were(spark_small, tmp_path, capsys, monkeypatch):
    """The run's results (report, placement, plan, cluster) appear together: a second run whose
    report fails after writing half of it leaves the first run's files, byte for byte."""
    import streamsched.evaluation.report as report_module
    from streamsched.cli import main

    out = tmp_path / "demo"
    args = ["demo", "-w", "diamond-12", "-c", "homogeneous-10", "--schedulers", "even", "--rows", "640",
            "--no-flink", "--out", str(out)]
    assert main(args) == 0
    results = ("report.html", "report.json", "report.csv", "placement.json", "plan-storm.json", "cluster.json")
    before = {name: (out / name).read_bytes() for name in results}

    def failing(path, *a, **k):
        path.write_text("<html>half")
        raise InputError("report failed")

    monkeypatch.setattr(report_module, "write_report", failing)
    assert main(args) == 2
    assert "report failed" in capsys.readouterr().err
    assert {name: (out / name).read_bytes() for name in results} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]
