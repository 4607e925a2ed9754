"""Faults of ``apply flink`` and the live loop without a JVM (issue 36, item 4): a JobManager
scripted over HTTP (GET and PUT, refusing connections while "down") whose job follows its
resource requirements as Flink's adaptive scheduler with the placement plugin does (each PUT
redeploys every subtask at the new bounds, capped by the slots registered; subtasks go where the
plan file says when it names registered TaskManagers only, else Flink's way, and a status file is
written as the plugin writes it), with scripted faults at chosen PUTs: a TaskManager leaving the
cluster, another plan honoured in place of apply's, the JobManager down for some seconds.

Checked: the error's kind and its one line (what happened, and what became of the job), the job
left as it was, or at its parallelism on the TaskManagers left; the PUTs apply made; one line per
outage in apply and in the loop's collector; a failed plan not tried again by the loop, a plan on
a TaskManager that left not applied.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest

from streamsched.engines.flink import apply as flink_apply
from streamsched.engines.flink.documents import FlinkReading
from streamsched.engines.rest_client import Unreachable
from streamsched.errors import InputError
from streamsched.model import Cluster, Placement, TaskGraph
from streamsched.model.cluster import Node
from streamsched.model.units import CORES
from streamsched.pipeline.live_loop import GridCollector, read_journal
from test_live_loop import Apply, lab, setting, window  # noqa: F401 (setting: the loop's fixture)

JOB = "ab" * 16
SRC, SINK = "a" * 32, "b" * 32
NAMES = {SRC: "Source: events", SINK: "Sink: files"}


class ScriptedFlink:
    """The JobManager (module docstring). ``where``: vertex id -> TaskManager per subtask;
    ``faults``: PUT number (1, 2, ...) -> a function of this object run in place of Flink's answer."""

    def __init__(self, plans: Path, where: dict[str, list[str]], taskmanagers=("tm-1", "tm-2", "tm-3"), slots=2):
        self.plans, self.where, self.tms, self.slots = plans, {v: list(t) for v, t in where.items()}, list(taskmanagers), slots
        self.bounds = {v: len(t) for v, t in where.items()}
        self.attempt, self.puts, self.faults, self.requests = 0, [], {}, 0
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                with owner.lock:
                    owner.requests += 1
                    status, body = owner.get([p for p in urlparse(self.path).path.split("/") if p])
                self._send(status, body)

            def do_PUT(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with owner.lock:
                    owner.put(body)
                self._send(200, {})

            def _send(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.handler = Handler
        self.port = 0
        self.up()
        self.url = f"http://127.0.0.1:{self.port}"

    # -------------------------------------------------------------- the server up and down
    def up(self) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), self.handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def down(self) -> None:
        """Connections refused from now on (the listening socket closed)."""
        self.httpd.shutdown()
        self.httpd.server_close()

    # -------------------------------------------------------------- Flink's answers
    def held(self, tm: str) -> int:
        return max((Counter(tms)[tm] for tms in self.where.values()), default=0)

    def get(self, parts):
        if parts == ["jobmanager", "environment"]:
            return 200, {"jvm": {"options": [f"-Dstreamsched.flink.placement={self.plans}"]},
                         "classpath": ["/flink/lib/streamsched-flink-placement-2.3.jar", "/flink/lib/flink-dist-2.3.0.jar"]}
        if parts == ["taskmanagers"]:
            return 200, {"taskmanagers": [{"id": tm, "freeSlots": self.slots - self.held(tm)} for tm in self.tms]}
        if parts[:1] == ["taskmanagers"] and len(parts) == 2 and parts[1] in self.tms:
            return 200, {"id": parts[1], "allocatedSlots": [{"jobId": JOB}] * self.held(parts[1])}
        if parts == ["jobs", JOB]:
            return 200, {"jid": JOB, "name": "bounded", "state": "RUNNING", "timestamps": {"CREATED": 1000},
                         "vertices": [{"id": v, "name": NAMES[v], "parallelism": len(t), "slotSharingGroupId": "g"}
                                      for v, t in self.where.items()]}
        if parts == ["jobs", JOB, "resource-requirements"]:
            return 200, {v: {"parallelism": {"lowerBound": 1, "upperBound": b}} for v, b in self.bounds.items()}
        if parts[:3] == ["jobs", JOB, "vertices"] and len(parts) == 4 and parts[3] in self.where:
            return 200, {"subtasks": [{"subtask": i, "taskmanager-id": tm, "status": "RUNNING", "attempt": self.attempt,
                                       "start-time": 2000, "status-duration": {"CREATED": 5, "RUNNING": 1}}
                                      for i, tm in enumerate(self.where[parts[3]])]}
        return 404, {"errors": ["Not found"]}

    def put(self, requirements) -> None:
        self.bounds = {v: r["parallelism"]["upperBound"] for v, r in requirements.items()}
        self.puts.append(dict(self.bounds))
        fault = self.faults.get(len(self.puts))
        if fault is not None:
            fault(self)
        else:
            self.redeploy()

    def redeploy(self, honour: bool = True) -> None:
        """Every subtask again at the bounds (as many as the registered slots allow): where the
        plan file says when it names registered TaskManagers only, else Flink's way (subtask i
        on the i-th TaskManager, round robin); the plugin's status written."""
        total = self.slots * len(self.tms)
        parallelism = {v: min(b, total) for v, b in self.bounds.items()}
        plan_file = self.plans / f"{JOB}.json"
        plan = json.loads(plan_file.read_text())["vertices"] if plan_file.exists() and honour else None
        usable = plan is not None and all(len(plan[v]["taskmanagers"]) == p and set(plan[v]["taskmanagers"]) <= set(self.tms)
                                          for v, p in parallelism.items())
        if usable:
            self.where = {v: list(plan[v]["taskmanagers"]) for v in parallelism}
            status = {"applied": True}
        else:
            self.where = {v: [self.tms[i % len(self.tms)] for i in range(p)] for v, p in parallelism.items()}
            status = {"applied": False, "reason": "no usable plan: assigned as Flink does"}
        self.attempt += 1
        self.write_status(status)

    def write_status(self, status) -> None:
        (self.plans / f"{JOB}.status.json").write_text(json.dumps({"job_id": JOB, "time_ms": time.time() * 1000,
                                                                   **status}))

    def close(self) -> None:
        self.down()


@pytest.fixture
def scripted(tmp_path):
    servers = []

    def make(where):
        plans = tmp_path / "plans"
        plans.mkdir(exist_ok=True)
        server = ScriptedFlink(plans, where)
        servers.append(server)
        return server

    yield make
    for server in servers:
        try:
            server.close()
        except OSError:
            pass


def reading_of(flink: ScriptedFlink) -> FlinkReading:
    """What ``read-engine flink`` gives for the scripted job: Source(2) -REBALANCE-> Sink(2),
    500-byte records at 100/s per pair, on three identical TaskManagers of 2 slots."""
    src, dst = [0, 0, 1, 1], [2, 3, 2, 3]
    graph = TaskGraph.build(name="bounded", operator_names=[NAMES[SRC], NAMES[SINK]], task_operator=[0, 0, 1, 1],
                            load=[0.01] * 4, load_unit=CORES, src=np.array(src), dst=np.array(dst), rate=[100.0] * 4,
                            bytes_rate=[50_000.0] * 4, task_ids=list(range(4)))
    cluster = Cluster(name="scripted", nodes=tuple(Node(name=tm, capacity=1, cores=1, task_slots=2)
                                                   for tm in ("tm-1", "tm-2", "tm-3")), capacity_unit=CORES)
    names = [n.name for n in cluster.nodes]
    node_of = [names.index(tm) for tm in flink.where[SRC] + flink.where[SINK]]
    report = {"job_id": JOB, "url": flink.url, "measured_per_s": {"bytes_in_remote": 100_000.0},
              "vertices": [{"id": SRC, "name": NAMES[SRC], "first_task": 0, "parallelism": 2, "inputs": [],
                            "records_out_per_s": 200.0},
                           {"id": SINK, "name": NAMES[SINK], "first_task": 2, "parallelism": 2, "inputs": [SRC],
                            "records_out_per_s": 0.0}]}
    return FlinkReading(graph, Placement.build(np.array(node_of)), cluster, report)


def plan_file(reading: FlinkReading, where: dict[str, list[str]], path: Path) -> Path:
    names = [n.name for n in reading.cluster.nodes]
    Placement.build(np.array([names.index(tm) for tm in where[SRC] + where[SINK]])).write(path, reading.graph,
                                                                                         reading.cluster)
    return path


def no_reading_after(monkeypatch):
    """The scripted JobManager has no metrics: the reading after an applied move fails (apply
    says so in its reason and stays applied)."""
    def capture_live(*_args, **_kwargs):
        raise InputError("the scripted JobManager has no metrics")

    monkeypatch.setattr(flink_apply, "capture_live", capture_live)


def test_a_taskmanager_lost_during_the_apply_ends_it_and_the_job_is_put_back(scripted, tmp_path):
    """The plan puts Sink[0] on tm-3, which the job held no slot of; tm-3 leaves the cluster as
    the second rescale is asked for, and Flink runs the job on the TaskManagers left (the plugin
    falls back: its plan names tm-3). The apply stops at once (no wait for its timeout) with a
    TaskManagerLost, and the job, whose placement never used tm-3, is put back as it was."""
    flink = scripted({SRC: ["tm-1", "tm-2"], SINK: ["tm-1", "tm-2"]})
    reading = reading_of(flink)
    plan = plan_file(reading, {SRC: ["tm-1", "tm-2"], SINK: ["tm-3", "tm-2"]}, tmp_path / "plan.json")

    def tm3_dies(f):
        f.tms.remove("tm-3")
        f.redeploy()

    flink.faults[2] = tm3_dies
    lines = []
    started = time.monotonic()
    with pytest.raises(flink_apply.TaskManagerLost) as lost:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, min_gain=-math.inf, timeout_s=30,
                          log=lines.append)
    assert time.monotonic() - started < 10  # found by the check of the registered TaskManagers, not a timeout
    message = str(lost.value)
    assert message.startswith("TaskManager tm-3 left the cluster during the apply (the job fails over); ")
    assert message.endswith("the job was put back as it was (parallelism and placement, checked per subtask)")
    assert "\n" not in message
    # rescale 1 asked for every slot (2 held + 4 free), rescale 2 the job's parallelism; no more
    assert flink.puts == [{SRC: 6, SINK: 2}, {SRC: 2, SINK: 2}]
    assert flink.where == {SRC: ["tm-1", "tm-2"], SINK: ["tm-1", "tm-2"]}
    doc = json.loads((flink.plans / f"{JOB}.json").read_text())  # the plan left is the job's own placement
    assert {v: d["taskmanagers"] for v, d in doc["vertices"].items()} == flink.where


