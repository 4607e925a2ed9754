"""``apply flink``'s live path without a cluster: a stateful fake JobManager (:class:`FakeFlink`)
that starts from the recorded job of tests/fixtures/flink/live-job (Flink 2.3, 2 TaskManagers x 2
slots, 9 vertices, the job holding 2 slots on TM1 and 1 on TM2) and changes the way a real Flink
2.3 with the adaptive scheduler and streamsched's plugin does (/work/shared/reference/flink-placement.md,
the conversation tests/test_flink_apply_live.py and tests/test_faults_live.py check live):

- ``PUT /jobs/:jid/resource-requirements`` whose upper bounds change a vertex's parallelism (as
  far as the job's slots allow) re-plans the job: it runs on until the next checkpoint (0.35 s),
  is RESTARTING (its subtasks CANCELED), a new execution graph is created (0.45 s: new attempt
  numbers, subtasks DEPLOYING) and every subtask is RUNNING 0.2 s later; a body that changes no
  parallelism does nothing. The job takes the slots its largest upper bound asks for from the
  free ones, TaskManager by TaskManager, and keeps them when the bound goes down.
- At each re-plan the plugin reads ``<plans>/<job>.json``: a plan fitting the job's slots is
  applied (``applied: true``), else (or without a plan) Flink's default runs (subtask i of every
  vertex in the job's i-th slot) and ``applied: false`` with the plugin's reason; either way it
  writes ``<job>.status.json`` with the JobManager's time.
- A TaskManager that leaves unregisters, takes the job's slots on it along, and the job fails
  over at once (re-planned 0.3 s later at the parallelism the slots left allow).

``apply``'s own clock and sleeps (``time`` in apply.py) are a virtual clock the fake shares, so
waits, deadlines and downtimes are exact and take no time. Every figure asserted is worked out
by hand from that timeline and the fixture's placement."""

from __future__ import annotations

import json
import math
import socket
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from json_http import JsonServer
from streamsched.engines.flink import apply as flink_apply
from streamsched.engines.flink import load_capture, read_capture
from streamsched.engines.rest_client import Unreachable
from streamsched.errors import InputError
from streamsched.model import Placement

FIXTURE = Path(__file__).parent / "fixtures" / "flink" / "live-job"
JOB = "76ca98e4065d945519b5c72b3e49e1a2"
OTHER_JOB = "0" * 31 + "1"
TM1, TM2, TM3 = "127.0.0.1:34055-b89534", "127.0.0.1:39221-9d27d0", "127.0.0.1:40000-cafe01"
GEN, GEN2 = "bc764cd8ddf7a0cff126f51c16239658", "6cdc5bb954874d922eaee11a8e7b5dd5"
GEN3, CALC = "2963852293169ba90d9d1e7d6308db5c", "3b33161f86e1c8a7b9c0ab508a63177a"
AGG, RESC = "faf3fc688fb5342b1fbb7d1574d8b37a", "9b7eaa82e307c1c50505d3f90c982b98"
BCAST, FWD = "288c9ec3656c98e4f76ce24186215411", "a3808cfdbdbaf7e6fa5130d3ad86e968"
FANIN = "683eb8c7b44f2fb9e5c406e6b83cbb8b"
#: The recorded job: vertex -> its parallelism and the TaskManager of each subtask (fixture, by hand).
P = {GEN: 2, GEN2: 2, GEN3: 3, CALC: 3, AGG: 3, RESC: 3, BCAST: 3, FWD: 2, FANIN: 2}
WHERE = {GEN: [TM1, TM1], GEN2: [TM1, TM1], GEN3: [TM1, TM1, TM2], CALC: [TM1, TM1, TM2], AGG: [TM1, TM1, TM2],
         RESC: [TM1, TM2, TM1], BCAST: [TM1, TM1, TM2], FWD: [TM1, TM1], FANIN: [TM1, TM1]}
#: The plan of most tests: Source: gen3's and fanin's subtask 1 next to their partners on TM2
#: (8.2 % fewer remote bytes); it needs 2 slots on each TaskManager.
TARGETS = {**WHERE, GEN3: [TM1, TM2, TM2], FANIN: [TM1, TM2]}
GEN3_NAME, FANIN_NAME = "Source: gen3[8] -> TableToDataStream", "fanin: Writer"
#: Seconds after a PUT: the job stops (next checkpoint), the new graph is created, subtasks run.
STOP_S, CREATE_S = 0.35, 0.45  # (a real one takes 1-2 s: shortened to poll less)
T0 = 1_795_470_600.0


class Clock:
    """``apply``'s ``time``: the virtual now; ``sleep`` advances it."""

    def __init__(self, now: float = T0):
        self.now, self.slept = now, []

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class Router:
    """One local server for the module (a server takes half a second to shut down): each test
    says what answers it (``serve``)."""

    def __init__(self):
        self.server = JsonServer(lambda parts, query: self.get(parts, query), write=lambda *args: self.put(*args))
        self.url = self.server.url

    def serve(self, get, put=lambda *args: (405, b'{"errors": ["Method not allowed"]}')) -> str:
        with self.server.lock:
            self.get, self.put = get, put
        return self.url


@pytest.fixture(scope="module")
def router():
    router = Router()
    yield router
    router.server.close()


class FakeFlink:
    """A JobManager running the recorded job (module docstring)."""

    def __init__(self, router: Router, clock: Clock, plans: Path, taskmanagers: dict[str, int] | None = None):
        self.clock, self.plans = clock, plans
        recorded = json.loads((FIXTURE / "1" / "jobs" / f"{JOB}.json").read_text())
        self.name = recorded["name"]
        self.vertices = [(v["id"], v["name"], v["slotSharingGroupId"]) for v in recorded["vertices"]]
        self.taskmanagers = dict(taskmanagers or {TM1: 2, TM2: 2})  # registered: id -> slots
        self.slots = [TM1, TM1, TM2]  # the job's slots, in the order it got them
        self.other = Counter()  # slots of another job
        self.parallelism = dict(P)
        self.upper, self.lower = dict(P), {**{vid: 1 for vid in P}, GEN: 2}
        self.state, self.created = "RUNNING", T0 - 100.0
        self.where = {vid: list(tms) for vid, tms in WHERE.items()}
        self.attempts = {vid: [0] * n for vid, n in P.items()}
        self.started = {vid: [T0 - 100.0] * n for vid, n in P.items()}
        self.canceled = False
        self.events: list[tuple[float, str]] = []
        self.skew = 0.0  # the JobManager's clock is this far behind
        self.stamp: int | None = None  # the plugin's status time_ms (None: the JobManager's clock at the re-plan)
        self.plugin = True
        self.fail_on_create = False
        self.environment = {"jvm": {"options": ["-Xmx1g", f"-Dstreamsched.flink.placement={plans}"]},
                            "classpath": ["/flink/lib/flink-csv-2.3.0.jar",
                                          "/flink/lib/streamsched-flink-placement-2.3.jar",
                                          "/flink/lib/flink-dist-2.3.0.jar"]}
        self.requirements_override = None
        self.intercept = None  # parts -> an answer of its own, or None
        self.stop_s, self.create_s = STOP_S, CREATE_S
        self.drop_puts = 0
        self.refuse_puts: tuple[int, bytes] | None = None
        self.on_put = None
        self.requests: list[str] = []
        self.puts: list[dict] = []
        self.statuses: list[dict] = []
        self.config: list[dict] = []  # /jobmanager/config
        self.unreachable: set[str] = set()  # dropped by the JobMaster, still registered
        self.leaves: list[tuple[float, str]] = []  # (when, TaskManager) the ResourceManager deregisters
        self.url = router.serve(self.answer, self.write)

    # ---------------------------------------------------------------- the job's life
    def jm_ms(self, t: float) -> int:
        return round((t - self.skew) * 1000)

    def free(self, tm: str) -> int:
        return self.taskmanagers[tm] - self.slots.count(tm) - self.other[tm]

    def advance(self) -> None:
        now = self.clock.now
        for at, tm in [left for left in self.leaves if left[0] <= now]:
            self.leaves.remove((at, tm))
            del self.taskmanagers[tm]
        while self.events and self.events[0][0] <= now:
            at, what = self.events.pop(0)
            if what == "stop":
                self.state, self.canceled = "RESTARTING", True
            else:
                self.create(at)

    def create(self, at: float) -> None:
        """A new execution graph: parallelism as the bounds and slots allow, placed by the plugin."""
        if self.fail_on_create:
            self.state = "FAILED"
            return
        self.parallelism = {vid: min(self.upper[vid], len(self.slots)) for vid in P}
        self.where = self.place(at)
        for vid, n in self.parallelism.items():
            old = self.attempts.get(vid, [])
            self.attempts[vid] = [(old[i] + 1 if i < len(old) else 0) for i in range(n)]
            self.started[vid] = [at] * n
        self.state, self.created, self.canceled = "RUNNING", at, False

    def place(self, at: float) -> dict[str, list[str]]:
        default = {vid: [self.slots[i] for i in range(n)] for vid, n in self.parallelism.items()}
        if not self.plugin:
            return default
        stamp = self.jm_ms(at) if self.stamp is None else self.stamp
        status = {"job_id": JOB, "job_name": self.name, "time_ms": stamp, "slots": len(self.slots),
                  "held": dict(Counter(self.slots))}
        plan_file = self.plans / f"{JOB}.json"
        try:
            if not plan_file.exists():
                raise ValueError(f"no plan for job {JOB} ({self.name}) in {self.plans}")
            plan = json.loads(plan_file.read_text())["vertices"]
            for vid, name, _group in self.vertices:
                tms, n = plan[vid]["taskmanagers"], self.parallelism[vid]
                if len(tms) != n:
                    raise ValueError(f"vertex {vid} ({name}) runs {n} subtasks, the plan places {len(tms)}")
                for i, tm in enumerate(tms):
                    if tm not in self.slots:
                        raise ValueError(f"vertex {vid} ({name}) subtask {i}: TaskManager {tm} holds none of "
                                         f"the job's slots")
            needed = Counter()  # one slot sharing group: per TaskManager, its most numerous vertex there
            for vid in P:
                for tm, n in Counter(plan[vid]["taskmanagers"]).items():
                    needed[tm] = max(needed[tm], n)
            for tm, n in needed.items():
                if n > self.slots.count(tm):
                    raise ValueError(f"TaskManager {tm} needs {n} slots (one subtask of a vertex per slot), the "
                                     f"job holds {self.slots.count(tm)} there")
        except ValueError as refused:
            status.update(applied=False, reason=str(refused))
            where = default
        else:
            where = {vid: list(plan[vid]["taskmanagers"]) for vid in P}
            status.update(applied=True, plan=str(plan_file), taskmanagers=where)
        self.statuses.append(status)
        (self.plans / f"{JOB}.status.json").write_text(json.dumps(status))
        return where

    def replan(self, stop: float, create: float) -> None:
        self.events = [(stop, "stop"), (create, "create")]

    def lose(self, tm: str) -> None:
        """``tm`` leaves the cluster: the job loses its slots there and fails over."""
        del self.taskmanagers[tm]
        self.slots = [s for s in self.slots if s != tm]
        now = self.clock.now
        self.replan(now, now + 0.3)
        self.advance()

    def drop(self, tm: str, deregistered_after: float) -> None:
        """``tm`` is killed: the JobMaster drops it at once (the job loses its slots there and
        fails over), the ResourceManager deregisters it ``deregistered_after`` seconds later."""
        self.unreachable.add(tm)
        self.slots = [s for s in self.slots if s != tm]
        now = self.clock.now
        self.leaves.append((now + deregistered_after, tm))
        self.replan(now, now + 0.3)
        self.advance()

    # ---------------------------------------------------------------- REST
    def subtask(self, vid: str, i: int) -> dict:
        now_ms, start = self.jm_ms(self.clock.now), self.jm_ms(self.started[vid][i])
        running = not self.canceled and now_ms >= start + 200
        status = "CANCELED" if self.canceled else "RUNNING" if running else "DEPLOYING"
        durations = {"CREATED": 50, "SCHEDULED": 50, "DEPLOYING": 60, "INITIALIZING": 40}
        if running:
            durations["RUNNING"] = now_ms - start - 200
        return {"subtask": i, "status": status, "attempt": self.attempts[vid][i], "taskmanager-id": self.where[vid][i],
                "endpoint": "localhost:1", "start-time": start, "status-duration": durations}

    def answer(self, parts, query):
        self.advance()
        self.requests.append("GET /" + "/".join(parts))
        if self.intercept and self.intercept(parts):
            return self.intercept(parts)
        if parts == ["jobmanager", "environment"]:
            body = self.environment
        elif parts == ["jobmanager", "config"]:
            body = self.config
        elif parts == ["jobs", "overview"]:
            body = {"jobs": [{"jid": JOB, "name": self.name, "state": self.state},
                             {"jid": OTHER_JOB, "name": "other", "state": "FINISHED"}]}
        elif parts == ["jobs", JOB]:
            body = {"jid": JOB, "name": self.name, "state": self.state,
                    "timestamps": {"CREATED": self.jm_ms(self.created), "RUNNING": 0},
                    "vertices": [{"id": vid, "name": name, "parallelism": self.parallelism[vid],
                                  "slotSharingGroupId": group} for vid, name, group in self.vertices]}
        elif parts[:3] == ["jobs", JOB, "vertices"] and len(parts) == 4 and parts[3] in self.parallelism:
            vid = parts[3]
            # Flink lists subtasks in order; untrusted order here: the reader sorts them
            body = {"id": vid, "parallelism": self.parallelism[vid],
                    "subtasks": [self.subtask(vid, i) for i in reversed(range(self.parallelism[vid]))]}
        elif parts == ["jobs", JOB, "resource-requirements"]:
            body = self.requirements_override or {
                vid: {"parallelism": {"lowerBound": self.lower[vid], "upperBound": self.upper[vid]}} for vid in P}
        elif parts == ["taskmanagers"]:
            body = {"taskmanagers": [{"id": tm, "slotsNumber": n, "freeSlots": self.free(tm)}
                                     for tm, n in self.taskmanagers.items()]}
        elif parts[:1] == ["taskmanagers"] and len(parts) == 2 and parts[1] in self.taskmanagers:
            tm = parts[1]
            body = {"id": tm, "allocatedSlots": [{"jobId": JOB}] * self.slots.count(tm)
                    + [{"jobId": OTHER_JOB}] * self.other[tm]}
        else:
            return 404, b'{"errors": ["Not found: /' + "/".join(parts).encode() + b'"]}'
        return 200, json.dumps(body).encode()

    def write(self, method, parts, query, body, headers):
        self.advance()
        self.requests.append(f"{method} /" + "/".join(parts))
        if method != "PUT" or parts != ["jobs", JOB, "resource-requirements"]:
            return 405, b'{"errors": ["Method not allowed"]}'
        if self.drop_puts:
            self.drop_puts -= 1
            return None, b""
        self.puts.append({"body": json.loads(body), "content-type": headers.get("Content-Type"),
                          "accept": headers.get("Accept"), "at": self.clock.now})
        if self.refuse_puts:
            return self.refuse_puts
        requirements = json.loads(body)
        self.upper = {vid: r["parallelism"]["upperBound"] for vid, r in requirements.items()}
        self.lower = {vid: r["parallelism"]["lowerBound"] for vid, r in requirements.items()}
        if self.on_put:  # what else happens meanwhile
            self.on_put(self)
        wanted = max(self.upper.values())
        for tm in [tm for tm in self.taskmanagers if tm not in self.unreachable]:
            while len(self.slots) < wanted and self.free(tm) > 0:
                self.slots.append(tm)
        if not self.events and all(min(self.upper[vid], len(self.slots)) == n for vid, n in self.parallelism.items()):
            return 200, b"{}"  # no parallelism changes: nothing happens
        if not self.events:
            now = self.clock.now
            self.replan(now + self.stop_s, now + self.create_s)
        return 200, b"{}"



