"""``streamsched apply flink``: make a running Flink 2.3 job run where a placement says, through
the placement plugin (:mod:`streamsched.engines.flink.plugin`) and the adaptive scheduler's
resource requirements (docs/engines.md, "Applying a placement to a running Flink job").

1. The placement (one TaskManager per subtask, over the graph ``read-engine flink`` reads) is
   checked against the live job: its graph is this job (name, vertices, parallelism), every
   TaskManager it names is registered, and no TaskManager needs more slots than it has (a slot
   holds at most one subtask of a vertex, so per slot sharing group a TaskManager needs as many
   slots as its most numerous vertex there).
2. The plan is taken relative to the running placement, both predicted from one reading of the
   job: identical TaskManagers (same slots, CPU, memory, link capacities) are relabelled so
   that the fewest subtasks move (:func:`relabel`), and the job is left alone when none would
   move or the predicted gain is below a threshold (:func:`judge`, :data:`MIN_GAIN`).
3. The plan is written where the plugin reads it (``<dir>/<job id>.json``, atomically).
4. The job is made to take it: the plugin is asked only when the adaptive scheduler re-plans,
   and the scheduler re-plans a running job when a vertex's parallelism upper bound changes
   (``PUT /jobs/:jid/resource-requirements``; an identical body does nothing). So two rescales:
   one away from the job's parallelism and one back. The first also makes the job hold the
   slots the plan needs: where it holds too few on a TaskManager it asks for every slot of the
   cluster (:func:`slots_to_hold`; the unused ones go back after ``slot.idle.timeout``); else
   a vertex below the largest parallelism is lowered by one (the job's slot count stays). Each
   rescale cancels the job and restores it from its last checkpoint, keeping its JobID and
   state. This path needs nothing but REST; stop-with-savepoint and resubmission needs the
   job's program and gives a new JobID (benchmarks/flink_placement.py measures both).
5. It waits until every subtask runs, checks each subtask's TaskManager through REST, reads the
   plugin's decision (``<job id>.status.json``), and measures the job again after a settle
   window (:func:`streamsched.engines.flink.capture_live`). A step that fails puts the job back
   at its parallelism and placement (:func:`restore`), and the error says how that went.

Faults: a JobManager that stops answering is asked again each second for up to ``outage_s``
(one line when the outage begins, one when it ends: :class:`PatientRest`); a TaskManager that
leaves the cluster during the apply ends it (:class:`TaskManagerLost`: the job fails over, and
the plugin places it on the TaskManagers left or falls back to Flink's assignment), and the
job is put back at its parallelism without the plan; a placement the REST check finds off plan,
or that the plugin refused, is :class:`NotHonoured`.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

import numpy as np

from streamsched import metrics
from streamsched.engines.flink.documents import FlinkReading
from streamsched.engines.flink.estimate import read_capture
from streamsched.engines.flink.plugin import PLAN_ENVIRONMENT, PLAN_PROPERTY
from streamsched.engines.flink.rest import FlinkRest, capture_live, config_seconds
from streamsched.engines.rest_client import Unreachable
from streamsched.errors import InputError, StreamschedError
from streamsched.model.io import read_document
from streamsched.model import Cluster, Placement
from streamsched.model.throughput import predict_throughput

PLAN_FORMAT = "streamsched.flink-placement/1"
#: What a Flink user controls through streamsched and what stays Flink's (printed by the commands).
CONTROL_NOTE = (
    "Flink placement through streamsched: you choose the TaskManager of every subtask (plugin + adaptive "
    "scheduler, applied by two rescales from the last checkpoint, JobID and state kept); Flink still decides "
    "which TaskManagers give the job its slots (streamsched asks for more slots when a TaskManager lacks them), "
    "slot sharing groups, chaining, parallelism, and, with local recovery on, Flink's StateLocalitySlotAssigner "
    "replaces the plugin on restarts."
)


#: Flink's JobID as the REST API writes it (16 bytes in hexadecimal).
JOB_ID = re.compile(r"[0-9a-f]{32}")


class ApplyError(StreamschedError):
    """The job did not take the plan (exit code 4)."""

    exit_code = 4


class TaskManagerLost(ApplyError):
    """A TaskManager of the cluster left it during the apply (the job failed over)."""


class NotHonoured(ApplyError):
    """Flink runs the job elsewhere than planned (the REST check), or the plugin refused the plan."""


#: Seconds ``apply`` rides out a JobManager that does not answer (per outage, then it fails).
OUTAGE_S = 60.0
#: Flink's default ``heartbeat.timeout``, seconds.
HEARTBEAT_TIMEOUT_S = 50.0


class PatientRest(FlinkRest):
    """The JobManager's REST API for ``apply``: a request finding it unreachable (refused,
    dropped, no answer in time) is made again each ``pause_s`` until ``outage_s`` have passed
    since the outage began, then fails; ``log`` gets one line when an outage begins and one when
    the JobManager answers again. Other errors (an HTTP error status) fail at once."""

    def __init__(self, url: str, outage_s: float = OUTAGE_S, log: Callable[[str], None] = lambda _m: None,
                 pause_s: float = 1.0, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        super().__init__(url)
        self.outage_s, self.log, self.pause_s, self.clock, self.sleep = outage_s, log, pause_s, clock, sleep
        self.down_since: float | None = None
        self.outages = 0

    def get(self, path: str) -> Any:
        return self.call(lambda: super(PatientRest, self).get(path))

    def call(self, request: Callable[[], Any]) -> Any:
        while True:
            try:
                answer = request()
            except Unreachable as exc:
                now = self.clock()
                if self.down_since is None:
                    self.down_since, self.outages = now, self.outages + 1
                    self.log(f"JobManager unreachable ({exc}); asking again each {self.pause_s:g} s for up to "
                             f"{self.outage_s:g} s")
                if now - self.down_since >= self.outage_s:
                    self.down_since = None
                    raise Unreachable(f"{exc} (no answer for {self.outage_s:g} s)") from None
                self.sleep(self.pause_s)
                continue
            if self.down_since is not None:
                self.log(f"JobManager answers again after {self.clock() - self.down_since:.1f} s")
                self.down_since = None
            return answer


@dataclass
class JobView:
    """The live job: name, state, vertices (id, name, parallelism) and where each subtask runs."""

    job_id: str
    name: str
    state: str
    vertices: list[dict[str, Any]]
    where: dict[str, list[str]]
    statuses: dict[str, list[str]]
    attempts: dict[str, list[int]]
    #: when each subtask's current attempt started RUNNING (JobManager clock, s; nan if not running)
    running_since: dict[str, list[float]]
    created: float


#: ``apply``'s default threshold: a plan whose predicted gain over the running placement is below
#: this fraction leaves the job alone (``apply flink --min-gain``, in percent).
MIN_GAIN = 0.05


@dataclass
class ApplyResult:
    """What ``apply`` did. Every figure before the move comes from one reading of the job
    (``reading``, the window it names); ``after`` is the reading taken after the move."""

    job_id: str
    #: False: the job was left alone (``reason`` says why)
    applied: bool
    reason: str
    #: what the gain is measured in: ``throughput`` (source records/s, where the cluster gives
    #: link capacities) or ``remote bytes`` (bytes/s between TaskManagers)
    basis: str
    #: predicted gain of the plan over the running placement (fraction; higher is better)
    gain: float
    min_gain: float
    #: the reading before: window (s), measured source records/s and remote bytes/s, and the
    #: predictions of the running placement and of the plan from it
    reading: dict[str, Any]
    #: plan node -> node it was relabelled to (identical TaskManagers swapped to move less)
    relabelled: dict[str, str]
    moved: list[dict[str, Any]]
    plan_file: str | None = None
    rescales: list[dict[str, Any]] = field(default_factory=list)
    downtime_s: float = 0.0
    plugin_status: dict[str, Any] = field(default_factory=dict)
    held_slots: dict[str, int] = field(default_factory=dict)
    #: the reading after the move (None when not applied)
    after: dict[str, Any] | None = None

    @property
    def predicted_remote_bytes_per_s(self) -> float:
        return self.reading["plan_predicted_remote_bytes_per_s"]

    @property
    def before_remote_bytes_per_s(self) -> float | None:
        return self.reading["measured_remote_bytes_per_s"]

    @property
    def measured_remote_bytes_per_s(self) -> float | None:
        return None if self.after is None else self.after["measured_remote_bytes_per_s"]

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "predicted_remote_bytes_per_s": self.predicted_remote_bytes_per_s,
                "before_remote_bytes_per_s": self.before_remote_bytes_per_s,
                "measured_remote_bytes_per_s": self.measured_remote_bytes_per_s}


def send(rest: FlinkRest, method: str, path: str, body: Any = None) -> Any:
    """A PUT/POST/PATCH to the JobManager; an HTTP error is one ``InputError`` with Flink's message,
    no answer :class:`Unreachable` (ridden out by a :class:`PatientRest`)."""
    if isinstance(rest, PatientRest):
        return rest.call(lambda: _send_once(rest, method, path, body))
    return _send_once(rest, method, path, body)


def _send_once(rest: FlinkRest, method: str, path: str, body: Any) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{rest.url}/{path.lstrip('/')}", data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=rest.timeout) as response:
            text = response.read()
    except urllib.error.HTTPError as exc:
        try:
            errors = json.loads(exc.read() or b"{}").get("errors") or []
        except (ValueError, AttributeError, OSError):
            errors = []
        detail = str(errors[0]).splitlines()[0][:200] if errors else exc.reason
        raise InputError(f"{rest.url}/{path.lstrip('/')}: HTTP {exc.code}: {detail}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise Unreachable(f"{rest.url}: Flink JobManager unreachable ({exc})") from None
    return json.loads(text) if text.strip() else None


def job_view(rest: FlinkRest, job_id: str) -> JobView:
    job = rest.get(f"/jobs/{quote(job_id, safe='')}")
    vertices, where, statuses, attempts, since = [], {}, {}, {}, {}
    for v in job.get("vertices", []):
        vertices.append({"id": v["id"], "name": v["name"], "parallelism": int(v["parallelism"]),
                         "group": str(v.get("slotSharingGroupId") or "")})
        details = rest.get(f"/jobs/{quote(job_id, safe='')}/vertices/{v['id']}")
        subs = sorted(details.get("subtasks", []), key=lambda s: s["subtask"])
        where[v["id"]] = [s.get("taskmanager-id", "") for s in subs]
        statuses[v["id"]] = [s.get("status", "") for s in subs]
        attempts[v["id"]] = [int(s.get("attempt", 0)) for s in subs]
        # the RUNNING state began when the states before it ended: start-time + their durations
        since[v["id"]] = [(s["start-time"] + sum(d for k, d in s.get("status-duration", {}).items() if k != "RUNNING"))
                          / 1000 if s.get("status") == "RUNNING" else float("nan") for s in subs]
    created = (job.get("timestamps") or {}).get("CREATED", 0) / 1000
    return JobView(job_id, str(job.get("name")), str(job.get("state")), vertices, where, statuses, attempts, since,
                   created)


def held_slots(rest: FlinkRest, job_id: str) -> tuple[dict[str, int], dict[str, int]]:
    """Per TaskManager: the job's slots, and the free slots (``/taskmanagers/:id``)."""
    held, free = {}, {}
    for tm in rest.get("/taskmanagers").get("taskmanagers", []):
        details = rest.get(f"/taskmanagers/{quote(tm['id'], safe='')}")
        slots = details.get("allocatedSlots", [])
        held[tm["id"]] = sum(1 for s in slots if s.get("jobId") == job_id)
        free[tm["id"]] = int(tm.get("freeSlots", 0))
    return held, free


