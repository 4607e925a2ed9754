"""Kill and restart lose and repeat nothing (issue 15, "what it must show"): real SIGKILLs of
``streamsched collect log``, ``collect storm-ui`` and ``watch`` subprocesses at points in the
middle of their work, restarts, and the result compared with what an uninterrupted run gives
(the lines written, the counters served, a ``watch`` run that was never stopped)."""

from __future__ import annotations

import csv
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from streamsched.pipeline.collect_rest import StormUICollector
from test_collect_rest import TOPOLOGY_ID, doc_server, storm_reading
from streamsched.engines.storm import ui_rest

TRAFFIC = "timestamp,topology,src_task,dst_task,tuples,bytes"
CLI = [sys.executable, "-c", "import sys; from streamsched.cli import main; sys.exit(main(sys.argv[1:]))"]


def _start(*args: str) -> subprocess.Popen:
    """A CLI subprocess in its own process group (its Spark JVM, if any, dies with it)."""
    return subprocess.Popen([*CLI, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)


def _kill(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)


def _wait_for(condition, timeout: float, what: str, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the subprocess ended ({process.returncode}) before {what}: "
                                 f"{process.stderr.read().decode()[-2000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout} s")
        time.sleep(0.01)


# ------------------------------------------------------------------------ collect log
@pytest.mark.slow
def test_sigkilled_log_collector_loses_and_repeats_no_line(tmp_path):
    logs, out = tmp_path / "logs", tmp_path / "chunks"
    logs.mkdir()
    log = logs / "traffic-app.log"
    lines = [f"{1_700_000_000 + k},app,{k % 3},{k % 3 + 1},{k},{7 * k}\n" for k in range(600)]
    log.write_text(TRAFFIC + "\n")

    go = [threading.Event() for _ in range(4)]

    def writer():  # half a line at a time, a rotation in the middle; segment i once go[i] is set
        handle = open(log, "a")
        for k, line in enumerate(lines):
            if k % 150 == 0:
                go[k // 150].wait(300)
            for piece in (line[:len(line) // 2], line[len(line) // 2:]):
                handle.write(piece)
                handle.flush()
                time.sleep(0.002)
            if k == 300:
                os.rename(log, logs / "traffic-app.log.1")
                handle.close()
                handle = open(log, "w")
        handle.close()

    thread = threading.Thread(target=writer)
    thread.start()
    rng = random.Random(15)
    for segment in range(4):
        seen = len(list(out.glob("traffic-*.csv"))) if out.exists() else 0
        process = _start("collect", "log", str(log), "--out", str(out), "--poll", "0.01")
        go[segment].set()
        _wait_for(lambda: out.exists() and len(list(out.glob("traffic-*.csv"))) > seen, 120,
                  "new chunk", process)
        time.sleep(rng.uniform(0.0, 0.2))  # then die somewhere in the middle of polling
        _kill(process)
    thread.join()
    process = _start("collect", "log", str(log), "--out", str(out), "--once")
    assert process.wait(timeout=120) == 0, process.stderr.read().decode()

    rows, ranges = [], {}
    for chunk in sorted(out.glob("traffic-*.csv")):
        with open(chunk) as handle:
            got = list(csv.reader(handle))
        assert got[0] == TRAFFIC.split(",")
        rows += [",".join(r) + "\n" for r in got[1:]]
        side = json.loads((out / f".{chunk.name}.json").read_text())
        ranges.setdefault(side["inode"], []).append(side["lines"])
    assert rows == lines  # each line once, in order, across the kills and the rotation
    for spans in ranges.values():  # every source line in exactly one chunk
        assert all(b[0] == a[1] + 1 for a, b in zip(spans, spans[1:]))


# ------------------------------------------------------------------------ collect storm-ui
@pytest.mark.slow
def test_sigkilled_storm_ui_collector_counts_every_tuple_once(tmp_path):
    """The server's counters grow by the fixture's counts at every reading (phase k: k times
    the fixture). Whatever readings the kills cost, the chunks' tuples into split executor
    [17-17] add up to (last phase differenced - first phase) x its 186760 executions."""
    phase = {"k": 1}

    def answer(parts, query):
        if parts[-1] == TOPOLOGY_ID:
            phase["docs"] = storm_reading(lambda r, k=phase["k"]: k, lambda r, k=phase["k"]: r["uptimeSeconds"] + 600 * k)
            phase["k"] += 1
        name = ("supervisors.json" if parts[-1] == "summary" else "topology.json" if parts[-1] == TOPOLOGY_ID
                else ui_rest.component_file(parts[-1]))
        return phase["docs"].get(name)

    server = doc_server(answer)
    out = tmp_path / "chunks"
    try:
        StormUICollector(server.url, TOPOLOGY_ID, out).poll()  # the base: phase 1
        rng = random.Random(7)
        args = ["collect", "storm-ui", "--url", server.url, "--topology-id", TOPOLOGY_ID, "--out", str(out),
                "--interval", "0.05"]
        for _ in range(3):
            seen = len(list(out.glob("traffic-*.csv")))
            process = _start(*args)
            _wait_for(lambda: len(list(out.glob("traffic-*.csv"))) > seen, 120, "new chunk", process)
            time.sleep(rng.uniform(0.0, 0.3))
            _kill(process)
    finally:
        server.close()
    StormUICollector("http://127.0.0.1:9", TOPOLOGY_ID, out)  # a start writes what a kill left pending
    state = json.loads((out / f".collect-storm-{TOPOLOGY_ID}.json").read_text())
    assert state["pending"] == []
    split = state["previous"]["documents"]["component-split.json"]
    [row] = [e for e in split["executorStats"] if e["id"] == "[17-17]"]
    last_phase = row["executed"] / 186760
    total, covers = 0.0, []
    for chunk in sorted(out.glob("traffic-*.csv")):
        with open(chunk) as handle:
            total += sum(float(r["tuples"]) for r in csv.DictReader(handle) if r["dst_task"] == "17")
        side = json.loads((out / f".{chunk.name}.json").read_text())
        assert side["resets"] == []
        covers.append(side["covers"])
    assert len(covers) >= 3 and all(b[0] == a[1] for a, b in zip(covers, covers[1:]))  # no gap, no overlap
    assert total == pytest.approx((last_phase - 1) * 186760)


# ------------------------------------------------------------------------------- watch
T0 = 1_700_000_000
PAIRS = [(0, 1, 3.0), (1, 2, 1.25), (0, 2, 0.5)]


def _window_files(directory: Path, first: int, last: int) -> None:
    """traffic-NN.csv for 5 s pieces ``first..last``: one row per pair and second, uneven
    counts; piece 6 carries a row with an empty field."""
    for piece in range(first, last + 1):
        rows = [f"{T0 + 5 * piece + s + 0.5},app,{a},{b},{n * (1 + (piece + s) % 3)},{int(10 * n)}"
                for s in range(5) for a, b, n in PAIRS]
        if piece == 6:
            rows.append(f"{T0 + 5 * piece + 1},app,0,,2,0")
        (directory / f"traffic-{piece:02d}.csv").write_text("\n".join([TRAFFIC, *rows]) + "\n")


class _Recorder:
    def __init__(self):
        self.decisions = []

    def on_graph(self, graph, snapshot=None):
        pass

    def on_cluster(self, cluster):
        pass


@pytest.mark.spark
def test_sigkilled_watch_restarts_and_gives_the_uninterrupted_result(spark, tmp_path):
    from streamsched.pipeline.store import list_snapshots, load_snapshot, read_manifest
    from streamsched.pipeline.watch import Watch

    spark.conf.set("spark.sql.shuffle.partitions", "2")
    arriving, store = tmp_path / "arriving", tmp_path / "store"
    arriving.mkdir()
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"name": "three", "nodes": [{"name": n, "capacity": 4} for n in "abc"]}))
    _window_files(arriving, 0, 3)
    (arriving / "traffic-junk.csv").write_bytes(b"\x00\x01\xfe\xff" * 64 + b"\n")
    process = _start("watch", str(arriving), "--store", str(store), "--cluster", str(cluster), "--window", "10",
                     "--poll", "0.5")
    state = store / "checkpoints" / "watch" / "state.json"
    try:
        _wait_for(lambda: state.exists() and json.loads(state.read_text())["batch_id"] >= 0, 400,
                  "first micro-batch", process)
        emitted = len(list_snapshots(store, "app"))
        _window_files(arriving, 4, 7)
        # Kill it in the middle of the next micro-batch: as soon as it wrote the first snapshot
        # of the windows this batch closes, most likely before its state is saved (then Spark
        # replays the batch after the restart).
        _wait_for(lambda: len(list_snapshots(store, "app")) > emitted, 400, "second micro-batch", process)
    finally:
        _kill(process)
    _window_files(arriving, 8, 11)
    Watch(spark, arriving, store, _Recorder(), window_s=10).run(available_now=True)

    whole, whole_store = tmp_path / "whole", tmp_path / "whole-store"
    shutil.copytree(arriving, whole)
    Watch(spark, whole, whole_store, _Recorder(), window_s=10).run(available_now=True)

    def by_window(where):
        out = {}
        for snapshot in list_snapshots(where, "app"):
            manifest = read_manifest(snapshot)
            end = manifest["window"]["end"]
            assert end not in out, f"window ending {end} emitted twice"
            g = load_snapshot(snapshot)
            counts = {k: manifest["rows"][k] for k in ("read", "accepted", "quarantined", "dropped_late")}
            out[end] = (sorted(zip(g.task_ids[g.src].tolist(), g.task_ids[g.dst].tolist(), g.rate.tolist())), counts)
        return out

    restarted, uninterrupted = by_window(store), by_window(whole_store)
    assert sorted(uninterrupted) == [T0 + 10 * w for w in range(1, 6)]  # the last window stays open
    assert restarted == uninterrupted
    assert uninterrupted[T0 + 40][1]["quarantined"] == {"missing_field": 1}
    # Window [T0, T0+10) by hand: pair 0->1 counts 3 x (1,2,3,1,2) + 3 x (2,3,1,2,3) over 10 s.
    assert uninterrupted[T0 + 10][0][0] == (0, 1, 3.0 * (9 + 11) / 10)
    kept = json.loads(state.read_text())["counts"]
    assert kept == json.loads((whole_store / "checkpoints" / "watch" / "state.json").read_text())["counts"]