@pytest.fixture(scope="module")
def reading():
    return read_capture(load_capture(FIXTURE))


@pytest.fixture()
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(flink_apply, "time", clock)
    return clock


@pytest.fixture()
def flink(router, clock, tmp_path):
    plans = tmp_path / "plans"
    plans.mkdir()
    return FakeFlink(router, clock, plans)


@pytest.fixture()
def after(monkeypatch):
    """The reading after a move: the recorded capture; each call's arguments."""
    calls = []

    def capture_live(url, job_id, window_s):
        calls.append((url, job_id, window_s))
        return load_capture(FIXTURE)

    monkeypatch.setattr(flink_apply, "capture_live", capture_live)
    return calls


def _plan(reading, targets: dict[str, list[str]], path: Path) -> Path:
    """A placement file putting every subtask where ``targets`` says."""
    names = [n.name for n in reading.cluster.nodes]
    node_of = reading.placement.node_of.copy()
    for v in reading.report["vertices"]:
        for i, tm in enumerate(targets[v["id"]]):
            node_of[v["first_task"] + i] = names.index(tm)
    Placement.build(node_of).write(path, reading.graph, reading.cluster)
    return path


def _requirements(upper: dict[str, int], lower: dict[str, int]) -> dict:
    return {vid: {"parallelism": {"lowerBound": lower[vid], "upperBound": upper[vid]}} for vid in P}


ONES = {vid: 1 for vid in P}
PUT_BACK = "the job was put back as it was (parallelism and placement, checked per subtask)"


# ------------------------------------------------------------------ the whole apply, as planned
def test_apply_moves_two_subtasks_by_two_rescales_and_verifies_them(reading, flink, clock, after, tmp_path):
    """The job holds 3 slots (TM1 2, TM2 1), the plan needs 2 on each: rescale 1 asks for every
    slot of the cluster (3 held + 1 free) on the first widest vertex (Source: gen3, 3 -> 4), the
    plan is written, rescale 2 sets 3 back, and the plugin places every subtask as planned."""
    lines = []
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    result = flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, log=lines.append)
    assert result.applied and result.reason == "applied and verified per subtask"
    assert result.moved == [{"vertex": GEN3_NAME, "subtask": 1, "from": TM1, "to": TM2},
                            {"vertex": FANIN_NAME, "subtask": 1, "from": TM1, "to": TM2}]
    assert result.relabelled == {}
    # two PUTs: Source: gen3 to 4, then every vertex back (lower bounds kept: min(lower, upper))
    lower = {**ONES, GEN: 2}
    assert [p["body"] for p in flink.puts] == [_requirements({**P, GEN3: 4}, lower), _requirements(P, lower)]
    assert {(p["content-type"], p["accept"]) for p in flink.puts} == {("application/json", "application/json")}
    assert [r["upper_bounds"] for r in result.rescales] == [{**P, GEN3: 4}, P]
    # the plan file where the plugin reads it, nothing else left there but the plugin's status
    plan_file = flink.plans / f"{JOB}.json"
    assert result.plan_file == str(plan_file)
    assert json.loads(plan_file.read_text()) == {
        "format": "streamsched.flink-placement/1", "job_id": JOB, "job_name": flink.name,
        "vertices": {vid: {"name": name, "taskmanagers": TARGETS[vid]} for vid, name, _g in flink.vertices}}
    assert sorted(p.name for p in flink.plans.iterdir()) == [f"{JOB}.json", f"{JOB}.status.json"]
    # Flink runs it: every subtask where planned, each redeployed twice, on 2 + 2 slots
    assert flink.where == TARGETS and flink.state == "RUNNING"
    assert flink.attempts == {vid: [2] * n for vid, n in P.items()}
    assert result.held_slots == {TM1: 2, TM2: 2}
    assert result.plugin_status == flink.statuses[-1] and result.plugin_status["applied"] is True
    assert [s["applied"] for s in flink.statuses] == [False, True]  # rescale 1 ran before the plan was written
    # the timeline: PUT at T0; polls each 0.1 s see the job stopped at +0.4, running at +0.7
    # (every subtask RUNNING since +0.65: start-time + CREATED..INITIALIZING = 0.45 + 0.2)
    first, second = result.rescales
    assert first["put"] == T0 and first["down"] == pytest.approx(T0 + 0.4, abs=1e-5)
    assert first["running"] == pytest.approx(T0 + 0.65, abs=2e-3)
    assert second["put"] == pytest.approx(T0 + 0.7, abs=1e-5)
    assert second["down"] == pytest.approx(T0 + 1.1, abs=1e-5)
    assert second["running"] == pytest.approx(T0 + 1.35, abs=2e-3)
    assert [r["downtime_s"] for r in result.rescales] == [pytest.approx(0.25, abs=2e-3)] * 2
    assert result.downtime_s == pytest.approx(0.5, abs=4e-3)
    assert all("view" not in r for r in result.rescales)
    # the TaskManagers: read before and after rescale 1, checked at the start of each wait
    # (0.7 s: no second check) and once after
    assert flink.requests.count("GET /taskmanagers") == 1 + 1 + 1 + 1 + 1
    assert lines == [
        f"rescale 1/2 (job holds 3 slots, plan needs 4): upper bounds {{'{GEN3_NAME}': 4}}",
        f"plan written to {plan_file}; rescale 2/2 back to the job's parallelism",
        "placement honoured; settling 10 s, then measuring for 10 s"]
    # settled, then measured again (the recorded capture): the figures after
    assert clock.slept[-1] == 10.0 and after == [(flink.url, JOB, 10.0)]
    measured = reading.report["measured_per_s"]["bytes_in_remote"]
    assert result.after["measured_remote_bytes_per_s"] == measured == result.measured_remote_bytes_per_s
    assert result.after["window_s"] == pytest.approx(9.8, abs=0.01)
    assert set(result.after) == {"window_s", "rates_from", "measured_throughput", "measured_remote_bytes_per_s",
                                 "exchanged_records_per_s"}
    assert result.after["measured_throughput"] == pytest.approx(
        sum(v["records_out_per_s"] for v in reading.report["vertices"] if not v["inputs"]))


def test_settle_and_window_are_passed_on_and_a_failed_reading_after_keeps_the_apply(reading, flink, clock,
                                                                                   monkeypatch, tmp_path):
    calls = []

    def capture_live(url, job_id, window_s):
        calls.append(window_s)
        raise InputError(f"{url}: Flink JobManager gave no complete answer within 10 s per request")

    monkeypatch.setattr(flink_apply, "capture_live", capture_live)
    lines = []
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    result = flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, settle_s=3, window_s=4, log=lines.append)
    assert result.applied and result.after is None and result.measured_remote_bytes_per_s is None
    assert result.reason == (f"applied and verified per subtask; the reading after it failed ({flink.url}: Flink "
                             f"JobManager gave no complete answer within 10 s per request)")
    assert clock.slept[-1] == 3 and calls == [4]
    assert lines[-1] == "placement honoured; settling 3 s, then measuring for 4 s"
    assert result.to_dict()["measured_remote_bytes_per_s"] is None


def test_a_jobmanager_clock_behind_by_up_to_a_second_still_counts_as_a_fresh_status(reading, flink, after, tmp_path):
    """The plugin's status is stamped by the JobManager's clock at the re-plan (PUT + 0.45 s):
    1.4 s behind, that is PUT - 0.95 s (fresh: within a second of the PUT); the subtasks' own
    times are behind too."""
    flink.skew = 1.4
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    result = flink_apply.apply(flink.url, plan, job_id=JOB, before=reading)
    # the new graph's creation (JobManager clock, PUT - 0.95 s) is earlier than the stop seen
    # here (PUT + 0.4 s): each downtime counts from it, 0.2 s to every subtask RUNNING
    assert result.applied and result.downtime_s == pytest.approx(0.4, abs=4e-3)
    assert result.rescales[0]["down"] == pytest.approx(T0 - 0.95, abs=2e-3)


