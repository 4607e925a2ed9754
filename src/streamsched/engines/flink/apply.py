"""``streamsched apply flink``: make a running Flink 2.3 job run where a placement says, through
the placement plugin (:mod:`streamsched.engines.flink.plugin`) and the adaptive scheduler's
resource requirements (docs/engines.md, "Applying a placement to a running Flink job").

1. The placement (one TaskManager per subtask, over the graph ``read-engine flink`` reads) is
   checked against the live job: its graph is this job (name, vertices, parallelism), every
   TaskManager it names is registered, and no TaskManager needs more slots than it has (a slot
   holds at most one subtask of a vertex, so per slot sharing group a TaskManager needs as many
   slots as its most numerous vertex there).
2. The plan is written where the plugin reads it (``<dir>/<job id>.json``, atomically).
3. The job is made to take it: the plugin is asked only when the adaptive scheduler re-plans,
   and the scheduler re-plans a running job when a vertex's parallelism upper bound changes
   (``PUT /jobs/:jid/resource-requirements``; an identical body does nothing). So two rescales:
   one away from the job's parallelism and one back. The first also makes the job hold the
   slots the plan needs: when it holds too few on a TaskManager, a vertex's upper bound is
   raised to the slots the job holds plus the missing ones (the job keeps slots it was given,
   also beyond its parallelism after an earlier apply); else a
   vertex below the largest parallelism is lowered by one (the job's slot count stays). Each
   rescale cancels the job and restores it from its last checkpoint, keeping its JobID and state.
   This path needs nothing but REST; stop-with-savepoint and resubmission needs the job's
   program and gives a new JobID (benchmarks/flink_placement.py measures both).
4. It waits until every subtask runs, checks each subtask's TaskManager through REST, reads the
   plugin's decision (``<job id>.status.json``), and measures the remote bytes after a settle
   window (:func:`streamsched.engines.flink.capture_live`).
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

from streamsched import metrics
from streamsched.engines.flink.documents import FlinkReading
from streamsched.engines.flink.estimate import read_capture
from streamsched.engines.flink.plugin import PLAN_ENVIRONMENT, PLAN_PROPERTY
from streamsched.engines.flink.rest import FlinkRest, capture_live
from streamsched.errors import InputError, StreamschedError
from streamsched.model.io import read_document
from streamsched.model import Placement

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


@dataclass
class ApplyResult:
    job_id: str
    plan_file: str
    moved: list[dict[str, Any]]
    rescales: list[dict[str, Any]]
    downtime_s: float
    predicted_remote_bytes_per_s: float
    before_remote_bytes_per_s: float | None
    measured_remote_bytes_per_s: float | None
    plugin_status: dict[str, Any]
    held_slots: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def send(rest: FlinkRest, method: str, path: str, body: Any = None) -> Any:
    """A PUT/POST/PATCH to the JobManager; an HTTP error is one ``InputError`` with Flink's message."""
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
        raise InputError(f"{rest.url}: Flink JobManager unreachable ({exc})") from None
    return json.loads(text) if text.strip() else None


def job_view(rest: FlinkRest, job_id: str) -> JobView:
    job = rest.get(f"/jobs/{quote(job_id, safe='')}")
    vertices, where, statuses, attempts, since = [], {}, {}, {}, {}
    for v in job.get("vertices", []):
        vertices.append({"id": v["id"], "name": v["name"], "parallelism": int(v["parallelism"])})
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


def slots_needed(taskmanagers: dict[str, list[str]]) -> dict[str, int]:
    """Slots each TaskManager needs for the plan (one slot sharing group, Flink's default: a
    slot holds one subtask of each vertex): its most numerous vertex's subtask count."""
    need: dict[str, int] = {}
    for tms in taskmanagers.values():
        for tm, n in Counter(tms).items():
            need[tm] = max(need.get(tm, 0), n)
    return need