def test_a_lost_taskmanager_the_job_ran_on_leaves_it_at_its_parallelism_without_the_plan(scripted, tmp_path):
    """The job ran on tm-2 and tm-3; tm-3 leaves during the first rescale (the job then runs at
    what the 4 slots left allow). Its placement cannot come back: the plan is removed (Flink
    assigns, the plugin places nothing on a TaskManager that left), the bounds go back to the
    job's parallelism, and the error says where the job runs."""
    flink = scripted({SRC: ["tm-2", "tm-3"], SINK: ["tm-2", "tm-3"]})
    reading = reading_of(flink)
    plan = plan_file(reading, {SRC: ["tm-2", "tm-3"], SINK: ["tm-2", "tm-1"]}, tmp_path / "plan.json")

    def tm3_dies(f):
        f.tms.remove("tm-3")
        f.redeploy()

    flink.faults[1] = tm3_dies
    with pytest.raises(flink_apply.TaskManagerLost) as lost:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, min_gain=-math.inf, timeout_s=30)
    assert str(lost.value) == (
        "TaskManager tm-3 left the cluster during the apply (the job fails over); TaskManager tm-3 is gone, so the "
        "job cannot be put back where it ran: it runs again at its parallelism as Flink assigned it "
        "(tm-1: 2 subtasks, tm-2: 2 subtasks)")
    assert flink.puts == [{SRC: 6, SINK: 2}, {SRC: 2, SINK: 2}]  # the second: the bounds put back
    assert flink.where == {SRC: ["tm-1", "tm-2"], SINK: ["tm-1", "tm-2"]}
    assert not (flink.plans / f"{JOB}.json").exists()


