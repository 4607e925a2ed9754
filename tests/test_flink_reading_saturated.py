"""Live Flink readings when the JobManager's metric cache fills late (issue 37, item 3).

Fast tests run against a scripted JobManager: the structure of the real Flink 2.3 capture
(tests/fixtures/flink/live-job: its job, plan, vertex pages, TaskManager ids) and a metric cache
filled as Flink's ``MetricFetcherImpl``/``MetricStore`` fill it: a metrics request at least one
fetch interval after the last fetch starts a fetch; each TaskManager makes its answer (every
metric of its own and of its subtasks, read at one moment of its clock) when the request
reaches it and the answer lands in the cache as a whole when it arrives; the script sets both
delays per TaskManager and fetch. Every counter grows at a rate the script sets, so the right
reading is known by hand, whatever the delays. The slow test reads a live job on the network
lab with its links saturated.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from streamsched.engines import flink
from streamsched.errors import InputError
from json_http import JsonServer

FIXTURE = Path(__file__).parent / "fixtures" / "flink" / "live-job"
INTERVAL_S = 0.3  # the scripted metrics.fetcher.update-interval


class ScriptedJobManager:
    """The fixture's job behind a metric cache that TaskManager answers reach late.

    ``made(tm, n)``: seconds after fetch ``n`` (1, 2, ...) that the TaskManager makes its
    answer (None: it never answers); ``travel(tm, n)``: seconds the answer then takes to land
    (answers of one TaskManager land in order, as over one connection)."""

    def __init__(self, made=lambda tm, n: 0.0, travel=lambda tm, n: 0.0):
        manifest = json.loads((FIXTURE / "capture.json").read_text())
        self.job_id = manifest["job_id"]
        snap = flink.load_capture(FIXTURE).snapshots[0]
        self.docs = {k: v for k, v in snap.documents.items() if not k.endswith("/metrics")}
        self.made, self.travel = made, travel
        self.start_ms = round(time.monotonic() * 1000) - 60_000  # every task started a minute ago
        self.last_fetch, self.fetches = -1e9, 0
        self.pending = {}  # tm -> [(lands, answer)], in landing order
        self.cache = {}  # REST path -> metrics list, per TaskManager answer
        self.rates = {}  # metrics key -> {counter: per second}
        self.host = {}  # metrics key -> TaskManager id
        job = self.docs[f"jobs/{self.job_id}"]
        k = 0
        for vertex in job["vertices"]:
            vkey = f"jobs/{self.job_id}/vertices/{vertex['id']}"
            source = not any(node["id"] == vertex["id"] and node.get("inputs")
                             for node in self.docs[f"jobs/{self.job_id}/plan"]["plan"]["nodes"])
            for sub in self.docs[vkey]["subtasks"]:
                key = f"{vkey}/subtasks/{sub['subtask']}/metrics"
                self.host[key] = sub["taskmanager-id"]
                k += 1
                records_in = 0 if source else 1000 * k
                self.rates[key] = {"numRecordsIn": records_in, "numRecordsOut": 1000 * (k + 1),
                                   "numBytesIn": 100 * records_in, "numBytesInRemote": 60 * records_in,
                                   "numBytesInLocal": 40 * records_in, "numBytesOut": 100_000 * (k + 1),
                                   "source": source}
        self.taskmanagers = sorted(set(self.host.values()))
        self.server = JsonServer(self.answer)
        self.url = self.server.url

    # ------------------------------------------------------------------ the TaskManagers' side
    def _answer_of(self, tm: str, made_s: float, n: int) -> dict:
        """Everything ``tm`` reports when it makes its answer at ``made_s`` (monotonic seconds)."""
        now_ms = round(made_s * 1000)
        elapsed = now_ms - self.start_ms
        out = {f"taskmanagers/{tm}/metrics": [{"id": "Status.JVM.CPU.Time", "value": str(now_ms * 10**6)},
                                              {"id": "Status.JVM.Memory.Heap.Used", "value": str(n)}]}
        for key, rates in self.rates.items():
            if self.host[key] != tm:
                continue
            busy, pressured = elapsed // 4, elapsed // 5
            values = {name: rate * elapsed // 1000 for name, rate in rates.items() if name != "source"}
            values.update({"accumulateBusyTimeMs": "NaN" if rates["source"] else float(busy),
                           "accumulateIdleTimeMs": 0 if rates["source"] else elapsed - busy - pressured,
                           "accumulateBackPressuredTimeMs": 0 if rates["source"] else pressured,
                           "busyTimeMsPerSecond": "NaN" if rates["source"] else 250.0,
                           "idleTimeMsPerSecond": 0, "backPressuredTimeMsPerSecond": 200})
            values.update({meter: "0.0" for meter in flink.METER_OF.values() if meter not in values})
            out[key] = [{"id": name, "value": str(value)} for name, value in values.items()]
        return out

    def _fetch_if_due(self, now: float) -> None:
        """Flink's ``MetricFetcherImpl.update()``: at most one fetch per interval."""
        if now - self.last_fetch <= INTERVAL_S:
            return
        self.last_fetch, self.fetches = now, self.fetches + 1
        for tm in self.taskmanagers:
            made = self.made(tm, self.fetches)
            if made is None:
                continue
            queue = self.pending.setdefault(tm, [])
            lands = max([now + made + self.travel(tm, self.fetches)] + [t for t, _ in queue])
            queue.append((lands, self._answer_of(tm, now + made, self.fetches)))

    def _land(self, now: float) -> None:
        for queue in self.pending.values():
            while queue and queue[0][0] <= now:
                self.cache.update(queue.pop(0)[1])  # MetricStore.addAll: the whole answer at once

    # ------------------------------------------------------------------ the REST API
    def answer(self, parts, query):
        path = "/".join(parts)
        now = time.monotonic()
        if path == "jobmanager/config":
            return 200, json.dumps([{"key": "metrics.fetcher.update-interval",
                                     "value": str(int(INTERVAL_S * 1000))}]).encode()
        if path == "jobs/overview":
            return 200, json.dumps({"jobs": [{"jid": self.job_id, "name": "streamsched-live",
                                              "state": "RUNNING"}]}).encode()
        if path.endswith("/metrics") or path == f"jobs/{self.job_id}":
            self._fetch_if_due(now)
        self._land(now)
        if path.endswith("/metrics"):
            return 200, json.dumps(self.cache.get(path, [])).encode()
        if path in self.docs:
            return 200, json.dumps(self.docs[path]).encode()
        return 404, b'{"errors": ["Not found: /' + path.encode() + b'"]}'

    # ------------------------------------------------------------------ the reading by hand
    def expected(self, tm: str) -> dict[str, float]:
        """Bytes per second into and out of ``tm``'s subtasks: the script's rates."""
        mine = [r for key, r in self.rates.items() if self.host[key] == tm]
        return {"bytes_in_per_s": float(sum(r["numBytesIn"] for r in mine)),
                "bytes_in_remote_per_s": float(sum(r["numBytesInRemote"] for r in mine)),
                "bytes_out_per_s": float(sum(r["numBytesOut"] for r in mine))}

    def close(self) -> None:
        self.server.close()