def test_a_status_stamped_exactly_a_second_before_the_put_is_fresh(reading, flink, after, tmp_path):
    """The bound is inclusive: the plugin's answer to the second PUT stamped exactly 1 s before
    it (the JobManager's clock a second behind, to the millisecond) counts as its answer."""
    def second_put(fake):
        if len(fake.puts) == 2:
            fake.stamp = round((fake.puts[-1]["at"] - 1) * 1000)

    clock = flink.clock

    def sleep(seconds):  # every PUT at a whole millisecond of the virtual clock
        clock.slept.append(seconds)
        clock.now = round(clock.now + seconds, 3)

    clock.sleep = sleep
    flink.on_put = second_put
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    result = flink_apply.apply(flink.url, plan, job_id=JOB, before=reading)
    assert flink.stamp is not None and flink.stamp / 1000 == result.rescales[-1]["put"] - 1  # on the bound
    assert result.applied and result.plugin_status["time_ms"] == flink.stamp


def test_a_status_older_than_the_put_is_the_plugin_not_answering(reading, flink, after, tmp_path):
    """1.5 s behind: the status says PUT - 1.05 s, older than the PUT by more than a second:
    the plugin did not answer; the job is put back (rescaled away and back, the plugin then
    places it as it ran)."""
    flink.skew = 1.5
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    with pytest.raises(flink_apply.ApplyError) as failed:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading)
    assert type(failed.value) is flink_apply.ApplyError
    assert str(failed.value) == (
        f"the placement plugin did not answer for job {JOB} (no fresh {JOB}.status.json in {flink.plans}): is the "
        f"plugin's jar on the JobManager's class path and jobmanager.scheduler: adaptive set?; {PUT_BACK}")
    assert flink.where == WHERE and flink.parallelism == P


def test_without_the_plugins_status_the_job_is_put_back_to_its_parallelism_but_not_its_placement(reading, flink,
                                                                                                 tmp_path):
    """A JobManager without the plugin's answers (no status file; Flink's default each time:
    subtask i of every vertex in the job's i-th slot, TM1, TM1, TM2, TM2): after the failure the
    job runs at its parallelism, but rescaled: Writer's subtasks 1 and 2 (TM2, TM1 before) run on
    TM1 and TM2; said in one line."""
    flink.plugin = False
    lines = []
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    with pytest.raises(flink_apply.ApplyError) as failed:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, log=lines.append)
    message = str(failed.value)
    assert message.startswith(f"the placement plugin did not answer for job {JOB} (no fresh {JOB}.status.json")
    assert message.endswith("; the job was put back to its parallelism, but 2 subtasks run off its original "
                            f"placement (e.g. rescaled: Writer[1] on {TM1})")
    # restore: a plan of the placement it found, then away (Source: gen, the first vertex
    # narrower than the widest, 2 -> 1; its lower bound 2 -> 1) and back
    assert [p["body"] for p in flink.puts] == [
        _requirements({**P, GEN3: 4}, {**ONES, GEN: 2}), _requirements(P, {**ONES, GEN: 2}),
        _requirements({**P, GEN: 1}, ONES), _requirements(P, ONES)]
    assert json.loads((flink.plans / f"{JOB}.json").read_text())["vertices"][RESC]["taskmanagers"] == WHERE[RESC]
    assert flink.parallelism == P and flink.where[RESC] == [TM1, TM1, TM2]
    assert lines[-1] == f"apply failed ({message.split('; the job was put')[0]}); putting the job back as it was"


def test_a_plan_flink_does_not_honour_is_one_line_and_the_job_is_put_back(reading, flink, after, tmp_path):
    """Another controller writes its plan (the job's own placement) over ours once ours is
    written: the plugin honours that one, the REST check finds Source: gen3's and fanin's
    subtask 1 still on TM1."""
    def log(message):
        if message.startswith("plan written to "):
            doc = {"format": "streamsched.flink-placement/1", "job_id": JOB, "job_name": flink.name,
                   "vertices": {vid: {"taskmanagers": tms} for vid, tms in WHERE.items()}}
            (flink.plans / f"{JOB}.json").write_text(json.dumps(doc))

    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    with pytest.raises(flink_apply.NotHonoured) as wrong:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, log=log)
    assert str(wrong.value) == (f"placement not honoured: 2 subtasks off plan, e.g. {GEN3_NAME}[1] on {TM1}, "
                                f"planned {TM2}; {PUT_BACK}")
    assert flink.where == WHERE and len(flink.puts) == 2  # already where it ran: no more rescales
    assert json.loads((flink.plans / f"{JOB}.json").read_text())["vertices"][GEN3]["taskmanagers"] == WHERE[GEN3]


def test_a_plan_the_plugin_refuses_is_one_line_and_the_job_is_put_back(reading, flink, after, tmp_path):
    """Another controller's plan places two of Calc's three subtasks: the plugin refuses it and
    Flink's default runs (rescaled: Writer on TM1, TM1, TM2); apply puts the job back by two more
    rescales (Source: gen 2 -> 1: the plugin refuses the old placement at parallelism 1; back to
    2: it places the job as it ran)."""

    def log(message):
        if message.startswith("plan written to "):
            doc = json.loads((flink.plans / f"{JOB}.json").read_text())
            doc["vertices"][CALC]["taskmanagers"] = [TM1, TM2]
            (flink.plans / f"{JOB}.json").write_text(json.dumps(doc))

    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    with pytest.raises(flink_apply.NotHonoured) as refused:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, log=log)
    assert str(refused.value) == (f"the placement plugin refused the plan: vertex {CALC} (Calc[2]) runs 3 subtasks, "
                                  f"the plan places 2; {PUT_BACK}")
    assert [p["body"] for p in flink.puts][2:] == [_requirements({**P, GEN: 1}, ONES), _requirements(P, ONES)]
    assert flink.where == WHERE and flink.parallelism == P
    assert [s["applied"] for s in flink.statuses] == [False, False, False, True]
    assert flink.statuses[2]["reason"] == f"vertex {GEN} (Source: gen[1]) runs 1 subtasks, the plan places 2"


@pytest.mark.parametrize("when", ["rescale 1/2", "plan written to "])
def test_a_taskmanager_leaving_ends_the_apply_and_the_job_runs_on_the_one_left(reading, flink, after, tmp_path, when):
    """TM2 leaves (before rescale 1, or once the plan is written): :class:`TaskManagerLost` at the
    next check; the job cannot be put back where it ran. Its plan is removed and its parallelism
    set back (a PUT where the bounds differ); it runs again on TM1's 2 slots, the 3-wide
    vertices at 2, all 18 subtasks on TM1."""
    lines = []

    def log(message):
        lines.append(message)
        if message.startswith(when):
            flink.lose(TM2)

    def pin(fake):  # meanwhile someone pins Source: gen3 at its new bound (lower bound 4)
        if len(fake.puts) == 1:
            fake.lower[GEN3] = 4

    flink.on_put = pin

    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    with pytest.raises(flink_apply.TaskManagerLost) as lost:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, log=log)
    lower = (f"{GEN3_NAME} 2, Calc[2] 2, GroupAggregate[4] -> sink[5]: Writer 2, rescaled: Writer 2, "
             f"broadcast: Writer 2")
    assert str(lost.value) == (
        f"TaskManager {TM2} left the cluster during the apply (the job fails over); TaskManager {TM2} is gone, so the "
        f"job cannot be put back where it ran: it runs again at a lower parallelism ({lower}) as Flink assigned it "
        f"({TM1}: 18 subtasks)")
    assert not (flink.plans / f"{JOB}.json").exists()
    assert flink.state == "RUNNING" and flink.parallelism == {vid: 2 for vid in P}
    bodies = [p["body"] for p in flink.puts]
    # rescale 1, then the bounds set back (the lower bound 4 to 3 with them): by restore
    # (TaskManager gone before rescale 2), or by rescale 2 (restore finds them at the
    # parallelism and sends nothing)
    assert bodies == [_requirements({**P, GEN3: 4}, {**ONES, GEN: 2}), _requirements(P, {**ONES, GEN: 2, GEN3: 3})]
    assert flink.statuses[-1]["applied"] is False and flink.statuses[-1]["reason"].startswith("no plan for job")
    assert lines[-1].startswith(f"apply failed (TaskManager {TM2} left the cluster during the apply")


def _dropped_once_the_plan_is_written(router, clock, tmp_path, deregistered_after):
    """Three TaskManagers of 2 slots, heartbeat.timeout 8 s. Rescale 1 asks for all 6 slots (the
    plan needs a second one on TM2); once the plan is written TM2 is killed: the JobMaster drops
    it at once (the job keeps TM1's and TM3's 4 slots, enough for its parallelism), the
    ResourceManager deregisters it ``deregistered_after`` s later. Rescale 2 runs the job at its
    parallelism as Flink assigns it (subtask i in the job's i-th slot: TM1, TM1, TM3), the plugin
    having refused the plan (held: TM1 2, TM3 2; no slot on TM2)."""
    plans = tmp_path / "plans"
    plans.mkdir()
    flink = FakeFlink(router, clock, plans, {TM1: 2, TM2: 2, TM3: 2})
    flink.config = [{"key": "heartbeat.interval", "value": "1000"}, {"key": "heartbeat.timeout", "value": "8000"}]
    killed = []

    def log(message):
        if message.startswith("plan written to "):
            killed.append(clock.now)
            flink.drop(TM2, deregistered_after)
        elif message.startswith("apply failed"):
            killed.append(clock.now)

    return flink, killed, log


def test_a_taskmanager_the_jobmaster_drops_before_it_leaves_is_a_lost_taskmanager(reading, router, clock, after,
                                                                                 tmp_path):
    """The plugin's refusal names TM2, where the JobMaster held none of the job's slots though
    rescale 1 gave it 2: apply waits (each 0.5 s, up to heartbeat.timeout) for TM2 to leave, 5 s
    after it was killed, and ends with :class:`TaskManagerLost`; the job runs on without it at
    its parallelism, its 5 three-wide vertices' subtask 2 on TM3 and the other 18 on TM1."""
    flink, killed, log = _dropped_once_the_plan_is_written(router, clock, tmp_path, 5.0)
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    with pytest.raises(flink_apply.TaskManagerLost) as lost:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, log=log)
    assert str(lost.value) == (
        f"TaskManager {TM2} left the cluster during the apply (the job fails over); TaskManager {TM2} is gone, so the "
        f"job cannot be put back where it ran: it runs again at its parallelism as Flink assigned it "
        f"({TM1}: 18 subtasks, {TM3}: 5 subtasks)")
    # rescale 1 (no plan yet), then the failover and rescale 2 in one re-plan; the put back sends nothing
    assert [s["held"] for s in flink.statuses] == [{TM1: 2, TM2: 2, TM3: 2}, {TM1: 2, TM3: 2}]
    assert flink.statuses[-1]["reason"] == (f"vertex {GEN3} ({GEN3_NAME}) subtask 1: TaskManager {TM2} holds none of "
                                            f"the job's slots")
    assert 5.0 <= killed[1] - killed[0] <= 5.5  # seen at the first poll after it left
    assert flink.parallelism == P and not (flink.plans / f"{JOB}.json").exists()


