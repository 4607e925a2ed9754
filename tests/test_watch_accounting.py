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

from streamsched.pipeline.store import list_snapshots, read_manifest
from streamsched.pipeline.watch import Watch, balanced

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
