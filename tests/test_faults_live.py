"""Faults of ``apply flink`` and the live loop on a real Flink 2.3, and nothing lost across
repeated applies (issue 36, items 4 and 5). Slow tier; one cluster at a time.

- **Nothing lost** (the session's cluster ``flink_cluster``): the ``bounded`` example job (ids
  1..N from datagen's sequence, checkpoints every 2 s, exactly-once, a filesystem sink of CSV
  files) through at least 5 applies of plans that move subtasks (two plans, alternating); once
  the job has FINISHED, the sink's files hold every id exactly once.
- **JobManager unreachable** (``flink_cluster``): the JobManager's JVM stopped (SIGSTOP) for 15 s
  during an apply and under the loop's collector; apply rides it out and finishes the move, each
  says once that it is unreachable and once that it answers again.
- **A plan Flink does not honour** (``flink_cluster``): while apply waits, another plan for the job
  takes the place of its own in the plugin's directory (another controller); the plugin honours
  that one, the REST check finds the subtasks off plan, apply says so in one line and the job is
  put back where it ran.
- **SIGTERM during the loop's apply** (``flink_cluster``): ``watch --apply-flink`` is signalled as
  soon as it says it is applying; the apply ends, its journal line is written, then the watch
  stops (windows its batch still held journalled, none applied), one line for each, exit 0, no
  traceback, the job running where the plan says.
- **Plugin missing** (a cluster of its own started without the plugin): ``apply flink`` exits 4
  with one line and the job is untouched (same attempts, same TaskManagers, no plan written).
- **TaskManager killed during an apply** (a cluster of its own, 3 TaskManagers, heartbeats every
  1 s): the TaskManager the plan moves subtasks to is killed (SIGKILL) once the plan is written;
  apply ends with one line (TaskManagerLost), the plugin's answers once the TaskManager is gone
  place nothing on it (it falls back, or places on the TaskManagers left), and the job runs again
  on the TaskManagers left.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml

from streamsched.cli import main
from streamsched.engines import flink
from streamsched.engines.flink import apply as flink_apply
from streamsched.engines.flink import local, plugin
from streamsched.model import Placement
from streamsched.pipeline.live_loop import GridCollector

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("javac") is None, reason="a JDK (javac) is needed for the Flink plugin"),
]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def _state(url: str, job_id: str) -> str:
    return _get(f"{url}/jobs/{job_id}")["state"]


def _where(url: str, job_id: str) -> dict[str, list[str]]:
    """Vertex id -> the TaskManager of each subtask, straight from Flink's REST API."""
    return {v["id"]: [s["taskmanager-id"] for s in sorted(_get(f"{url}/jobs/{job_id}/vertices/{v['id']}")["subtasks"],
                                                          key=lambda s: s["subtask"])]
            for v in _get(f"{url}/jobs/{job_id}")["vertices"]}


def _attempts(url: str, job_id: str) -> list[int]:
    return [s["attempt"] for v in _get(f"{url}/jobs/{job_id}")["vertices"]
            for s in _get(f"{url}/jobs/{job_id}/vertices/{v['id']}")["subtasks"]]


def _cancel(url: str, job_id: str) -> None:
    try:
        request = urllib.request.Request(f"{url}/jobs/{job_id}?mode=cancel", method="PATCH")
        urllib.request.urlopen(request, timeout=10).close()
    except OSError:
        return
    deadline = time.time() + 30
    while time.time() < deadline and _state(url, job_id) not in ("CANCELED", "FINISHED", "FAILED"):
        time.sleep(0.5)


def _plan(reading, taskmanagers: list[str], flip: int, path: Path) -> Path:
    """A placement over ``taskmanagers`` (two): subtask i of a source on the i-th (round robin),
    of every other vertex on the (i + flip)-th; at most 2 subtasks of a vertex per TaskManager
    for parallelism up to 4 (2 slots each)."""
    names = [n.name for n in reading.cluster.nodes]
    node_of = np.empty(reading.graph.n_tasks, int)
    for v in reading.report["vertices"]:
        shift = 0 if not v["inputs"] else flip
        for i in range(v["parallelism"]):
            node_of[v["first_task"] + i] = names.index(taskmanagers[(i + shift) % len(taskmanagers)])
    Placement.build(node_of).write(path, reading.graph, reading.cluster)
    return path