def test_a_placement_flink_does_not_honour_is_reported_and_the_job_put_back(scripted, tmp_path):
    """Another plan is honoured in place of apply's (the plugin says applied, Sink runs where it
    ran): the REST check finds both Sink subtasks off plan, a NotHonoured says so, and the job is
    put back (it runs as before: no further rescale)."""
    flink = scripted({SRC: ["tm-1", "tm-2"], SINK: ["tm-1", "tm-2"]})
    reading = reading_of(flink)
    plan = plan_file(reading, {SRC: ["tm-1", "tm-2"], SINK: ["tm-2", "tm-1"]}, tmp_path / "plan.json")

    def other_plan(f):
        f.where = {SRC: ["tm-1", "tm-2"], SINK: ["tm-1", "tm-2"]}
        f.attempt += 1
        f.write_status({"applied": True})

    flink.faults[2] = other_plan
    with pytest.raises(flink_apply.NotHonoured) as wrong:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, min_gain=-math.inf, timeout_s=30)
    assert str(wrong.value) == ("placement not honoured: 2 subtasks off plan, e.g. Sink: files[0] on tm-1, planned "
                                "tm-2; the job was put back as it was (parallelism and placement, checked per subtask)")
    assert flink.puts == [{SRC: 3, SINK: 2}, {SRC: 2, SINK: 2}]


