"""The Flink REST reader without a cluster: the capture of a real Flink 2.3 job
(tests/fixtures/flink/live-job, written by tests/test_flink_live.py), pair rates recomputed by
hand from its raw JSON, small synthetic jobs for the edge cases, the live capture's timing
logic against a fake JobManager, bad input, and ``read-engine flink``."""

from __future__ import annotations

import json
import math
import re
import shutil
import socket
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pytest

from streamsched import metrics
from streamsched.cli import main
from streamsched.engines import flink
from streamsched.errors import InputError
from streamsched.model import Cluster, Placement
from streamsched.model.graph_files import read_graph

FIXTURE = Path(__file__).parent / "fixtures" / "flink" / "live-job"
GEN, CALC, AGG = r"Source: gen\[\d+\]", r"Calc\[\d+\]", r"GroupAggregate\[\d+\] -> sink\[\d+\]: Writer"
GEN2, GEN3 = r"Source: gen2\[\d+\] -> TableToDataStream", r"Source: gen3\[\d+\] -> TableToDataStream"


@pytest.fixture(scope="module")
def capture():
    return flink.load_capture(FIXTURE)


@pytest.fixture(scope="module")
def reading(capture):
    return flink.read_capture(capture)


def _vertex(reading, pattern):
    (v,) = [v for v in reading.report["vertices"] if re.fullmatch(pattern, v["name"])]
    return v


def _matrix(reading, up, down):
    a, b = _vertex(reading, up), _vertex(reading, down)
    out = np.zeros((a["parallelism"], b["parallelism"]))
    g = reading.graph
    for s, d, r in zip(g.src, g.dst, g.rate):
        if 0 <= s - a["first_task"] < a["parallelism"] and 0 <= d - b["first_task"] < b["parallelism"]:
            out[s - a["first_task"], d - b["first_task"]] = r
    return out


def _raw_rates(capture, pattern, metric):
    """Per-subtask counter differences over the window, straight from the saved JSON."""
    first, last = capture.snapshots
    job = last.documents[f"jobs/{capture.job_id}"]
    (vertex,) = [v for v in job["vertices"] if re.fullmatch(pattern, v["name"])]
    out = []
    for i in range(vertex["parallelism"]):
        key = f"jobs/{capture.job_id}/vertices/{vertex['id']}/subtasks/{i}/metrics"
        value = lambda snap: float({m["id"]: m["value"] for m in snap.documents[key]}[metric])
        out.append((value(last) - value(first)) / (last.time - first.time))
    return np.array(out)


# ------------------------------------------------------------------- the real capture
def test_fixture_graph_structure(reading):
    report = reading.report
    assert report["flink_version"] == "2.3.0" and report["rates_from"] == "counters"
    assert 8 < report["window_s"] < 12
    assert [(v["name"], v["parallelism"], v["first_task"]) for v in report["vertices"]][:2] == [
        ("Source: gen[1]", 2, 0), ("Source: gen2[6] -> TableToDataStream", 2, 2)]
    strategies = sorted((e["ship_strategy"], e["pairs"]) for e in report["edges"])
    assert strategies == [("BROADCAST", 6), ("FORWARD", 2), ("HASH", 9), ("REBALANCE", 6), ("RESCALE", 3), ("RESCALE", 3)]
    g = reading.graph
    assert g.n_tasks == 23 and g.n_edges == 29 and g.load_unit == "cores"
    assert g.task_ids.tolist() == list(range(23))
    assert [g.task_label(t) for t in (0, 1, 22)] == ["Source: gen[1][0]", "Source: gen[1][1]", "fanin: Writer[1]"]