def _packed(reading, taskmanagers: list[str], path: Path) -> Path:
    """A placement that no relabelling of :func:`_plan`'s makes: every subtask of a vertex of
    parallelism 2 or more on the second TaskManager (2 slots), of a source on the second, of any
    other vertex on the first."""
    names = [n.name for n in reading.cluster.nodes]
    node_of = np.empty(reading.graph.n_tasks, int)
    for v in reading.report["vertices"]:
        tm = taskmanagers[1] if v["parallelism"] > 1 or not v["inputs"] else taskmanagers[0]
        node_of[v["first_task"]:v["first_task"] + v["parallelism"]] = names.index(tm)
    Placement.build(node_of).write(path, reading.graph, reading.cluster)
    return path


# --------------------------------------------------------------------------- nothing lost
ROWS, RATE = 24_000, 200


def test_nothing_is_lost_or_doubled_through_five_applies(flink_cluster, tmp_path):
    """24,000 ids at 200/s (a source -REBALANCE-> 2 writers): 5 applies while it runs, each moving
    subtasks (two rescales, each a restore from the last checkpoint, the source's state of ids
    yet to send redistributed); the sink holds ids 1..24,000 once each."""
    url = flink_cluster.url
    sink = flink_cluster.base / f"bounded-{os.getpid()}-{time.time_ns()}"
    job_id = local.submit_example(url, flink_cluster.logs, kind="bounded", rows=ROWS, sink_dir=sink, rate=RATE,
                                  record_bytes=200, parallelism=2, source_parallelism=1,
                                  extra={"execution.checkpointing.mode": "EXACTLY_ONCE"})
    try:
        local.wait_flowing(url, job_id)
        applied = []
        tms = ["tm-1", "tm-2"]
        for attempt in range(8):
            if len(applied) == 5:
                break
            assert _state(url, job_id) == "RUNNING", f"the job ended after {len(applied)} applies: rows too few"
            reading = flink.read(url=url, job_id=job_id, window_s=2)
            plan = (_plan(reading, tms, 0, tmp_path / f"plan-{attempt}.json") if attempt % 2 else
                    _packed(reading, tms, tmp_path / f"plan-{attempt}.json"))
            result = flink_apply.apply(url, plan, job_id=job_id, before=reading, min_gain=-math.inf, settle_s=0,
                                       window_s=2)
            if result.applied:
                assert result.moved and result.plugin_status["applied"] is True
                applied.append(len(result.moved))
            else:
                assert "no subtask would move" in result.reason, result.reason
        assert len(applied) == 5, applied
        deadline = time.time() + 300
        while _state(url, job_id) == "RUNNING" and time.time() < deadline:
            time.sleep(2)
        assert _state(url, job_id) == "FINISHED"
    finally:
        if _state(url, job_id) == "RUNNING":
            _cancel(url, job_id)
    ids = local.count_bounded(sink)
    counts = Counter(ids)
    doubled = sorted(i for i, n in counts.items() if n > 1)
    missing = sorted(set(range(1, ROWS + 1)) - set(counts))
    assert not doubled and not missing, f"{len(doubled)} ids twice (e.g. {doubled[:5]}), {len(missing)} missing " \
                                        f"(e.g. {missing[:5]}) after applies moving {applied} subtasks"
    assert len(ids) == ROWS
    print(f"nothing lost: {ROWS} ids once each after 5 applies moving {applied} subtasks")  # the run's figures (-s)


# --------------------------------------------------------------------------- the shared cluster's job
@pytest.fixture(scope="module")
def running_job(flink_cluster):
    """The example job (datagen(2) -> Calc(2) -> aggregate(2)) on the session's cluster."""
    job_id = local.submit_example(flink_cluster.url, flink_cluster.logs, rate=500, record_bytes=200, parallelism=2,
                                  source_parallelism=2)
    local.wait_flowing(flink_cluster.url, job_id)
    try:
        yield job_id
    finally:
        _cancel(flink_cluster.url, job_id)


def _moving_plan(url: str, job_id: str, path: Path):
    """A plan that moves subtasks of the running job (of the two alternating ones, one that does)."""
    reading = flink.read(url=url, job_id=job_id, window_s=0)
    running = reading.placement.node_of
    for flip in (0, 1):
        _plan(reading, ["tm-1", "tm-2"], flip, path)
        planned = Placement.from_dict(json.loads(path.read_text()), reading.graph, reading.cluster).node_of
        node_of, _ = flink_apply.relabel(running, planned, flink_apply.identical_nodes(reading.cluster))
        if (node_of != running).any():
            return reading, path
    raise AssertionError("neither plan moves a subtask")