def test_a_taskmanager_the_jobmaster_dropped_that_stays_registered_is_named_in_the_refusal(reading, router, clock,
                                                                                          after, tmp_path):
    """As above, but the ResourceManager keeps TM2 for 20 s, past heartbeat.timeout (8 s): after
    8 s apply ends with :class:`NotHonoured`, the plugin's reason and the dropped TaskManager."""
    flink, killed, log = _dropped_once_the_plan_is_written(router, clock, tmp_path, 20.0)
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    with pytest.raises(flink_apply.NotHonoured) as refused:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, log=log)
    assert str(refused.value).startswith(
        f"the placement plugin refused the plan: vertex {GEN3} ({GEN3_NAME}) subtask 1: TaskManager {TM2} holds none "
        f"of the job's slots (the JobManager dropped the job's slots on {TM2}, still registered 8 s later); ")
    assert 8.0 <= killed[1] - killed[0] <= 8.6


def test_without_heartbeat_timeout_in_the_config_the_wait_is_flinks_default_within_the_apply_timeout(
        reading, router, clock, after, tmp_path):
    """A plan needing one slot on TM2 (fanin's subtask 1 moved there), no ``heartbeat.timeout``
    in the JobManager's configuration: Flink's default (50 s) capped by ``timeout_s`` (20 s)."""
    flink, killed, log = _dropped_once_the_plan_is_written(router, clock, tmp_path, 30.0)
    flink.config = []
    plan = _plan(reading, {**WHERE, FANIN: [TM1, TM2]}, tmp_path / "plan.json")
    with pytest.raises(flink_apply.NotHonoured) as refused:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, log=log, timeout_s=20.0,
                          min_gain=-math.inf)
    assert str(refused.value).startswith(
        f"the placement plugin refused the plan: vertex {GEN3} ({GEN3_NAME}) subtask 2: TaskManager {TM2} holds "
        f"none of the job's slots (the JobManager dropped the job's slots on {TM2}, still registered 20 s later); ")
    refusal = next(s for s in flink.statuses if s["reason"].startswith(f"vertex {GEN3} ({GEN3_NAME}) subtask 2"))
    assert refusal["held"] == {TM1: 2, TM3: 1}  # rescale 2 took one of TM3's slots for the third subtasks
    assert 20.0 <= killed[1] - killed[0] <= 20.6


def test_slots_given_elsewhere_by_the_resourcemanager_fail_the_apply_and_the_job_is_put_back(reading, router, clock,
                                                                                           after, tmp_path):
    """A third TaskManager, one of its 2 slots held by another job. The plan needs a second slot
    on TM2 (1 free): rescale 1 asks for all 5 slots the job holds or could get; meanwhile the
    other job moves to TM2's free slot, so the job gets TM3's two instead. Restore: the job runs
    at Source: gen3 5, so it is redeployed back at 3, placed as it ran."""
    plans = tmp_path / "plans"
    plans.mkdir()
    flink = FakeFlink(router, clock, plans, {TM1: 2, TM2: 2, TM3: 2})
    flink.other[TM3] = 1

    def move(fake):
        if len(fake.puts) == 1:
            fake.other = Counter({TM2: 1})

    flink.on_put = move
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    with pytest.raises(flink_apply.ApplyError) as failed:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading)
    assert str(failed.value) == (
        f"job {JOB} holds {{'{TM1}': 2, '{TM2}': 1, '{TM3}': 2}} slots; the plan needs {{'{TM1}': 2, '{TM2}': 2}} "
        f"(the ResourceManager gave slots elsewhere); {PUT_BACK}")
    assert [p["body"] for p in flink.puts] == [_requirements({**P, GEN3: 5}, {**ONES, GEN: 2}),
                                               _requirements(P, {**ONES, GEN: 2})]
    assert flink.where == WHERE and flink.parallelism == P
    assert flink.attempts[GEN3] == [2, 2, 2]  # redeployed back (5 -> 3)


def test_a_rescale_flink_never_reaches_times_out_and_the_bounds_are_set_back(reading, flink, clock, after, tmp_path):
    """Another job takes TM2's free slot as rescale 1 is sent: the job cannot reach 4 and runs on
    at 3; after ``timeout_s`` (2 s: polls each 0.1 s) apply fails and sets the bound back,
    without waiting for a redeploy (the job still runs at its parallelism), nothing moved."""

    def steal(fake):
        if len(fake.puts) == 1:
            fake.other[TM2] += 1

    flink.on_put = steal
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    with pytest.raises(flink_apply.ApplyError) as failed:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, timeout_s=2)
    assert str(failed.value) == (f"job {JOB} did not run at the requested parallelism within 2 s (state RUNNING); "
                                 f"{PUT_BACK}")
    assert [p["body"]["2963852293169ba90d9d1e7d6308db5c"]["parallelism"]["upperBound"] for p in flink.puts] == [4, 3]
    assert 2.0 < flink.puts[1]["at"] - T0 <= 2.2  # the deadline: 2 s after rescale 1 began
    assert clock.slept == [0.1] * len(clock.slept) and 20 <= len(clock.slept) <= 21
    assert flink.attempts == {vid: [0] * n for vid, n in P.items()} and flink.where == WHERE
    # restore wrote a plan of the placement it found
    assert json.loads((flink.plans / f"{JOB}.json").read_text())["vertices"] == {
        vid: {"name": name, "taskmanagers": WHERE[vid]} for vid, name, _g in flink.vertices}


def test_a_put_flink_refuses_is_one_line_and_the_job_is_left_as_it_ran(reading, flink, after, tmp_path):
    flink.refuse_puts = (503, b'{"errors": ["Rescaling is temporarily disabled. See FLINK-12312\\nat org..."]}')
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    with pytest.raises(flink_apply.ApplyError) as failed:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading)
    assert type(failed.value) is flink_apply.ApplyError
    assert str(failed.value) == (f"{flink.url}/jobs/{JOB}/resource-requirements: HTTP 503: Rescaling is temporarily "
                                 f"disabled. See FLINK-12312; {PUT_BACK}")
    assert len(flink.puts) == 1 and flink.where == WHERE


def test_an_answer_not_foreseen_is_one_line_and_so_is_a_failed_put_back(reading, flink, after, tmp_path):
    flink.requirements_override = {vid: {} for vid in P}
    lines = []
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    with pytest.raises(flink_apply.ApplyError) as failed:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, log=lines.append)
    assert str(failed.value) == ("unexpected KeyError: 'parallelism'; putting the job back failed too (unexpected "
                                 "KeyError: 'parallelism'); check its parallelism and placement")
    assert lines[-1] == "apply failed (unexpected KeyError: 'parallelism'); putting the job back as it was"
    assert flink.puts == []


def test_a_put_back_failing_with_flinks_error_says_so(reading, flink, after, tmp_path):
    flink.refuse_puts = (409, b'{"errors": ["busy"]}')
    flink.intercept = lambda parts: (404, b'{"errors": ["gone"]}') if flink.puts and \
        parts[-1:] == ["resource-requirements"] else None
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    with pytest.raises(flink_apply.ApplyError) as failed:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading)
    assert str(failed.value) == (
        f"{flink.url}/jobs/{JOB}/resource-requirements: HTTP 409: busy; putting the job back failed too "
        f"({flink.url}/jobs/{JOB}/resource-requirements: HTTP 404 Not Found: gone); check its parallelism and "
        f"placement")


def test_a_put_dropped_by_the_jobmanager_is_sent_again_with_one_line_each_way(reading, flink, after, tmp_path):
    """The JobManager closes the connection on rescale 1's PUT (no answer): asked again a
    second later (real time: ``apply``'s own PatientRest), then the apply goes on."""
    flink.drop_puts = 1
    lines = []
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    result = flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, log=lines.append)
    assert result.applied and len(flink.puts) == 2 and flink.where == TARGETS
    assert lines[1] == (f"JobManager unreachable ({flink.url}: Flink JobManager unreachable (Remote end closed "
                        f"connection without response)); asking again each 1 s for up to 60 s")
    assert lines[2].startswith("JobManager answers again after 1.") and lines[2].endswith(" s")
    assert len(lines) == 5 and lines[3].startswith("plan written to ")
    assert flink.requests.count(f"PUT /jobs/{JOB}/resource-requirements") == 3


# ------------------------------------------------------------------ apply's checks before anything moves
def _untouched(flink) -> None:
    assert flink.puts == [] and not (flink.plans / f"{JOB}.json").exists()


def test_the_job_id_defaults_to_the_only_running_job(reading, flink, after, tmp_path):
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    result = flink_apply.apply(flink.url, plan, before=reading, min_gain=1.0)
    assert result.job_id == JOB and not result.applied and "below the threshold (100 %" in result.reason
    assert flink.requests[0] == "GET /jobs/overview"
    _untouched(flink)


@pytest.mark.parametrize("job_id", ["../../etc/x", JOB.upper(), JOB + "0", JOB[:-1]])
def test_a_job_id_that_is_not_a_flink_jobid_is_refused(reading, flink, tmp_path, job_id):
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    with pytest.raises(InputError) as bad:
        flink_apply.apply(flink.url, plan, job_id=job_id, before=reading)
    assert str(bad.value) == f"job id {job_id!r}: not a Flink JobID (32 hexadecimal digits)"
    assert flink.requests == []


def test_a_job_that_is_not_running_is_refused(reading, flink, tmp_path):
    flink.state = "RESTARTING"
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    with pytest.raises(InputError) as bad:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading)
    assert str(bad.value) == f"job {JOB} ({flink.name}) is RESTARTING, not RUNNING: nothing to apply to"
    _untouched(flink)


@pytest.mark.parametrize("classpath", [["/l/flink-dist-2.3.0.jar", "/l/streamsched-flink-placement.jar"],
                                       ["/l/flink-dist-2.3.0.jar"], []])
def test_without_the_plugin_first_on_the_class_path_apply_refuses(reading, flink, tmp_path, classpath):
    flink.environment["classpath"] = classpath
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    with pytest.raises(flink_apply.ApplyError) as missing:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, plan_location=str(tmp_path))
    assert str(missing.value) == (
        f"the placement plugin is not installed on {flink.url}: no streamsched-flink-placement jar before "
        f"flink-dist on the JobManager's class path (`streamsched flink-plugin path`)")
    assert missing.value.exit_code == 4
    _untouched(flink)


def test_the_plan_location_comes_from_the_jobmanager_or_the_caller(reading, flink, after, tmp_path):
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    flink.environment["jvm"]["options"] = ["-Xmx1g"]
    with pytest.raises(InputError) as none:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading)
    assert str(none.value) == ("the JobManager has no -Dstreamsched.flink.placement; give --plan-location (the "
                               "path the JobManager reads through STREAMSCHED_FLINK_PLACEMENT)")
    with pytest.raises(InputError) as not_dir:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, plan_location=str(plan))
    assert str(not_dir.value) == (f"--plan-location {plan}: not a directory here (the JobManager's plan directory "
                                  f"must be visible to this command)")
    _untouched(flink)
    # given, it is where the plan goes (the plugin here reads the same directory)
    result = flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, plan_location=str(flink.plans),
                               min_gain=1.0)
    assert not result.applied


def test_a_plan_breaking_the_slot_rule_is_refused_before_anything_moves(reading, flink, tmp_path):
    """Every Calc subtask on TM2 (2 slots): 3 slots needed there."""
    plan = _plan(reading, {**WHERE, CALC: [TM2, TM2, TM2]}, tmp_path / "plan.json")
    with pytest.raises(InputError) as broken:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, min_gain=-math.inf)
    assert str(broken.value) == (f"{plan}: TaskManager {TM2} would need 3 slots (a slot holds one subtask of a "
                                 f"vertex), it has 2 for this job (slot rule broken)")
    _untouched(flink)