def test_fixture_pair_rates_by_hand(capture, reading):
    """Every strategy's pairs recomputed from the raw counters: receivers' totals, split by the
    senders' records out as the strategy says."""
    out, into = _raw_rates(capture, GEN, "numRecordsOut"), _raw_rates(capture, CALC, "numRecordsIn")
    expected = np.outer(out / out.sum(), np.full(3, into.sum() / 3))  # REBALANCE: even
    np.testing.assert_allclose(_matrix(reading, GEN, CALC), expected, rtol=1e-12)
    out, into = _raw_rates(capture, CALC, "numRecordsOut"), _raw_rates(capture, AGG, "numRecordsIn")
    np.testing.assert_allclose(_matrix(reading, CALC, AGG), np.outer(out / out.sum(), into), rtol=1e-12)  # HASH
    out = _raw_rates(capture, GEN2, "numRecordsOut")
    into = _raw_rates(capture, r"rescaled: Writer", "numRecordsIn")
    scale = into.sum() / out.sum()
    np.testing.assert_allclose(_matrix(reading, GEN2, r"rescaled: Writer"),
                               [[out[0] / 2 * scale, out[0] / 2 * scale, 0], [0, 0, out[1] * scale]], rtol=1e-12)
    into = _raw_rates(capture, r"broadcast: Writer", "numRecordsIn")
    np.testing.assert_allclose(_matrix(reading, GEN2, r"broadcast: Writer"),
                               np.outer(out / out.sum(), np.full(3, into.sum() / 3)), rtol=1e-12)
    into = _raw_rates(capture, r"forwarded: Writer", "numRecordsIn")
    np.testing.assert_allclose(_matrix(reading, GEN2, r"forwarded: Writer"), np.diag(out * into.sum() / out.sum()), rtol=1e-12)
    out, into = _raw_rates(capture, GEN3, "numRecordsOut"), _raw_rates(capture, r"fanin: Writer", "numRecordsIn")
    scale = into.sum() / out.sum()
    np.testing.assert_allclose(_matrix(reading, GEN3, r"fanin: Writer"),
                               [[out[0] * scale, 0], [0, out[1] * scale], [0, out[2] * scale]], rtol=1e-12)
    # the receivers' own counts agree with the pointwise pairs (exact strategies), within records in flight
    np.testing.assert_allclose(into, [out[0], out[1] + out[2]], rtol=0.02)


def test_fixture_bytes_loads_and_remote_traffic(capture, reading):
    g = reading.graph
    # bytes of a pair = its records x the receiver's numBytesIn / numRecordsIn
    calc = _vertex(reading, CALC)
    bpr = _raw_rates(capture, CALC, "numBytesIn") / _raw_rates(capture, CALC, "numRecordsIn")
    into = (g.dst >= calc["first_task"]) & (g.dst < calc["first_task"] + 3)
    np.testing.assert_allclose(g.bytes_rate[into] / g.rate[into], bpr[g.dst[into] - calc["first_task"]], rtol=1e-12)
    # loads: busy milliseconds per second, differenced, / 1000; sources (NaN busy time) estimated
    busy = _raw_rates(capture, CALC, "accumulateBusyTimeMs") / 1000
    np.testing.assert_allclose(g.load[calc["first_task"]:calc["first_task"] + 3], busy, rtol=1e-12)
    sources = [t for p in (GEN, GEN2, GEN3) for t in range(_vertex(reading, p)["first_task"],
                                                           _vertex(reading, p)["first_task"] + _vertex(reading, p)["parallelism"])]
    assert reading.report["load_fallback_tasks"] == sources
    assert np.all(g.load[sources] > 0) and np.all(g.load[sources] < 0.1)
    assert any("no busy time" in w for w in reading.warnings)
    # the current placement's inter-node bytes against Flink's numBytesInRemote (live test: why 5 %)
    remote = reading.report["measured_per_s"]["bytes_in_remote"]
    assert metrics.inter_node_traffic(g, reading.placement, weight="bytes") == pytest.approx(remote, rel=0.05)
    assert g.bytes_rate.sum() == pytest.approx(reading.report["measured_per_s"]["bytes_in"], rel=0.01)