def test_a_jobmanager_unreachable_for_15_s_is_ridden_out_with_one_line_each_way(flink_cluster, running_job, tmp_path):
    url, job_id = flink_cluster.url, running_job
    jobmanager = flink_cluster.pids["jobmanager"]
    reading, plan = _moving_plan(url, job_id, tmp_path / "plan.json")
    collector_lines: list[str] = []
    stop = threading.Event()
    collector = GridCollector(url, tmp_path / "arriving", job_id)
    follower = threading.Thread(target=collector.follow_grid, args=(3.0, stop, collector_lines.append), daemon=True)
    follower.start()
    frozen = threading.Event()

    def freeze():
        os.kill(jobmanager, signal.SIGSTOP)
        frozen.set()
        try:
            time.sleep(15)
        finally:
            os.kill(jobmanager, signal.SIGCONT)

    lines: list[str] = []

    def log(message: str) -> None:
        lines.append(message)
        if message.startswith("rescale 1/2"):
            threading.Thread(target=freeze, daemon=True).start()
            frozen.wait(5)

    try:
        result = flink_apply.apply(url, plan, job_id=job_id, before=reading, min_gain=-math.inf, settle_s=0,
                                   window_s=2, log=log)
    finally:
        os.kill(jobmanager, signal.SIGCONT)  # whatever happened: the session's JobManager runs on
    time.sleep(8)  # the collector's next readings land
    stop.set()
    follower.join(timeout=90)
    assert result.applied, result.reason
    down = [m for m in lines if m.startswith("JobManager unreachable (")]
    back = [m for m in lines if m.startswith("JobManager answers again after ")]
    assert len(down) == 1 and len(back) == 1, lines
    # from the first request that found no answer (its 10 s timeout into the 15 s) to the first answer
    assert 1 <= float(back[0].split("after ")[1].split(" s")[0]) <= 30
    failing = [m for m in collector_lines if m.startswith("reading failed (")]
    resumed = [m for m in collector_lines if m.startswith("reading again after ")]
    assert len(failing) == 1 and len(resumed) == 1 and len(collector_lines) == 2, collector_lines
    print("\n".join(["apply:", *down, *back, "collector:", *collector_lines]))
    assert _state(url, job_id) == "RUNNING"
    planned = flink_apply.subtask_targets(reading, Placement.from_dict(json.loads(plan.read_text()), reading.graph,
                                                                       reading.cluster))
    assert _where(url, job_id) == {vid: [result.relabelled.get(tm, tm) for tm in tms] for vid, tms in planned.items()}


def test_a_plan_flink_does_not_honour_is_reported_in_one_line_and_the_job_put_back(flink_cluster, running_job,
                                                                                   tmp_path):
    url, job_id = flink_cluster.url, running_job
    reading, plan = _moving_plan(url, job_id, tmp_path / "plan.json")
    rest = flink_apply.FlinkRest(url)
    original = flink_apply.job_view(rest, job_id)
    other = flink_apply.plan_document(original, original.where)  # the job's own placement: another controller's

    def log(message: str) -> None:
        if message.startswith("plan written to "):
            flink_apply._write_plan(str(flink_cluster.plans), original, original.where)
            assert json.loads((flink_cluster.plans / f"{job_id}.json").read_text()) == other

    with pytest.raises(flink_apply.NotHonoured) as wrong:
        flink_apply.apply(url, plan, job_id=job_id, before=reading, min_gain=-math.inf, settle_s=0, window_s=2,
                          log=log)
    message = str(wrong.value)
    print(message)
    assert "\n" not in message and message.startswith("placement not honoured: ")
    assert message.endswith("the job was put back as it was (parallelism and placement, checked per subtask)")
    status = json.loads((flink_cluster.plans / f"{job_id}.status.json").read_text())
    assert status["applied"] is True  # the plugin honoured a plan: not the one apply wrote
    assert _state(url, job_id) == "RUNNING" and _where(url, job_id) == original.where


