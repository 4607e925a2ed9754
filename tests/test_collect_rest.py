"""REST collectors (issue 15, item 1) against a local HTTP server serving the recorded answers:
the Storm UI fixture (tests/fixtures/storm_ui, shaped as storm-webapp writes it) turned into
cumulative ``:all-time`` readings, and the real Flink 2.3 capture (tests/fixtures/flink/live-job).
Per-interval counts are checked by hand against the fixtures' raw numbers; a restarted worker
(counters and uptime fall) is counted from zero and reported; a kill after the state save and a
restart write every chunk exactly once."""

from __future__ import annotations

import copy
import csv
import json
import re
import time
from pathlib import Path

import pytest
from json_http import JsonServer

from streamsched.cli import main
from streamsched.engines import flink
from streamsched.engines.storm import ui_rest
from streamsched.pipeline import collect_rest
from streamsched.pipeline.collect_rest import FlinkCollector, StormUICollector, running_placement

FIXTURES = Path(__file__).parent / "fixtures"
STORM = FIXTURES / "storm_ui" / "wordcount"
TOPOLOGY_ID = "wordcount-3-1714557000"
NODE2 = "node2.example.com"
FLINK = FIXTURES / "flink" / "live-job"


# ------------------------------------------------------------------------ servers
def doc_server(answer) -> JsonServer:
    """Answers GETs with ``answer(path parts, query) -> doc | None`` (None: 404)."""

    def respond(parts, query):
        doc = answer(parts, query)
        return (200, json.dumps(doc).encode()) if doc is not None else (404, b'{"errors": ["not found"]}')

    return JsonServer(respond)


def _storm_fixture() -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in STORM.glob("*.json") if p.name != "generator-truth.json"}


def storm_reading(scale, uptime) -> dict[str, dict]:
    """The fixture's counts as cumulative ``:all-time`` counters: executor e's counts times
    ``scale(e)``, its uptime ``uptime(e)``; each bolt input the bolt's executions scaled alike."""
    docs = _storm_fixture()
    for name, doc in docs.items():
        if name == "supervisors.json":
            continue
        doc["window"] = ":all-time"
        rows = doc.get("executorStats", [])
        before = sum(r.get("executed", 0) for r in rows)
        for r in rows:
            k = scale(r)
            for key in ("emitted", "transferred", "acked", "executed"):
                if key in r:
                    r[key] = r[key] * k
            r["uptimeSeconds"] = uptime(r)
        after = sum(r.get("executed", 0) for r in rows)
        for i in doc.get("inputStats", []):
            i["executed"] = i["executed"] * after / before
    return docs


@pytest.fixture()
def storm_server():
    state = {"docs": storm_reading(lambda r: 1, lambda r: r["uptimeSeconds"]), "on_topology": None}

    def answer(parts, query):
        assert "window=%3Aall-time" in query or parts[-1] == "summary"
        if parts[-1] == TOPOLOGY_ID and state["on_topology"]:
            state["on_topology"]()
        name = ("supervisors.json" if parts[-1] == "summary" else "topology.json" if parts[-1] == TOPOLOGY_ID
                else ui_rest.component_file(parts[-1]))
        return state["docs"].get(name)

    server = doc_server(answer)
    server.state = state
    yield server
    server.close()


def _chunk(out: Path, kind: str, seq: int) -> list[dict]:
    [path] = [*out.glob(f"{kind}-storm-*-{seq:08d}.csv"), *out.glob(f"{kind}-flink-*-{seq:08d}.csv")]
    with open(path) as handle:
        return list(csv.DictReader(handle))


def _pairs(rows) -> dict[tuple[int, int], float]:
    out = {}
    for r in rows:
        key = (int(r["src_task"]), int(r["dst_task"]))
        out[key] = out.get(key, 0.0) + float(r["tuples"])
    return out