def test_fixture_placement_and_cluster(capture, reading):
    tms = json.loads((FIXTURE / "1" / "taskmanagers.json").read_text())["taskmanagers"]
    cluster = reading.cluster
    assert cluster.capacity_unit == "cores" and sorted(n.name for n in cluster.nodes) == sorted(t["id"] for t in tms)
    assert reading.placement.violations(reading.graph, cluster) == []
    assert set(reading.placement.worker_of.tolist()) == {0}
    for k, node in enumerate(cluster.nodes):
        (tm,) = [t for t in tms if t["id"] == node.name]
        assert np.sum(reading.placement.node_of == k) == tm["assignedTasks"]
        assert node.ram_mb == 1280 and node.slots == 1 and node.capacity == 2.0
    by_host = flink.read_capture(capture, node_by="host")
    assert [(n.name, n.slots, n.capacity) for n in by_host.cluster.nodes] == [("127.0.0.1", 2, 2.0)]
    assert sorted(set(by_host.placement.worker_of.tolist())) == [0, 1]
    np.testing.assert_array_equal(by_host.placement.worker_of, reading.placement.node_of)


def test_one_snapshot_uses_meters(tmp_path):
    """A bare directory of REST responses (no capture.json) is one snapshot: Flink's meters."""
    one = flink.load_capture(FIXTURE / "1")
    assert len(one.snapshots) == 1 and one.url is None
    job = json.loads(next((FIXTURE / "1" / "jobs").glob("*.json")).read_text())
    assert one.snapshots[0].time == job["now"] / 1000
    reading = flink.read_capture(one)
    assert reading.report["rates_from"] == "meters" and reading.report["window_s"] == 0
    assert any("60 s meters" in w and "understate" in w for w in reading.warnings)  # the job was 20 s old
    source = _vertex(reading, GEN)
    assert 0 < source["records_out_per_s"] < 2000


def test_save_and_load_round_trip(capture, reading, tmp_path):
    flink.save_capture(capture, tmp_path / "copy")
    again = flink.read_capture(flink.load_capture(tmp_path / "copy"))
    np.testing.assert_array_equal(again.graph.rate, reading.graph.rate)
    np.testing.assert_array_equal(again.graph.load, reading.graph.load)
    assert again.report["window_s"] == reading.report["window_s"]


# ------------------------------------------------------------------ pair rules
@pytest.mark.parametrize("p_up,p_down,pairs", [
    (3, 3, [(0, 0), (1, 1), (2, 2)]),
    (2, 3, [(0, 0), (0, 1), (1, 2)]),          # seen on Flink 2.3
    (3, 2, [(0, 0), (1, 1), (2, 1)]),          # seen on Flink 2.3
    (2, 4, [(0, 0), (0, 1), (1, 2), (1, 3)]),
    (4, 2, [(0, 0), (1, 0), (2, 1), (3, 1)]),
    (2, 5, [(0, 0), (0, 1), (0, 2), (1, 3), (1, 4)]),
    (5, 2, [(0, 0), (1, 0), (2, 1), (3, 1), (4, 1)]),
])
def test_pointwise_pairs(p_up, p_down, pairs):
    s, d = flink.pointwise_pairs(p_up, p_down)
    assert sorted(zip(s.tolist(), d.tolist())) == pairs
    assert set(s.tolist()) == set(range(p_up)) and set(d.tolist()) == set(range(p_down))


def test_pair_weights_per_strategy():
    received = np.array([1.0, 3.0])
    rows = lambda r: sorted(zip(r[0].tolist(), r[1].tolist(), np.round(r[2], 6).tolist()))
    assert rows(flink.pair_weights("FORWARD", 2, 2, received)) == [(0, 0, 1.0), (1, 1, 1.0)]
    assert rows(flink.pair_weights("REBALANCE", 1, 2, received)) == [(0, 0, 0.5), (0, 1, 0.5)]
    assert rows(flink.pair_weights("SHUFFLE", 1, 2, received)) == [(0, 0, 0.5), (0, 1, 0.5)]
    assert rows(flink.pair_weights("HASH", 1, 2, received)) == [(0, 0, 0.25), (0, 1, 0.75)]
    assert rows(flink.pair_weights("CUSTOM", 1, 2, received)) == [(0, 0, 0.25), (0, 1, 0.75)]
    assert rows(flink.pair_weights("HASH", 1, 2, np.zeros(2))) == [(0, 0, 0.5), (0, 1, 0.5)]
    assert rows(flink.pair_weights("BROADCAST", 1, 2, received)) == [(0, 0, 1.0), (0, 1, 1.0)]
    assert rows(flink.pair_weights("GLOBAL", 2, 2, received)) == [(0, 0, 1.0), (1, 0, 1.0)]
    assert rows(flink.pair_weights("RESCALE", 1, 2, received)) == [(0, 0, 0.5), (0, 1, 0.5)]
    assert flink.pair_weights("HASH", 1, 2, received)[3] is False
    assert flink.pair_weights("REBALANCE", 1, 2, received)[3] is True


