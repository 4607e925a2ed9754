"""Issue 27 (reliability, second round): one named test per example of the issue, each against
what a hostile server, a changing log or a busy machine does. Servers are local
(tests/json_http.py) serving the recorded fixtures (tests/fixtures/storm_ui, flink/live-job)
with one thing wrong."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import time
from pathlib import Path
from urllib.parse import parse_qs

import numpy as np
import pytest
from json_http import JsonServer

from streamsched.cli import main
from streamsched.engines.storm import ui_rest
from streamsched.errors import InputError

FIXTURES = Path(__file__).parent / "fixtures"
STORM = FIXTURES / "storm_ui" / "wordcount"
TOPOLOGY_ID = "wordcount-3-1714557000"
FLINK = FIXTURES / "flink" / "live-job"


# ------------------------------------------------------------------------ servers
def storm_answer(edit=lambda name, doc: doc, trickle: dict | None = None, flaky: dict | None = None):
    """Storm UI's REST paths served from the fixture; ``edit(file name, doc)`` changes an answer,
    ``trickle[file name]`` sends that page a byte every so many seconds, ``flaky[file name]``
    answers that page with that many failures (HTTP 503 or a closed connection) first."""
    trickle, flaky = trickle or {}, flaky or {}

    def answer(parts, query):
        name = None
        if parts[:4] == ["api", "v1", "supervisor", "summary"]:
            name = "supervisors.json"
        elif parts[:3] == ["api", "v1", "topology"] and len(parts) == 4:
            name = "topology.json"
        elif parts[:3] == ["api", "v1", "topology"] and len(parts) == 6 and parts[4] == "component":
            name = ui_rest.component_file(parts[5])
        if name is None or not (STORM / name).exists():
            return 404, b'{"error": "not found"}'
        if flaky.get(name):
            flaky[name] -= 1
            return (503, b'{"error": "busy"}') if flaky[name] % 2 else (None, b"")
        window = parse_qs(query).get("window", ["600"])[0]
        doc = json.loads((STORM / name).read_text())
        if "window" in doc:
            doc["window"] = window
        body = json.dumps(edit(name, doc)).encode()
        return (200, body, trickle[name]) if name in trickle else (200, body)

    return answer


@pytest.fixture()
def serve():
    servers = []

    def start(answer) -> str:
        servers.append(JsonServer(answer))
        return servers[-1].url

    yield start
    for server in servers:
        server.close()


def run(args) -> tuple[int, float]:
    began = time.monotonic()
    code = main(args)
    return code, time.monotonic() - began


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:"), err
    return err[0]


# ------------------------------------------------------------------ no overall deadline (hang)
def test_read_engine_storm_ui_trickling_page_ends_by_timeout(serve, tmp_path, capsys):
    url = serve(storm_answer(trickle={"component-split.json": 1.0}))
    code, took = run(["read-engine", "storm-ui", "--url", url, "--topology-id", TOPOLOGY_ID,
                      "--out", str(tmp_path / "o" / "r"), "--timeout", "3"])
    assert code == 2 and took < 15
    assert "no complete answer within --timeout 3 s" in one_error_line(capsys)
    assert not (tmp_path / "o" / "r").exists()


@pytest.mark.slow  # waits out a 4 s deadline
def test_collect_storm_ui_trickling_page_ends_by_timeout(serve, tmp_path, capsys):
    url = serve(storm_answer(trickle={"component-count.json": 1.0}))
    code, took = run(["collect", "storm-ui", "--url", url, "--topology-id", TOPOLOGY_ID,
                      "--out", str(tmp_path / "chunks"), "--interval", "1", "--timeout", "4"])
    assert code == 2 and took < 15
    assert "within --timeout 4 s" in one_error_line(capsys)


def _flink_answer(job_id_shown: str | None = None, config_interval: str | None = None,
                  other_job: str | None = None):
    """The live-job capture's snapshot 0 then 1 (a metrics fetch after the first poll of the
    TaskManagers) at the JobManager's REST paths, each TaskManager's signal (``/taskmanagers/:id/metrics``)
    moving with them (never, with ``config_interval``: no fetch comes); ``job_id_shown`` is
    what /jobs/overview calls the job, ``config_interval`` the metric fetch interval
    /jobmanager/config gives, ``other_job`` the jid /jobs/:jid answers with."""
    manifest = json.loads((FLINK / "capture.json").read_text())
    real = manifest["job_id"]
    shown = job_id_shown or real
    snapshots = [FLINK / e["dir"] for e in manifest["snapshots"]]
    polls = {"n": 0}

    def answer(parts, query):
        path = "/".join(parts).replace(shown, real) if shown != real else "/".join(parts)
        if path == "jobs/overview":
            job = json.loads((snapshots[0] / "jobs" / f"{real}.json").read_text())
            return 200, json.dumps({"jobs": [{"jid": shown, "name": job["name"], "state": "RUNNING"}]}).encode()
        if path == "jobmanager/config":
            if config_interval is None:
                return 404, b'{"errors": ["not found"]}'
            return 200, json.dumps([{"key": "metrics.fetcher.update-interval", "value": config_interval}]).encode()
        fetched = polls["n"] > 2 and not config_interval  # after the first poll of both TaskManagers
        if len(parts) == 3 and parts[0] == "taskmanagers" and parts[2] == "metrics":
            polls["n"] += 1
            return 200, json.dumps([{"id": "Status.JVM.CPU.Time", "value": "2" if fetched else "1"}]).encode()
        file = snapshots[1 if fetched else 0] / f"{path}.json"
        if not file.exists():
            return 404, b'{"errors": ["not found"]}'
        doc = json.loads(file.read_text())
        if path == f"jobs/{real}":
            doc["jid"] = other_job or shown
        return 200, json.dumps(doc).encode()

    return answer


def test_read_engine_flink_day_long_fetch_interval_ends_by_timeout(serve, tmp_path, capsys):
    url = serve(_flink_answer(config_interval="86400000"))
    code, took = run(["read-engine", "flink", "--url", url, "--window", "0", "--timeout", "3",
                      "--out", str(tmp_path / "o" / "r")])
    assert code == 2 and took < 15
    line = one_error_line(capsys)
    assert "did not move within --timeout 3 s" in line and "update-interval 86400 s" in line
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


@pytest.mark.slow  # waits out the retries, about 4 s
def test_http_5xx_and_resets_are_retried(serve, tmp_path, capsys):
    url = serve(storm_answer(flaky={"component-split.json": 3, "topology.json": 1}))
    out = tmp_path / "r"
    assert main(["read-engine", "storm-ui", "--url", url, "--topology-id", TOPOLOGY_ID, "--out", str(out)]) == 0
    assert (out / "graph.json").exists()
    capsys.readouterr()
    url = serve(storm_answer(flaky={"component-split.json": 9}))
    assert main(["read-engine", "storm-ui", "--url", url, "--topology-id", TOPOLOGY_ID,
                 "--out", str(tmp_path / "s")]) == 2
    assert "4 tries" in one_error_line(capsys)


# ----------------------------------------- issue 34: deadlines on the default path (no option)
def _silent(answer, path_start: list[str], times: set[int] | None = None):
    """``answer`` but the requests whose path starts with ``path_start`` (the ``times``-th of
    them, counting from 1; None: all) get no answer for 30 s (then a closed connection)."""
    seen = {"n": 0}

    def silent(parts, query):
        if parts[:len(path_start)] == path_start:
            seen["n"] += 1
            if times is None or seen["n"] in times:
                return None, b"", 30.0
        return answer(parts, query)

    return silent


SUPERVISORS = ["api", "v1", "supervisor", "summary"]
#: Seconds of slack over a deadline on a busy 2-core machine (imports, the staged directory).
SLACK_S = 5.0


@pytest.fixture()
def short_defaults(monkeypatch):
    """The REST readers' default deadlines made short (the constants the default path reads at
    call time; no option is given). Every command module is imported first: their help states
    the real defaults, and the time measured is the command's, not the imports'."""
    from streamsched.cli import load_commands
    from streamsched.engines import rest_client

    load_commands(None)

    def set_defaults(request_s: float, read_s: float) -> None:
        monkeypatch.setattr(rest_client, "REQUEST_TIMEOUT_S", request_s)
        monkeypatch.setattr(rest_client, "READ_TIMEOUT_S", read_s)

    return set_defaults


@pytest.mark.parametrize("request_s, read_s, says", [
    (1.0, 30.0, "within 1 s per request"),      # the request's default ends it
    (30.0, 2.0, "within --timeout 2 s"),      # the whole read's default ends it
])
def test_read_engine_storm_ui_silent_supervisor_summary_ends_by_the_default_deadlines(
        serve, tmp_path, capsys, short_defaults, request_s, read_s, says):
    short_defaults(request_s, read_s)
    url = serve(_silent(storm_answer(), SUPERVISORS))
    out = tmp_path / "o" / "r"
    code, took = run(["read-engine", "storm-ui", "--url", url, "--topology-id", TOPOLOGY_ID, "--out", str(out)])
    assert code == 2 and took < min(request_s, read_s) + SLACK_S, took
    line = one_error_line(capsys)
    assert "/api/v1/supervisor/summary: Storm UI gave no complete answer " + says in line, line
    assert not out.exists() and list((tmp_path / "o").iterdir()) == []


def test_read_engine_flink_silent_jobmanager_ends_by_the_default_deadline(serve, tmp_path, capsys, short_defaults):
    short_defaults(30.0, 2.0)
    url = serve(_silent(_flink_answer(), ["jobs", "overview"]))
    out = tmp_path / "o" / "r"
    code, took = run(["read-engine", "flink", "--url", url, "--window", "0", "--out", str(out)])
    assert code == 2 and took < 2.0 + SLACK_S, took
    assert "/jobs/overview: Flink JobManager gave no complete answer within --timeout 2 s" in one_error_line(capsys)
    assert not out.exists()


def test_read_engine_defaults_are_stated_in_the_help(capsys):
    from streamsched.engines.rest_client import READ_TIMEOUT_S, REQUEST_TIMEOUT_S

    for engine in ("storm-ui", "flink"):
        assert main(["read-engine", engine, "--help"]) == 0
        text = " ".join(capsys.readouterr().out.replace("│", " ").split())
        assert f"seconds for the whole read, every request ended by then (default {READ_TIMEOUT_S:g})" in text \
            or f"seconds for the whole read, window included (default {READ_TIMEOUT_S:g})" in text
        assert f"per request, tries included (default {REQUEST_TIMEOUT_S:g})" in text


@pytest.mark.parametrize("engine", ["storm-ui", "flink"])
def test_collect_first_reading_ends_by_the_default_reading_deadline(serve, tmp_path, capsys, short_defaults, engine):
    """No --timeout (the loop runs until stopped), no --read-timeout: a server that never answers
    ends the first reading by the default, which ends the command (exit 2)."""
    short_defaults(30.0, 2.0)
    if engine == "storm-ui":
        url = serve(_silent(storm_answer(), SUPERVISORS))
        argv = ["collect", "storm-ui", "--url", url, "--topology-id", TOPOLOGY_ID]
    else:
        url = serve(_silent(_flink_answer(), ["jobs", "overview"]))
        argv = ["collect", "flink", "--url", url]
    code, took = run(argv + ["--out", str(tmp_path / "chunks"), "--interval", "1"])
    assert code == 2 and took < 2.0 + SLACK_S, took
    assert "gave no complete answer within --read-timeout 2 s" in one_error_line(capsys)


def test_collect_deadline_is_per_reading_not_per_run(serve, tmp_path, short_defaults):
    """The second reading's supervisor summary never comes: that reading ends by the default
    reading deadline (the collector has no end of its own), and the next reading differences
    over the longer interval."""
    from streamsched.pipeline.collect_rest import StormUICollector

    short_defaults(30.0, 2.0)
    ticks = iter([1000.0, 1060.0, 1120.0])
    collector = StormUICollector(serve(_silent(storm_answer(), SUPERVISORS, times={2})), TOPOLOGY_ID,
                                 tmp_path / "chunks", clock=lambda: next(ticks))
    assert collector.poll() is None  # the base
    began = time.monotonic()
    with pytest.raises(InputError, match=r"supervisor/summary: Storm UI gave no complete answer within "
                                         r"--read-timeout 2 s"):
        collector.poll()
    assert time.monotonic() - began < 2.0 + SLACK_S
    assert collector.poll()["covers"] == [1000.0, 1120.0]


# --------------------------------------------------------------- the wrong topology or job
def test_read_engine_storm_ui_refuses_answer_for_another_topology(serve, tmp_path, capsys):
    other = "other-7-1714550000"

    def rename(name, doc):
        if name == "topology.json":
            doc["id"] = other
        elif "topologyId" in doc:
            doc["topologyId"] = other
        return doc

    url = serve(storm_answer(rename))
    assert main(["read-engine", "storm-ui", "--url", url, "--topology-id", TOPOLOGY_ID,
                 "--out", str(tmp_path / "r")]) == 2
    line = one_error_line(capsys)
    assert other in line and TOPOLOGY_ID in line and "not the one asked for" in line
    assert not (tmp_path / "r").exists()


def test_read_engine_flink_refuses_answer_for_another_job(serve, tmp_path, capsys):
    url = serve(_flink_answer(other_job="0" * 32))
    assert main(["read-engine", "flink", "--url", url, "--window", "0", "--timeout", "20",
                 "--out", str(tmp_path / "r")]) == 2
    assert "not the job asked for" in one_error_line(capsys)


# ------------------------------------------------------------- ids that are paths
def test_read_engine_flink_job_id_with_dot_dot_writes_nothing_outside(serve, tmp_path, capsys):
    url = serve(_flink_answer(job_id_shown="../../../x"))
    work = tmp_path / "a" / "b" / "c"
    out = work / "o" / "r"
    assert main(["read-engine", "flink", "--url", url, "--window", "0", "--timeout", "20", "--out", str(out)]) == 2
    assert "'..'" in one_error_line(capsys)
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    assert all(p.startswith("a/b/c/o") for p in written if p.count("/") >= 3), written
    assert not out.exists() and not list(tmp_path.rglob("x.json"))


def test_watch_assignment_file_name_is_cleaned():
    from streamsched.model.paths import inside, safe_name

    assert safe_name("wordcount") == "wordcount"
    for hostile in ("../../x", "a/b", "..", "", "x" * 300, "a.b", "a\x00b"):
        cleaned = safe_name(hostile)
        assert "/" not in cleaned and "." not in cleaned and 0 < len(cleaned) <= 100
    assert safe_name("a/b") != safe_name("a_b")  # cleaned names stay apart
    with pytest.raises(InputError, match=r"'\.\.'"):
        inside("/tmp", "jobs/../x.json", "answer")


def test_watch_replanner_writes_assignment_under_its_directory(tmp_path):
    from streamsched.model import Cluster, TaskGraph
    from streamsched.model.cluster import Node
    from streamsched.schedulers import get_scheduler
    from streamsched.schedulers.replanning import Replanner

    graph = TaskGraph.build("../../../escaped", ["a", "b"], [0, 1], [1.0, 1.0], [0], [1], [5.0])
    cluster = Cluster("c", (Node("n1", 4.0), Node("n2", 4.0)))
    out = tmp_path / "store" / "assignments"
    planner = Replanner(get_scheduler("ols"), cluster, {}, 1, out)
    decision = planner.on_graph(graph)
    assignment = Path(decision.assignment).resolve()
    assert assignment.is_file() and out.resolve() in assignment.parents, assignment
    assert not list(tmp_path.parent.glob("escaped*"))


# ------------------------------------------------------- raw answers saved before checks
@pytest.mark.parametrize("value", [float("nan"), -1.0, 1e308])
def test_read_engine_storm_ui_bad_number_leaves_no_partial_output(serve, tmp_path, capsys, value):
    def poison(name, doc):
        if name == "component-split.json":
            doc["executorStats"][0]["executed"] = value
        return doc

    url = serve(storm_answer(poison))
    out = tmp_path / "o" / "r"
    assert main(["read-engine", "storm-ui", "--url", url, "--topology-id", TOPOLOGY_ID, "--out", str(out)]) == 2
    one_error_line(capsys)
    assert not out.exists() and list((tmp_path / "o").iterdir()) == []


def test_huge_load_error_names_task_and_field():
    from streamsched.model import TaskGraph

    with pytest.raises(InputError, match=r"task 17 \(b\): load is 5\.83e\+301"):
        TaskGraph.build("g", ["a", "b"], [0, 1], [1.0, 5.83e301], [0], [1], [1.0], task_ids=[3, 17])
    with pytest.raises(InputError, match=r"pair task 3 -> task 17: rate is inf"):
        TaskGraph.build("g", ["a", "b"], [0, 1], [1.0, 1.0], [0], [1], [math.inf], task_ids=[3, 17])


# --------------------------------------------------------------------- numbers overflow
def test_export_heron_huge_memory_is_refused(tmp_path, capsys):
    from streamsched.engines.heron import heron_packing_plan
    from streamsched.model import Cluster, Placement, TaskGraph
    from streamsched.model.cluster import Node

    graph = TaskGraph.build("g", ["a", "b"], [0, 1], [1.0, 1.0], [0], [1], [1.0], memory_mb=[1e13, 128.0])
    cluster = Cluster("c", (Node("n1", 4.0), Node("n2", 4.0)))
    placement = Placement.build([0, 1], [0, 0])
    with pytest.raises(InputError, match=r"task 0 \(a\): memory_mb 1e\+13 .*above Heron's int64"):
        heron_packing_plan(graph, cluster, placement)
    plan = heron_packing_plan(TaskGraph.build("g", ["a", "b"], [0, 1], [1.0, 1.0], [0], [1], [1.0],
                                              memory_mb=[8e12, 128.0]), cluster, placement)
    assert int(plan["containerPlans"][0]["instancePlans"][0]["resource"]["ram"]) == round(8e12 * 2**20)


# ------------------------------------------------------- results that depend on the load
def test_i_scheduler_same_placement_when_the_clock_races(monkeypatch):
    """A busy machine seen from the search: every clock reading 0.5 s after the last. theta is
    a work budget, so the placement is the one of a quiet run (the best known cost, 8, on
    linear-10/homogeneous-10 and 4 on linear-12/heterogeneous-10, issue 27)."""
    from streamsched import workloads
    from streamsched.schedulers import get_scheduler

    cases = [("linear-10", "homogeneous-10", 8.0), ("linear-12", "heterogeneous-10", 4.0)]
    quiet = {}
    for w, c, best in cases:
        p = get_scheduler("i-scheduler", theta=1.0).schedule(workloads.workload(w), workloads.cluster(c), seed=1)
        assert p.metadata["cost"] == best
        quiet[w] = p.node_of.tolist()
    now = [time.perf_counter()]

    def racing() -> float:
        now[0] += 0.5
        return now[0]

    monkeypatch.setattr(time, "perf_counter", racing)
    for w, c, best in cases:
        p = get_scheduler("i-scheduler", theta=1.0).schedule(workloads.workload(w), workloads.cluster(c), seed=1)
        assert p.node_of.tolist() == quiet[w] and p.metadata["cost"] == best


# ------------------------------------------------------ collector state read without checks
def test_collect_storm_ui_truncated_state_file_is_one_line(serve, tmp_path, capsys):
    url = serve(storm_answer())
    out = tmp_path / "chunks"
    args = ["collect", "storm-ui", "--url", url, "--topology-id", TOPOLOGY_ID, "--out", str(out), "--once"]
    assert main(args) == 0
    state = out / f".collect-storm-{TOPOLOGY_ID}.json"
    state.write_text(state.read_text()[:40])
    capsys.readouterr()
    assert main(args) == 2
    assert "corrupt collector state" in one_error_line(capsys)


def test_collect_log_truncated_state_file_is_rebuilt(tmp_path, capsys):
    log = tmp_path / "traffic.log"
    log.write_text("".join(f"{k},t,1,2,{k},0\n" for k in range(5)))
    out = tmp_path / "chunks"
    assert main(["collect", "log", str(log), "--out", str(out), "--once"]) == 0
    state = out / ".collect-traffic.json"
    state.write_text(state.read_text()[:25])
    with open(log, "a") as handle:
        handle.write("5,t,1,2,5,0\n")
    capsys.readouterr()
    assert main(["collect", "log", str(log), "--out", str(out), "--once"]) == 0
    assert "corrupt collector state" in capsys.readouterr().err
    rows = [r for c in sorted(out.glob("traffic-*.csv")) for r in c.read_text().splitlines()[1:]]
    assert rows == [f"{k},t,1,2,{k},0" for k in range(6)]


# ------------------------------------------------------------- collect log loses or repeats rows
def _rows(out: Path) -> list[str]:
    return [r for c in sorted(out.glob("traffic-*.csv")) for r in c.read_text().splitlines()[1:]]


def test_collect_log_truncated_and_rewritten_longer_loses_nothing(tmp_path):
    from streamsched.pipeline.collect import LogCollector

    log, out = tmp_path / "traffic.log", tmp_path / "chunks"
    log.write_text("".join(f"{k},t,1,2,{k},0\n" for k in range(3)))
    collector = LogCollector(log, out)
    collector.poll()
    with open(log, "r+") as handle:  # truncated in place, then written longer than before
        handle.truncate(0)
        handle.write("".join(f"{k},t,1,2,{k},0\n" for k in range(100, 110)))
    collector.poll()
    assert _rows(out) == [f"{k},t,1,2,{k},0" for k in (0, 1, 2, *range(100, 110))]


def test_collect_log_over_long_line_is_quarantined_not_looped_on(tmp_path):
    from streamsched.pipeline.collect import LogCollector

    log, out = tmp_path / "traffic.log", tmp_path / "chunks"
    log.write_text("1,t,1,2,1,0\n" + "2,t,1,2," + "9" * 5000 + ",0\n" + "3,t,1,2,3,0\n")
    LogCollector(log, out, max_line=1024).poll()
    assert _rows(out) == ["1,t,1,2,1,0", "3,t,1,2,3,0"]
    (record,) = [json.loads(x) for x in (out / "quarantine" / "traffic.jsonl").read_text().splitlines()]
    assert record["line"] == 2 and record["bytes"] == [12, 12 + 5011]


def test_collect_log_same_name_in_two_directories_is_refused(tmp_path):
    from streamsched.pipeline.collect import LogCollector

    out = tmp_path / "chunks"
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "traffic.log").write_text("1,t,1,2,1,0\n")
    LogCollector(tmp_path / "a" / "traffic.log", out).poll()
    with pytest.raises(InputError, match="two logs of the same name"):
        LogCollector(tmp_path / "b" / "traffic.log", out)
    assert _rows(out) == ["1,t,1,2,1,0"]


def test_collect_log_named_pipe_is_refused_without_blocking(tmp_path):
    import os
    import threading

    from streamsched.pipeline.collect import LogCollector

    fifo = tmp_path / "traffic.log"
    os.mkfifo(fifo)
    outcome = []

    def attempt():
        try:
            LogCollector(fifo, tmp_path / "chunks").poll()
            outcome.append("read")
        except InputError as exc:
            outcome.append(str(exc))

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(10)
    if thread.is_alive():  # unblock the open() of the old code
        with open(fifo, "w"):
            pass
        thread.join(5)
        pytest.fail("collect log blocked on a named pipe")
    assert outcome and "not a regular file" in outcome[0]


# -------------------------------------------------- export ignores options meant for another format
@pytest.mark.parametrize("argv, option", [
    (["--format", "heron", "--image", "reg/x:1", "--kind", "statefulset", "--per", "task"], "--per"),
    (["--format", "heron", "--image", "reg/x:1"], "--image"),
    (["--format", "heron", "--kind", "statefulset"], "--kind"),
    (["--format", "kubernetes", "--topology-id", "ID"], "--topology-id"),
    (["--format", "storm", "--cpu-per-load", "2"], "--cpu-per-load"),
])
def test_export_option_for_another_format_is_refused(tmp_path, capsys, argv, option):
    placement = tmp_path / "p.json"
    assert main(["schedule", "-w", "linear-10", "-c", "homogeneous-10", "-o", str(placement)]) == 0
    capsys.readouterr()
    assert main(["export", str(placement), "-w", "linear-10", "-c", "homogeneous-10", *argv]) == 2
    assert f"{option}: only for --format" in one_error_line(capsys)


# ---------------------------------------------------- every parameter checked before any work
def test_scheduler_parameters_are_checked_when_the_scheduler_is_made():
    from streamsched.errors import ParameterError
    from streamsched.schedulers import get_scheduler

    with pytest.raises(ParameterError, match=r"optimal\.params\.time_limit: -1\.0 not in valid range"):
        get_scheduler("optimal", time_limit="-1")
    with pytest.raises(ParameterError, match=r"optimal\.params\.time_limit: 1e\+308 not in valid range"):
        get_scheduler("optimal", time_limit="1e308")


def test_schedule_optimal_time_limit_1e308_is_one_line(capsys):
    assert main(["schedule", "-w", "linear-10", "-c", "homogeneous-10", "-s", "optimal", "-p", "time_limit=1e308"]) == 2
    assert "time_limit" in one_error_line(capsys)


def test_watch_time_limit_minus_one_is_refused_before_spark(tmp_path, capsys, monkeypatch):
    import streamsched.cli.pipeline as cli_pipeline

    def no_spark(*args, **kwargs):
        raise AssertionError("Spark started before the parameters were checked")

    monkeypatch.setattr(cli_pipeline, "_spark", no_spark)
    (tmp_path / "in").mkdir()
    assert main(["watch", str(tmp_path / "in"), "--store", str(tmp_path / "store"), "-c", "homogeneous-10",
                 "-s", "optimal", "-p", "time_limit=-1", "--once"]) == 2
    assert "time_limit" in one_error_line(capsys)


# ------------------------------------------------------ Spark failures surface as Java traces
def test_watch_store_on_a_read_only_mount_is_one_line_before_spark(tmp_path, capsys, monkeypatch):
    import streamsched.cli.pipeline as cli_pipeline

    monkeypatch.setattr(cli_pipeline, "_spark", lambda master: pytest.fail("Spark started"))
    (tmp_path / "in").mkdir()
    assert main(["watch", str(tmp_path / "in"), "--store", "/proc/streamsched-store", "-c", "homogeneous-10",
                 "--once"]) == 2
    assert "--store /proc/streamsched-store: cannot write there" in one_error_line(capsys)


def _java_failure(module: str, text: str) -> Exception:
    cls = type("Py4JJavaError", (Exception,), {"__module__": module})
    return cls(text)


JAVA_TRACE = """An error occurred while calling o123.save.
: org.apache.spark.SparkException: Job aborted.
\tat org.apache.spark.sql.execution.datasources.FileFormatWriter$.write(FileFormatWriter.scala:251)
""" + "\tat some.Frame.call(Frame.java:1)\n" * 150 + """Caused by: java.io.IOException: Mkdirs failed to create file:/ro/store/snapshots/t/.tmp-1 (exists=false, cwd=file:/work)
\tat org.apache.hadoop.fs.ChecksumFileSystem.create(ChecksumFileSystem.java:515)
"""


def test_spark_failures_are_one_line_naming_the_cause(monkeypatch, capsys):
    from streamsched.pipeline.spark_errors import describe, is_spark_failure

    exc = _java_failure("py4j.protocol", JAVA_TRACE)
    assert is_spark_failure(exc) and not is_spark_failure(ValueError("x"))
    line, code = describe(exc)
    assert code == 2 and "\n" not in line
    assert line.startswith("Spark failed: IOException: Mkdirs failed to create file:/ro/store/snapshots/t/.tmp-1")
    assert "cannot write there" in line
    query = _java_failure("pyspark.errors.exceptions.captured", "[STREAM_FAILED] Query [id = 1] terminated with "
                          "exception: An exception was raised by the Python Proxy. Return Message: Traceback ...\n"
                          "streamsched.errors.InfeasibleError: graph 't' (load 40) does not fit cluster 'c' (capacity 4)\n"
                          + "\tat java.lang.Thread.run(Thread.java:1)\n" * 1000
                          + "Caused by: java.lang.StackOverflowError\n")
    assert describe(query) == ("graph 't' (load 40) does not fit cluster 'c' (capacity 4)", 3)
    # through the CLI: one line, the trace only with --verbose
    from streamsched.cli import core as cli_core

    def failing(*args, **kwargs):
        raise exc

    monkeypatch.setattr(cli_core, "resolve_names", failing)
    assert main(["compare", "-w", "linear-10", "-c", "homogeneous-10", "--schedulers", "even"]) == 2
    assert "IOException: Mkdirs failed" in one_error_line(capsys)
    assert main(["--verbose", "compare", "-w", "linear-10", "-c", "homogeneous-10", "--schedulers", "even"]) == 2
    assert "Frame.java" in capsys.readouterr().err


# A window that cannot be placed fails inside Spark's foreachBatch: the CLI, a real JVM
# launched the way a user's command launches it, prints one line (Spark logged the query's
# failure with every frame, 86 lines here, about 1,000 in the battery's run).
def _windows(directory: Path, first: int, count: int) -> None:
    for w in range(first, first + count):
        rows = [f"{1_700_000_000 + 10 * w + s},app,{a},{b},{n},0" for s in range(10)
                for a, b, n in ((0, 1, 7), (2, 3, 5), (1, 2, 1))]
        (directory / f".traffic-{w}").write_text("timestamp,topology,src_task,dst_task,tuples,bytes\n"
                                                 + "\n".join(rows) + "\n")
        (directory / f".traffic-{w}").rename(directory / f"traffic-{w}.csv")


def _nodes(path: Path, capacities: list[int]) -> None:
    path.write_text(json.dumps({"name": f"c{len(capacities)}",
                                "nodes": [{"name": f"n{k}", "capacity": c} for k, c in enumerate(capacities)]}))


@pytest.mark.slow
def test_watch_window_that_cannot_be_placed_is_one_line_from_a_real_spark(tmp_path):
    import subprocess

    from test_kill_restart import CLI

    (tmp_path / "in").mkdir()
    _windows(tmp_path / "in", 0, 2)
    _nodes(tmp_path / "small.json", [1])
    done = subprocess.run([*CLI, "watch", str(tmp_path / "in"), "--store", str(tmp_path / "store"),
                           "--cluster", str(tmp_path / "small.json"), "--window", "10", "--once"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 3
    assert done.stderr.splitlines() == [
        "error: graph 'app' needs load 4 but cluster 'c1' has capacity 1 (--verbose for the trace)"]


@pytest.mark.slow
def test_watch_cluster_shrunk_mid_run_is_one_line_from_a_real_spark(tmp_path):
    """The battery's example: a running ``watch`` whose cluster file shrinks to one small node;
    the change is seen in a batch or between batches (either way: exit 3, one line)."""
    import subprocess

    from test_kill_restart import CLI, _kill, _wait_for

    arriving, store, nodes = tmp_path / "in", tmp_path / "store", tmp_path / "cluster.json"
    arriving.mkdir()
    _windows(arriving, 0, 2)
    _nodes(nodes, [2, 2, 2])
    err = tmp_path / "stderr.txt"  # a file, not a pipe: 1,000 frames would fill a pipe and block the run
    with err.open("w") as handle:
        process = subprocess.Popen([*CLI, "watch", str(arriving), "--store", str(store), "--cluster", str(nodes),
                                    "--window", "10", "--poll", "1"],
                                   stdout=subprocess.DEVNULL, stderr=handle, start_new_session=True)
    try:
        _wait_for(lambda: process.poll() is not None or list((store / "assignments").glob("*.placement.json")),
                  240, "first assignment")
        assert process.poll() is None, err.read_text()[-2000:]
        _nodes(nodes, [1])
        _windows(arriving, 2, 2)
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            _kill(process)
    assert process.returncode == 3
    (line,) = err.read_text().splitlines()
    assert "on 'c1' (capacity 1)" in line or "cluster 'c1' has capacity 1" in line


# ------------------------------------------------------------------- parsing before limits
@pytest.mark.slow  # about 4 s of parsing
def test_yaml_topology_of_100000_operators_is_refused_and_nodes_bounded(tmp_path, capsys, monkeypatch):
    import streamsched.model.io as sio

    big = tmp_path / "big.yaml"
    big.write_text("name: big\noperators:\n" + "".join(f"  - name: o{k}\n" for k in range(100_000)))
    assert main(["schedule", "-g", str(big), "-c", "homogeneous-10", "-s", "even"]) == 2
    assert "100,000 operators exceed the limit of 50,000" in one_error_line(capsys)
    monkeypatch.setattr(sio, "MAX_YAML_NODES", 1000)
    with pytest.raises(InputError, match=r"big\.yaml:\d+: more than 1,000 YAML nodes; refused before reading further"):
        sio.read_document(big)
    alias = tmp_path / "a.yaml"
    alias.write_text("name: x\noperators:\n  - &o {name: a}\n  - *o\n")
    with pytest.raises(InputError, match=r"a\.yaml:4: invalid YAML \(alias \*o refused"):
        sio.read_document(alias)


# ------------------------------------------- Storm >= 2.3 cumulative counters: three reports
def _metrics_line(ts: int, task: int, component: str, name: str, value) -> str:
    """A line as LoggingMetricsConsumer writes it under Storm's log4j2 worker.xml pattern."""
    return (f"2026-11-23 21:28:25,398 4440     {ts}\tnode1.example.com:6700\t{task:>3}:{component:<11}\t"
            f"{(name + ' ' * 23)[:23]}\t{value}")