def test_a_plan_needing_slots_the_cluster_does_not_have_free_is_refused(reading, flink, tmp_path):
    flink.other[TM2] = 1  # TM2's free slot is another job's
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    with pytest.raises(InputError) as short:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading)
    assert str(short.value) == (f"{plan}: TaskManager {TM2} would need 2 slots (a slot holds one subtask of a "
                                f"vertex), it has 1 for this job (slot rule broken)")
    _untouched(flink)


def test_a_reading_of_another_job_or_placement_is_taken_again(reading, flink, after, tmp_path):
    """``before`` names another job, or the job no longer runs where it saw it: apply reads the
    job itself (the recorded capture here) for ``window_s`` and says so."""
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    lines = []
    other = replace(reading, report={**reading.report, "job_id": OTHER_JOB})
    result = flink_apply.apply(flink.url, plan, job_id=JOB, before=other, window_s=7, min_gain=1.0, log=lines.append)
    assert lines == [f"reading job {JOB} ({flink.name}) for 7 s"] and after == [(flink.url, JOB, 7)]
    assert not result.applied and len(result.moved) == 2
    flink.where[RESC] = [TM1, TM1, TM2]  # moved since the reading
    result = flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, window_s=7, min_gain=1.0, log=lines.append)
    assert len(after) == 2 and len(lines) == 2
    assert result.moved[0] == {"vertex": "Source: gen3[8] -> TableToDataStream", "subtask": 1, "from": TM1, "to": TM2}
    assert {"vertex": "rescaled: Writer", "subtask": 1, "from": TM1, "to": TM2} in result.moved
    # the same job where it ran: not read again
    flink.where[RESC] = list(WHERE[RESC])
    flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, min_gain=1.0, log=lines.append)
    assert len(after) == 2 and len(lines) == 2


def test_a_job_vertex_missing_from_the_placement_is_refused(reading, flink, after, tmp_path):
    flink.vertices.append(("f" * 32, "Extra: Writer", flink.vertices[0][2]))
    P_extra = {**flink.parallelism, "f" * 32: 1}
    flink.parallelism = P_extra
    flink.where["f" * 32], flink.attempts["f" * 32], flink.started["f" * 32] = [TM1], [0], [T0 - 100]
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    with pytest.raises(InputError) as missing:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading)
    assert str(missing.value) == f"{plan}: job vertex {'f' * 32} (Extra: Writer) is not in the placement"


# ------------------------------------------------------------------ the REST steps one by one
def test_job_view_reads_each_subtask_in_order_and_when_it_started_running(flink, clock):
    """Subtasks as listed (in reverse here) sorted by index; RUNNING since start-time + the
    durations of the states before RUNNING (50 + 50 + 60 + 40 ms); not running: nan."""
    flink.started[CALC] = [T0 - 10.0, T0 - 5.0, T0 - 0.1]  # the last one still deploying
    flink.where[CALC] = [TM2, TM1, TM1]
    flink.attempts[CALC] = [3, 1, 2]
    view = flink_apply.job_view(flink_apply.FlinkRest(flink.url), JOB)
    assert view.job_id == JOB and view.name == flink.name and view.state == "RUNNING"
    assert view.where[CALC] == [TM2, TM1, TM1] and view.attempts[CALC] == [3, 1, 2]
    assert view.statuses[CALC] == ["RUNNING", "RUNNING", "DEPLOYING"]
    assert view.running_since[CALC][:2] == [pytest.approx(T0 - 9.8, abs=1e-3), pytest.approx(T0 - 4.8, abs=1e-3)]
    assert math.isnan(view.running_since[CALC][2])
    assert view.created == pytest.approx(T0 - 100.0, abs=1e-3)
    assert view.vertices[0] == {"id": GEN, "name": "Source: gen[1]", "parallelism": 2,
                                "group": "47e14d51af12f01a43c6ccdc8741ba59"}
    assert [v["id"] for v in view.vertices] == list(P)


def test_job_view_defaults_for_fields_a_jobmanager_leaves_out(router):
    def answer(parts, query):
        if parts == ["jobs", JOB]:
            return 200, json.dumps({"vertices": [{"id": "v", "name": "V", "parallelism": "2"}]}).encode()
        running = {"subtask": 0, "status": "RUNNING", "start-time": 4000,
                   "status-duration": {"RUNNING": 7, "CREATED": 500}}
        return 200, json.dumps({"subtasks": [{"subtask": 1}, running]}).encode()

    view = flink_apply.job_view(flink_apply.FlinkRest(router.serve(answer)), JOB)
    assert (view.name, view.state, view.created) == ("None", "None", 0.0)
    assert view.vertices == [{"id": "v", "name": "V", "parallelism": 2, "group": ""}]
    assert view.where == {"v": ["", ""]} and view.statuses == {"v": ["RUNNING", ""]} and view.attempts == {"v": [0, 0]}
    assert view.running_since["v"][0] == 4.5 and math.isnan(view.running_since["v"][1])


def test_held_slots_count_the_jobs_own_and_the_free_ones(flink):
    flink.other[TM2] = 1
    rest = flink_apply.FlinkRest(flink.url)
    assert flink_apply.held_slots(rest, JOB) == ({TM1: 2, TM2: 1}, {TM1: 0, TM2: 0})
    assert flink_apply.held_slots(rest, OTHER_JOB) == ({TM1: 0, TM2: 1}, {TM1: 0, TM2: 0})
    assert flink_apply.registered(rest) == {TM1, TM2}
    flink.lose(TM2)
    assert flink_apply.registered(rest) == {TM1}
    with pytest.raises(flink_apply.TaskManagerLost) as lost:
        flink_apply._lost(rest, {TM1, TM2, TM3})
    assert str(lost.value) == (f"TaskManager {TM2}, {TM3} left the cluster during the apply (the job fails over)")
    assert lost.value.exit_code == 4
    flink_apply._lost(rest, {TM1})
    flink_apply._lost(rest, None)
    flink_apply._lost(rest, set())


def test_held_slots_without_freeslots_counts_none_free(router):
    def answer(parts, query):
        if parts == ["taskmanagers"]:
            return 200, b'{"taskmanagers": [{"id": "a/b c"}]}'
        if parts == ["taskmanagers", "a/b c"]:  # the id quoted whole, its slash too
            return 200, b'{"allocatedSlots": [{"jobId": "j"}, {}]}'
        return 404, b'{"errors": ["Not found"]}'

    assert flink_apply.held_slots(flink_apply.FlinkRest(router.serve(answer)), "j") == ({"a/b c": 1}, {"a/b c": 0})


@pytest.mark.parametrize("options, classpath, expected", [
    (["-Dstreamsched.flink.placement=/a=b", "-Dx=1"], ["/x/streamsched-flink-placement-1.jar", "/x/flink-dist.jar"],
     ("/a=b", True)),
    (["-Dstreamsched.flink.placement=/a", "-Dstreamsched.flink.placement=/b"], ["flink-dist.jar"], ("/b", False)),
    (["-Dstreamsched.flink.placementx=/a"], ["/o/other.jar", "/x/streamsched-flink-placement.jar"], (None, True)),
    ([], ["/streamsched-flink-placement/flink-dist.jar", "/x/streamsched-flink-placement.jar"], (None, False)),
    ([], [], (None, False)),
])
def test_plugin_location_from_the_jobmanagers_options_and_class_path(router, options, classpath, expected):
    def answer(parts, query):
        assert parts == ["jobmanager", "environment"]
        return 200, json.dumps({"jvm": {"options": options}, "classpath": classpath}).encode()

    assert flink_apply.plugin_location(flink_apply.FlinkRest(router.serve(answer))) == expected
    assert flink_apply.plugin_location(flink_apply.FlinkRest(router.serve(lambda p, q: (200, b"{}")))) == (None, False)


def test_status_is_read_from_the_plan_directory_or_beside_a_plan_file(tmp_path):
    assert flink_apply._status(None, JOB) is None
    assert flink_apply._status(str(tmp_path), JOB) is None  # none yet
    (tmp_path / f"{JOB}.status.json").write_text('{"applied": true}')
    assert flink_apply._status(str(tmp_path), JOB) == {"applied": True}
    (tmp_path / "plan.json.status.json").write_text('{"applied": false}')
    assert flink_apply._status(str(tmp_path / "plan.json"), JOB) == {"applied": False}
    (tmp_path / f"{JOB}.status.json").write_text('{"applied": tr')  # being written
    assert flink_apply._status(str(tmp_path), JOB) is None


def test_the_plan_file_is_written_whole_under_the_jobs_id(tmp_path, flink):
    view = flink_apply.job_view(flink_apply.FlinkRest(flink.url), JOB)
    (tmp_path / "out").mkdir()
    path = flink_apply._write_plan(str(tmp_path / "out"), view, TARGETS)
    assert path == tmp_path / "out" / f"{JOB}.json" and [p.name for p in (tmp_path / "out").iterdir()] == [path.name]
    assert path.read_text() == json.dumps(flink_apply.plan_document(view, TARGETS), indent=1)


# ------------------------------------------------------------------ waits and rescales
def test_a_rescale_waits_for_new_attempts_and_reports_its_times(flink, clock):
    """Calc 3 -> 2: PUT at T0, stopped first seen at +0.4, running at +0.65 (its new graph created
    at +0.45); the view is the job at the new parallelism."""
    rest = flink_apply.FlinkRest(flink.url)
    out = flink_apply.rescale(rest, JOB, {**P, CALC: 2}, 5)
    assert out["upper_bounds"] == {**P, CALC: 2} and out["put"] == T0
    assert out["down"] == pytest.approx(T0 + 0.4, abs=1e-5) and out["running"] == pytest.approx(T0 + 0.65, abs=1e-3)
    assert out["downtime_s"] == pytest.approx(0.25, abs=2e-3)
    assert out["view"].vertices[3]["parallelism"] == 2 and out["view"].attempts[CALC] == [1, 1]
    assert flink.puts[0]["body"] == _requirements({**P, CALC: 2}, {**ONES, GEN: 2})
    assert clock.slept == [0.1] * 7
    assert "GET /taskmanagers" not in flink.requests  # no TaskManagers to watch


def test_a_rescale_first_seen_in_its_new_graph_counts_from_the_graphs_creation(flink, clock):
    """The stop falls between two polls (the job cancelled and rebuilt within 0.03 s): the
    downtime counts from the new graph's creation (+0.83) to every subtask RUNNING (+1.03)."""
    flink.stop_s, flink.create_s = 0.81, 0.83
    out = flink_apply.rescale(flink_apply.FlinkRest(flink.url), JOB, {**P, CALC: 2}, 5)
    assert out["down"] == pytest.approx(T0 + 0.83, abs=1e-3)
    assert out["downtime_s"] == pytest.approx(0.2, abs=2e-3)


def test_a_rescale_without_redeploy_returns_once_the_job_runs_at_the_bounds(flink, clock):
    rest = flink_apply.FlinkRest(flink.url)
    out = flink_apply.rescale(rest, JOB, P, 5, redeploy=False)
    assert clock.slept == [] and out["view"].attempts == flink.attempts
    # never seen stopped: from the graph's creation to every subtask RUNNING (0.2 s later)
    assert out["down"] == pytest.approx(T0 - 100.0, abs=1e-3) and out["downtime_s"] == pytest.approx(0.2, abs=2e-3)
    # with redeploy, the same bounds wait for new attempts (none come): the deadline
    with pytest.raises(flink_apply.ApplyError) as late:
        flink_apply.rescale(rest, JOB, P, 0.5)
    assert str(late.value) == f"job {JOB} did not run at the requested parallelism within 0.5 s (state RUNNING)"
    assert len(clock.slept) in (5, 6)