# ------------------------------------------------------------------------ Storm UI
def test_storm_ui_intervals_by_hand_and_a_worker_restart(storm_server, tmp_path):
    clock = iter([1000.0, 1600.0, 2200.0])
    out = tmp_path / "chunks"
    collector = StormUICollector(storm_server.url, TOPOLOGY_ID, out, clock=lambda: next(clock))
    assert collector.poll() is None  # the first reading is the base of the next difference
    assert list(out.glob("*.csv")) == []
    # 600 s later every counter grew by the fixture's counts.
    storm_server.state["docs"] = storm_reading(lambda r: 2, lambda r: r["uptimeSeconds"] + 600)
    side = collector.poll()
    assert side["covers"] == [1000.0, 1600.0] and side["resets"] == [] and side["kind"] == "traffic"
    pairs = _pairs(_chunk(out, "traffic", 1))
    # spout -> split (shuffle): sender share of the spouts' transfers (300000 of 300000 + 288000
    # + 218400 + 300000 + 294000), times split [17]'s 186760 executions (its only input).
    assert pairs[(25, 17)] == pytest.approx(300000 / 1400400 * 186760)
    # split -> count: [17]'s share of split's transfers (5 x 1494000 + 3 x 1045800), times the
    # split fraction of count's executions (10159200 of 10159820, the rest are ticks), times
    # [5-7]'s 3179360 executions.
    assert pairs[(17, 5)] == pytest.approx(1494000 / 10607400 * 10159200 / 10159820 * 3179360)
    into_split = sum(v for (s, d), v in pairs.items() if d == 17)
    assert into_split == pytest.approx(186760)
    loads = {int(r["task"]): float(r["load"]) for r in _chunk(out, "load", 1)}
    assert loads[17] == pytest.approx(186760 * 0.350 / 1000 / 600)  # busy cores over the interval
    assert loads[5] == pytest.approx(3179360 * 0.060 / 1000 / 600)
    assert all(float(r["timestamp"]) == 1600.0 and r["topology"] == "wordcount" for r in _chunk(out, "load", 1))

    # A restart of the collector, then the worker on node2 restarts 300 s before the next
    # reading: its executors' counters start again (half the fixture's counts, uptime 300).
    collector = StormUICollector(storm_server.url, TOPOLOGY_ID, out, clock=lambda: next(clock))
    on_node2 = lambda r: r["host"] == NODE2  # noqa: E731
    storm_server.state["docs"] = storm_reading(lambda r: 0.5 if on_node2(r) else 3,
                                               lambda r: 300 if on_node2(r) else r["uptimeSeconds"] + 1200)
    side = collector.poll()
    reset = sorted(r["executor"] for r in side["resets"])
    assert reset == sorted(f"{c}[{a}-{b}]" for c, a, b in [("count", 5, 7), ("count", 13, 14), ("split", 18, 18),
                                                            ("split", 21, 21), ("split", 24, 24), ("spout", 27, 27),
                                                            ("__acker", 2, 2)])
    assert all(r["counted"] == "since its start" and "uptime fell" in r["reason"] for r in side["resets"])
    pairs = _pairs(_chunk(out, "traffic", 2))
    assert min(pairs.values()) >= 0
    # [5-7] restarted: its 0.5 x 3179360 executions since; split [17] (node1) kept counting.
    assert pairs[(17, 5)] == pytest.approx(1494000 / (5 * 1494000 + 3 * 0.5 * 1045800)
                                           * 10159200 / 10159820 * 0.5 * 3179360)
    assert sum(v for (s, d), v in pairs.items() if d == 18) == pytest.approx(0.5 * 130720)
    assert sum(v for (s, d), v in pairs.items() if d == 17) == pytest.approx(186760)

    # The metrics consumer's executor disappears from the UI (rebalanced away): reported.
    storm_server.state["docs"] = storm_reading(lambda r: 4, lambda r: r["uptimeSeconds"] + 1800)
    metrics = "__metricsorg.apache.storm.metric.LoggingMetricsConsumer"
    storm_server.state["docs"][ui_rest.component_file(metrics)]["executorStats"] = []
    side = StormUICollector(storm_server.url, TOPOLOGY_ID, out, clock=lambda: 2800.0).poll()
    gone = [r for r in side["resets"] if r["reason"].startswith("gone")]
    assert [r["executor"] for r in gone] == [f"{metrics}[4-4]"]