def registered(rest: FlinkRest) -> set[str]:
    """The ids of the TaskManagers registered with the JobManager."""
    return {str(tm.get("id")) for tm in rest.get("/taskmanagers").get("taskmanagers", [])}


def _lost(rest: FlinkRest, taskmanagers: set[str] | None) -> None:
    """A :class:`TaskManagerLost` when one of ``taskmanagers`` is no longer registered."""
    gone = sorted(taskmanagers - registered(rest)) if taskmanagers else []
    if gone:
        raise TaskManagerLost(f"TaskManager {', '.join(gone)} left the cluster during the apply (the job fails over)")


def refused(rest: FlinkRest, status: dict[str, Any], need: dict[str, int], timeout_s: float,
            poll_s: float = 0.5) -> ApplyError:
    """The error for a plan the plugin refused. Where the JobMaster then held fewer of the job's
    slots on a TaskManager than the plan needs there (the status's ``held``) although rescale 1
    had given them, the JobMaster dropped that TaskManager (a killed one is seen by its
    connections first); the ResourceManager lists it until ``heartbeat.timeout``. Wait that long
    (at most ``timeout_s``) for it to leave: :class:`TaskManagerLost` if it does, else
    :class:`NotHonoured` naming it."""
    reason = f"the placement plugin refused the plan: {status.get('reason')}"
    held = status.get("held")
    dropped = {tm for tm, n in need.items() if isinstance(held, dict) and held.get(tm, 0) < n}
    if not dropped:
        return NotHonoured(reason)
    grace = min(config_seconds(rest, "heartbeat.timeout", HEARTBEAT_TIMEOUT_S), timeout_s)
    deadline = time.time() + grace
    while True:
        try:
            _lost(rest, dropped)
        except TaskManagerLost as lost:
            return lost
        if time.time() >= deadline:
            return NotHonoured(f"{reason} (the JobManager dropped the job's slots on {', '.join(sorted(dropped))}, "
                               f"still registered {grace:g} s later)")
        time.sleep(poll_s)