# ------------------------------------------------------------------ synthetic jobs
def _metrics(**values):
    return [{"id": k, "value": str(v)} for k, v in values.items()]


def _job(vertices, inputs, placement, counters, now_ms=100_000, attempts=None):
    """REST documents of a made-up job. ``vertices``: [(id, name, parallelism)]; ``inputs``:
    {id: [(upstream id, strategy)]}; ``placement``: {id: [tm id per subtask]}; ``counters``:
    {(id, i): {metric: value}}."""
    docs = {
        "jobs/j": {"jid": "j", "name": "synthetic", "state": "RUNNING", "duration": 120_000, "now": now_ms,
                   "vertices": [{"id": v, "name": n, "parallelism": p} for v, n, p in vertices]},
        "jobs/j/plan": {"plan": {"jid": "j", "nodes": [
            {"id": v, "parallelism": p, "inputs": [{"id": u, "num": k, "ship_strategy": st}
                                                   for k, (u, st) in enumerate(inputs.get(v, []))]}
            for v, _n, p in vertices]}},
        "taskmanagers": {"taskmanagers": [
            {"id": tm, "path": f"pekko.tcp://flink@{host}:6122/user/rpc/taskmanager_0", "slotsNumber": 2,
             "hardware": {"cpuCores": 4}, "totalResource": {"cpuCores": 2.0},
             "memoryConfiguration": {"totalProcessMemory": 2 * 2**30}}
            for tm, host in (("tm-a", "10.0.0.1"), ("tm-b", "10.0.0.2"), ("tm-c", "10.0.0.1"))]},
    }
    for v, _n, p in vertices:
        docs[f"jobs/j/vertices/{v}"] = {"id": v, "subtasks": [
            {"subtask": i, "attempt": (attempts or {}).get((v, i), 0), "status": "RUNNING",
             "endpoint": "host:1", "taskmanager-id": placement[v][i]} for i in range(p)]}
        for i in range(p):
            docs[f"jobs/j/vertices/{v}/subtasks/{i}/metrics"] = _metrics(**counters.get((v, i), {}))
    return docs