@pytest.fixture()
def scripted():
    made = []

    def make(**script):
        jm = ScriptedJobManager(**script)
        made.append(jm)
        return jm

    yield make
    for jm in made:
        jm.close()


def _read(jm, window_s=0.7, timeout=20.0):
    started = time.monotonic()
    capture = flink.capture_live(jm.url, window_s=window_s, timeout=timeout, poll_s=0.02)
    return flink.read_capture(capture), capture, time.monotonic() - started


def _assert_rates_by_hand(jm, reading):
    for tm in jm.taskmanagers:
        got = reading.report["taskmanagers"][tm]
        for key, value in jm.expected(tm).items():
            assert got[key] == pytest.approx(value, rel=1e-9), (tm, key)
        assert got["bytes_in_per_s"] > 0
    # records into each vertex: the sum of its subtasks' scripted rates
    job = jm.docs[f"jobs/{jm.job_id}"]
    by_name = {v["name"]: v for v in reading.report["vertices"]}
    for vertex in job["vertices"]:
        keys = [k for k in jm.rates if f"/vertices/{vertex['id']}/" in k]
        assert by_name[vertex["name"]]["records_in_per_s"] == pytest.approx(
            sum(jm.rates[k]["numRecordsIn"] for k in keys), rel=1e-9)


def test_on_time_answers_give_the_scripted_rates(scripted):
    jm = scripted()
    reading, capture, _ = _read(jm)
    _assert_rates_by_hand(jm, reading)
    windows = reading.report["windows"]
    assert sorted(windows) == jm.taskmanagers
    for tm, w in windows.items():
        assert w["clock"] == "taskmanager" and w["seconds"] >= 0.7 - 0.05
        assert w["start"] < w["end"] and w["uncertainty_s"] < 0.5
    assert reading.report["windows_overlap_s"] > 0.5


def test_a_taskmanager_a_whole_window_late_and_irregular(scripted):
    """One TaskManager's answers land a whole fetch interval or more after the other's, by a
    different delay each fetch: its window is its own (its answers' clock), not the other's, and
    every rate is the scripted one."""
    late = "127.0.0.1:39221-9d27d0"
    delays = [0.05, 0.55, 0.1, 0.6, 0.2, 0.45, 0.05, 0.5, 0.3, 0.1] * 5
    jm = scripted(travel=lambda tm, n: delays[n % len(delays)] if tm == late else 0.0)
    reading, capture, took = _read(jm)
    _assert_rates_by_hand(jm, reading)
    windows = reading.report["windows"]
    assert windows[late]["clock"] == "taskmanager"
    # its answers landed late: its window is stated apart from the other TaskManager's
    other = next(tm for tm in jm.taskmanagers if tm != late)
    assert windows[late]["start"] != windows[other]["start"]
    # the polled window of the late TaskManager is not its answers' window (the delays differ),
    # which is why the reading goes by the TaskManager's own clock
    assert all(tm in capture.snapshots[0].taskmanagers for tm in jm.taskmanagers)


