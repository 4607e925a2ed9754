"""Flink REST documents: the counters and meters read, the data read from a job, and the parsers of
the JobManager's answers (field names as Flink 2.3 writes them; see the package docstring)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from streamsched.engines import MAX_COUNT
from streamsched.errors import InputError
from streamsched.model.cluster import Cluster, Node
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph

FORMAT = "streamsched.flink-rest/1"
CAPTURE_FILE = "capture.json"
#: Counters read per subtask (cumulative since the subtask attempt started).
COUNTERS = ("numRecordsIn", "numRecordsOut", "numBytesIn", "numBytesOut", "numBytesInLocal",
            "numBytesInRemote", "accumulateBusyTimeMs")
#: The meter (or gauge) standing for each counter's rate when counters cannot be differenced.
METER_OF = {
    "numRecordsIn": "numRecordsInPerSecond",
    "numRecordsOut": "numRecordsOutPerSecond",
    "numBytesIn": "numBytesInPerSecond",
    "numBytesOut": "numBytesOutPerSecond",
    "numBytesInLocal": "numBytesInLocalPerSecond",
    "numBytesInRemote": "numBytesInRemotePerSecond",
    "accumulateBusyTimeMs": "busyTimeMsPerSecond",
}
METERS = tuple(METER_OF.values()) + ("idleTimeMsPerSecond", "backPressuredTimeMsPerSecond")
#: Older spellings of the local/remote byte counters (the netty shuffle's own group).
ALIASES = {
    "numBytesInLocal": "Shuffle.Netty.Input.numBytesInLocal",
    "numBytesInRemote": "Shuffle.Netty.Input.numBytesInRemote",
    "numBytesInLocalPerSecond": "Shuffle.Netty.Input.numBytesInLocalPerSecond",
    "numBytesInRemotePerSecond": "Shuffle.Netty.Input.numBytesInRemotePerSecond",
}
#: Gauges that with ``accumulateBusyTimeMs`` make the subtask's own clock: Flink's
#: ``TaskIOMetricGroup`` computes busy time as ``now - task start - idle - back-pressured`` (when
#: positive), so the three add up to the milliseconds since the task started, read by the
#: TaskManager when it answered the JobManager's metric fetch.
CLOCK_GAUGES = ("accumulateIdleTimeMs", "accumulateBackPressuredTimeMs")
METRIC_NAMES = COUNTERS + METERS + CLOCK_GAUGES + tuple(ALIASES.values())
SHIP_STRATEGIES = ("FORWARD", "REBALANCE", "RESCALE", "HASH", "BROADCAST", "GLOBAL", "SHUFFLE", "CUSTOM")
NODE_BY = ("taskmanager", "host")
DEFAULT_FETCH_INTERVAL_S = 10.0
#: Job age below which the 60 s meters understate rates (MeterView's span plus its 5 s update).
METER_SPAN_S = 65.0


# ------------------------------------------------------------------------------- data
@dataclass(frozen=True)
class Snapshot:
    """The REST documents of one read, keyed by REST path (``jobs/<jid>/plan``), and the time
    (unix seconds) the JobManager's cache held the metrics they hold: ``taskmanagers`` gives,
    per TaskManager, the poll before and the poll at which a fresh answer of that TaskManager
    was seen (its subtasks' metrics come from that answer); a TaskManager it does not name was
    sampled at ``time``."""

    time: float
    documents: Mapping[str, Any]
    where: str = "flink"  # the URL or directory the documents came from (error messages)
    taskmanagers: Mapping[str, tuple[float, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class Capture:
    """One job's snapshots, oldest first; ``where`` names their origin in error messages."""

    job_id: str
    snapshots: tuple[Snapshot, ...]
    url: str | None = None
    where: str = "flink"


@dataclass(frozen=True)
class SubtaskInfo:
    index: int
    attempt: int
    status: str
    taskmanager: str
    endpoint_host: str
    metrics: Mapping[str, float]


@dataclass(frozen=True)
class VertexInfo:
    id: str
    name: str
    parallelism: int
    inputs: tuple[tuple[str, str], ...]  # (upstream vertex id, ship strategy)
    subtasks: tuple[SubtaskInfo, ...]
    slot_sharing_group: str = ""  # /jobs/:jid vertices[].slotSharingGroupId ("" when not given)


@dataclass(frozen=True)
class TaskManagerInfo:
    id: str
    host: str
    slots: int
    cores: float          # hardware.cpuCores: processors the TaskManager's JVM sees
    flink_cores: float    # totalResource.cpuCores: taskmanager.cpu.cores (default: slots)
    memory_mb: float


@dataclass(frozen=True)
class JobState:
    """One snapshot parsed."""

    job_id: str
    name: str
    state: str
    duration_s: float
    vertices: tuple[VertexInfo, ...]
    taskmanagers: tuple[TaskManagerInfo, ...]
    flink_version: str | None


@dataclass(frozen=True)
class FlinkReading:
    """What :func:`read_capture` builds; ``report`` says how (JSON-ready)."""

    graph: TaskGraph
    placement: Placement
    cluster: Cluster
    report: dict[str, Any]
    warnings: tuple[str, ...] = field(default=())


# ------------------------------------------------------------------------- parsing
def _where(where: str, key: str) -> str:
    """``<url>/<key>`` for a live JobManager, ``<dir>/<key>.json`` for saved responses."""
    return f"{where.rstrip('/')}/{key}" if where.startswith(("http://", "https://")) else f"{where}/{key}.json"


def _doc(documents: Mapping[str, Any], key: str, where: str, required: bool = True) -> Any:
    if key not in documents:
        if required:
            raise InputError(f"{_where(where, key)}: missing (needed for the Flink reader)")
        return None
    return documents[key]


def _get(obj: Any, key: str, where: str, kind: type | tuple[type, ...], required: bool = True) -> Any:
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected an object")
    if key not in obj or obj[key] is None:
        if required:
            raise InputError(f"{where}.{key}: missing")
        return None
    value = obj[key]
    if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise InputError(f"{where}.{key}: expected {names}, got {value!r}")
    return value


def _metric_value(raw: Any, where: str) -> float:
    """A metric value: Flink writes them as strings (``"12"``, ``"0.5"``, ``"NaN"``)."""
    if isinstance(raw, (int, float, str)) and not isinstance(raw, bool):
        try:
            return float(raw.strip() if isinstance(raw, str) else raw)
        except (ValueError, OverflowError):
            pass
    raise InputError(f"{where}: expected a number (as a string), got {raw!r}")


def parse_metrics(doc: Any, where: str) -> dict[str, float]:
    """``[{"id": name, "value": "1.5"}, ...]`` -> ``{name: 1.5}``; aliases fill missing names. A
    metric the reader uses (:data:`METRIC_NAMES`) may be NaN (Flink's "nothing to say"), not
    infinite nor beyond 2^63 either way (``MAX_COUNT``: Flink's counters are Java longs)."""
    if not isinstance(doc, list):
        raise InputError(f"{where}: expected a list of {{id, value}}")
    out: dict[str, float] = {}
    for k, item in enumerate(doc):
        name = _get(item, "id", f"{where}[{k}]", str)
        raw = _get(item, "value", f"{where}[{k}]", (str, int, float))
        out[name] = value = _metric_value(raw, f"{where}[{k}].value ({name})")
        if name in METRIC_NAMES and abs(value) > MAX_COUNT:
            raise InputError(f"{where}[{k}].value ({name}): {raw!r} is beyond 2^63 ({MAX_COUNT:.4g}): no Flink "
                             f"counter is (a Java long)")
    for name, alias in ALIASES.items():
        if name not in out and alias in out:
            out[name] = out[alias]
    return out


def _host_of(address: str) -> str:
    """Host of ``pekko.tcp://flink@10.0.0.5:6122/user/rpc/taskmanager_0``, ``host:port`` or
    ``host:port-suffix``."""
    if "@" in address:
        address = address.split("@", 1)[1]
    address = address.split("/", 1)[0]
    if address.startswith("["):  # [ipv6]:port
        return address[1:].split("]", 1)[0]
    return address.rsplit(":", 1)[0] if ":" in address else address


def parse_taskmanagers(doc: Any, where: str) -> tuple[TaskManagerInfo, ...]:
    items = _get(doc, "taskmanagers", where, list)
    out = []
    for k, tm in enumerate(items):
        w = f"{where}.taskmanagers[{k}]"
        tm_id = _get(tm, "id", w, str)
        path = _get(tm, "path", w, str, required=False)
        slots = _get(tm, "slotsNumber", w, int)
        hardware = _get(tm, "hardware", w, dict, required=False) or {}
        cores = _get(hardware, "cpuCores", f"{w}.hardware", (int, float), required=False)
        resource = _get(tm, "totalResource", w, dict, required=False) or {}
        flink_cores = _get(resource, "cpuCores", f"{w}.totalResource", (int, float), required=False)
        memory = _get(tm, "memoryConfiguration", w, dict, required=False) or {}
        process = _get(memory, "totalProcessMemory", f"{w}.memoryConfiguration", (int, float), required=False)
        if cores is None and flink_cores is None:
            raise InputError(f"{w}: neither hardware.cpuCores nor totalResource.cpuCores")
        cores = float(cores if cores is not None else flink_cores)
        flink_cores = float(flink_cores if flink_cores else cores)
        out.append(TaskManagerInfo(
            id=tm_id, host=_host_of(path or tm_id), slots=slots, cores=cores, flink_cores=flink_cores,
            memory_mb=float(process) / 2**20 if process else Node.__dataclass_fields__["ram_mb"].default))
    return tuple(out)


def parse_snapshot(documents: Mapping[str, Any], job_id: str, where: str) -> JobState:
    """The job's vertices (in ``/jobs/:jid`` order), ship strategies, subtasks with their
    TaskManager and metrics, and the TaskManagers."""
    job_key = f"jobs/{job_id}"
    job = _doc(documents, job_key, where)
    w = _where(where, job_key)
    name = _get(job, "name", w, str)
    state = _get(job, "state", w, str, required=False) or "UNKNOWN"
    duration = _get(job, "duration", w, (int, float), required=False) or 0
    listed = _get(job, "vertices", w, list)
    plan_doc = documents.get(f"{job_key}/plan")
    plan_where = _where(where, f"{job_key}/plan")
    if plan_doc is None:
        plan_doc, plan_where = _get(job, "plan", w, dict), f"{w}.plan"
    elif "plan" in plan_doc:
        plan_doc, plan_where = plan_doc["plan"], f"{plan_where}.plan"
    inputs: dict[str, list[tuple[str, str]]] = {}
    for k, node in enumerate(_get(plan_doc, "nodes", plan_where, list)):
        nw = f"{plan_where}.nodes[{k}]"
        node_id = _get(node, "id", nw, str)
        for m, item in enumerate(_get(node, "inputs", nw, list, required=False) or []):
            iw = f"{nw}.inputs[{m}]"
            strategy = _get(item, "ship_strategy", iw, str).strip().upper()
            inputs.setdefault(node_id, []).append((_get(item, "id", iw, str), strategy))
    vertices = []
    ids = set()
    for k, vertex in enumerate(listed):
        vw = f"{w}.vertices[{k}]"
        vid = _get(vertex, "id", vw, str)
        ids.add(vid)
        vname = _get(vertex, "name", vw, str)
        group = _get(vertex, "slotSharingGroupId", vw, str, required=False) or ""
        parallelism = _get(vertex, "parallelism", vw, int)
        if parallelism < 1:
            raise InputError(f"{vw}.parallelism: {parallelism}; must be >= 1")
        vkey = f"{job_key}/vertices/{vid}"
        details = _doc(documents, vkey, where)
        dw = _where(where, vkey)
        subtasks: list[SubtaskInfo | None] = [None] * parallelism
        for m, sub in enumerate(_get(details, "subtasks", dw, list)):
            sw = f"{dw}.subtasks[{m}]"
            index = _get(sub, "subtask", sw, int)
            if not 0 <= index < parallelism:
                raise InputError(f"{sw}.subtask: {index} outside 0..{parallelism - 1}")
            endpoint = _get(sub, "endpoint", sw, str, required=False) or _get(sub, "host", sw, str, required=False) or ""
            mkey = f"{vkey}/subtasks/{index}/metrics"
            metrics = parse_metrics(documents[mkey], _where(where, mkey)) if mkey in documents else {}
            subtasks[index] = SubtaskInfo(
                index=index, attempt=_get(sub, "attempt", sw, int, required=False) or 0,
                status=_get(sub, "status", sw, str, required=False) or "UNKNOWN",
                taskmanager=_get(sub, "taskmanager-id", sw, str, required=False) or "",
                endpoint_host=_host_of(endpoint) if endpoint else "", metrics=metrics)
        missing = [i for i, s in enumerate(subtasks) if s is None]
        if missing:
            raise InputError(f"{dw}.subtasks: subtask {missing[0]} of {parallelism} is not listed")
        vertices.append(VertexInfo(vid, vname, parallelism, tuple(inputs.get(vid, ())), tuple(subtasks), group))
    for vertex in vertices:
        for upstream, strategy in vertex.inputs:
            if upstream not in ids:
                raise InputError(f"{plan_where}: input {upstream} of vertex {vertex.name!r} is not a vertex of {w}")
    tm_doc = _doc(documents, "taskmanagers", where)
    taskmanagers = parse_taskmanagers(tm_doc, _where(where, "taskmanagers"))
    overview = documents.get("overview")
    version = overview.get("flink-version") if isinstance(overview, dict) else None
    return JobState(job_id, name, state, float(duration) / 1000.0, tuple(vertices), taskmanagers,
                    version if isinstance(version, str) else None)