def test_synthetic_two_inputs_nan_busy_and_restart():
    vertices = [("a", "A", 2), ("b", "B", 1), ("c", "C", 2)]
    inputs = {"c": [("a", "HASH"), ("b", "BROADCAST")]}
    placement = {"a": ["tm-a", "tm-b"], "b": ["tm-c"], "c": ["tm-a", "tm-b"]}
    c0 = {("a", 0): dict(numRecordsOut=0, accumulateBusyTimeMs="NaN", idleTimeMsPerSecond=750,
                         busyTimeMsPerSecond="NaN"),
          ("a", 1): dict(numRecordsOut=0, accumulateBusyTimeMs="NaN", idleTimeMsPerSecond=0),
          ("b", 0): dict(numRecordsOut=0, accumulateBusyTimeMs=0),
          ("c", 0): dict(numRecordsIn=0, numBytesIn=0, accumulateBusyTimeMs=0),
          ("c", 1): dict(numRecordsIn=0, numBytesIn=0, accumulateBusyTimeMs=0)}
    c1 = {("a", 0): dict(numRecordsOut=1000, accumulateBusyTimeMs="NaN", idleTimeMsPerSecond=750,
                         backPressuredTimeMsPerSecond=50),
          ("a", 1): dict(numRecordsOut=3000, accumulateBusyTimeMs="NaN", idleTimeMsPerSecond=0),
          ("b", 0): dict(numRecordsOut=100, accumulateBusyTimeMs=1000),
          ("c", 0): dict(numRecordsIn=1100, numBytesIn=11000, accumulateBusyTimeMs=2000),
          ("c", 1): dict(numRecordsIn=1000, numBytesIn=40000, accumulateBusyTimeMs=500,
                         numRecordsInPerSecond=77.0)}
    capture = flink.Capture("j", (flink.Snapshot(0.0, _job(vertices, inputs, placement, c0), "s0"),
                                  flink.Snapshot(10.0, _job(vertices, inputs, placement, c1, attempts={("c", 1): 1}),
                                                 "s1")))
    r = flink.read_capture(capture)
    # c[1] restarted (attempt 1): its records in are its meter (77/s), the others differenced
    assert any("restarted" in w and "C[1]" in w for w in r.warnings)
    c = r.report["vertices"][2]
    assert c["records_in_per_s"] == pytest.approx(110 + 77)
    # two inputs: totals from the senders (A: 100 + 300 records/s, B: 10/s broadcast to both)
    hashed = [e for e in r.report["edges"] if e["ship_strategy"] == "HASH"][0]
    assert hashed["total_from"] == "senders" and hashed["records_per_s"] == pytest.approx(400)
    rows = {(int(s), int(d)): float(x) for s, d, x in zip(r.graph.src, r.graph.dst, r.graph.rate)}
    share = np.array([110, 77]) / 187
    assert rows[(0, 3)] == pytest.approx(100 * share[0]) and rows[(1, 4)] == pytest.approx(300 * share[1])
    assert rows[(2, 3)] == pytest.approx(10) and rows[(2, 4)] == pytest.approx(10)
    # bytes per record: each receiver's own numBytesIn / numRecordsIn (c[0]: 10 B; c[1]'s
    # counters restarted, so its meters are used: no numBytesInPerSecond -> the vertex average)
    bytes_rows = {(int(s), int(d)): float(x) for s, d, x in zip(r.graph.src, r.graph.dst, r.graph.bytes_rate)}
    assert bytes_rows[(0, 3)] == pytest.approx(rows[(0, 3)] * 10)
    # loads: a[0] has no busy time but idle 750 and back-pressure 50 ms/s -> 0.2 cores; a[1]
    # and the restarted c[1] (no busyTimeMsPerSecond either) nothing -> the job's median cost
    # per record (a[0]: 0.2 core / 100 rec/s, b: 0.1 / 10, c[0]: 0.2 / 110) times their records
    assert r.graph.load[0] == pytest.approx(0.2)
    assert r.report["load_fallback_tasks"] == [1, 4]
    cost = sorted([0.2 / 100, 0.1 / 10, 0.2 / 110])[1]
    assert r.graph.load[1] == pytest.approx(cost * 300) and r.graph.load[4] == pytest.approx(cost * 77)
    assert r.graph.load[2] == pytest.approx(0.1) and r.graph.load[3] == pytest.approx(0.2)
    # nodes: TaskManagers sorted by host then id; capacity = taskmanager.cpu.cores (2 of 4)
    assert [(n.name, n.capacity, n.cores, n.ram_mb) for n in r.cluster.nodes] == [
        ("tm-a", 2.0, 4, 2048.0), ("tm-c", 2.0, 4, 2048.0), ("tm-b", 2.0, 4, 2048.0)]
    assert r.placement.node_of.tolist() == [0, 2, 1, 0, 2]
    hosts = flink.read_capture(capture, node_by="host")
    assert [(n.name, n.slots, n.capacity, n.ram_mb) for n in hosts.cluster.nodes] == [
        ("10.0.0.1", 2, 4.0, 4096.0), ("10.0.0.2", 1, 4.0, 2048.0)]
    assert hosts.placement.node_of.tolist() == [0, 1, 0, 0, 1]
    assert hosts.placement.worker_of.tolist() == [0, 0, 1, 0, 0]