def placement_targets(placement_file: str | Path, reading, view: JobView) -> tuple[dict[str, list[str]], Placement]:
    """Per vertex id, the TaskManager of each subtask, from a streamsched placement file over the
    job's graph; one-line errors for a placement of another job or cluster."""
    data = read_document(placement_file)
    where = str(placement_file)
    if isinstance(data, dict) and data.get("graph") not in (None, reading.graph.name):
        raise InputError(f"{where}: a placement of graph {data.get('graph')!r}, but job {view.job_id} is "
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
    out = {}
    for v in reading.report["vertices"]:
        first = v["first_task"]
        out[v["id"]] = [reading.cluster.nodes[placement.node_of[first + i]].name for i in range(v["parallelism"])]
    return out, placement


def _wait(rest: FlinkRest, job_id: str, before: JobView, parallelism: dict[str, int], timeout_s: float,
          poll_s: float = 0.1) -> tuple[JobView, float]:
    """Until the job runs every subtask at ``parallelism`` in a new attempt (the rescale
    redeployed them all): that view, and when the job was first seen stopped (else the new
    execution graph's creation)."""
    down = None
    deadline = time.time() + timeout_s
    while True:
        view = job_view(rest, job_id)
        now = time.time()
        if view.state in ("FAILED", "CANCELED", "FINISHED"):
            raise ApplyError(f"job {job_id} went {view.state} while re-planning")
        running = view.state == "RUNNING" and all(s == "RUNNING" for st in view.statuses.values() for s in st)
        if not running and down is None:
            down = now
        redeployed = all(v["parallelism"] == parallelism[v["id"]] for v in view.vertices) and all(
            i >= len(before.attempts.get(vid, [])) or a != before.attempts[vid][i]
            for vid, tries in view.attempts.items() for i, a in enumerate(tries))
        if running and redeployed:
            return view, min(down if down is not None else view.created, view.created)
        if now > deadline:
            raise ApplyError(f"job {job_id} did not run at the requested parallelism within {timeout_s:g} s "
                             f"(state {view.state})")
        time.sleep(poll_s)


def rescale(rest: FlinkRest, job_id: str, upper: dict[str, int], timeout_s: float) -> dict[str, Any]:
    """Set the vertices' parallelism upper bounds and wait for the job to run at them; the
    rescale's times: PUT, stopped (first seen, else the new graph's creation), every subtask
    RUNNING again (Flink's subtask state durations), and the downtime between the last two."""
    path = f"/jobs/{quote(job_id, safe='')}/resource-requirements"
    requirements = rest.get(path)
    for vid, bound in upper.items():
        requirements[vid]["parallelism"]["upperBound"] = bound
        requirements[vid]["parallelism"]["lowerBound"] = min(requirements[vid]["parallelism"]["lowerBound"], bound)
    before = job_view(rest, job_id)
    put = time.time()
    send(rest, "PUT", path, requirements)
    view, down = _wait(rest, job_id, before, upper, timeout_s)
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


def apply(url: str, placement_file: str | Path, job_id: str | None = None, plan_location: str | None = None,
          settle_s: float = 10.0, window_s: float = 10.0, timeout_s: float = 180.0,
          log: Callable[[str], None] = lambda _m: None, before: FlinkReading | None = None) -> ApplyResult:
    """Apply a streamsched placement to a running job (module docstring). ``plan_location``
    defaults to the JobManager's ``-Dstreamsched.flink.placement``; it must be a directory this
    process can write and the JobManager can read. ``before``: a reading of this job the caller
    just took (the graph the placement was made for), so the job is not read twice."""
    from streamsched.engines.flink.rest import running_job

    rest = FlinkRest(url)
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
        raise InputError(f"{rest.url}: the JobManager has no -D{PLAN_PROPERTY}=PATH; give --plan-location "
                         f"(the path the JobManager reads through {PLAN_ENVIRONMENT})")
    if not Path(location).is_dir():
        raise InputError(f"--plan-location {location}: not a directory here (the JobManager's plan directory "
                         f"must be visible to this command)")
    if before is None or before.report.get("job_id") != job_id:
        log(f"reading job {job_id} ({view.name}) for {window_s:g} s")
        before = read_capture(capture_live(rest.url, job_id, window_s=window_s))
    targets, placement = placement_targets(placement_file, before, view)
    for v in view.vertices:
        if v["id"] not in targets:
            raise InputError(f"{placement_file}: job vertex {v['id']} ({v['name']}) is not in the placement")
    need = slots_needed(targets)
    held, free = held_slots(rest, job_id)
    total = {tm: held.get(tm, 0) + free.get(tm, 0) for tm in set(held) | set(free)}
    for tm, n in sorted(need.items()):
        if n > total.get(tm, 0):
            raise InputError(f"{placement_file}: TaskManager {tm} would need {n} slots (a slot holds one subtask "
                             f"of a vertex), it has {total.get(tm, 0)} for this job (slot rule broken)")
    predicted = metrics.inter_node_traffic(before.graph, placement, weight="bytes")
    before_remote = before.report["measured_per_s"].get("bytes_in_remote")
    parallelism = {v["id"]: v["parallelism"] for v in view.vertices}
    missing = sum(max(0, n - held.get(tm, 0)) for tm, n in need.items())
    widest = max(view.vertices, key=lambda v: v["parallelism"])
    narrower = [v for v in view.vertices if 1 < v["parallelism"] < widest["parallelism"]]
    spare = sum(free.values())
    if missing > spare:
        raise ApplyError(f"the plan needs {missing} more slots for job {job_id}, the cluster has {spare} free")
    if missing:  # the job keeps slots it was given beyond its parallelism: ask for that many more
        first_step = {widest["id"]: max(widest["parallelism"], sum(held.values())) + missing}
    elif narrower:
        first_step = {narrower[0]["id"]: narrower[0]["parallelism"] - 1}
    elif spare:
        first_step = {widest["id"]: widest["parallelism"] + 1}
    elif widest["parallelism"] > 1:
        first_step = {widest["id"]: widest["parallelism"] - 1}
    else:
        raise ApplyError(f"job {job_id}: every vertex has parallelism 1 and the cluster no free slot; "
                         "no rescale can make Flink re-plan it")
    log(f"rescale 1/2 (job holds {sum(held.values())} slots, plan needs {sum(need.values())}): upper bounds "
        f"{ {next(v['name'] for v in view.vertices if v['id'] == k): b for k, b in first_step.items()} }")
    one = rescale(rest, job_id, {**parallelism, **first_step}, timeout_s)
    held_now, _free = held_slots(rest, job_id)
    short = {tm: n for tm, n in need.items() if held_now.get(tm, 0) < n}
    if short:
        raise ApplyError(f"job {job_id} holds {held_now} slots; the plan needs {need} (the ResourceManager gave "
                         f"slots elsewhere); nothing was changed beyond the rescale")
    plan_file = Path(location) / f"{job_id}.json"
    temporary = plan_file.with_name(f".{plan_file.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(plan_document(view, targets), indent=1))
    os.replace(temporary, plan_file)
    log(f"plan written to {plan_file}; rescale 2/2 back to the job's parallelism")
    two = rescale(rest, job_id, parallelism, timeout_s)
    status = _status(location, job_id) or {}
    if status.get("time_ms", 0) / 1000 < two["put"] - 1:
        raise ApplyError(f"the placement plugin did not answer for job {job_id} (no fresh {job_id}.status.json in "
                         f"{location}): is the plugin's jar on the JobManager's class path and "
                         f"jobmanager.scheduler: adaptive set?")
    if not status.get("applied"):
        raise ApplyError(f"the placement plugin refused the plan, Flink's default placement runs: {status.get('reason')}")
    after = job_view(rest, job_id)
    wrong = [(v["name"], i, after.where[v["id"]][i], targets[v["id"]][i]) for v in after.vertices
             for i in range(v["parallelism"]) if after.where[v["id"]][i] != targets[v["id"]][i]]
    if wrong:
        name, i, got, want = wrong[0]
        raise ApplyError(f"placement not honoured: {len(wrong)} subtasks off plan, e.g. {name}[{i}] on {got}, "
                         f"planned {want}")
    moved = [{"vertex": v["name"], "subtask": i, "from": view.where[v["id"]][i], "to": targets[v["id"]][i]}
             for v in view.vertices for i in range(v["parallelism"]) if view.where[v["id"]][i] != targets[v["id"]][i]]
    log(f"placement honoured; settling {settle_s:g} s, then measuring for {window_s:g} s")
    time.sleep(settle_s)
    measured = read_capture(capture_live(rest.url, job_id, window_s=window_s)).report["measured_per_s"].get("bytes_in_remote")
    rescales = [{k: v for k, v in r.items() if k != "view"} for r in (one, two)]
    return ApplyResult(job_id, str(plan_file), moved, rescales, one["downtime_s"] + two["downtime_s"], predicted,
                       before_remote, measured, status, held_now)