def plugin_location(rest: FlinkRest) -> tuple[str | None, bool]:
    """The plan location the JobManager's plugin reads (its ``-Dstreamsched.flink.placement``;
    an environment variable is not visible through REST) and whether the plugin's jar comes
    before ``flink-dist`` on the JobManager's class path."""
    env = rest.get("/jobmanager/environment")
    location = None
    for option in env.get("jvm", {}).get("options", []):
        if option.startswith(f"-D{PLAN_PROPERTY}="):
            location = option.split("=", 1)[1]
    first = None
    for entry in env.get("classpath", []):
        name = os.path.basename(entry)
        if name.startswith("streamsched-flink-placement") or name.startswith("flink-dist"):
            first = name
            break
    return location, bool(first and first.startswith("streamsched-flink-placement"))


def plan_document(view: JobView, taskmanagers: dict[str, list[str]]) -> dict[str, Any]:
    return {"format": PLAN_FORMAT, "job_id": view.job_id, "job_name": view.name,
            "vertices": {v["id"]: {"name": v["name"], "taskmanagers": taskmanagers[v["id"]]} for v in view.vertices}}


def slots_needed(taskmanagers: dict[str, list[str]], groups: dict[str, str] | None = None) -> dict[str, int]:
    """Slots each TaskManager needs for the plan (vertex id -> TaskManager per subtask): a slot
    holds at most one subtask of each vertex of its slot sharing group (``groups``: vertex id ->
    group; default one group, Flink's default), so per group its most numerous vertex's subtask
    count there, summed over the groups (as the plugin packs them)."""
    most: dict[tuple[str, str], int] = {}
    for vid, tms in taskmanagers.items():
        group = (groups or {}).get(vid, "")
        for tm, n in Counter(tms).items():
            most[tm, group] = max(most.get((tm, group), 0), n)
    need: dict[str, int] = {}
    for (tm, _group), n in most.items():
        need[tm] = need.get(tm, 0) + n
    return need