def test_a_kill_after_the_state_save_writes_each_chunk_once(storm_server, tmp_path, monkeypatch):
    clock = iter([0.0, 600.0, 1200.0])
    out = tmp_path / "chunks"
    StormUICollector(storm_server.url, TOPOLOGY_ID, out, clock=lambda: next(clock)).poll()
    storm_server.state["docs"] = storm_reading(lambda r: 2, lambda r: r["uptimeSeconds"] + 600)

    def die(self):
        raise KeyboardInterrupt  # the process ends between the state save and the chunks

    dying = StormUICollector(storm_server.url, TOPOLOGY_ID, out, clock=lambda: next(clock))
    with monkeypatch.context() as patch:
        patch.setattr(collect_rest.RestCollector, "_write_pending", die)
        with pytest.raises(KeyboardInterrupt):
            dying.poll()
    assert list(out.glob("*.csv")) == []
    restarted = StormUICollector(storm_server.url, TOPOLOGY_ID, out, clock=lambda: next(clock))
    assert sorted(p.name for p in out.glob("*.csv")) == [f"load-storm-{TOPOLOGY_ID}-00000001.csv",
                                                         f"traffic-storm-{TOPOLOGY_ID}-00000001.csv"]
    assert _pairs(_chunk(out, "traffic", 1))[(25, 17)] == pytest.approx(300000 / 1400400 * 186760)
    storm_server.state["docs"] = storm_reading(lambda r: 3, lambda r: r["uptimeSeconds"] + 1200)
    restarted.poll()
    assert _pairs(_chunk(out, "traffic", 2))[(25, 17)] == pytest.approx(300000 / 1400400 * 186760)
    assert len(list(out.glob("traffic-*.csv"))) == 2
    side = json.loads((out / f".traffic-storm-{TOPOLOGY_ID}-00000002.csv.json").read_text())
    assert side["covers"] == [600.0, 1200.0] and side["url"] == storm_server.url


# ------------------------------------------------------------------------------ Flink
@pytest.fixture()
def flink_server():
    """Serves the capture's snapshots; ``arm(docs)``: the JobManager's next metrics fetch (at
    most one per 0.2 s, triggered by a poll of a TaskManager's signal, ``/taskmanagers/:id/metrics``,
    which moves with every fetch) brings ``docs``."""
    capture = flink.load_capture(FLINK)
    job_key = f"jobs/{capture.job_id}"
    stale = copy.deepcopy(dict(capture.snapshots[0].documents))
    for vertex in stale[job_key]["vertices"]:
        vertex["metrics"] = {k: 0 for k in vertex["metrics"]}  # before the first fetch
    state = {"docs": stale, "next": dict(capture.snapshots[0].documents), "signal": 0, "fetched": 0.0}

    def answer(parts, query):
        key = "/".join(parts)
        if key == "jobmanager/config":
            return [{"key": "metrics.fetcher.update-interval", "value": "2000"}]
        if key == "jobs/overview":
            return {"jobs": [{"jid": capture.job_id, "name": "streamsched-live", "state": "RUNNING"}]}
        if len(parts) == 3 and parts[0] == "taskmanagers" and parts[2] == "metrics":
            if time.monotonic() - state["fetched"] >= 0.2:
                state["fetched"], state["signal"] = time.monotonic(), state["signal"] + 1
                if state["next"] is not None:
                    state["docs"], state["next"] = state["next"], None
            return [{"id": "Status.JVM.CPU.Time", "value": str(state["signal"])}]
        return state["docs"].get(key)

    server = doc_server(answer)
    server.capture = capture

    def arm(docs):
        with server.lock:
            state["next"] = docs

    server.arm = arm
    yield server
    server.close()


def _received(documents, job_id, pattern) -> float:
    """A vertex's numRecordsIn summed over its subtasks, from the raw JSON."""
    job = documents[f"jobs/{job_id}"]
    (vertex,) = [v for v in job["vertices"] if re.fullmatch(pattern, v["name"])]
    total = 0.0
    for i in range(vertex["parallelism"]):
        metrics = documents[f"jobs/{job_id}/vertices/{vertex['id']}/subtasks/{i}/metrics"]
        total += float({m["id"]: m["value"] for m in metrics}["numRecordsIn"])
    return total