def test_a_rescale_watches_the_taskmanagers_each_second(flink, clock):
    rest = flink_apply.FlinkRest(flink.url)
    flink.stop_s, flink.create_s = 0.75, 1.05  # running at +1.25, seen at +1.3
    flink_apply.rescale(rest, JOB, {**P, CALC: 2}, 5, taskmanagers={TM1, TM2})
    assert flink.requests.count("GET /taskmanagers") == 2  # at +0 and at +1.0 of the 1.3 s wait
    flink.requests.clear()
    flink.taskmanagers[TM3] = 2
    with pytest.raises(flink_apply.TaskManagerLost):
        flink_apply.rescale(rest, JOB, P, 5, taskmanagers={TM1, "gone"})


def test_a_job_failing_while_re_planned_ends_the_wait(flink, clock):
    flink.fail_on_create = True
    with pytest.raises(flink_apply.ApplyError) as failed:
        flink_apply.rescale(flink_apply.FlinkRest(flink.url), JOB, {**P, CALC: 2}, 5)
    assert str(failed.value) == f"job {JOB} went FAILED while re-planning"
    with pytest.raises(flink_apply.ApplyError) as failed:
        flink_apply._wait_running(flink_apply.FlinkRest(flink.url), JOB, P, 5)
    assert str(failed.value) == f"job {JOB} went FAILED"


@pytest.mark.parametrize("state", ["CANCELED", "FINISHED"])
def test_a_job_ended_ends_the_waits(flink, clock, state):
    flink.state = state
    rest = flink_apply.FlinkRest(flink.url)
    with pytest.raises(flink_apply.ApplyError, match=f"went {state} while re-planning"):
        flink_apply._wait(rest, JOB, flink_apply.job_view(rest, JOB), P, 5)
    with pytest.raises(flink_apply.ApplyError, match=f"went {state}$"):
        flink_apply._wait_running(rest, JOB, P, 5)


def test_wait_running_polls_each_half_second_until_every_subtask_runs_within_the_parallelism(flink, clock):
    rest = flink_apply.FlinkRest(flink.url)
    flink.replan(T0, T0 + 0.3)  # failing over: running at +0.5
    view = flink_apply._wait_running(rest, JOB, P, 5)
    assert clock.slept == [0.5] and view.state == "RUNNING" and flink.attempts[GEN] == [1, 1]
    # above the parallelism asked for: waits, then says so
    with pytest.raises(flink_apply.ApplyError) as late:
        flink_apply._wait_running(rest, JOB, {**P, CALC: 2}, 2)
    assert str(late.value) == f"job {JOB} did not run again within 2 s (state RUNNING)"
    assert clock.slept[1:] == [0.5] * 5  # polls at +0, 0.5, ..., 2.5 (the first past the deadline)
    flink.state = "RESTARTING"
    with pytest.raises(flink_apply.ApplyError, match=r"within 1\.5 s \(state RESTARTING\)"):
        flink_apply._wait_running(rest, JOB, P, 1.5)


# ------------------------------------------------------------------ restore on its own
def test_restore_of_a_job_that_runs_as_it_did_writes_its_plan_and_sends_nothing(flink, clock):
    rest = flink_apply.FlinkRest(flink.url)
    original = flink_apply.job_view(rest, JOB)
    assert flink_apply.restore(rest, original, str(flink.plans), 5) == PUT_BACK
    assert flink.puts == [] and clock.slept == []
    assert json.loads((flink.plans / f"{JOB}.json").read_text())["vertices"][RESC]["taskmanagers"] == WHERE[RESC]


def test_restore_at_other_bounds_redeploys_only_where_the_job_runs_elsewhere(flink, clock):
    rest = flink_apply.FlinkRest(flink.url)
    original = flink_apply.job_view(rest, JOB)
    flink.upper[CALC] = 5  # a bound left away from the parallelism; the job still runs at it
    assert flink_apply.restore(rest, original, str(flink.plans), 5) == PUT_BACK
    assert [p["body"] for p in flink.puts] == [_requirements(P, {**ONES, GEN: 2})] and clock.slept == []


def test_restore_that_fails_says_so(flink, clock):
    rest = flink_apply.FlinkRest(flink.url)
    original = flink_apply.job_view(rest, JOB)
    flink.state = "FAILED"
    assert flink_apply.restore(rest, original, str(flink.plans), 5) == (
        f"putting the job back failed too (job {JOB} went FAILED); check its parallelism and placement")


# ------------------------------------------------------------------ send and PatientRest
def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_send_puts_json_and_reads_flinks_answer(router):
    seen = []

    def write(method, parts, query, body, headers):
        seen.append((method, parts, query, body, headers.get("Content-Type"), headers.get("Accept"), headers["path"]))
        return {"a": (200, b'{"ok": 1}'), "b": (202, b"  \n"), "c": (400, b'{"errors": ["bad bound\\nstack"]}'),
                "d": (500, b"not json"), "e": (409, b'{"errors": []}'),
                "f": (404, b'{"errors": ["' + b"x" * 300 + b'"]}'),
                "g": (400, b"[1]")}[parts[-1]]

    url = router.serve(lambda parts, query: (404, b""), write)
    rest = flink_apply.FlinkRest(url)
    assert flink_apply.send(rest, "PUT", "/jobs/a", {"k": [1]}) == {"ok": 1}
    assert seen[-1] == ("PUT", ["jobs", "a"], "", b'{"k": [1]}', "application/json", "application/json", "/jobs/a")
    assert flink_apply.send(rest, "POST", "jobs/b") is None
    assert seen[-1][0] == "POST" and seen[-1][3] == b"" and seen[-1][6] == "/jobs/b"
    assert flink_apply.send(rest, "PATCH", "/jobs/a?mode=cancel", {}) == {"ok": 1}
    assert seen[-1][:4] == ("PATCH", ["jobs", "a"], "mode=cancel", b"{}")
    for name, detail in [("c", "HTTP 400: bad bound"), ("d", "HTTP 500: Internal Server Error"),
                         ("e", "HTTP 409: Conflict"), ("f", "HTTP 404: " + "x" * 200), ("g", "HTTP 400: Bad Request")]:
        with pytest.raises(InputError) as failed:
            flink_apply.send(flink_apply.PatientRest(url), "PUT", f"/jobs/{name}", {})
        assert str(failed.value) == f"{url}/jobs/{name}: {detail}"
        assert not isinstance(failed.value, Unreachable)
    url = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(Unreachable) as down:
        flink_apply.send(flink_apply.FlinkRest(url), "PUT", "/x", {})
    assert str(down.value).startswith(f"{url}: Flink JobManager unreachable (") and "refused" in str(down.value)


class _Ticks:
    def __init__(self):
        self.now, self.slept = 100.0, []

    def clock(self):
        return self.now

    def sleep(self, s):
        self.slept.append(s)
        self.now += s


def test_patient_rest_rides_out_an_outage_with_one_line_each_way():
    ticks, lines = _Ticks(), []
    rest = flink_apply.PatientRest("http://jm:8081", outage_s=5, log=lines.append, pause_s=2.0, clock=ticks.clock,
                                   sleep=ticks.sleep)
    answers = iter([Unreachable("down a"), Unreachable("down b"), {"ok": 1}, Unreachable("down c"), {"ok": 2}])

    def request():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert rest.call(request) == {"ok": 1}
    assert lines == ["JobManager unreachable (down a); asking again each 2 s for up to 5 s",
                     "JobManager answers again after 4.0 s"]
    assert ticks.slept == [2.0, 2.0] and rest.outages == 1 and rest.down_since is None
    assert rest.call(request) == {"ok": 2}
    assert lines[2:] == ["JobManager unreachable (down c); asking again each 2 s for up to 5 s",
                         "JobManager answers again after 2.0 s"]
    assert rest.outages == 2
    assert rest.call(lambda: 7) == 7 and len(lines) == 4  # no outage: no line


def test_patient_rest_gives_up_after_outage_s_and_fails_at_once_on_an_http_error():
    ticks, lines = _Ticks(), []
    rest = flink_apply.PatientRest("http://jm:8081", outage_s=3, log=lines.append, pause_s=1.0, clock=ticks.clock,
                                   sleep=ticks.sleep)

    def down():
        raise Unreachable("http://jm:8081: Flink JobManager unreachable (refused)")

    with pytest.raises(Unreachable) as gone:
        rest.call(down)
    assert str(gone.value) == "http://jm:8081: Flink JobManager unreachable (refused) (no answer for 3 s)"
    assert ticks.slept == [1.0, 1.0, 1.0] and rest.down_since is None and len(lines) == 1
    # the next outage starts afresh
    with pytest.raises(Unreachable):
        rest.call(down)
    assert rest.outages == 2 and len(lines) == 2 and len(ticks.slept) == 6
    calls = []

    def refused():
        calls.append(1)
        raise InputError("http://jm:8081/x: HTTP 404 Not Found")

    with pytest.raises(InputError, match="HTTP 404"):
        rest.call(refused)
    assert calls == [1] and len(ticks.slept) == 6


def test_patient_rest_gets_through_the_same_patience(router):
    ticks, lines = _Ticks(), []
    url = f"http://127.0.0.1:{_closed_port()}"
    rest = flink_apply.PatientRest(url, outage_s=2, log=lines.append, pause_s=1.0, clock=ticks.clock, sleep=ticks.sleep)
    with pytest.raises(Unreachable) as gone:
        rest.get("/jobs/overview")
    assert str(gone.value).startswith(f"{url}/jobs/overview: Flink JobManager unreachable (")
    assert str(gone.value).endswith(" (no answer for 2 s)") and ticks.slept == [1.0, 1.0]
    served = router.serve(lambda parts, query: (200, json.dumps(parts).encode()))
    assert flink_apply.PatientRest(served).get("/jobs/overview") == ["jobs", "overview"]
    assert flink_apply.OUTAGE_S == 60.0
    defaults = flink_apply.PatientRest("http://jm:8081")
    assert (defaults.outage_s, defaults.pause_s, defaults.outages, defaults.down_since) == (60.0, 1.0, 0, None)


# ------------------------------------------------------------------ the pure steps' edges
def test_the_threshold_itself_is_enough(reading, flink, after, tmp_path):
    """A plan predicted exactly at ``min_gain`` is applied (below it is not)."""
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    left = flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, min_gain=1.0)
    gain = left.gain
    assert gain == pytest.approx(0.082, abs=1e-3) and left.applied is False
    assert left.reason == ("predicted gain in remote bytes +8.2 % is below the threshold (100 %, --min-gain); 2 "
                           "subtasks would move")
    assert flink.puts == []
    assert not flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, min_gain=math.nextafter(gain, 1)).applied
    result = flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, min_gain=gain)
    assert result.applied and result.min_gain == gain


def test_a_placement_of_another_job_or_cluster_is_refused_in_one_line(reading, tmp_path):
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    doc = json.loads(plan.read_text())
    (tmp_path / "other.json").write_text(json.dumps({**doc, "graph": "another-job"}))
    with pytest.raises(InputError) as other:
        flink_apply.read_plan(tmp_path / "other.json", reading, JOB)
    assert str(other.value) == (f"{tmp_path / 'other.json'}: a placement of graph 'another-job', but job {JOB} is "
                                f"'streamsched-live' (a plan for another job)")
    gone = {**doc, "nodes": ["tm-9", doc["nodes"][1]]}  # TM1's subtasks (node 0) on tm-9
    (tmp_path / "gone.json").write_text(json.dumps(gone))
    with pytest.raises(InputError) as missing:
        flink_apply.read_plan(tmp_path / "gone.json", reading, JOB)
    assert str(missing.value) == (f"{tmp_path / 'gone.json'}: TaskManager tm-9 is not registered with the JobManager "
                                  f"at http://127.0.0.1:50313 (gone, or a plan for another cluster); registered: "
                                  f"{TM1}, {TM2}")
    # a name listed but used by no task is left to the placement's own check (its message)
    unused = {**doc, "nodes": [*doc["nodes"], "tm-9"]}
    (tmp_path / "unused.json").write_text(json.dumps(unused))
    with pytest.raises(InputError) as listed:
        flink_apply.read_plan(tmp_path / "unused.json", reading, JOB)
    assert str(listed.value).startswith(f"{tmp_path / 'unused.json'}.nodes: cluster 'flink-streamsched-live': unknown")
    without_graph = {k: v for k, v in doc.items() if k != "graph"}
    (tmp_path / "nograph.json").write_text(json.dumps(without_graph))
    assert flink_apply.read_plan(tmp_path / "nograph.json", reading, JOB)[0].node_of.tolist() == \
        flink_apply.read_plan(plan, reading, JOB)[0].node_of.tolist()