def test_synthetic_odd_strategies_and_unplaced():
    vertices = [("a", "A", 2), ("b", "B", 3), ("c", "C", 1)]
    inputs = {"b": [("a", "FORWARD")], "c": [("b", "PARTITION_CUSTOM_X")]}
    placement = {"a": ["tm-a", "tm-a"], "b": ["tm-b", "", "tm-b"], "c": ["ghost"]}
    counters = {("a", 0): dict(numRecordsOutPerSecond=10), ("a", 1): dict(numRecordsOutPerSecond=20),
                ("b", 0): dict(numRecordsInPerSecond=10, numRecordsOutPerSecond=1),
                ("b", 2): dict(numRecordsInPerSecond=20, numRecordsOutPerSecond=2),
                ("c", 0): dict(numRecordsInPerSecond=3)}
    capture = flink.Capture("j", (flink.Snapshot(1.0, _job(vertices, inputs, placement, counters), "saved"),))
    r = flink.read_capture(capture)
    text = " | ".join(r.warnings)
    assert "pointwise pairs used" in text and "PARTITION_CUSTOM_X" in text
    assert "ghost" in text and "1 subtasks run on no TaskManager" in text
    # nodes by host, then id: tm-a, tm-c (10.0.0.1), tm-b (10.0.0.2), ghost (its endpoint's host)
    assert [n.name for n in r.cluster.nodes] == ["tm-a", "tm-c", "tm-b", "ghost"]
    assert r.placement.node_of.tolist()[2:5] == [2, -1, 2]  # B[1] has no TaskManager
    assert r.report["rates_from"] == "meters"


# ------------------------------------------------------------------ live capture logic
class FakeRest:
    """A JobManager on a fake clock (each request takes 10 ms): the capture's second snapshot,
    and each TaskManager's signal (``/taskmanagers/:id/metrics``) taking a new value at the polls
    of that TaskManager numbered in ``changes``; ``moves``: the vertex pages' requests at which
    a subtask's attempt goes up (a restart)."""

    url = "http://fake:8081"

    def __init__(self, capture, changes, moves=()):
        self.docs = json.loads(json.dumps(dict(capture.snapshots[1].documents)))
        self.changes, self.moves = changes, set(moves)
        self.now, self.polls, self.log, self.vertex_calls = 100.0, {}, [], 0
        self.calls = []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds

    def get(self, path):
        asked = self.now
        self.now += 0.01
        key = path.lstrip("/").split("?", 1)[0]
        self.calls.append(key)
        signal = re.fullmatch(r"taskmanagers/([^/]+)/metrics", key)
        if signal:
            tm = unquote(signal.group(1))
            n = self.polls[tm] = self.polls.get(tm, 0) + 1
            version = sum(1 for c in self.changes.get(tm, ()) if c <= n)
            self.log.append((tm, n, asked, self.now))
            return [{"id": "Status.JVM.CPU.Time", "value": str(version)}]
        if re.fullmatch(r"jobs/[^/]+/vertices/[^/]+", key):
            self.vertex_calls += 1
            if self.vertex_calls in self.moves:
                self.docs[key]["subtasks"][0]["attempt"] += 1
        return json.loads(json.dumps(self.docs[key]))

    def times(self, tm, n):
        """(asked, answered) of poll ``n`` of ``tm``."""
        return next((a, b) for t, k, a, b in self.log if t == tm and k == n)


def _tms(capture):
    return sorted({s["taskmanager-id"] for k, d in capture.snapshots[1].documents.items()
                   if re.fullmatch(r"jobs/[^/]+/vertices/[^/]+", k) for s in d["subtasks"]})