def read_plan(placement_file: str | Path, reading: FlinkReading, job_id: str) -> tuple[Placement, str | None]:
    """A streamsched placement file over the job's graph (as read), and the cluster it was made
    for where that is not the reading's TaskManagers as described (its ``cluster_hash`` differs;
    None where it matches or the file has none); one-line errors for a placement of another
    job or of TaskManagers the JobManager does not have."""
    data = read_document(placement_file)
    where = str(placement_file)
    if isinstance(data, dict) and data.get("graph") not in (None, reading.graph.name):
        raise InputError(f"{where}: a placement of graph {data.get('graph')!r}, but job {job_id} is "
                         f"{reading.graph.name!r} (a plan for another job)")
    names = {n.name for n in reading.cluster.nodes}
    if isinstance(data, dict) and isinstance(data.get("nodes"), list) and isinstance(data.get("node"), list):
        used = {data["nodes"][k] for k in data["node"] if isinstance(k, int) and 0 <= k < len(data["nodes"])}
        gone = sorted(str(n) for n in used - names)
        if gone:
            raise InputError(f"{where}: TaskManager {gone[0]} is not registered with the JobManager at "
                             f"{reading.report.get('url', 'the cluster')} (gone, or a plan for another cluster); "
                             f"registered: {', '.join(sorted(names))}")
    placement = Placement.from_dict(data, reading.graph, reading.cluster, where=where)
    made_for = data.get("cluster_hash") if isinstance(data, dict) else None
    other = isinstance(made_for, str) and made_for != reading.cluster.fingerprint()
    return placement, (str(data.get("cluster")) if other else None)


def subtask_targets(reading: FlinkReading, placement: Placement) -> dict[str, list[str]]:
    """Per vertex id, the TaskManager of each subtask under ``placement`` (over the reading's graph)."""
    nodes = reading.cluster.nodes
    return {v["id"]: [nodes[placement.node_of[v["first_task"] + i]].name for i in range(v["parallelism"])]
            for v in reading.report["vertices"]}


def identical_nodes(cluster: Cluster) -> list[list[int]]:
    """Classes of interchangeable nodes (TaskManagers): the same slots, CPU (capacity and
    cores), memory and link capacities in and out. Every placement keeps its predicted value
    when nodes of one class trade their tasks."""
    classes: dict[tuple, list[int]] = {}
    for k, n in enumerate(cluster.nodes):
        key = (n.task_slots, n.slots, n.capacity, n.cores, n.ghz, n.ram_mb, n.net_in, n.net_out)
        classes.setdefault(key, []).append(k)
    return list(classes.values())


def relabel(current: np.ndarray, plan: np.ndarray, classes: list[list[int]]) -> tuple[np.ndarray, dict[int, int]]:
    """The plan with its nodes renamed within each class of identical nodes so that the fewest
    tasks leave the node they run on: per class, the permutation maximising the tasks the plan
    puts on a node that already runs them (an assignment problem, ``linear_sum_assignment``).
    Returns the relabelled node of every task and the renaming (plan node -> node) where it
    changes a node."""
    from scipy.optimize import linear_sum_assignment

    current, plan = np.asarray(current), np.asarray(plan)
    out = plan.copy()
    renamed: dict[int, int] = {}
    for nodes in classes:
        if len(nodes) < 2:
            continue
        # kept[a, b]: tasks the plan puts on nodes[a] that run on nodes[b] now
        kept = np.array([[np.count_nonzero((plan == a) & (current == b)) for b in nodes] for a in nodes])
        rows, cols = linear_sum_assignment(kept, maximize=True)
        for a, b in zip(rows, cols):
            out[plan == nodes[a]] = nodes[b]
            if a != b:
                renamed[nodes[a]] = nodes[b]
    return out, renamed


def moved_subtasks(vertices: list[dict[str, Any]], where: dict[str, list[str]],
                   targets: dict[str, list[str]]) -> list[dict[str, Any]]:
    """Subtasks whose TaskManager the plan changes: vertex name, subtask index, from, to."""
    return [{"vertex": v["name"], "subtask": i, "from": where[v["id"]][i], "to": targets[v["id"]][i]}
            for v in vertices for i in range(v["parallelism"]) if where[v["id"]][i] != targets[v["id"]][i]]


def measured_source_rate(reading: FlinkReading) -> float | None:
    """Measured throughput: records/s out of the job's source vertices (those without inputs)."""
    rates = [v["records_out_per_s"] for v in reading.report["vertices"] if not v["inputs"]]
    return float(sum(rates)) if rates else None


def with_machines(reading: FlinkReading, cluster: Cluster, where: str) -> FlinkReading:
    """The reading with each TaskManager's CPU and link capacities from ``cluster`` (a cluster
    file naming the TaskManagers, e.g. the one ``flink-local start`` writes for its lab)."""
    given = {n.name: n for n in cluster.nodes}
    missing = [n.name for n in reading.cluster.nodes if n.name not in given]
    if missing:
        raise InputError(f"{where}: no node {missing[0]!r}; it must describe every TaskManager of the job's "
                         f"cluster ({', '.join(n.name for n in reading.cluster.nodes)})")
    nodes = tuple(replace(n, capacity=given[n.name].capacity, cores=given[n.name].cores, net_in=given[n.name].net_in,
                          net_out=given[n.name].net_out) for n in reading.cluster.nodes)
    return replace(reading, cluster=replace(reading.cluster, nodes=nodes))


