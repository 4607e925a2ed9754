"""``watch`` accounts for every row (issue 15): per window and per run, rows read = accepted +
quarantined (by reason) + dropped late; a bad row or a binary file is quarantined, never a
crash; a file that does not match the patterns is reported as ignored; a file that grew after it
was read is reported, not re-read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from streamsched.pipeline.store import list_snapshots, load_snapshot, read_manifest
from streamsched.pipeline.watch import Watch, balanced
from test_collect_rest import TOPOLOGY_ID, storm_reading, storm_server  # noqa: F401 (a fixture)

pytestmark = pytest.mark.spark

T0 = 1_700_000_000
TRAFFIC = "timestamp,topology,src_task,dst_task,tuples,bytes"


class _Recorder:
    """A re-planning step that only records the graphs it is handed."""

    def __init__(self):
        self.decisions, self.graphs = [], []

    def on_graph(self, graph, snapshot=None):
        self.graphs.append((graph, snapshot))

    def on_cluster(self, cluster):
        pass


def _traffic(path: Path, rows: list[str]) -> None:
    path.write_text("\n".join([TRAFFIC, *rows]) + "\n")


def _balanced_windows(report) -> None:
    assert balanced({"read": report["rows_read"], "accepted": report["rows_accepted"],
                     "quarantined": report["rows_quarantined"], "dropped_late": report["rows_dropped_late"]})
    for w in report["windows"]:
        assert w["read"] == w["accepted"] + sum(w["quarantined"].values()) + w["dropped_late"]


@pytest.fixture()
def spark_small(spark):
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    return spark


def test_every_row_is_accounted_bad_rows_and_files_never_crash(spark_small, tmp_path):
    arriving, store = tmp_path / "arriving", tmp_path / "store"
    arriving.mkdir()
    # Window [T0, T0+10): 10 rows 0->1 of 5 tuples; window [T0+10, T0+20): 10 rows, one of
    # them (issue 15) with an empty dst_task.
    _traffic(arriving / "traffic-a.csv", [f"{T0 + t},app,0,1,5,100" for t in range(10)]
             + [f"{T0 + 10 + t},app,0,1,5,100" for t in range(9)] + [f"{T0 + 10},app,0,,5,100"])
    # A file that will grow after it was read.
    _traffic(arriving / "traffic-grow.csv", [f"{T0 + 3},app,1,2,2,0"])
    (arriving / "traffic-junk.csv").write_bytes(bytes(range(256)) * 4 + b"\n\x00\x01,\xff\n")
    (arriving / "notes.txt").write_text("not metrics\n")
    (arriving / ".traffic-partial.csv.tmp").write_text(TRAFFIC + "\n")  # a writer's temporary name
    recorder = _Recorder()
    first = Watch(spark_small, arriving, store, recorder, window_s=10).run(available_now=True)

    _balanced_windows(first)
    quarantined = first["rows_quarantined"]
    assert quarantined.get("missing_field") == 1
    assert quarantined.get("malformed", 0) + quarantined.get("wrong_type", 0) + quarantined.get("missing_field") >= 2
    assert first["rows_accepted"] == 10 + 9 + 1
    assert first["rows_dropped_late"] == 0
    assert first["files_ignored"] == ["notes.txt"]
    assert first["files_changed_after_read"] == []
    # Window 1 emitted (the watermark, at the latest event T0+19, passed its end); window 2 open.
    assert len(first["snapshots"]) == 1 and first["windows_open"] == 1
    rows = read_manifest(first["snapshots"][0])["rows"]
    assert rows["read"] == rows["accepted"] + sum(rows["quarantined"].values()) + rows["dropped_late"]
    assert rows["accepted"] == 11 and rows["dropped_late"] == 0
    graph = recorder.graphs[0][0]
    assert sorted(zip(graph.src.tolist(), graph.dst.tolist(), graph.rate.tolist())) == [(0, 1, 5.0), (1, 2, 0.2)]
    reasons = pq.read_table(str(store / "quarantine" / "watch")).column("reason").to_pylist()
    assert len(reasons) == sum(quarantined.values())

    # The grown file is reported, not re-read; 3 late rows for the emitted window 1 are dropped
    # and counted; a flush event closes window 2.
    with open(arriving / "traffic-grow.csv", "a") as handle:
        handle.write(f"{T0 + 4},app,1,2,2,0\n")
    _traffic(arriving / "traffic-late.csv", [f"{T0 + 5},app,0,1,5,100"] * 3 + [f"{T0 + 45},app,0,1,5,100"])
    second = Watch(spark_small, arriving, store, recorder, window_s=10).run(available_now=True)
    _balanced_windows(second)
    assert second["files_changed_after_read"] == [str(arriving / "traffic-grow.csv")]
    assert second["rows_read"] == 4 and second["rows_dropped_late"] == 3 and second["rows_accepted"] == 1
    assert len(second["snapshots"]) == 1
    rows = read_manifest(second["snapshots"][0])["rows"]
    assert rows == {**rows, "accepted": 9, "read": 10, "quarantined": {"missing_field": 1}}
    late = [w for w in second["windows"] if w["end"] == T0 + 10][0]
    assert late["dropped_late"] == 3 and late["accepted"] == 11 and late["emitted"]
    assert len(list_snapshots(store, "app")) == 2


def test_a_collected_log_written_in_pieces_gives_every_row_once(spark_small, tmp_path):
    """The case of issue 15 (a file written half, completed later, lost its second half): the
    collector turns the growing, rotated log into immutable chunks, and watch counts every line."""
    from streamsched.pipeline.collect import LogCollector

    logs, arriving, store = tmp_path / "logs", tmp_path / "arriving", tmp_path / "store"
    logs.mkdir()
    log = logs / "traffic-app.log"
    lines = [f"{T0 + t},app,0,1,{1 + t % 3},10\n" for t in range(30)] + [f"{T0 + 60},app,0,1,1,10\n"]
    text = TRAFFIC + "\n" + "".join(lines[:7]) + lines[7][:6]
    log.write_text(text)
    recorder = _Recorder()
    LogCollector(log, arriving).poll()
    first = Watch(spark_small, arriving, store, recorder, window_s=10).run(available_now=True)
    with open(log, "a") as handle:
        handle.write(lines[7][6:] + "".join(lines[8:20]))
    os.rename(log, logs / "traffic-app.log.1")
    log.write_text("".join(lines[20:]))
    LogCollector(log, arriving).poll()
    second = Watch(spark_small, arriving, store, recorder, window_s=10).run(available_now=True)
    assert first["rows_read"] + second["rows_read"] == len(lines)
    assert second["files_changed_after_read"] == []
    rates = [float(g.rate[0]) for g, _ in recorder.graphs]
    expected = [sum(1 + t % 3 for t in range(start, start + 10)) / 10 for start in (0, 10, 20)]
    assert rates == expected


def test_watch_over_a_log_collected_half_a_line_at_a_time_equals_batch_ingest(spark_small, tmp_path):
    """Issue 15, "what it must show": a writer appends to a log half a line at a time and rotates
    it; ``collect log`` turns it into chunks after every piece; ``watch`` runs while it grows and
    after it ends (a bad row and a binary file arrive too). Every window's rates equal a batch
    ``ingest`` of the finished files, and every line is accounted for once."""
    import shutil

    from streamsched.pipeline.collect import LogCollector
    from streamsched.pipeline.ingest import Window, ingest

    logs, arriving, store = tmp_path / "logs", tmp_path / "arriving", tmp_path / "store"
    logs.mkdir()
    log = logs / "traffic-app.log"
    # Two pairs with different, uneven counts; half-second timestamps so that watch's windows
    # [s, s + 10) and ingest's (e - 10, e] hold the same rows.
    lines = []
    for t in range(30):
        lines.append(f"{T0 + t + 0.5},app,0,1,{1 + (7 * t) % 5},{10 * t}\n")
        lines.append(f"{T0 + t + 0.5},app,1,2,{3 + (3 * t) % 4}.25,0\n")
    lines.insert(25, f"{T0 + 12.5},app,0,,5,100\n")  # a bad row: empty dst_task
    lines.append(f"{T0 + 60.5},app,0,1,1,0\n")        # a later event: windows up to T0+30 close
    collector = LogCollector(log, arriving)
    handle = open(log, "w")
    handle.write(TRAFFIC + "\n")
    reports = []
    for k, line in enumerate(lines):
        half = len(line) // 2
        for piece in (line[:half], line[half:]):
            handle.write(piece)
            handle.flush()
            collector.poll()
        if k == 40:  # rotation: the writer finishes in the old file, then a new one with its header
            os.rename(log, logs / "traffic-app.log.1")
            handle.close()
            collector.poll()
            handle = open(log, "w")
            handle.write(TRAFFIC + "\n" + lines[k + 1][:7])
            handle.flush()
            collector.poll()
            lines[k + 1] = lines[k + 1][7:]
        if k == 45:  # watch while the log grows, a half line pending
            reports.append(Watch(spark_small, arriving, store, _Recorder(), window_s=10).run(available_now=True))
        if k == 30:
            (arriving / "traffic-junk.csv").write_bytes(b"\x00\xff\xfe" * 200 + b"\n\x89PNG\r\n")
    handle.close()
    collector.poll()
    recorder = _Recorder()
    reports.append(Watch(spark_small, arriving, store, recorder, window_s=10).run(available_now=True))

    data_lines = len(lines)
    # The binary file's two lines: the first, where the header belongs, quarantined as
    # bad_header, the second as a row.
    assert sum(r["rows_read"] for r in reports) == data_lines + 2
    junk = 2
    assert sum(r["rows_accepted"] for r in reports) == data_lines - 1
    quarantined: dict[str, int] = {}
    for r in reports:
        _balanced_windows(r)
        assert r["files_changed_after_read"] == []
        for reason, n in r["rows_quarantined"].items():
            quarantined[reason] = quarantined.get(reason, 0) + n
    assert quarantined["missing_field"] == 1 and quarantined["bad_header"] == 1
    assert sum(quarantined.values()) == 1 + junk
    reasons = pq.read_table(str(store / "quarantine" / "watch")).column("reason").to_pylist()
    assert sorted(reasons) == sorted(r for r, n in quarantined.items() for _ in range(n))
    snapshots = list_snapshots(store, "app")
    assert [read_manifest(s)["window"]["end"] for s in snapshots] == [T0 + 10, T0 + 20, T0 + 30]

    def pairs(g):
        return sorted(zip(g.task_ids[g.src].tolist(), g.task_ids[g.dst].tolist(), g.rate.tolist(), g.bytes_rate.tolist()))

    # Batch ingest of the finished files, one 10 s window at a time.
    final = tmp_path / "final"
    final.mkdir()
    shutil.copy(logs / "traffic-app.log.1", final / "traffic-app-1.csv")
    shutil.copy(log, final / "traffic-app-2.csv")
    for snapshot in snapshots:
        end = read_manifest(snapshot)["window"]["end"]
        batch = ingest(spark_small, [final], tmp_path / f"batch-{end}", Window(seconds=10, end=end))
        assert batch["rows_read"] == data_lines and batch["rows_quarantined"] == {"missing_field": 1}
        streamed, batched = load_snapshot(snapshot), load_snapshot(batch["snapshots"][0])
        assert [p[:2] for p in pairs(streamed)] == [p[:2] for p in pairs(batched)] == [(0, 1), (1, 2)]
        assert [v for p in pairs(streamed) for v in p[2:]] == pytest.approx([v for p in pairs(batched) for v in p[2:]])
    # By hand, window [T0, T0+10): 0->1 carries (1+3+5+2+4+1+3+5+2+4)/10 tuples/s and
    # 10 x (0+...+9)/10 bytes/s; 1->2 (3+6+5+4+3+6+5+4+3+6 + 10 x 0.25)/10.
    first = load_snapshot(snapshots[0])
    assert pairs(first) == [(0, 1, 3.0, 45.0), (1, 2, 4.75, 0.0)]


def test_a_window_emitted_before_a_kill_is_not_written_again_on_replay(tmp_path):
    """A kill after a window's snapshot was written and before the state was saved: Spark replays
    the micro-batch, the window is final again, and its snapshot is the one already written (no
    second snapshot of the window). No Spark needed: the emission step on a saved state."""
    arriving, store = tmp_path / "arriving", tmp_path / "store"
    arriving.mkdir()
    first = Watch(None, arriving, store, _Recorder(), window_s=10)
    first.state.update(watermark=T0 + 15.0, counts={repr(T0 + 10.0): {"read": 2, "accepted": 2, "quarantined": {},
                                                                      "dropped_late": 0}},
                       open={repr(T0 + 10.0): {json.dumps(["app", "traffic", 0, 1, None]): [30.0, 0.0, 2]}})
    first._save_state()
    first._emit()  # the snapshot is written; the process dies before saving the state
    replayed = Watch(None, arriving, store, _Recorder(), window_s=10)
    assert replayed.state["open"]  # the saved state still has the window open
    replayed._emit()
    assert replayed.snapshots == first.snapshots and len(list_snapshots(store, "app")) == 1
    # Another directory's watch on the same store writes its own snapshot of that window.
    other = Watch(None, tmp_path / "elsewhere", store, _Recorder(), window_s=10)
    other.state.update(replayed.state, open={repr(T0 + 10.0): {json.dumps(["app", "traffic", 0, 1, None]): [30.0, 0.0, 2]}})
    other._emit()
    assert len(list_snapshots(store, "app")) == 2 and load_snapshot(other.snapshots[0]).rate.tolist() == [3.0]


def test_a_restarted_watch_weighs_the_next_window_against_the_running_assignment(spark_small, tmp_path, capsys):
    """Item 5 across a restart: the second `watch` run takes up the assignment the first emitted
    (decisions.jsonl) and applies the threshold rule to the next window instead of emitting a
    fresh initial plan; the earlier assignment file is kept."""
    from streamsched.cli import main

    arriving, store = tmp_path / "arriving", tmp_path / "store"
    arriving.mkdir()
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"name": "three", "nodes": [{"name": n, "capacity": 2} for n in "abc"]}))
    pairs = [(0, 1, 7), (2, 3, 5), (1, 2, 1)]
    for w in range(3):
        _traffic(arriving / f"traffic-{w}.csv", [f"{T0 + 10 * w + s},app,{a},{b},{n},0" for s in range(10)
                                                 for a, b, n in pairs])
        args = ["watch", str(arriving), "--store", str(store), "--cluster", str(cluster), "--window", "10", "--once"]
        if w == 0:
            continue  # window 1 is final once window 2's rows arrive
        assert main(args) == 0
    decisions = [json.loads(line) for line in (store / "assignments" / "decisions.jsonl").read_text().splitlines()]
    assert [(d["why"], d["emitted"]) for d in decisions] == [("initial", True), ("below-threshold", False)]
    assert decisions[1]["moved"] == 0 and decisions[1]["traffic_current"] == decisions[0]["traffic_proposed"]
    assert len(list((store / "assignments").glob("*.placement.json"))) == 1
    assert "resumed 'app' from" in capsys.readouterr().err


def test_storm_ui_collector_chunks_feed_watch_and_ingest_in_cores(spark_small, storm_server, tmp_path):
    """REST collector -> chunks -> watch (and batch ingest), loads in cores: a window holding one
    10-minute interval has the hand-computed pair rate and busy cores of the Storm UI fixture."""
    from streamsched.pipeline.collect_rest import StormUICollector
    from streamsched.pipeline.ingest import Window, ingest
    from streamsched.pipeline.sources import Options

    base = 1_700_000_400  # a multiple of 600: readings at base + 300 + 600 k
    chunks, store = tmp_path / "chunks", tmp_path / "store"
    for k in range(1, 5):
        storm_server.state["docs"] = storm_reading(lambda r, k=k: k, lambda r, k=k: r["uptimeSeconds"] + 600 * k)
        StormUICollector(storm_server.url, TOPOLOGY_ID, chunks, clock=lambda k=k: base - 300 + 600.0 * k).poll()
    report = Watch(spark_small, chunks, store, _Recorder(), window_s=600,
                   options=Options(load_unit="cores")).run(available_now=True)
    _balanced_windows(report)
    assert report["rows_quarantined"] == {} and len(report["snapshots"]) == 2
    batch = ingest(spark_small, [chunks], tmp_path / "batch", Window(seconds=600, end=base + 1200),
                   Options(load_unit="cores"))
    for graph in (load_snapshot(report["snapshots"][0]), load_snapshot(batch["snapshots"][0])):
        assert graph.load_unit == "cores" and graph.name == "wordcount"
        ids = graph.task_ids.tolist()
        rate = {(ids[s], ids[d]): r for s, d, r in zip(graph.src.tolist(), graph.dst.tolist(), graph.rate.tolist())}
        assert rate[(25, 17)] == pytest.approx(300000 / 1400400 * 186760 / 600)
        assert graph.load[ids.index(17)] == pytest.approx(186760 * 0.350 / 1000 / 600)


def test_a_batch_the_runs_stop_interrupts_is_read_again_by_the_next_run(spark_small, tmp_path):
    """The live loop's stop (SIGTERM after an apply) stops the query while a batch's Spark call
    runs: that call fails. The run ends without an error (it was its own stop), nothing of the
    batch is counted, written or decided, and the next run reads its rows again: every row
    counted once. (That Spark logs no traceback for it is checked on the command's stderr,
    tests/test_faults_live.py: the session's JVM writes to the stderr it started with, which
    pytest cannot capture.)"""
    import threading

    arriving, store = tmp_path / "arriving", tmp_path / "store"
    arriving.mkdir()
    rows = [f"{T0 + t},app,0,1,2,10" for t in range(25)]
    _traffic(arriving / "traffic-a.csv", rows)
    stop = threading.Event()

    class _StoppedInItsSparkCall(Watch):
        def _aggregate(self, batch):
            stop.set()  # the loop's stop, seen by the run within one poll
            while not self._stopping:
                stop.wait(0.05)
            raise RuntimeError("py4j: the interrupted Spark call")

    recorder = _Recorder()
    watch = _StoppedInItsSparkCall(spark_small, arriving, store, recorder, window_s=10)
    first = watch.run(poll_s=1, stop=stop, timeout_s=120)
    assert first["rows_read"] == 0 and first["windows"] == [] and first["snapshots"] == []
    assert watch.state["batch_id"] == -1 and watch.state["open"] == {} and recorder.graphs == []
    second = Watch(spark_small, arriving, store, recorder, window_s=10).run(available_now=True)
    assert second["rows_read"] == len(rows) and second["rows_accepted"] == len(rows)
    assert [g.rate[0] for g, _ in recorder.graphs] == [2.0, 2.0]


def test_an_error_of_a_re_plan_during_the_runs_stop_is_the_querys_error(spark_small, tmp_path):
    """Once a batch's Spark calls are done its windows are counted and decided: a re-planning
    step that fails while the run stops is an error of the run, not taken for the stop's
    interruption (and its batch not silently undone after its snapshot was written)."""
    import threading

    arriving, store = tmp_path / "arriving", tmp_path / "store"
    arriving.mkdir()
    _traffic(arriving / "traffic-a.csv", [f"{T0 + t},app,0,1,2,10" for t in range(25)])
    stop = threading.Event()

    class _FailsWhileStopping(_Recorder):
        def on_graph(self, graph, snapshot=None):
            stop.set()
            while not watch._stopping:
                stop.wait(0.05)
            raise RuntimeError("the re-plan failed")

    watch = Watch(spark_small, arriving, store, _FailsWhileStopping(), window_s=10)
    with pytest.raises(RuntimeError, match="(?s)the streaming query failed: .*the re-plan failed"):
        watch.run(poll_s=1, stop=stop, timeout_s=120)