def test_take_snapshot_waits_for_each_taskmanagers_fresh_answer(capture):
    a, b = _tms(capture)
    # a's answer is seen at its 3rd poll; b's at its 2nd and a newer one at the 3rd (the check
    # after its subtasks were read): b's subtasks are read again, from that newer answer
    rest = FakeRest(capture, {a: [3], b: [2, 3]})
    snap = flink.take_snapshot(rest, capture.job_id, interval_s=2.0, poll_s=0.2, clock=rest.clock, sleep=rest.sleep)
    assert snap.taskmanagers[a] == (rest.times(a, 2)[0], rest.times(a, 3)[1])
    assert snap.taskmanagers[b] == (rest.times(b, 2)[0], rest.times(b, 3)[1])
    assert snap.time == max(seen for _, seen in snap.taskmanagers.values())
    subtasks = sum(1 for k in capture.snapshots[1].documents if k.endswith("/metrics"))
    on_b = sum(1 for d in (v for k, v in capture.snapshots[1].documents.items()
                           if re.fullmatch(r"jobs/[^/]+/vertices/[^/]+", k)) for s in d["subtasks"]
               if s["taskmanager-id"] == b)
    assert sum(1 for c in rest.calls if c.startswith("jobs/") and c.endswith("/metrics")) == subtasks + on_b
    assert rest.polls == {a: 4, b: 4}
    assert flink.parse_snapshot(snap.documents, capture.job_id, "x").vertices