def test_a_jobmanager_down_during_the_apply_is_ridden_out_with_one_line_each_way(scripted, tmp_path, monkeypatch):
    """The JobManager refuses connections for 2.5 s right after the first rescale is asked for:
    apply asks again each second, says once that it is unreachable and once that it answers
    again, and the move is applied and checked all the same."""
    no_reading_after(monkeypatch)
    flink = scripted({SRC: ["tm-1", "tm-2"], SINK: ["tm-1", "tm-2"]})
    reading = reading_of(flink)
    plan = plan_file(reading, {SRC: ["tm-1", "tm-2"], SINK: ["tm-2", "tm-1"]}, tmp_path / "plan.json")

    def outage(f):
        f.redeploy()
        threading.Thread(target=lambda: (f.down(), time.sleep(2.5), f.up()), daemon=True).start()
        time.sleep(0.2)  # the PUT's answer leaves before the socket closes

    flink.faults[1] = outage
    lines = []
    result = flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, min_gain=-math.inf, timeout_s=30,
                               settle_s=0, log=lines.append)
    assert result.applied and flink.where == {SRC: ["tm-1", "tm-2"], SINK: ["tm-2", "tm-1"]}
    assert result.reason == ("applied and verified per subtask; the reading after it failed (the scripted "
                             "JobManager has no metrics)")
    down = [line for line in lines if "unreachable" in line]
    back = [line for line in lines if line.startswith("JobManager answers again after")]
    assert len(down) == 1 and len(back) == 1, lines
    assert down[0].startswith("JobManager unreachable (") and "asking again each 1 s for up to 60 s" in down[0]
    assert 2.0 <= float(back[0].split("after ")[1].split(" s")[0]) <= 6.0