def test_identical_nodes_differ_in_any_of_slots_cpu_memory_and_links():
    from streamsched.model import Cluster, Node

    base = Node("a", 2.0, slots=1, cores=2, task_slots=2, net_in=10.0, net_out=10.0)
    variants = [replace(base, name="b"), replace(base, name="c", slots=2), replace(base, name="d", cores=4),
                replace(base, name="e", ghz=3.0), replace(base, name="f", net_in=20.0),
                replace(base, name="g", net_out=20.0), replace(base, name="h", capacity=3.0)]
    classes = flink_apply.identical_nodes(Cluster("c", (base, *variants), capacity_unit="cores"))
    assert classes == [[0, 1], [2], [3], [4], [5], [6], [7]]


def test_no_remote_bytes_running_is_no_gain_in_remote_bytes(reading):
    """The running placement all on TM1: nothing crosses TaskManagers, so no plan can gain."""
    alone = replace(reading, placement=Placement.build(reading.placement.node_of * 0))
    basis, gain, figures = flink_apply.judge(alone, reading.placement)
    assert (basis, gain) == ("remote bytes", 0.0)
    assert figures["running_predicted_remote_bytes_per_s"] == 0.0
    assert figures["plan_predicted_remote_bytes_per_s"] > 0
    assert figures["running_predicted_throughput"] is None and figures["plan_bottleneck"] is None


def test_a_put_without_an_answer_in_time_is_unreachable(router):
    url = router.serve(lambda parts, query: (404, b""), lambda *args: (None, 1.0))
    with pytest.raises(Unreachable) as silent:
        flink_apply.send(flink_apply.FlinkRest(url, timeout=0.2), "PUT", "/jobs/x", {})
    assert str(silent.value).startswith(f"{url}: Flink JobManager unreachable (") and "timed out" in str(silent.value)


def test_the_cli_applies_with_the_note_first_and_the_result_as_json(reading, flink, after, tmp_path, capsys):
    """``streamsched apply flink --json``: the note on what a Flink user controls first, the
    apply's lines after it, then the result (the properties beside the fields)."""
    from streamsched.cli import main

    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    code = main(["apply", "flink", "--url", flink.url, "--job-id", JOB, "--placement", str(plan), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    err = " ".join(captured.err.split())  # (the console wraps long lines)
    assert err.startswith("Flink placement through streamsched: you choose the TaskManager of every subtask (plugin "
                          "+ adaptive scheduler, applied by two rescales from the last checkpoint, JobID and state "
                          "kept); Flink still decides which TaskManagers give the job its slots")
    assert (f"replaces the plugin on restarts. reading job {JOB} (streamsched-live) for 10 s rescale 1/2 (job holds "
            f"3 slots, plan needs 4)") in err
    out = json.loads(captured.out)
    assert out["applied"] is True and len(out["moved"]) == 2 and out["held_slots"] == {TM1: 2, TM2: 2}
    assert out["before_remote_bytes_per_s"] == reading.report["measured_per_s"]["bytes_in_remote"]
    assert out["measured_remote_bytes_per_s"] == out["after"]["measured_remote_bytes_per_s"]
    assert out["predicted_remote_bytes_per_s"] == out["reading"]["plan_predicted_remote_bytes_per_s"]
    assert out["predicted_remote_bytes_per_s"] < out["reading"]["running_predicted_remote_bytes_per_s"]
    assert [r["upper_bounds"][GEN3] for r in out["rescales"]] == [4, 3]


def test_restore_where_taskmanagers_are_gone_says_where_the_job_runs(flink, clock):
    """The job ran partly on two TaskManagers that are gone (names of another cluster here) and
    now runs at its parallelism on TM1 and TM2: its plan is removed, nothing sent, and the
    message names both and counts the subtasks per TaskManager (18 on TM1, 5 on TM2)."""
    rest = flink_apply.FlinkRest(flink.url)
    original = flink_apply.job_view(rest, JOB)
    original.where[CALC] = ["tm-b", TM1, "tm-a"]
    (flink.plans / f"{JOB}.json").write_text("{}")
    assert flink_apply.restore(rest, original, str(flink.plans), 5) == (
        f"TaskManager tm-a, tm-b is gone, so the job cannot be put back where it ran: it runs again at its "
        f"parallelism as Flink assigned it ({TM1}: 18 subtasks, {TM2}: 5 subtasks)")
    assert flink.puts == [] and not (flink.plans / f"{JOB}.json").exists()


def test_with_machines_takes_each_taskmanagers_cpu_and_links_from_the_cluster_file(reading):
    from streamsched.model import Cluster, Node

    given = Cluster("lab", (Node(TM2, 8.0, cores=8, net_in=1e6, net_out=2e6), Node(TM1, 4.0, cores=4, net_in=3e6,
                                                                                    net_out=4e6),
                            Node("spare", 1.0)), capacity_unit="cores")
    nodes = flink_apply.with_machines(reading, given, "lab.yaml").cluster.nodes
    assert [(n.name, n.capacity, n.cores, n.net_in, n.net_out) for n in nodes] == [
        (TM1, 4.0, 4, 3e6, 4e6), (TM2, 8.0, 8, 1e6, 2e6)]
    assert [n.task_slots for n in nodes] == [n.task_slots for n in reading.cluster.nodes]
    with pytest.raises(InputError) as missing:
        flink_apply.with_machines(reading, Cluster("x", (Node(TM2, 1.0),)), "lab.yaml")
    assert str(missing.value) == (f"lab.yaml: no node '{TM1}'; it must describe every TaskManager of the job's "
                                  f"cluster ({TM1}, {TM2})")


def test_slots_needed_per_slot_sharing_group_of_the_live_job(reading, flink, tmp_path):
    """forwarded: Writer in a slot sharing group of its own: its 2 subtasks on TM1 need 2 slots
    besides the 2 the default group needs there (4 > 2)."""
    flink.vertices = [(vid, name, "other" if vid == FWD else group) for vid, name, group in flink.vertices]
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    with pytest.raises(InputError) as broken:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading)
    assert str(broken.value) == (f"{plan}: TaskManager {TM1} would need 4 slots (a slot holds one subtask of a "
                                 f"vertex), it has 2 for this job (slot rule broken)")


def test_restore_says_which_subtask_runs_off_the_original_placement_first(flink, clock):
    """Without the plugin Flink places subtask i of every vertex in the job's i-th slot (TM1, TM1,
    TM2, TM2): a job that ran Source: gen's subtask 0 on TM2 (and rescaled: Writer's 1 and 2 on
    TM2, TM1) is put back to its parallelism by two rescales, with 3 subtasks off, the first of
    them named."""
    flink.plugin = False
    rest = flink_apply.FlinkRest(flink.url)
    original = flink_apply.job_view(rest, JOB)
    original.where[GEN] = [TM2, TM1]
    flink.slots.append(TM2)  # the job holds TM2's free slot too (no free slot: Source: gen 2 -> 1 and back)
    assert flink_apply.restore(rest, original, str(flink.plans), 5) == (
        f"the job was put back to its parallelism, but 3 subtasks run off its original placement (e.g. "
        f"Source: gen[1][0] on {TM1})")
    assert [p["body"]["bc764cd8ddf7a0cff126f51c16239658"]["parallelism"]["upperBound"] for p in flink.puts] == [1, 2]


def _remote_bytes(reading, node_of) -> float:
    """Bytes/s between TaskManagers, edge by edge (independent of streamsched.metrics)."""
    g = reading.graph
    return sum(float(b) for s, d, b in zip(g.src, g.dst, g.bytes_rate) if node_of[s] != node_of[d])


def test_judge_gives_every_figure_of_the_one_reading(reading, tmp_path):
    plan, made_for = flink_apply.read_plan(_plan(reading, TARGETS, tmp_path / "plan.json"), reading, JOB)
    assert made_for is None  # made for the reading's cluster
    basis, gain, figures = flink_apply.judge(reading, plan)
    running, planned = _remote_bytes(reading, reading.placement.node_of), _remote_bytes(reading, plan.node_of)
    sources = sum(v["records_out_per_s"] for v in reading.report["vertices"] if not v["inputs"])
    assert basis == "remote bytes" and gain == pytest.approx((running - planned) / running)
    assert figures == {
        "job_id": JOB, "window_s": pytest.approx(9.8, abs=0.01), "rates_from": "counters",
        "measured_throughput": pytest.approx(sources), "exchanged_records_per_s": pytest.approx(9695.517, abs=1e-3),
        "measured_remote_bytes_per_s": reading.report["measured_per_s"]["bytes_in_remote"],
        "running_predicted_remote_bytes_per_s": pytest.approx(running),
        "plan_predicted_remote_bytes_per_s": pytest.approx(planned),
        "running_predicted_throughput": None, "plan_predicted_throughput": None,
        "running_bottleneck": None, "plan_bottleneck": None}
    assert flink_apply.measured_source_rate(reading) == pytest.approx(sources) and sources > 4000
    # with link capacities: in predicted throughput, both bottlenecks named
    from streamsched.model import Cluster

    machines = Cluster("lab", tuple(replace(n, capacity=64.0, cores=64, net_in=1e5, net_out=1e5)
                                    for n in reading.cluster.nodes), capacity_unit="cores")
    lab = flink_apply.with_machines(reading, machines, "lab")
    basis, gain, figures = flink_apply.judge(lab, plan)
    assert basis == "throughput"
    assert gain == pytest.approx(figures["plan_predicted_throughput"] / figures["running_predicted_throughput"] - 1)
    assert figures["running_bottleneck"].startswith("link ") and figures["plan_bottleneck"].startswith("link ")
    # everything on TM1: no link binds, 64 cores do: a real gain
    basis, gain, figures = flink_apply.judge(lab, Placement.build(reading.placement.node_of * 0))
    assert gain > 1 and gain == pytest.approx(
        figures["plan_predicted_throughput"] / figures["running_predicted_throughput"] - 1)
    assert figures["running_predicted_remote_bytes_per_s"] == pytest.approx(running)


def test_held_slots_of_a_cluster_without_taskmanagers_or_slots(router):
    answers = {("taskmanagers",): b"{}"}
    rest = flink_apply.FlinkRest(router.serve(lambda parts, query: (200, answers[tuple(parts)])))
    assert flink_apply.held_slots(rest, "j") == ({}, {})
    answers[("taskmanagers",)] = b'{"taskmanagers": [{"id": "t", "freeSlots": 2}]}'
    answers[("taskmanagers", "t")] = b'{"id": "t"}'  # no slot allocated
    assert flink_apply.held_slots(rest, "j") == ({"t": 0}, {"t": 2})


def test_slots_needed_puts_vertices_without_a_group_in_the_default_group():
    plan = {"a": ["x", "x"], "b": ["x"], "c": ["y"]}
    assert flink_apply.slots_needed(plan, {"a": ""}) == {"x": 2, "y": 1}  # b and c: default group, with a
    assert flink_apply.slots_needed(plan, {"a": "", "b": "g"}) == {"x": 3, "y": 1}


def test_the_first_rescale_for_taskmanagers_the_job_knows_nothing_of():
    # the plan names "c", where the job holds nothing and the cluster lists nothing free
    with pytest.raises(flink_apply.ApplyError) as short:
        flink_apply.slots_to_hold({"v": 2}, {"a": 2}, {"a": 0}, {"a": 1, "c": 1}, ["v"])
    assert str(short.value) == "the plan needs 1 slots on TaskManager c; the job holds 0 there and 0 are free"
    with pytest.raises(flink_apply.ApplyError) as short:
        flink_apply.slots_to_hold({"v": 2}, {"a": 2}, {"a": 1}, {"a": 4}, ["v"])
    assert str(short.value) == "the plan needs 4 slots on TaskManager a; the job holds 2 there and 1 are free"
    # "c" free but not the job's: every slot (2 + 1)
    assert flink_apply.slots_to_hold({"v": 2}, {"a": 2}, {"c": 1}, {"a": 1, "c": 1}, ["v"]) == {"v": 3}
    # all vertices at 2, no free slot: one less; a vertex at 1 is never lowered to 0
    assert flink_apply.slots_to_hold({"u": 2, "v": 2}, {"t": 2}, {"t": 0}, {"t": 2}, ["u", "v"]) == {"u": 1}
    assert flink_apply.slots_to_hold({"u": 1, "v": 3}, {"t": 3}, {"t": 0}, {"t": 3}, ["u", "v"]) == {"v": 2}
    with pytest.raises(flink_apply.ApplyError) as stuck:
        flink_apply.slots_to_hold({"u": 1, "v": 1}, {"t": 1}, {"t": 0}, {"t": 1}, ["u", "v"])
    assert str(stuck.value) == ("every vertex has parallelism 1 and the cluster no free slot; no rescale can make "
                                "Flink re-plan the job")


def test_registered_of_a_jobmanager_listing_no_taskmanagers(router):
    assert flink_apply.registered(flink_apply.FlinkRest(router.serve(lambda parts, query: (200, b"{}")))) == set()


def test_wait_by_default_wants_new_attempts_and_checks_the_taskmanagers_a_second_apart(flink, clock):
    """Polled each 0.5 s: the same job without a re-plan never shows new attempts (a poll at
    the deadline, +1.0, still waits; the next, +1.5, fails); re-planned by a PUT it runs from
    +0.65 and is seen at +1.0, the TaskManagers checked at +0 and again at +1.0."""
    rest = flink_apply.FlinkRest(flink.url)
    before = flink_apply.job_view(rest, JOB)
    with pytest.raises(flink_apply.ApplyError, match="within 1 s"):
        flink_apply._wait(rest, JOB, before, P, 1.0, poll_s=0.5)
    assert clock.now - T0 == 1.5
    flink_apply.send(rest, "PUT", f"/jobs/{JOB}/resource-requirements", _requirements({**P, CALC: 2}, ONES))
    view, down = flink_apply._wait(rest, JOB, before, {**P, CALC: 2}, 5, poll_s=0.5, taskmanagers={TM1})
    assert view.attempts[CALC] == [1, 1] and clock.now - T0 == 2.5  # 1.5 of the first wait, 1.0 of this one
    assert flink.requests.count("GET /taskmanagers") == 2


@pytest.mark.parametrize("index", [2, "0", -1])
def test_a_node_index_out_of_range_is_left_to_the_placements_own_check(reading, tmp_path, index):
    doc = json.loads(_plan(reading, TARGETS, tmp_path / "plan.json").read_text())
    doc["node"][3] = index
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(InputError) as bad:
        flink_apply.read_plan(tmp_path / "bad.json", reading, JOB)
    assert str(bad.value).startswith(f"{tmp_path / 'bad.json'}") and "not registered" not in str(bad.value)


def test_job_view_of_a_vertex_without_subtasks_or_state_durations(router):
    def answer(parts, query):
        if parts == ["jobs", JOB]:
            return 200, json.dumps({"vertices": [{"id": "v", "name": "V", "parallelism": 1},
                                                 {"id": "w", "name": "W", "parallelism": 1}]}).encode()
        if parts[-1] == "v":
            return 200, b"{}"
        return 200, json.dumps({"subtasks": [{"subtask": 0, "status": "RUNNING", "start-time": 4000}]}).encode()

    view = flink_apply.job_view(flink_apply.FlinkRest(router.serve(answer)), JOB)
    assert view.where == {"v": [], "w": [""]} and view.statuses == {"v": [], "w": ["RUNNING"]}
    assert view.running_since == {"v": [], "w": [4.0]}


def test_apply_passes_its_deadline_to_each_rescale(reading, flink, after, tmp_path, monkeypatch):
    """``timeout_s`` (default 180 s) bounds each rescale's wait."""
    seen = []
    real = flink_apply.rescale

    def rescale(rest, job_id, upper, timeout_s, redeploy=True, taskmanagers=None):
        seen.append(timeout_s)
        return real(rest, job_id, upper, timeout_s, redeploy=redeploy, taskmanagers=taskmanagers)

    monkeypatch.setattr(flink_apply, "rescale", rescale)
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    assert flink_apply.apply(flink.url, plan, job_id=JOB, before=reading).applied
    assert seen == [180.0, 180.0]


def test_the_running_placement_itself_moves_nothing(reading, flink, tmp_path):
    plan = _plan(reading, WHERE, tmp_path / "plan.json")
    result = flink_apply.apply(flink.url, plan, job_id=JOB, before=reading)
    assert result.applied is False and result.relabelled == {} and result.moved == []
    assert result.reason == "the plan is the running placement: no subtask would move"
    _untouched(flink)


def test_apply_errors_name_the_cluster_file_and_the_job(reading, flink, tmp_path):
    from streamsched.model import Cluster, Node

    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    with pytest.raises(InputError) as missing:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, machines=Cluster("lab", (Node(TM2, 1.0),)))
    assert str(missing.value).startswith(f"cluster 'lab': no node '{TM1}'; it must describe every TaskManager")
    doc = json.loads(plan.read_text())
    (tmp_path / "foreign.json").write_text(json.dumps({**doc, "graph": "another-job"}))
    with pytest.raises(InputError) as foreign:
        flink_apply.apply(flink.url, tmp_path / "foreign.json", job_id=JOB, before=reading)
    assert f"but job {JOB} is 'streamsched-live' (a plan for another job)" in str(foreign.value)
    _untouched(flink)