def test_storm_v2_cumulative_counters_three_reports_count_three_intervals(tmp_path):
    """Three reports 60 s apart of counters started with the executor (6670 tuples a report):
    the 180 s they cover hold 20,010 tuples, 111.17/s (not 13,340 / 180 = 74.11/s). The
    first report is counted from the counter's start (one 60 s report)."""
    from streamsched.engines.storm.metrics_traffic import read_topology

    path = tmp_path / "workers-artifacts" / "wc-1-1714560000" / "6700" / "worker.log.metrics"
    path.parent.mkdir(parents=True)
    lines = []
    for k in (1, 2, 3):
        ts = 1714560000 + 60 * k
        lines += [_metrics_line(ts, 1, "spout", "__transfer-count-default", 6670 * k),
                  _metrics_line(ts, 1, "spout", "__transfer-count-default.m1_rate", 111.1),
                  _metrics_line(ts, 2, "split", "__execute-count-spout:default", 6670 * k),
                  _metrics_line(ts, 2, "split", "__execute-count-spout:default.m1_rate", 111.1)]
    path.write_text("".join(line + "\n" for line in lines))
    _, estimate, _ = read_topology([(str(path), "storm-log")], "wc-1-1714560000", (1714560000.0, 1714560180.0), 60.0)
    assert sum(v for _, s, d, v in estimate.traffic if (s, d) == (1, 2)) / 180 == pytest.approx(111.1666, rel=1e-4)
    assert any("counted from the counter's start" in n for n in estimate.notes)
    # a file that begins mid-run (the counter far above one report): the first report is the baseline
    mid = [line.replace(f"\t{6670 * k}\n", f"\t{6670 * (k + 20)}\n") for k, line in
           ((1 + i // 4, line + "\n") for i, line in enumerate(lines))]
    path.write_text("".join(mid))
    _, estimate, _ = read_topology([(str(path), "storm-log")], "wc-1-1714560000", (1714560000.0, 1714560180.0), 60.0)
    assert sum(v for _, s, d, v in estimate.traffic if (s, d) == (1, 2)) == pytest.approx(2 * 6670)


# ------------------------------------------------------------- libraries where they serve
def test_native_output_is_kept_off_the_descriptors_and_logged(capfd, caplog):
    import ctypes
    import logging
    import os

    from streamsched.native_output import captured_native_output

    libc = ctypes.CDLL(None)
    with caplog.at_level(logging.DEBUG, logger="streamsched.native"):
        with captured_native_output("metis"):
            libc.printf(b"C stdio, buffered\n")
            os.write(2, b"straight to fd 2\n")
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    (record,) = caplog.records
    assert record.getMessage().startswith("metis: ") and "C stdio, buffered" in record.getMessage()
    assert "straight to fd 2" in record.getMessage()


# ------------------------------------------------ outputs moved into place only when complete
def test_edge_simulate_failing_midway_leaves_no_partial_output(tmp_path, capsys, monkeypatch):
    import streamsched.edge.figures as figures

    def broken(results, out, title=""):
        (out / "fig3.png").write_bytes(b"half")
        raise InputError("figures failed")

    monkeypatch.setattr(figures, "write_figures", broken)
    out = tmp_path / "sim"
    assert main(["edge", "simulate", "--setup", "small", "--strategy", "topset", "--intervals", "2",
                 "--out", str(out)]) == 2
    assert "figures failed" in one_error_line(capsys)
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_gen_metrics_failing_midway_leaves_no_partial_output(tmp_path, capsys, monkeypatch):
    """The first chunk's files are written, the second fails: no ``--out`` appears."""
    import streamsched.pipeline.generate as generate

    real, calls = generate._write, []

    def failing(stem, fmt, columns, dirty):
        calls.append(stem.name)
        if len(calls) > 2:
            raise InputError("disk gave out")
        return real(stem, fmt, columns, dirty)

    monkeypatch.setattr(generate, "_write", failing)
    out = tmp_path / "metrics"
    assert main(["gen-metrics", "-w", "linear-10", "--rows", "40", "--rows-per-file", "20",
                 "--out", str(out)]) == 2
    assert "disk gave out" in one_error_line(capsys)
    assert calls == ["traffic-00000", "load-00000", "traffic-00001"]
    assert list(tmp_path.iterdir()) == []


def test_gen_metrics_names_files_where_they_end_up(tmp_path):
    """Written through a staging directory, the summary and ``_generator.json`` still list the
    files at their final paths, and exactly the files that are there."""
    from streamsched import workloads
    from streamsched.pipeline.generate import generate_metrics

    out = tmp_path / "m"
    summary = generate_metrics(workloads.workload("linear-10"), out, rows=40, rows_per_file=20)
    on_disk = sorted(str(p) for p in out.iterdir() if p.name != "_generator.json")
    # linear-10: 9 edges; 40 rows = 5 intervals, 2 intervals per 20-row file: 3 chunks x 2 files
    assert sorted(summary["files"]) == on_disk and len(on_disk) == 6
    assert json.loads((out / "_generator.json").read_text())["files"] == summary["files"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


def test_reproduce_failing_midway_leaves_no_partial_output(tmp_path, capsys, monkeypatch):
    """results.csv/.json are written, then the experiment's tables fail: no ``--out`` appears,
    and a rerun that succeeds lists the files at their final paths."""
    from streamsched.evaluation.experiments import registry

    exp = registry.experiment("micro-optimum")

    def failing(rows, out_dir):
        (out_dir / "comparison.md").write_text("half")
        raise InputError("figures failed")

    monkeypatch.setitem(registry._EXPERIMENTS, exp.name, dataclasses.replace(exp, summarise=failing))
    out = tmp_path / "repro"
    args = ["reproduce", "micro-optimum", "--quick", "--schedulers", "even", "--out", str(out), "--json"]
    assert main(args) == 2
    assert "figures failed" in one_error_line(capsys)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setitem(registry._EXPERIMENTS, exp.name, exp)
    assert main(args) == 0
    written = json.loads(capsys.readouterr().out)["written"]
    assert written and all(Path(w).parent in (out, out / "figures") and Path(w).is_file() for w in written)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repro"]


def test_staged_directory_replaces_entries_of_an_existing_directory(tmp_path):
    from streamsched.model.paths import staged_directory

    out = tmp_path / "out"
    (out / "storm-ui").mkdir(parents=True)
    (out / "storm-ui" / "old.json").write_text("{}")
    (out / "mine.txt").write_text("kept")
    with staged_directory(out) as stage:
        (stage / "storm-ui").mkdir()
        (stage / "storm-ui" / "topology.json").write_text("{}")
        (stage / "graph.json").write_text("{}")
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == [
        "graph.json", "mine.txt", "storm-ui", "storm-ui/topology.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_apply_flink_refuses_a_job_id_that_is_no_flink_jobid_before_any_request():
    """The job id names the plan and status files in the plugin's directory: ``../x`` (from a
    user or a server) is refused in one line before anything is read or written."""
    from streamsched.engines.flink.apply import apply

    with pytest.raises(InputError, match=r"^job id '\.\./\.\./x': not a Flink JobID"):
        apply("http://127.0.0.1:9", "unused.json", job_id="../../x")


# -------------------------- issue 34: counts of 1e308 are one line, never a numpy warning
#: The Flink record counters and their meters (a one-snapshot read's rates) set to 1e308.
FLINK_POISONED = ("numRecordsIn", "numRecordsOut", "numRecordsInPerSecond", "numRecordsOutPerSecond")


def _poison_flink_metrics(doc: list) -> list:
    for item in doc:
        if item.get("id") in FLINK_POISONED:
            item["value"] = "1e308"
    return doc


def _poisoned_flink(answer):
    """``answer`` with every subtask's :data:`FLINK_POISONED` metrics at 1e308."""
    def poisoned(parts, query):
        status, body, *rest = answer(parts, query)
        if status == 200 and parts[-1] == "metrics" and "subtasks" in parts:
            body = json.dumps(_poison_flink_metrics(json.loads(body))).encode()
        return (status, body, *rest)

    return poisoned


def _poison_storm(name, doc):
    if name.startswith("component-"):
        for row in doc.get("executorStats", []):
            for key in ("executed", "emitted", "transferred"):
                if key in row:
                    row[key] = 1e308
    return doc


def _poison_saved(engine: str, target: Path) -> Path:
    """A copy of the engine's saved fixture with counts at 1e308 (what the readers of the
    issue-34 battery summed into numpy's RuntimeWarning)."""
    import shutil

    if engine == "storm-ui":
        shutil.copytree(STORM, target)
        for page in target.glob("component-*.json"):
            page.write_text(json.dumps(_poison_storm(page.name, json.loads(page.read_text()))))
    else:  # its last snapshot alone (rates from the meters, as a live --window 0 read)
        shutil.copytree(FLINK, target)
        manifest = json.loads((target / "capture.json").read_text())
        manifest["snapshots"] = manifest["snapshots"][-1:]
        (target / "capture.json").write_text(json.dumps(manifest))
        for path in (target / manifest["snapshots"][0]["dir"]).rglob("metrics.json"):
            path.write_text(json.dumps(_poison_flink_metrics(json.loads(path.read_text()))))
    return target


def _stderr_of_one_error(capsys, caught) -> str:
    """The one line on stderr, no warning recorded (it would print on stderr in a real run)."""
    assert not caught, [f"{w.category.__name__}: {w.message}" for w in caught]
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("error:") and "Warning" not in err[0], err
    return err[0]


@pytest.mark.parametrize("engine, source", [("storm-ui", "live"), ("flink", "live"),
                                            ("storm-ui", "saved"), ("flink", "saved")])
def test_counts_of_1e308_are_one_line_naming_the_field(serve, tmp_path, capsys, engine, source):
    import warnings

    if source == "saved":
        argv = ["read-engine", engine, "--dir", str(_poison_saved(engine, tmp_path / "saved"))]
    elif engine == "storm-ui":
        argv = ["read-engine", engine, "--url", serve(storm_answer(_poison_storm)), "--topology-id", TOPOLOGY_ID]
    else:
        argv = ["read-engine", engine, "--url", serve(_poisoned_flink(_flink_answer())), "--window", "0"]
    out = tmp_path / "o" / "r"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(argv + ["--out", str(out)])
    line = _stderr_of_one_error(capsys, caught)
    assert code == 2
    if engine == "storm-ui":
        assert re.search(r"component-\S+\.executorStats\[0\]\.\w+: 1e\+308 is above 2\^63", line), line
    else:
        assert re.search(r"subtasks/\d+/metrics(\.json)?\[\d+\]\.value \(numRecords\w+\): '1e308' is beyond 2\^63",
                         line), line
    assert not out.exists() and list((tmp_path / "o").iterdir()) == []


def test_collect_counts_of_1e308_are_one_line(serve, tmp_path, capsys):
    import warnings

    url = serve(storm_answer(_poison_storm))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(["collect", "storm-ui", "--url", url, "--topology-id", TOPOLOGY_ID, "--out", str(tmp_path / "c"),
                     "--once"])
    assert code == 2 and "is above 2^63" in _stderr_of_one_error(capsys, caught)
    assert not list((tmp_path / "c").glob("*.csv"))


@pytest.mark.slow  # a process of its own: seconds to start on a busy machine
def test_counts_of_1e308_real_stderr_has_one_line(tmp_path):
    """The same through a real process: what numpy would print goes to the real stderr."""
    import subprocess
    import sys

    saved = _poison_saved("storm-ui", tmp_path / "saved")
    done = subprocess.run([sys.executable, "-m", "streamsched.cli", "read-engine", "storm-ui", "--dir", str(saved),
                           "--out", str(tmp_path / "r")], capture_output=True, text=True, timeout=120)
    err = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(err) == 1 and "Warning" not in done.stderr, done.stderr
    assert not (tmp_path / "r").exists()


def test_numbers_in_range_that_combine_out_of_it_are_one_line(tmp_path, capsys):
    """Every count within 2^63, but two Flink snapshots 1e-310 s apart: the rates overflow in
    numpy's sums; that is one error naming the capture, not a RuntimeWarning. Storm alike: an
    interval of 1e-300 s between two collector readings."""
    import shutil
    import warnings

    from streamsched.pipeline.collect_rest import storm_interval

    saved = tmp_path / "saved"
    shutil.copytree(FLINK, saved)
    manifest = json.loads((saved / "capture.json").read_text())
    manifest["snapshots"][0]["time"], manifest["snapshots"][1]["time"] = 0.0, 1e-310
    (saved / "capture.json").write_text(json.dumps(manifest))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(["read-engine", "flink", "--dir", str(saved), "--out", str(tmp_path / "r")])
        line = _stderr_of_one_error(capsys, caught)
        assert code == 2 and "combine out of range" in line and str(saved) in line, line

        data = ui_rest.read_dir(STORM)
        more = {"emitted": 1e18, "transferred": 1e18, "executed": 1e18}
        later = dataclasses.replace(
            data, executors=tuple(dataclasses.replace(e, **{k: getattr(e, k) + v for k, v in more.items()
                                                            if getattr(e, k) is not None}) for e in data.executors),
            inputs=tuple(dataclasses.replace(i, executed=i.executed + 1e18) for i in data.inputs))
        interval, _ = storm_interval(data, later, 1e-300)
        with pytest.raises(InputError, match="combine out of range"):
            ui_rest.estimate(interval)
    assert not caught, [str(w.message) for w in caught]