def test_patient_rest_gives_up_after_the_outage_bound(scripted):
    """A JobManager that never comes back: one line, a request each second, and after
    ``outage_s`` one error saying so (clock and sleep scripted: no waiting)."""
    flink = scripted({SRC: ["tm-1"], SINK: ["tm-1"]})
    flink.down()
    now = [0.0]
    slept = []
    lines = []
    rest = flink_apply.PatientRest(flink.url, outage_s=3, log=lines.append, clock=lambda: now[0],
                                   sleep=lambda s: (slept.append(s), now.__setitem__(0, now[0] + s)))
    with pytest.raises(Unreachable) as gone:
        rest.get("/taskmanagers")
    assert str(gone.value).endswith("(no answer for 3 s)") and "unreachable" in str(gone.value)
    assert slept == [1.0, 1.0, 1.0] and len(lines) == 1 and rest.outages == 1
    flink.up()  # the next request opens a new outage's count, and finds it up
    assert rest.get("/taskmanagers")["taskmanagers"][0]["id"] == "tm-1"
    assert len(lines) == 1  # no outage: no line


def test_the_loop_collector_says_once_per_outage_when_readings_fail_and_resume():
    """follow_grid with readings scripted to fail in two runs (3 and 1 readings): two lines each."""
    outcomes = iter([True, False, False, False, True, True, False, True])
    stop = threading.Event()

    class Scripted(GridCollector):
        def __init__(self):  # no JobManager: only follow_grid's own logic runs
            pass

        def poll(self):
            ok = next(outcomes, None)
            if ok is None or ok is True:
                if ok is None:
                    stop.set()
                return None
            raise InputError("http://jm:8081/jobs/x: Flink JobManager unreachable (Connection refused)")

    lines = []
    Scripted().follow_grid(0.02, stop, lines.append)
    assert len(lines) == 4, lines
    assert lines[0] == ("reading failed (http://jm:8081/jobs/x: Flink JobManager unreachable (Connection refused)); "
                        "reading again once per window")
    assert lines[1].startswith("reading again after ") and lines[1].endswith(" s (3 failed readings)")
    assert lines[2] == lines[0] and lines[3].endswith(" s (1 failed reading)")


class FailingApply(Apply):
    """``apply flink`` failing as it does when Flink does not honour the plan (it put the job back)."""

    def __call__(self, url, plan_file, job_id, **kwargs):
        self.calls.append({"plan": json.loads(Path(plan_file).read_text()), **kwargs})
        raise flink_apply.NotHonoured("placement not honoured: 2 subtasks off plan, e.g. Calc[2] on tm-2, planned "
                                      "tm-3; the job was put back as it was")


def test_the_loop_does_not_apply_a_failed_plan_again_until_the_cluster_changes(setting):
    graph, collector, _apply, loop, tmp_path = setting
    loop.apply_fn = failing = FailingApply()
    loop.on_cluster(lab(slow=2))
    for k in (1, 2, 3, 4, 5):
        window(loop, graph, collector, tmp_path, k, throughput=900)
    rows = read_journal(loop.journal)
    assert [r["decision"] for r in rows] == ["wait", "apply-failed", "keep", "keep", "keep"]
    assert rows[1]["fault"] == "NotHonoured" and rows[1]["why"].startswith("placement not honoured")
    assert rows[2]["why"] == ("this plan failed from this placement before (window %.0f: NotHonoured); not tried "
                              "again until the cluster file changes" % rows[1]["window"]["end"])
    assert len(failing.calls) == 1
    loop.on_cluster(lab(slow=2))  # the cluster file rewritten: the plan may be tried again
    window(loop, graph, collector, tmp_path, 6, throughput=900)
    window(loop, graph, collector, tmp_path, 7, throughput=900)
    assert [r["decision"] for r in read_journal(loop.journal)][5:] == ["wait", "apply-failed"]
    assert len(failing.calls) == 2