def test_sigterm_during_a_loop_apply_stops_the_watch_once_the_apply_is_journalled(flink_cluster, running_job,
                                                                                  tmp_path):
    """``watch --apply-flink`` on the session's job, split over both TaskManagers (the traffic
    optimum, everything on one of them, moves half of it): SIGTERM as soon as the loop says it is
    applying. The apply runs to its end, its journal line is written, then the watch stops: one
    line for the signal, one for the stop, no traceback; the job runs where the plan says."""
    url, job_id = flink_cluster.url, running_job
    reading = flink.read(url=url, job_id=job_id, window_s=0)
    split = _plan(reading, ["tm-1", "tm-2"], 0, tmp_path / "split.json")
    flink_apply.apply(url, split, job_id=job_id, before=reading, min_gain=-math.inf, settle_s=0, window_s=2)
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(flink.read(url=url, job_id=job_id, window_s=0).cluster.to_dict(),
                                      sort_keys=False))
    journal, log = tmp_path / "journal.jsonl", tmp_path / "watch.log"
    (tmp_path / "arriving").mkdir()
    command = [str(Path(sys.executable).with_name("streamsched")), "watch", str(tmp_path / "arriving"),
               "--store", str(tmp_path / "store"), "--cluster", str(cluster), "-s", "optimal", "--load-unit", "cores",
               "--window", "5", "--poll", "1", "--apply-flink", url, "--job-id", job_id, "--confirm-windows", "1",
               "--min-gain", "0", "--payback", "1000", "--journal", str(journal), "--out", str(tmp_path / "plans")]
    with open(log, "w") as stderr:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
    signalled = None
    try:
        deadline = time.time() + 240
        while time.time() < deadline and proc.poll() is None and signalled is None:
            if "live loop: applying " in log.read_text():
                proc.send_signal(signal.SIGTERM)
                signalled = time.time()
            time.sleep(0.1)
        assert signalled is not None, log.read_text()[-3000:]
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    err = [line for line in log.read_text().splitlines() if line.strip()]
    print("\n".join(err))
    assert "Traceback" not in log.read_text()
    assert proc.returncode == 0, err
    said = [k for k, line in enumerate(err) if line.startswith("SIGTERM: stopping once the apply in progress is "
                                                                "journalled")]
    stopped = [k for k, line in enumerate(err) if line == "live loop: stopping after the apply (journalled)"]
    assert len(said) == 1 and len(stopped) == 1 and said[0] < stopped[0], err
    rows = [json.loads(line) for line in journal.read_text().splitlines()]
    applied = [k for k, r in enumerate(rows) if r["decision"] == "apply"]
    assert len(applied) == 1 and rows[applied[0]]["moved_subtasks"], [r["decision"] for r in rows]
    assert rows[applied[0]]["apply_times"][1] > signalled  # the apply ended after the signal: not cut short
    # windows the batch in progress still held are journalled, none applied
    assert {r["decision"] for r in rows[applied[0] + 1:]} <= {"keep", "no-data", "settling"}
    assert _state(url, job_id) == "RUNNING"
    planned = Placement.from_dict(json.loads(Path(rows[applied[0]]["plan_file"]).read_text()), reading.graph,
                                  reading.cluster)
    where = _where(url, job_id)
    assert len({tm for tms in where.values() for tm in tms}) == 1, where  # all on one TaskManager, as planned
    assert set(planned.node_of.tolist()) == {planned.node_of[0]}


# --------------------------------------------------------------------------- clusters of their own
def test_without_the_plugin_apply_is_one_line_and_the_job_untouched(tmp_path_factory, tmp_path, capsys):
    base = tmp_path_factory.mktemp("flink-noplugin")
    cluster = local.start(base, taskmanagers=2, slots=2, rest_port=0, plugin=False)
    try:
        job_id = local.submit_example(cluster.url, cluster.logs, rate=500, record_bytes=200, parallelism=2,
                                      source_parallelism=1)
        local.wait_flowing(cluster.url, job_id)
        reading = flink.read(url=cluster.url, job_id=job_id, window_s=0)
        plan = _plan(reading, ["tm-1", "tm-2"], 1, tmp_path / "plan.json")
        where, attempts = _where(cluster.url, job_id), _attempts(cluster.url, job_id)
        capsys.readouterr()
        code = main(["apply", "flink", "--url", cluster.url, "--job-id", job_id, "--placement", str(plan),
                     "--plan-location", str(tmp_path)])
        err = capsys.readouterr().err.strip().splitlines()
        with capsys.disabled():
            print("\n".join(err))
        assert code == 4 and len(err) == 2 and err[0].startswith("Flink placement through"), err
        assert "the placement plugin is not installed on " in err[1] and "Traceback" not in err[1]
        time.sleep(3)
        assert _state(cluster.url, job_id) == "RUNNING"
        assert _where(cluster.url, job_id) == where and _attempts(cluster.url, job_id) == attempts
        assert not list(tmp_path.glob(f"{job_id}*")) and not list((base / "plans").glob("*"))  # nothing written
    finally:
        local.stop(base)