def measured_figures(reading: FlinkReading) -> dict[str, Any]:
    """What ``reading`` measured: its window, where its rates come from, the sources' records/s,
    the records/s exchanged and the bytes/s received from other TaskManagers (no prediction: the
    figures ``apply`` reports after it moved the job)."""
    return {"window_s": reading.report.get("window_s"), "rates_from": reading.report.get("rates_from"),
            "measured_throughput": measured_source_rate(reading), "exchanged_records_per_s": reading.graph.total_rate,
            "measured_remote_bytes_per_s": reading.report["measured_per_s"].get("bytes_in_remote")}


def judge(reading: FlinkReading, plan: Placement) -> tuple[str, float, dict[str, Any]]:
    """The plan against the running placement, both predicted from one reading: the basis of
    the gain, the gain (fraction, higher is better) and the reading's figures. Where every
    TaskManager's link capacities are known, by predicted throughput (source records/s at which
    the first CPU or link direction saturates, :mod:`streamsched.model.throughput` T1-T5; an
    overloaded running placement is predicted at what its overload allows); else by remote
    bytes (bytes/s between TaskManagers, i-scheduler.txt eq. 3 over bytes)."""
    running = metrics.inter_node_traffic(reading.graph, reading.placement, weight="bytes")
    planned = metrics.inter_node_traffic(reading.graph, plan, weight="bytes")
    links = reading.cluster.has_links
    if links:
        now = predict_throughput(reading.graph, reading.cluster, reading.placement.node_of)
        then = predict_throughput(reading.graph, reading.cluster, plan.node_of)
    figures = {
        "job_id": reading.report.get("job_id"), **measured_figures(reading),
        "running_predicted_remote_bytes_per_s": running, "plan_predicted_remote_bytes_per_s": planned,
        "running_predicted_throughput": now.throughput if links else None,
        "plan_predicted_throughput": then.throughput if links else None,
        "running_bottleneck": now.bottleneck if links else None, "plan_bottleneck": then.bottleneck if links else None,
    }
    if links:
        gain = then.throughput / now.throughput - 1 if 0 < now.throughput < math.inf else 0.0
        return "throughput", gain, figures
    gain = (running - planned) / running if running > 0 else 0.0
    return "remote bytes", gain, figures


def slots_to_hold(parallelism: dict[str, int], held: dict[str, int], free: dict[str, int],
                  need: dict[str, int], order: list[str]) -> dict[str, int]:
    """The upper bounds of the first rescale (vertex id -> bound; ``order``: the vertex ids in
    Flink's order). It must change a parallelism (else Flink does not re-plan), and where the
    job holds fewer slots on a TaskManager than the plan needs there it asks for every slot of
    the cluster (the job's and the free ones): the ResourceManager picks which TaskManagers
    supply slots asked for, so only all of them are sure to include the named ones. Slots the
    plan then leaves unused go back to the cluster after ``slot.idle.timeout`` (Flink's
    ``DefaultDeclarativeSlotPool.releaseIdleSlots`` frees idle slots beyond the job's
    requirement, the largest upper bound per slot sharing group)."""
    short = {tm: n - held.get(tm, 0) for tm, n in need.items() if n > held.get(tm, 0)}
    for tm, n in sorted(short.items()):
        if n > free.get(tm, 0):
            raise ApplyError(f"the plan needs {need[tm]} slots on TaskManager {tm}; the job holds "
                             f"{held.get(tm, 0)} there and {free.get(tm, 0)} are free")
    widest = max(order, key=lambda vid: parallelism[vid])  # the first of the widest
    narrower = [vid for vid in order if 1 < parallelism[vid] < parallelism[widest]]
    spare = sum(free.values())
    if short:
        return {widest: sum(held.values()) + spare}
    if narrower:
        return {narrower[0]: parallelism[narrower[0]] - 1}
    if spare:
        return {widest: parallelism[widest] + 1}
    if parallelism[widest] > 1:
        return {widest: parallelism[widest] - 1}
    raise ApplyError("every vertex has parallelism 1 and the cluster no free slot; no rescale can make "
                     "Flink re-plan the job")


def _wait(rest: FlinkRest, job_id: str, before: JobView, parallelism: dict[str, int], timeout_s: float,
          poll_s: float = 0.1, redeploy: bool = True, taskmanagers: set[str] | None = None) -> tuple[JobView, float]:
    """Until the job runs every subtask at ``parallelism`` in a new attempt (the rescale
    redeployed them all; any attempt without ``redeploy``): that view, and when the job was
    first seen stopped (else the new execution graph's creation). Each second it checks that
    ``taskmanagers`` are all still registered (else :class:`TaskManagerLost`)."""
    down = None
    deadline = time.time() + timeout_s
    checked = 0.0
    while True:
        view = job_view(rest, job_id)
        now = time.time()
        if taskmanagers and now - checked >= 1.0:
            _lost(rest, taskmanagers)
            checked = now
        if view.state in ("FAILED", "CANCELED", "FINISHED"):
            raise ApplyError(f"job {job_id} went {view.state} while re-planning")
        running = view.state == "RUNNING" and all(s == "RUNNING" for st in view.statuses.values() for s in st)
        if not running and down is None:
            down = now
        redeployed = all(v["parallelism"] == parallelism[v["id"]] for v in view.vertices) and (not redeploy or all(
            i >= len(before.attempts.get(vid, [])) or a != before.attempts[vid][i]
            for vid, tries in view.attempts.items() for i, a in enumerate(tries)))
        if running and redeployed:
            return view, min(down if down is not None else view.created, view.created)
        if now > deadline:
            raise ApplyError(f"job {job_id} did not run at the requested parallelism within {timeout_s:g} s "
                             f"(state {view.state})")
        time.sleep(poll_s)