def test_flink_intervals_from_the_real_capture_and_a_restarted_subtask(flink_server, tmp_path):
    capture = flink_server.capture
    first, second = (dict(s.documents) for s in capture.snapshots)
    ticks = iter(float(t) for t in range(0, 10_000, 5))
    out = tmp_path / "chunks"
    collector = FlinkCollector(flink_server.url, out, clock=lambda: next(ticks), poll_s=0.01)
    assert collector.job_id == capture.job_id
    assert collector.poll() is None
    flink_server.arm(second)
    side = collector.poll()
    assert side["resets"] == [] and side["rates_from"] == "counters"
    rows = _chunk(out, "traffic", 1)
    graph = flink.read_capture(capture).graph
    # Every receiving vertex has one input: the tuples into it are its subtasks' numRecordsIn
    # differences between the two recorded answers.
    for pattern in (r"Calc\[\d+\]", r"GroupAggregate\[\d+\] -> sink\[\d+\]: Writer", "rescaled: Writer",
                    "fanin: Writer"):
        [op] = [k for k, name in enumerate(graph.operator_names) if re.fullmatch(pattern, name)]
        tasks = {int(t) for t, o in zip(graph.task_ids, graph.task_operator) if o == op}
        got = sum(float(r["tuples"]) for r in rows if int(r["dst_task"]) in tasks)
        assert got == pytest.approx(_received(second, capture.job_id, pattern) - _received(first, capture.job_id, pattern))
    # The job runs on as in the recorded interval (every counter grows by the same amount)
    # while a subtask restarts (attempt 1, counters from zero): its count starts from zero.
    third = copy.deepcopy(second)
    for key, doc in third.items():
        if key.endswith("/metrics"):
            before = {m["id"]: m["value"] for m in first[key]}
            for m in doc:
                if m["id"] in flink.COUNTERS and m["value"] != "NaN":
                    m["value"] = repr(2 * float(m["value"]) - float(before[m["id"]]))
    job = third[f"jobs/{capture.job_id}"]
    (calc,) = [v for v in job["vertices"] if re.fullmatch(r"Calc\[\d+\]", v["name"])]
    vkey = f"jobs/{capture.job_id}/vertices/{calc['id']}"
    third[vkey]["subtasks"][0]["attempt"] += 1
    metrics = third[f"{vkey}/subtasks/0/metrics"]
    for m in metrics:
        if m["id"] in flink.COUNTERS:
            m["value"] = "40"
    for v in job["vertices"]:  # the job's counters moved: a fresh fetch
        v["metrics"]["read-records"] += 1
    flink_server.arm(third)
    side = collector.poll()
    assert [(r["subtask"], r["reason"]) for r in side["resets"]] == [(f"{calc['name']}[0]", "attempt 0 -> 1")]
    [op] = [k for k, name in enumerate(graph.operator_names) if name == calc["name"]]
    calc_tasks = {int(t) for t, o in zip(graph.task_ids, graph.task_operator) if o == op}
    rows = _chunk(out, "traffic", 2)
    # Into Calc: 40 since the restart, plus subtasks 1 and 2 as recorded (numRecordsIn 2667 ->
    # 9334 and 2666 -> 9333, so 6667 each); REBALANCE spreads the total evenly over the pairs.
    assert sum(float(r["tuples"]) for r in rows if int(r["dst_task"]) in calc_tasks) == pytest.approx(40 + 2 * 6667)
    assert min(float(r["tuples"]) for r in rows) >= 0