def test_a_taskmanager_killed_during_an_apply(tmp_path_factory, tmp_path):
    plugin.build()
    base = tmp_path_factory.mktemp("flink-tmkill")
    cluster = local.start(base, taskmanagers=3, slots=2, rest_port=0,
                          extra={"heartbeat.interval": "1000", "heartbeat.timeout": "8000"})
    url = cluster.url
    try:
        job_id = local.submit_example(url, cluster.logs, rate=500, record_bytes=200, parallelism=2,
                                      source_parallelism=2)
        local.wait_flowing(url, job_id)
        rest = flink_apply.FlinkRest(url)
        held, _free = flink_apply.held_slots(rest, job_id)
        assert min(held.values()) == 0, held  # Flink's ResourceManager filled TaskManagers: one holds nothing
        idle = min(held, key=held.get)
        busy = sorted(tm for tm in held if tm != idle)
        reading = flink.read(url=url, job_id=job_id, window_s=0)
        # every non-source subtask on the idle TaskManager (2 of each, 2 slots): it gets moved there
        names = [n.name for n in reading.cluster.nodes]
        node_of = np.empty(reading.graph.n_tasks, int)
        for v in reading.report["vertices"]:
            for i in range(v["parallelism"]):
                node_of[v["first_task"] + i] = names.index(busy[i % 2] if not v["inputs"] else idle)
        Placement.build(node_of).write(tmp_path / "plan.json", reading.graph, reading.cluster)
        statuses: list[dict] = []
        gone: list[float] = []  # when the JobManager was first seen without the killed TaskManager
        watching = threading.Event()

        def watch_plugin():
            seen = None
            while not watching.is_set():
                try:
                    if not gone and idle not in flink_apply.registered(rest):
                        gone.append(time.time())
                    status = json.loads((cluster.plans / f"{job_id}.status.json").read_text())
                except (OSError, ValueError, flink_apply.InputError):
                    time.sleep(0.1)
                    continue
                if status.get("time_ms") != seen:
                    seen = status.get("time_ms")
                    statuses.append(status)
                time.sleep(0.1)

        killed = []

        def log(message: str) -> None:
            if message.startswith("plan written to ") and not killed:
                os.killpg(cluster.pids[idle], signal.SIGKILL)
                killed.append(time.time())
                threading.Thread(target=watch_plugin, daemon=True).start()

        with pytest.raises(flink_apply.TaskManagerLost) as lost:
            flink_apply.apply(url, tmp_path / "plan.json", job_id=job_id, before=reading, min_gain=-math.inf,
                              settle_s=0, window_s=2, log=log, timeout_s=150)
        watching.set()
        message = str(lost.value)
        print(message, *[(s.get("applied"), s.get("reason") or s.get("taskmanagers")) for s in statuses], sep="\n")
        assert killed and "\n" not in message
        assert message.startswith(f"TaskManager {idle} left the cluster during the apply (the job fails over); ")
        assert _state(url, job_id) == "RUNNING"
        where = _where(url, job_id)
        assert {tm for tms in where.values() for tm in tms} <= set(busy), where
        assert [v["parallelism"] for v in _get(f"{url}/jobs/{job_id}")["vertices"]] == \
            [v["parallelism"] for v in reading.report["vertices"]]
        # the plugin's answers once the JobManager dropped the killed TaskManager: nothing placed on
        # it. The JobMaster may drop it (its slots gone from the status's "held"), and the plugin
        # refuse the plan, before the ResourceManager deregisters it: then no answer follows that.
        assert gone, "the JobManager never dropped the killed TaskManager"
        after = [s for s in statuses if s["time_ms"] / 1000 > gone[0] or idle not in s.get("held", {idle: 0})]
        assert after, statuses
        for status in after:
            if status.get("applied"):
                assert idle not in {tm for tms in status["taskmanagers"].values() for tm in tms}, status
            else:
                assert status.get("reason"), status
    finally:
        local.stop(base)