def test_take_snapshot_reads_again_when_subtasks_restart_and_names_a_silent_taskmanager(capture):
    a, b = _tms(capture)
    vertices = sum(1 for k in capture.snapshots[1].documents if re.fullmatch(r"jobs/[^/]+/vertices/[^/]+", k))
    # a restart seen by the check after the first read: everything is read again
    rest = FakeRest(capture, {a: [2, 6], b: [2, 6]}, moves={vertices + 1})
    snap = flink.take_snapshot(rest, capture.job_id, interval_s=2.0, poll_s=0.2, clock=rest.clock, sleep=rest.sleep)
    assert snap.taskmanagers[a] == (rest.times(a, 5)[0], rest.times(a, 6)[1])
    # restarts at every check: three tries, then one line
    rest = FakeRest(capture, {a: [2, 6, 10], b: [2, 6, 10]}, moves={vertices * k + vertices // 2 for k in range(1, 7)})
    with pytest.raises(InputError, match="restarted or moved while they were read, three times"):
        flink.take_snapshot(rest, capture.job_id, interval_s=2.0, poll_s=0.2, clock=rest.clock, sleep=rest.sleep)
    # b never gives a fresh answer: waited for (0.5 s of real time), then named
    rest = FakeRest(capture, {a: [2]})
    with pytest.raises(InputError) as info:
        flink.take_snapshot(rest, capture.job_id, interval_s=2.0, poll_s=0.2, clock=rest.clock, sleep=rest.sleep,
                            wait_s=0.5)
    assert f"TaskManager {b!r} did not move within 0.5 s" in str(info.value) and repr(a) not in str(info.value)


# ------------------------------------------------------------------ bad input
def _copy(tmp_path):
    target = tmp_path / "cap"
    shutil.copytree(FIXTURE, target)
    return target, json.loads((target / "capture.json").read_text())["job_id"]


def test_bad_input_names_file_and_field(tmp_path):
    target, job = _copy(tmp_path)
    metrics_file = next((target / "1" / "jobs" / job / "vertices").glob("*/subtasks/0/metrics.json"))
    doc = json.loads(metrics_file.read_text())
    doc[0]["value"] = "lots"
    metrics_file.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=re.escape(str(metrics_file)) + r"\[0\]\.value .*expected a number"):
        flink.read_capture(flink.load_capture(target))
    metrics_file.write_text("[{")
    with pytest.raises(InputError, match=re.escape(str(metrics_file)) + ":1: invalid JSON"):
        flink.load_capture(target)
    shutil.rmtree(target)
    target, job = _copy(tmp_path)
    (target / "0" / "jobs" / job / "plan.json").unlink()
    job_doc = json.loads((target / "0" / "jobs" / f"{job}.json").read_text())
    del job_doc["plan"]
    job_doc["vertices"][1]["parallelism"] = "two"
    (target / "0" / "jobs" / f"{job}.json").write_text(json.dumps(job_doc))
    with pytest.raises(InputError, match=r"0/jobs/\w+\.json\.plan: missing"):
        flink.read_capture(flink.load_capture(target))
    (target / "capture.json").write_text(json.dumps({"format": "x"}))
    with pytest.raises(InputError, match=r"capture\.json\.format: expected 'streamsched\.flink-rest/1'"):
        flink.load_capture(target)
    with pytest.raises(InputError, match="not a directory"):
        flink.load_capture(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="exactly one jobs/<job id>.json, found 0"):
        flink.load_capture(tmp_path / "empty")
    with pytest.raises(InputError, match="node_by"):
        flink.read_capture(flink.load_capture(FIXTURE), node_by="rack")


def test_missing_taskmanagers_and_vertex_pages(tmp_path):
    target, job = _copy(tmp_path)
    (target / "1" / "taskmanagers.json").unlink()
    with pytest.raises(InputError, match=r"1/taskmanagers\.json: missing"):
        flink.read_capture(flink.load_capture(target))
    vertex = next((target / "0" / "jobs" / job / "vertices").glob("*.json"))
    vertex.unlink()
    with pytest.raises(InputError, match=re.escape(vertex.name[:-5]) + r"\.json: missing"):
        flink.read_capture(flink.load_capture(target))


def test_unreachable_jobmanager_is_one_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(InputError, match=r"Flink JobManager unreachable") as info:
        flink.capture_live(f"http://127.0.0.1:{port}", "abc", window_s=0, timeout=2)
    assert "\n" not in str(info.value)
    with pytest.raises(InputError, match="not an http"):
        flink.FlinkRest("localhost:8081")
    with pytest.raises(InputError, match="either --url"):
        flink.read()
    with pytest.raises(InputError, match="--job-id goes with --url"):
        flink.read(directory=FIXTURE, job_id="x")


# ------------------------------------------------------------------ the CLI
def test_cli_read_engine_flink_then_schedule(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["read-engine", "flink", "--dir", str(FIXTURE), "--out", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["engine"] == "flink" and report["graph"]["tasks"] == 23 and report["rates_from"] == "counters"
    graph = read_graph(out / "graph.json")
    cluster = Cluster.load(out / "cluster.yaml")
    assert graph.load_unit == "cores" and cluster.capacity_unit == "cores"
    placement = Placement.read(out / "placement.json", graph, cluster)
    assert placement.violations(graph, cluster) == []
    assert metrics.inter_node_traffic(graph, placement, weight="bytes") == pytest.approx(
        report["measured_per_s"]["bytes_in_remote"], rel=0.05)
    assert main(["schedule", "--graph", str(out / "graph.json"), "--cluster", str(out / "cluster.yaml"),
                 "-s", "ols", "-o", str(tmp_path / "new.json")]) == 0
    capsys.readouterr()
    assert main(["read-engine", "flink", "--dir", str(tmp_path / "none"), "--out", str(tmp_path / "y")]) == 2
    assert main(["read-engine", "flink", "--url", "http://127.0.0.1:9", "--out", str(tmp_path / "z"), "--window", "1",
                 "--timeout", "2"]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 2 and all(line.startswith("error:") for line in errors)
    assert "not a directory" in errors[0] and "unreachable" in errors[1]


#: Flink 2.3's own parse of each value (``TimeUtils.parseDuration`` run on the flink-dist jar of
#: apache-flink-libraries, 2026-11-28), in milliseconds; None: Flink refuses it.
FLINK_DURATIONS_MS = {"8000": 8000, "8 s": 8000, "8sec": 8000, "8 seconds": 8000, "2 m": 120000, "2min": 120000,
                      "1 h": 3600000, "1 d": 86400000, "8000 ms": 8000, "8000 millis": 8000, "8 SECONDS": 8000,
                      "8000000 µs": 8000, "8000000000 ns": 8000, " 8 s ": 8000, "1.5 s": None, "8 fortnights": None}


@pytest.mark.parametrize("value, ms", FLINK_DURATIONS_MS.items())
def test_config_durations_read_as_flink_parses_them(value, ms):
    from streamsched.engines.flink.rest import config_seconds

    class Config:
        def get(self, path):
            assert path == "/jobmanager/config"
            return [{"key": "other", "value": "1 s"}, {"key": "heartbeat.timeout", "value": value}]

    assert config_seconds(Config(), "heartbeat.timeout", -1.0) == pytest.approx(-1.0 if ms is None else ms / 1000)