# -------------------------------------------------------------------------------- CLI
def test_cli_collect_storm_ui_once_and_bad_input(storm_server, tmp_path, capsys):
    out = tmp_path / "chunks"
    args = ["collect", "storm-ui", "--url", storm_server.url, "--topology-id", TOPOLOGY_ID, "--out", str(out)]
    assert main(args + ["--once", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"chunk": None, "next_seq": 1}
    storm_server.state["docs"] = storm_reading(lambda r: 2, lambda r: r["uptimeSeconds"] + 600)
    assert main(args + ["--once", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["next_seq"] == 2 and report["chunk"]["rows"] == 80
    storm_server.state["docs"] = storm_reading(lambda r: 3, lambda r: r["uptimeSeconds"] + 1200)
    assert main(args + ["--once"]) == 0  # without --json: one readable line
    printed = capsys.readouterr()
    line = re.fullmatch(r"chunk of 80 pairs over ([0-9.]+) s: current placement ([0-9,]+) of ([0-9,]+) tuples/s cross "
                        r"nodes \([0-9.]+ %\), ([0-9,]+) cross workers \(0 counter resets\); next chunk 3\n", printed.out)
    assert line, printed
    assert printed.err == ""
    # the figures are the chunk's: its rows' tuples over its seconds, those between hosts apart
    rows = _chunk(out, "traffic", 2)
    [sidecar] = out.glob(".traffic-storm-*-00000002.csv.json")
    seconds = json.loads(sidecar.read_text())["seconds"]
    total = sum(float(r["tuples"]) for r in rows) / seconds
    cross, workers = (float(line.group(k).replace(",", "")) for k in (2, 4))
    assert float(line.group(3).replace(",", "")) == pytest.approx(total, abs=0.5)
    assert 0 < cross <= workers <= total + 0.5
    assert main(args + ["--interval", "0"]) == 2
    assert main(["collect", "storm-ui", "--url", storm_server.url, "--topology-id", "gone-1-1", "--out",
                 str(tmp_path / "x"), "--once"]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert errors[-2].startswith("error: --interval") and errors[-1].startswith("error:") and "404" in errors[-1]



def test_a_failed_reading_is_reported_and_the_next_covers_the_gap(storm_server, tmp_path):
    """The UI answers errors for two readings: the follow loop reports them and goes on; the
    next chunk covers the whole time since the last good reading (nothing lost)."""
    out = tmp_path / "chunks"
    collector = StormUICollector(storm_server.url, TOPOLOGY_ID, out)
    calls = {"n": 0}

    def on_topology():  # reading k: counters k times the fixture's; readings 3 and 4 fail
        calls["n"] += 1
        k = calls["n"]
        storm_server.state["docs"] = ({} if k in (3, 4) else
                                      storm_reading(lambda r: k, lambda r: r["uptimeSeconds"] + 600 * k))

    storm_server.state["on_topology"] = on_topology
    errors, sides = [], []
    collector.follow(0.05, timeout_s=3.0, report=sides.append, report_error=errors.append)
    assert len(errors) == 2 and all("HTTP 404" in e for e in errors)
    assert len(sides) >= 3 and all(b["covers"][0] == a["covers"][1] for a, b in zip(sides, sides[1:]))
    into_17 = [sum(v for (_, d), v in _pairs(_chunk(out, "traffic", seq)).items() if d == 17)
               for seq in range(1, len(sides) + 1)]
    # Reading 1 is the base; chunk 1 = readings 1 -> 2, chunk 2 = readings 2 -> 5 (3 and 4 failed).
    assert into_17[:2] == [pytest.approx(186760), pytest.approx(3 * 186760)]
    assert all(x == pytest.approx(186760) for x in into_17[2:])


def test_the_follow_loop_says_each_warning_once_per_run(tmp_path, capsys):
    """Every reading of a job repeats its warnings (Flink's NaN busy time of sources): the
    command prints each once, the chunks and resets every time."""
    from streamsched.cli.pipeline import _follow_rest

    side = {"rows": 4, "seconds": 60.0, "resets": [], "warnings": ["no busy time for 2 subtasks", "rates from meters"],
            "current": {"inter_node_traffic": 10.0, "inter_worker_traffic": 12.0, "total_traffic": 40.0}}

    class Repeating:
        state = {"seq": 1}

        def __init__(self, deadline=None):
            self.deadline = deadline

        def follow(self, interval, timeout, report, report_error):
            for _ in range(3):
                report(side)

    _follow_rest(Repeating, 1.0, False, None, False)
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if line.startswith("warning:")] == [
        "warning: no busy time for 2 subtasks", "warning: rates from meters"]
    chunks = [line for line in err if line.startswith("chunk of 4 pairs over 60.0 s")]
    assert len(chunks) == 3
    assert "current placement 10 of 40 tuples/s cross nodes (25.0 %), 12 cross workers" in chunks[0]


def test_flink_collector_keeps_the_jobs_running_placement(flink_server, tmp_path):
    """After a poll, ``.running-flink-<job>.json`` holds where the job's subtasks ran (the
    recorded answer's TaskManagers), readable as a placement of the interval's graph."""
    capture = flink_server.capture
    ticks = iter(float(t) for t in range(0, 10_000, 5))
    out = tmp_path / "chunks"
    collector = FlinkCollector(flink_server.url, out, clock=lambda: next(ticks), poll_s=0.01)
    collector.poll()
    flink_server.arm(dict(capture.snapshots[1].documents))
    collector.poll()
    reading = flink.read_capture(capture)
    found = running_placement(out, reading.graph, reading.cluster)
    expected = {}
    for vertex in flink.parse_snapshot(capture.snapshots[1].documents, capture.job_id, "x").vertices:
        for sub in vertex.subtasks:
            expected[len(expected)] = sub.taskmanager
    assert {t: reading.cluster.nodes[k].name for t, k in enumerate(found.node_of.tolist())} == expected