def test_staggered_answers(scripted):
    """The second TaskManager makes its answer 0.15 s after the first one (half an interval)."""
    jm = scripted(made=lambda tm, n: 0.15 if tm == "127.0.0.1:39221-9d27d0" else 0.0,
                  travel=lambda tm, n: 0.05)
    reading, _, _ = _read(jm)
    _assert_rates_by_hand(jm, reading)


def test_a_taskmanager_that_never_answers_is_named_by_the_deadline(scripted):
    silent = "127.0.0.1:39221-9d27d0"
    jm = scripted(made=lambda tm, n: None if tm == silent else 0.0)
    started = time.monotonic()
    with pytest.raises(InputError) as info:
        flink.capture_live(jm.url, window_s=0.5, timeout=2.5, poll_s=0.02)
    message = str(info.value)
    assert "\n" not in message and repr(silent) in message and "did not move within --timeout 2.5 s" in message
    assert "127.0.0.1:34055-b89534" not in message  # the one that answered is not blamed
    assert time.monotonic() - started < 10


def test_saved_capture_keeps_each_taskmanagers_window(scripted, tmp_path):
    jm = scripted(travel=lambda tm, n: 0.4 if tm == "127.0.0.1:39221-9d27d0" else 0.0)
    reading, capture, _ = _read(jm)
    flink.save_capture(capture, tmp_path / "cap")
    again = flink.read_capture(flink.load_capture(tmp_path / "cap"))
    assert again.report["windows"] == reading.report["windows"]
    assert again.report["taskmanagers"] == reading.report["taskmanagers"]
    manifest = json.loads((tmp_path / "cap" / "capture.json").read_text())
    manifest["snapshots"][1]["taskmanagers"]["127.0.0.1:39221-9d27d0"] = [5.0, 1.0]
    (tmp_path / "cap" / "capture.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match=r"capture\.json\.snapshots\[1\]\.taskmanagers\['127\.0\.0\.1:39221"):
        flink.load_capture(tmp_path / "cap")


def test_a_newer_answer_during_the_read_is_read_again(scripted):
    """A fetch every 0.3 s and a first read of a subtask that takes longer than that: the next
    request starts a fetch, so the TaskManager's signal moves while its subtasks are read; the
    reader then reads them again, so no two answers are mixed. (One slow read, not every read
    slow: on a loaded machine reads that all straddle a fetch would never give a whole answer.)"""
    jm = scripted()
    answer, reads = jm.answer, []

    def slow(parts, query):
        if parts[0] == "jobs" and parts[-1] == "metrics":
            reads.append("/".join(parts))
            if len(reads) == 1:
                time.sleep(INTERVAL_S + 0.05)
        return answer(parts, query)

    jm.server.close()
    jm.server = JsonServer(slow)
    jm.url = jm.server.url
    reading, _, _ = _read(jm)
    _assert_rates_by_hand(jm, reading)
    # two snapshots read each subtask twice; more is the reads again
    assert len(reads) > 2 * len(jm.rates)


# ---------------------------------------------------------------- live, on the network lab
@pytest.mark.slow
def test_twenty_live_reads_on_a_saturated_lab_link(flink_lab):
    """The example job on the lab (2 TaskManagers behind 20 Mbit/s links, sources far above what
    the links carry, so they are back-pressured and the links saturated): 20 live reads in a row
    all succeed, every TaskManager's window is its own and at least the asked window, and every
    TaskManager that runs receiving subtasks receives bytes from the other one."""
    import urllib.request

    from streamsched.engines.flink import local, netlab

    job_id = local.submit_example(flink_lab.url, flink_lab.logs, rate=20000, record_bytes=500)
    try:
        local.wait_flowing(flink_lab.url, job_id)
        lab = netlab.load(flink_lab.base)
        before, t0 = netlab.link_bytes(lab), time.monotonic()
        time.sleep(5)
        after, seconds = netlab.link_bytes(lab), time.monotonic() - t0
        busiest = max((after[tm][d] - before[tm][d]) / seconds for tm in after for d in ("in", "out"))
        assert busiest >= 0.5 * 20e6 / 8, f"the lab's links are not saturated ({busiest:.0f} B/s)"
        for k in range(20):
            capture = flink.capture_live(flink_lab.url, job_id, window_s=3.0, timeout=60.0)
            reading = flink.read_capture(capture)
            report = reading.report
            receiving = {s.taskmanager for v in flink.parse_snapshot(capture.snapshots[-1].documents, job_id, "x").vertices
                         if v.inputs for s in v.subtasks}
            assert receiving == {"tm-1", "tm-2"}, (k, receiving)
            for tm in receiving:
                window = report["windows"][tm]
                assert window["seconds"] >= 3.0 - 0.5 and window["clock"] == "taskmanager", (k, tm, window)
                assert report["taskmanagers"][tm]["bytes_in_remote_per_s"] > 0, (k, tm, report["taskmanagers"])
    finally:
        urllib.request.urlopen(urllib.request.Request(f"{flink_lab.url}/jobs/{job_id}?mode=cancel", method="PATCH"),
                               timeout=10).close()