def test_a_taskmanager_the_jobmanager_no_longer_lists_has_no_slots_for_the_plan(reading, flink, tmp_path):
    """TM2 gone from ``/taskmanagers`` while the job's pages still show subtasks there (before
    it fails over): the plan's 2 slots there are not to be had."""
    del flink.taskmanagers[TM2]
    plan = _plan(reading, TARGETS, tmp_path / "plan.json")
    with pytest.raises(InputError) as short:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading)
    assert str(short.value) == (f"{plan}: TaskManager {TM2} would need 2 slots (a slot holds one subtask of a "
                                f"vertex), it has 0 for this job (slot rule broken)")
    _untouched(flink)


def test_read_plan_of_a_document_that_is_not_a_placement_or_of_a_reading_without_url(reading, tmp_path):
    for text in ("[]", "{}", '{"nodes": "x", "node": [0]}'):
        (tmp_path / "odd.json").write_text(text)
        with pytest.raises(InputError):
            flink_apply.read_plan(tmp_path / "odd.json", reading, JOB)
    doc = json.loads(_plan(reading, TARGETS, tmp_path / "plan.json").read_text())
    (tmp_path / "gone.json").write_text(json.dumps({**doc, "nodes": ["tm-9", TM2]}))
    unnamed = replace(reading, report={k: v for k, v in reading.report.items() if k != "url"})
    with pytest.raises(InputError) as gone:
        flink_apply.read_plan(tmp_path / "gone.json", unnamed, JOB)
    assert "TaskManager tm-9 is not registered with the JobManager at the cluster (gone, or" in str(gone.value)


def test_a_reading_without_sources_has_no_measured_throughput(reading):
    inner = [v for v in reading.report["vertices"] if v["inputs"]]
    assert flink_apply.measured_source_rate(replace(reading, report={**reading.report, "vertices": inner})) is None


def test_one_slot_on_a_taskmanager_the_jobmanager_no_longer_lists_is_not_to_be_had(reading, flink, tmp_path):
    del flink.taskmanagers[TM2]
    plan = _plan(reading, {**WHERE, RESC: [TM1, TM1, TM2]}, tmp_path / "plan.json")  # 1 slot needed on TM2
    with pytest.raises(InputError) as short:
        flink_apply.apply(flink.url, plan, job_id=JOB, before=reading, min_gain=-math.inf)
    assert str(short.value) == (f"{plan}: TaskManager {TM2} would need 1 slots (a slot holds one subtask of a "
                                f"vertex), it has 0 for this job (slot rule broken)")
    _untouched(flink)


@pytest.mark.parametrize("running, planned, gain", [
    (0.0, 5.0, 0.0),  # nothing predicted for the running placement: no ratio, no gain claimed
    (math.inf, 5.0, 0.0),  # nothing binds the running placement: nothing to gain
    (0.5, 1.0, 1.0), (1.0, 3.0, 2.0), (4.0, 2.0, -0.5), (4.0, math.inf, math.inf),
])
def test_judges_gain_in_throughput_is_the_ratio_of_the_predictions_where_it_has_one(reading, monkeypatch,
                                                                                   running, planned, gain):
    """The gain in throughput is ``plan / running - 1``, 0 where the running placement's prediction
    is 0 or infinite (either way no ratio says what the plan gains); the predictions here are
    given, the placements told apart by their node of task 0."""
    from types import SimpleNamespace

    from streamsched.model import Cluster

    machines = Cluster("lab", tuple(replace(n, capacity=64.0, cores=64, net_in=1e5, net_out=1e5)
                                    for n in reading.cluster.nodes), capacity_unit="cores")
    lab = flink_apply.with_machines(reading, machines, "lab")
    plan = Placement.build([1 if k == 0 else 0 for k in reading.placement.node_of.tolist()])
    predictions = {int(reading.placement.node_of[0]): running, int(plan.node_of[0]): planned}
    monkeypatch.setattr(flink_apply, "predict_throughput", lambda graph, cluster, node_of: SimpleNamespace(
        throughput=predictions[int(node_of[0])], bottleneck="b"))
    basis, got, figures = flink_apply.judge(lab, plan)
    assert basis == "throughput" and got == gain
    assert (figures["running_predicted_throughput"], figures["plan_predicted_throughput"]) == (running, planned)


@pytest.mark.parametrize("running, planned, gain", [(0.0, 3.0, 0.0), (0.5, 0.25, 0.5), (1.0, 0.0, 1.0), (8.0, 10.0, -0.25)])
def test_judges_gain_in_remote_bytes_is_the_share_saved_wherever_bytes_cross(reading, monkeypatch, running, planned,
                                                                               gain):
    """Without link capacities the gain is the share of remote bytes/s the plan saves, also
    below 1 byte/s; 0 where nothing crosses now (given predictions, told apart as above)."""
    plan = Placement.build([1 if k == 0 else 0 for k in reading.placement.node_of.tolist()])
    bytes_of = {int(reading.placement.node_of[0]): running, int(plan.node_of[0]): planned}
    monkeypatch.setattr(flink_apply.metrics, "inter_node_traffic",
                        lambda graph, placement, weight: bytes_of[int(placement.node_of[0])])
    basis, got, figures = flink_apply.judge(reading, plan)
    assert basis == "remote bytes" and got == gain
    assert (figures["running_predicted_remote_bytes_per_s"], figures["plan_predicted_remote_bytes_per_s"]) == \
        (running, planned)