def test_the_loop_does_not_apply_a_plan_on_a_taskmanager_that_left(setting):
    """tm-2's link slowed, the scheduler's plan moves its subtasks to tm-3; tm-3 is not in the
    job's reading any more (it died): kept, said why, nothing applied."""
    graph, collector, apply, loop, tmp_path = setting
    reading = collector.reading
    nodes = tuple(n for n in reading.cluster.nodes if n.name != "tm-3")
    collector.reading = FlinkReading(reading.graph, reading.placement, Cluster(name="lab", nodes=nodes,
                                                                               capacity_unit=CORES), reading.report)
    loop.on_cluster(lab(slow=2))
    for k in (1, 2, 3):
        window(loop, graph, collector, tmp_path, k, throughput=900)
    rows = read_journal(loop.journal)
    assert [r["decision"] for r in rows] == ["keep"] * 3 and not apply.calls
    assert rows[0]["why"] == "the plan uses TaskManager tm-3, not registered with the JobManager (gone?)"


def test_an_unforeseen_answer_mid_apply_puts_the_job_back_with_one_line(scripted, tmp_path):
    """After the second rescale the JobManager once answers a running subtask without its
    start time (not Flink's shape): apply does not leave the job half-moved, it puts it back and
    says what it met."""
    flink = scripted({SRC: ["tm-1", "tm-2"], SINK: ["tm-1", "tm-2"]})
    reading = reading_of(flink)
    plan = plan_file(reading, {SRC: ["tm-1", "tm-2"], SINK: ["tm-2", "tm-1"]}, tmp_path / "plan.json")
    answer = flink.get

    def odd(f):
        f.redeploy()
        vertex_calls = []

        def get(parts):
            status, body = answer(parts)
            if parts[:3] == ["jobs", JOB, "vertices"] and not vertex_calls:
                vertex_calls.append(parts)
                return 200, {"subtasks": [{"subtask": 0, "status": "RUNNING"}]}  # running since when?
            return status, body

        f.get = get

    flink.faults[2] = odd
    with pytest.raises(flink_apply.ApplyError) as failed:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, min_gain=-math.inf, timeout_s=30, settle_s=0)
    assert str(failed.value).startswith("unexpected KeyError: 'start-time'; "), str(failed.value)
    assert "\n" not in str(failed.value) and str(failed.value).endswith("checked per subtask)")
    assert flink.where == {SRC: ["tm-1", "tm-2"], SINK: ["tm-1", "tm-2"]} and flink.bounds == {SRC: 2, SINK: 2}


def test_the_bounded_example_job_and_its_count(tmp_path):
    """The bounded kind's SQL (ids 1..rows from datagen's sequence, a CSV file sink at the given
    directory as a file URI, quotes percent-encoded) and the sink's count: finished part files
    only (Flink's in-progress and pending files start with a dot)."""
    from streamsched.engines.flink import local

    with pytest.raises(InputError, match="kind bounded needs a number of rows >= 1 and a sink directory"):
        local.example_sql(100, 100, 2, 10, "bounded")
    odd = tmp_path / "it's here"
    source, sink, insert = local.example_sql(100, 100, 2, 10, "bounded", rows=5, sink_dir=odd)
    assert "'fields.id.kind' = 'sequence'" in source and "'fields.id.end' = '5'" in source
    assert f"'path' = '{odd.as_uri()}'" in sink and "%27" in odd.as_uri() and "'format' = 'csv'" in sink
    assert insert.startswith("INSERT INTO sink SELECT id, ")
    odd.mkdir()
    (odd / "part-a-0-0").write_text("1,ABCDEFGH\n3,ABCDEFGH\n")
    (odd / "part-a-1-0").write_text("2,XYZ\n")
    (odd / ".part-a-1-1.inprogress.0").write_text("4,UNCOMMITTED\n")
    assert sorted(local.count_bounded(odd)) == [1, 2, 3]