def rescale(rest: FlinkRest, job_id: str, upper: dict[str, int], timeout_s: float,
            redeploy: bool = True, taskmanagers: set[str] | None = None) -> dict[str, Any]:
    """Set the vertices' parallelism upper bounds and wait for the job to run at them
    (``redeploy``: in new attempts; without, bounds the job already runs at); the rescale's
    times: PUT, stopped (first seen, else the new graph's creation), every subtask RUNNING again
    (Flink's subtask state durations), and the downtime between the last two."""
    path = f"/jobs/{quote(job_id, safe='')}/resource-requirements"
    requirements = rest.get(path)
    for vid, bound in upper.items():
        requirements[vid]["parallelism"]["upperBound"] = bound
        requirements[vid]["parallelism"]["lowerBound"] = min(requirements[vid]["parallelism"]["lowerBound"], bound)
    before = job_view(rest, job_id)
    put = time.time()
    send(rest, "PUT", path, requirements)
    view, down = _wait(rest, job_id, before, upper, timeout_s, redeploy=redeploy, taskmanagers=taskmanagers)
    up = max(t for ts in view.running_since.values() for t in ts)
    return {"upper_bounds": upper, "put": put, "down": down, "running": up, "downtime_s": max(0.0, up - down),
            "view": view}


def _status(location: str | None, job_id: str) -> dict[str, Any] | None:
    if location is None:
        return None
    base = Path(location)
    path = base / f"{job_id}.status.json" if base.is_dir() else Path(f"{location}.status.json")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _write_plan(location: str, view: JobView, taskmanagers: dict[str, list[str]]) -> Path:
    plan_file = Path(location) / f"{view.job_id}.json"
    temporary = plan_file.with_name(f".{plan_file.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(plan_document(view, taskmanagers), indent=1))
    os.replace(temporary, plan_file)
    return plan_file


def restore(rest: FlinkRest, original: JobView, location: str, timeout_s: float) -> str:
    """Put a job back as ``original`` shows it after a failed apply: a plan of its placement,
    its parallelism as upper bounds (a rescale where they differ), and two more rescales where
    it then runs elsewhere. Returns what became of it (one clause for the error)."""
    job_id = original.job_id
    parallelism = {v["id"]: v["parallelism"] for v in original.vertices}
    try:
        gone = sorted({tm for tms in original.where.values() for tm in tms} - registered(rest))
        if gone:
            return _restore_without(rest, original, location, gone, timeout_s)
        _write_plan(location, original, original.where)
        path = f"/jobs/{quote(job_id, safe='')}/resource-requirements"
        bounds = {vid: r["parallelism"]["upperBound"] for vid, r in rest.get(path).items()}
        now = job_view(rest, job_id)
        if bounds != parallelism:
            at_original = all(v["parallelism"] == parallelism[v["id"]] for v in now.vertices)
            now = rescale(rest, job_id, parallelism, timeout_s, redeploy=not at_original)["view"]
        else:  # where it runs once it runs (it may be failing over)
            now = _wait_running(rest, job_id, parallelism, timeout_s)
        if now.where != original.where:
            held, free = held_slots(rest, job_id)
            away = slots_to_hold(parallelism, held, free, {}, [v["id"] for v in original.vertices])
            rescale(rest, job_id, {**parallelism, **away}, timeout_s)
            now = rescale(rest, job_id, parallelism, timeout_s)["view"]
    except Exception as exc:  # noqa: BLE001 (an unforeseen answer too: the error says so, in one line)
        what = exc if isinstance(exc, StreamschedError) else f"unexpected {type(exc).__name__}: {exc}"
        return f"putting the job back failed too ({what}); check its parallelism and placement"
    off = moved_subtasks(original.vertices, now.where, original.where)
    if off:
        return (f"the job was put back to its parallelism, but {len(off)} subtasks run off its original "
                f"placement (e.g. {off[0]['vertex']}[{off[0]['subtask']}] on {off[0]['from']})")
    return "the job was put back as it was (parallelism and placement, checked per subtask)"


def _restore_without(rest: FlinkRest, original: JobView, location: str, gone: list[str], timeout_s: float) -> str:
    """The job's placement ran on TaskManagers that are ``gone``: it cannot be put back. Its
    plan is removed (Flink assigns its slots, the plugin is not asked to place anything on a
    TaskManager that left), its parallelism set back as upper bounds, and once it runs again
    (at its parallelism where the slots left allow) where it runs is said."""
    job_id = original.job_id
    parallelism = {v["id"]: v["parallelism"] for v in original.vertices}
    (Path(location) / f"{job_id}.json").unlink(missing_ok=True)
    path = f"/jobs/{quote(job_id, safe='')}/resource-requirements"
    requirements = rest.get(path)
    if {vid: r["parallelism"]["upperBound"] for vid, r in requirements.items()} != parallelism:
        for vid, bound in parallelism.items():
            requirements[vid]["parallelism"].update(upperBound=bound,
                                                    lowerBound=min(requirements[vid]["parallelism"]["lowerBound"], bound))
        send(rest, "PUT", path, requirements)
    view = _wait_running(rest, job_id, parallelism, timeout_s)
    at = ", ".join(f"{v['name']} {v['parallelism']}" for v in view.vertices if v["parallelism"] != parallelism[v["id"]])
    spread = Counter(tm for tms in view.where.values() for tm in tms)
    return (f"TaskManager {', '.join(gone)} is gone, so the job cannot be put back where it ran: it runs again "
            + (f"at a lower parallelism ({at})" if at else "at its parallelism")
            + " as Flink assigned it (" + ", ".join(f"{tm}: {n} subtasks" for tm, n in sorted(spread.items())) + ")")


def _wait_running(rest: FlinkRest, job_id: str, parallelism: dict[str, int], timeout_s: float,
                  poll_s: float = 0.5) -> JobView:
    """Until the job runs every subtask at no more than ``parallelism`` (as many as its slots allow)."""
    deadline = time.time() + timeout_s
    while True:
        view = job_view(rest, job_id)
        if view.state in ("FAILED", "CANCELED", "FINISHED"):
            raise ApplyError(f"job {job_id} went {view.state}")
        if view.state == "RUNNING" and all(s == "RUNNING" for st in view.statuses.values() for s in st) \
                and all(v["parallelism"] <= parallelism[v["id"]] for v in view.vertices):
            return view
        if time.time() > deadline:
            raise ApplyError(f"job {job_id} did not run again within {timeout_s:g} s (state {view.state})")
        time.sleep(poll_s)


def apply(url: str, placement_file: str | Path, job_id: str | None = None, plan_location: str | None = None,
          settle_s: float = 10.0, window_s: float = 10.0, timeout_s: float = 180.0,
          log: Callable[[str], None] = lambda _m: None, before: FlinkReading | None = None,
          min_gain: float = MIN_GAIN, machines: Cluster | None = None, outage_s: float = OUTAGE_S) -> ApplyResult:
    """Apply a streamsched placement to a running job (module docstring), or leave the job alone
    when no subtask would move once identical TaskManagers are relabelled (:func:`relabel`) or
    the predicted gain over the running placement is below ``min_gain`` (:func:`judge`; -inf:
    apply whatever the prediction).
    ``plan_location`` defaults to the JobManager's ``-Dstreamsched.flink.placement``; it must be
    a directory this process can write and the JobManager can read. ``before``: a reading of
    this job the caller just took (the graph the placement was made for), so the job is not
    read twice; it is read again when the job no longer runs where that reading saw it.
    ``machines``: the TaskManagers' CPU and link capacities (:func:`with_machines`). A failed
    step puts the job back as it was (:func:`restore`) and the error says so; the error is a
    :class:`TaskManagerLost` or :class:`NotHonoured` where that is why. A JobManager that does not
    answer is asked again for up to ``outage_s`` seconds per outage (:class:`PatientRest`)."""
    from streamsched.engines.flink.rest import running_job

    if math.isnan(min_gain) or min_gain == math.inf:
        raise InputError(f"--min-gain: {min_gain!r}; must be a number (a negative one applies plans predicted "
                         f"worse, down to that loss; -inf any plan that moves a subtask)")
    rest = PatientRest(url, outage_s, log)
    job_id = job_id or running_job(rest)
    if not JOB_ID.fullmatch(job_id):  # it names the plan and status files: never a path
        raise InputError(f"job id {job_id!r}: not a Flink JobID (32 hexadecimal digits)")
    view = job_view(rest, job_id)
    if view.state != "RUNNING":
        raise InputError(f"job {job_id} ({view.name}) is {view.state}, not RUNNING: nothing to apply to")
    location, first_on_classpath = plugin_location(rest)
    location = plan_location or location
    if not first_on_classpath:
        raise ApplyError(f"the placement plugin is not installed on {rest.url}: no streamsched-flink-placement jar "
                         f"before flink-dist on the JobManager's class path (`streamsched flink-plugin path`)")
    if location is None:
        raise InputError("the JobManager has no -Dstreamsched.flink.placement; give --plan-location "
                         f"(the path the JobManager reads through {PLAN_ENVIRONMENT})")
    if not Path(location).is_dir():
        raise InputError(f"--plan-location {location}: not a directory here (the JobManager's plan directory "
                         f"must be visible to this command)")
    if before is not None and (before.report.get("job_id") != job_id
                               or subtask_targets(before, before.placement) != view.where):
        before = None  # another job, or the job moved since: its figures would not be the running placement's
    if before is None:
        log(f"reading job {job_id} ({view.name}) for {window_s:g} s")
        before = read_capture(capture_live(rest.url, job_id, window_s=window_s))
    if machines is not None:
        before = with_machines(before, machines, f"cluster {machines.name!r}")
    plan, made_for = read_plan(placement_file, before, job_id)
    classes = identical_nodes(before.cluster)
    if made_for is not None and machines is None:  # alike over REST, perhaps not in the plan's cluster
        classes = [[k] for k in range(len(before.cluster.nodes))]
        log(f"{placement_file}: made for cluster {made_for!r}, not for the TaskManagers as the JobManager describes "
            f"them: none swapped for another (their capacities, apply flink --cluster FILE, let identical ones swap)")
    node_of, renamed = relabel(before.placement.node_of, plan.node_of, classes)
    plan = Placement.build(node_of, metadata=plan.metadata)
    names = [n.name for n in before.cluster.nodes]
    targets = subtask_targets(before, plan)
    for v in view.vertices:
        if v["id"] not in targets:
            raise InputError(f"{placement_file}: job vertex {v['id']} ({v['name']}) is not in the placement")
    moved = moved_subtasks(view.vertices, view.where, targets)
    basis, gain, figures = judge(before, plan)
    result = ApplyResult(job_id, False, "", basis, gain, min_gain, figures,
                         {names[a]: names[b] for a, b in renamed.items()}, moved)
    if not moved:
        result.reason = ("the plan is the running placement" + (" with identical TaskManagers swapped" if renamed
                                                                else "") + ": no subtask would move")
        return result
    if gain < min_gain:
        result.reason = (f"predicted gain in {basis} {100 * gain:+.1f} % is below the threshold "
                         f"({100 * min_gain:g} %, --min-gain); {len(moved)} subtasks would move")
        return result
    need = slots_needed(targets, {v["id"]: v["group"] for v in view.vertices})
    held, free = held_slots(rest, job_id)
    total = {tm: held.get(tm, 0) + free.get(tm, 0) for tm in set(held) | set(free)}
    for tm, n in sorted(need.items()):
        if n > total.get(tm, 0):
            raise InputError(f"{placement_file}: TaskManager {tm} would need {n} slots (a slot holds one subtask "
                             f"of a vertex), it has {total.get(tm, 0)} for this job (slot rule broken)")
    parallelism = {v["id"]: v["parallelism"] for v in view.vertices}
    first_step = slots_to_hold(parallelism, held, free, need, [v["id"] for v in view.vertices])
    cluster = set(held) | set(free)
    rescales: list[dict[str, Any]] = []
    try:
        log(f"rescale 1/2 (job holds {sum(held.values())} slots, plan needs {sum(need.values())}): upper bounds "
            f"{ {next(v['name'] for v in view.vertices if v['id'] == k): b for k, b in first_step.items()} }")
        rescales.append(rescale(rest, job_id, {**parallelism, **first_step}, timeout_s, taskmanagers=cluster))
        held_now, _free = held_slots(rest, job_id)
        short = {tm: n for tm, n in need.items() if held_now.get(tm, 0) < n}
        if short:
            raise ApplyError(f"job {job_id} holds {held_now} slots; the plan needs {need} (the ResourceManager "
                             f"gave slots elsewhere)")
        plan_file = _write_plan(location, view, targets)
        log(f"plan written to {plan_file}; rescale 2/2 back to the job's parallelism")
        rescales.append(rescale(rest, job_id, parallelism, timeout_s, taskmanagers=cluster))
        _lost(rest, cluster)
        status = _status(location, job_id) or {}
        if status.get("time_ms", 0) / 1000 < rescales[-1]["put"] - 1:
            raise ApplyError(f"the placement plugin did not answer for job {job_id} (no fresh {job_id}.status.json "
                             f"in {location}): is the plugin's jar on the JobManager's class path and "
                             f"jobmanager.scheduler: adaptive set?")
        if not status.get("applied"):
            raise refused(rest, status, need, timeout_s)
        after = job_view(rest, job_id)
        wrong = moved_subtasks(after.vertices, after.where, targets)
        if wrong:
            raise NotHonoured(f"placement not honoured: {len(wrong)} subtasks off plan, e.g. {wrong[0]['vertex']}"
                             f"[{wrong[0]['subtask']}] on {wrong[0]['from']}, planned {wrong[0]['to']}")
    except Exception as exc:  # an answer of a kind not foreseen too: the job is not left half-moved
        what = str(exc) if isinstance(exc, StreamschedError) else f"unexpected {type(exc).__name__}: {exc}"
        log(f"apply failed ({what}); putting the job back as it was")
        kind = type(exc) if isinstance(exc, ApplyError) else ApplyError
        raise kind(f"{what}; {restore(rest, view, location, timeout_s)}") from None
    result.applied, result.reason, result.plan_file = True, "applied and verified per subtask", str(plan_file)
    result.rescales = [{k: v for k, v in r.items() if k != "view"} for r in rescales]
    result.downtime_s = sum(r["downtime_s"] for r in rescales)
    result.plugin_status, result.held_slots = status, held_now
    log(f"placement honoured; settling {settle_s:g} s, then measuring for {window_s:g} s")
    time.sleep(settle_s)
    try:
        later = read_capture(capture_live(rest.url, job_id, window_s=window_s))
    except StreamschedError as exc:  # applied all the same: the reading after is what is missing
        result.reason += f"; the reading after it failed ({exc})"
        return result
    result.after = measured_figures(later)
    return result
