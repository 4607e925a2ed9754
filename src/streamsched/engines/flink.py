"""Apache Flink: the subtask-level task graph, the current placement and the observed cluster of
one running job, from the JobManager's REST API (live) or from saved REST JSON
(docs/engines.md, "Flink").

What is read (field names as Flink 2.3 writes them; checked against a live cluster):

- ``/jobs/:jid``: name, state, ``duration``, ``vertices[]`` (``id``, ``name``, ``parallelism``)
  in Flink's topological order;
- ``/jobs/:jid/plan``: ``plan.nodes[].inputs[]`` (``id`` of the upstream vertex,
  ``ship_strategy``: FORWARD, REBALANCE, RESCALE, HASH, BROADCAST, also GLOBAL, SHUFFLE, CUSTOM);
- ``/jobs/:jid/vertices/:vid``: ``subtasks[]`` with ``subtask``, ``attempt``, ``status``,
  ``taskmanager-id`` and ``endpoint`` (``host:dataPort``; older Flink: ``host``);
- ``/jobs/:jid/vertices/:vid/subtasks/:i/metrics?get=...``: ``[{"id", "value"}]``, values as
  strings (``"NaN"`` for an unmeasured busy time): the counters :data:`COUNTERS` and the meters
  and gauges :data:`METERS`;
- ``/taskmanagers``: ``id``, ``path`` (the RPC address, whose host is the TaskManager's host),
  ``slotsNumber``, ``hardware.cpuCores``, ``totalResource.cpuCores``,
  ``memoryConfiguration.totalProcessMemory``;
- ``/overview`` (optional): ``flink-version``; ``/jobmanager/config`` (live only):
  ``metrics.fetcher.update-interval``.

**Rates.** The JobManager answers metric requests from a cache that it refreshes at most every
``metrics.fetcher.update-interval`` (default 10 s), and only when a request comes in. A live
capture (:func:`capture_live`) therefore waits for a fresh fetch (it polls the job's counters
until they change; the fetch was triggered by the poll before) and reads every document before
the next fetch can happen (checked: the counters are unchanged at the end, else it reads again).
Two such snapshots ``window_s`` apart give rates as counter differences over the fetch times
(exact up to the poll interval). One snapshot gives Flink's meters (``...PerSecond``), which
are 60 s moving averages: a job younger than about 65 s is understated (a warning says so).

**Saved layout** (:func:`save_capture`, :func:`load_capture`): a directory with
``capture.json`` (``{"format": "streamsched.flink-rest/1", "url", "job_id", "snapshots":
[{"dir": "0", "time": <unix s>}, ...]}``) and one sub-directory per snapshot holding every
response under its REST path plus ``.json``: ``overview.json``, ``taskmanagers.json``,
``jobs/<jid>.json``, ``jobs/<jid>/plan.json``, ``jobs/<jid>/vertices/<vid>.json``,
``jobs/<jid>/vertices/<vid>/subtasks/<i>/metrics.json``. A directory without ``capture.json``
is one snapshot in that layout (for example saved with ``curl``), taken at the job's ``now``.

:func:`read_capture` builds the graph (one task per subtask; task id = the subtask's position
in the vertices' order, ``offset(vertex) + subtask index``; operator = job vertex name), the
placement (node = TaskManager, or its host with ``node_by="host"``) and the cluster. Pair rates
per ship strategy are documented in :func:`pair_weights`. Pure Python: ``urllib`` and ``json``.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import quote, urlsplit

import numpy as np

from streamsched.engines.rest_client import HTTPStatusError, get_json
from streamsched.errors import InputError
from streamsched.io import read_document
from streamsched.model.cluster import Cluster, Node
from streamsched.model.placement import NO_WORKER, Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.model.units import CORES

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
METRIC_NAMES = COUNTERS + METERS + tuple(ALIASES.values())
SHIP_STRATEGIES = ("FORWARD", "REBALANCE", "RESCALE", "HASH", "BROADCAST", "GLOBAL", "SHUFFLE", "CUSTOM")
NODE_BY = ("taskmanager", "host")
DEFAULT_FETCH_INTERVAL_S = 10.0
#: Job age below which the 60 s meters understate rates (MeterView's span plus its 5 s update).
METER_SPAN_S = 65.0


# ------------------------------------------------------------------------------- data
@dataclass(frozen=True)
class Snapshot:
    """The REST documents of one consistent read, keyed by REST path (``jobs/<jid>/plan``),
    and the time (unix seconds) the JobManager sampled the metrics they hold."""

    time: float
    documents: Mapping[str, Any]
    where: str = "flink"  # the URL or directory the documents came from (error messages)


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
    if isinstance(raw, bool):
        raise InputError(f"{where}: expected a number, got {raw!r}")
    if isinstance(raw, (int, float)):
        return float(raw)
    if isinstance(raw, str):
        try:
            return float(raw.strip())
        except ValueError:
            pass
    raise InputError(f"{where}: expected a number (as a string), got {raw!r}")


def parse_metrics(doc: Any, where: str) -> dict[str, float]:
    """``[{"id": name, "value": "1.5"}, ...]`` -> ``{name: 1.5}``; aliases fill missing names."""
    if not isinstance(doc, list):
        raise InputError(f"{where}: expected a list of {{id, value}}")
    out: dict[str, float] = {}
    for k, item in enumerate(doc):
        name = _get(item, "id", f"{where}[{k}]", str)
        out[name] = _metric_value(_get(item, "value", f"{where}[{k}]", (str, int, float)), f"{where}[{k}].value ({name})")
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
        vertices.append(VertexInfo(vid, vname, parallelism, tuple(inputs.get(vid, ())), tuple(subtasks)))
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


# -------------------------------------------------------------------- pair weights
def pointwise_pairs(p_up: int, p_down: int) -> tuple[np.ndarray, np.ndarray]:
    """Sender -> receiver pairs of a pointwise (RESCALE) connection, as Flink connects them
    (checked on a live cluster: 2 -> 3 gives {0: 0, 1}, {1: 2}; 3 -> 2 gives {0: 0}, {1, 2: 1}):

    - equal parallelism: ``i -> i``;
    - fan-out (``p_up < p_down``): receiver ``j`` is fed by sender ``floor(j * p_up / p_down)``;
    - fan-in (``p_up > p_down``): receiver ``j`` is fed by senders
      ``floor(j * p_up / p_down) .. floor((j + 1) * p_up / p_down) - 1``.
    """
    if p_up == p_down:
        s = np.arange(p_up)
        return s, s.copy()
    if p_up < p_down:
        d = np.arange(p_down)
        return d * p_up // p_down, d
    senders, receivers = [], []
    for j in range(p_down):
        lo, hi = j * p_up // p_down, (j + 1) * p_up // p_down
        senders.extend(range(lo, hi))
        receivers.extend([j] * (hi - lo))
    return np.asarray(senders, dtype=np.int64), np.asarray(receivers, dtype=np.int64)


def pair_weights(strategy: str, p_up: int, p_down: int, received: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """``(sender, receiver, weight, exact)``: the pairs one job edge connects; a pair's record
    rate is the sender's records out x ``weight``.

    - FORWARD: ``i -> i`` (equal parallelism; otherwise Flink would not allow it, and the
      pointwise pairs are used);
    - REBALANCE, SHUFFLE: ``1 / p_down`` to every receiver (round robin: exact up to one record);
    - RESCALE: the pointwise pairs of :func:`pointwise_pairs`, a sender's records split evenly
      over its receivers (round robin within the group);
    - HASH, CUSTOM (and any other strategy): receiver ``j`` gets its share of the records the
      receivers got, ``received[j] / sum(received)``, from every sender (exact per receiver;
      the split over senders assumes that every sender sees the same key distribution);
    - BROADCAST: ``1`` to every receiver (exact);
    - GLOBAL: ``1`` to receiver 0 (exact).
    """
    if strategy == "FORWARD" and p_up == p_down or strategy == "GLOBAL":
        s = np.arange(p_up)
        d = s.copy() if strategy == "FORWARD" else np.zeros(p_up, dtype=np.int64)
        return s, d, np.ones(p_up), True
    if strategy in ("RESCALE", "FORWARD"):
        s, d = pointwise_pairs(p_up, p_down)
        fan = np.bincount(s, minlength=p_up).astype(np.float64)
        return s, d, 1.0 / fan[s], True
    s = np.repeat(np.arange(p_up), p_down)
    d = np.tile(np.arange(p_down), p_up)
    if strategy in ("REBALANCE", "SHUFFLE"):
        return s, d, np.full(s.size, 1.0 / p_down), True
    if strategy == "BROADCAST":
        return s, d, np.ones(s.size), True
    received = np.asarray(received, dtype=np.float64)
    total = received.sum()
    share = received / total if total > 0 else np.full(p_down, 1.0 / p_down)
    return s, d, share[d], False


# ------------------------------------------------------------------------ estimate
def _rates(first: JobState, last: JobState, dt: float) -> tuple[dict[tuple[str, int], dict[str, float]], list[str]]:
    """Per (vertex id, subtask) the rate of every counter: differences between the first and
    the last snapshot when possible, else the last snapshot's meter."""
    before = {(v.id, s.index): s for v in first.vertices for s in v.subtasks} if dt > 0 else {}
    out: dict[tuple[str, int], dict[str, float]] = {}
    from_meters: list[str] = []
    for v in last.vertices:
        for s in v.subtasks:
            old = before.get((v.id, s.index))
            rates: dict[str, float] = {}
            for name in COUNTERS:
                value = s.metrics.get(name, math.nan)
                if (old is not None and old.attempt == s.attempt and math.isfinite(value)
                        and math.isfinite(old.metrics.get(name, math.nan)) and value >= old.metrics[name]):
                    rates[name] = (value - old.metrics[name]) / dt
                else:
                    rates[name] = s.metrics.get(METER_OF[name], math.nan)
                    if dt > 0 and name in ("numRecordsIn", "numRecordsOut") and (old is None or old.attempt != s.attempt):
                        from_meters.append(f"{v.name}[{s.index}]")
            for name in ("idleTimeMsPerSecond", "backPressuredTimeMsPerSecond"):
                rates[name] = s.metrics.get(name, math.nan)
            out[(v.id, s.index)] = rates
    return out, sorted(set(from_meters))


def read_capture(capture: Capture, node_by: str = "taskmanager") -> FlinkReading:
    """Graph, current placement and observed cluster of the captured job.

    ``node_by``: ``taskmanager`` (default: one node per TaskManager, which is where Flink's
    local/remote distinction lies, capacity ``totalResource.cpuCores``) or ``host`` (one node
    per host, capacity the host's cores, worker = the TaskManager's index on it).
    """
    if node_by not in NODE_BY:
        raise InputError(f"node_by: {node_by!r} is not one of {', '.join(NODE_BY)}")
    if not capture.snapshots:
        raise InputError(f"{capture.where}: no snapshot")
    warnings: list[str] = []
    states = [parse_snapshot(s.documents, capture.job_id, s.where) for s in capture.snapshots]
    first, last = states[0], states[-1]
    dt = capture.snapshots[-1].time - capture.snapshots[0].time if len(states) > 1 else 0.0
    if len(states) > 1 and not dt > 0:
        raise InputError(f"{capture.where}: snapshot times do not increase ({capture.snapshots[0].time} .. "
                         f"{capture.snapshots[-1].time})")
    if [(v.id, v.parallelism) for v in first.vertices] != [(v.id, v.parallelism) for v in last.vertices]:
        warnings.append("the job's vertices or parallelism changed between the snapshots; the last ones are used")
        first, dt = last, 0.0
    rates, from_meters = _rates(first, last, dt)
    if from_meters:
        warnings.append(f"subtasks restarted during the window, their rates are Flink's 60 s meters: "
                        f"{', '.join(from_meters[:5])}{' ...' if len(from_meters) > 5 else ''}")
    if dt <= 0 and last.duration_s < METER_SPAN_S:
        warnings.append(f"rates are Flink's 60 s meters and the job ran {last.duration_s:.0f} s: they understate "
                        f"(capture two snapshots, e.g. --window 10)")
    vertices = last.vertices
    offsets = np.cumsum([0] + [v.parallelism for v in vertices])
    index = {v.id: k for k, v in enumerate(vertices)}
    n = int(offsets[-1])

    def column(v: VertexInfo, name: str) -> np.ndarray:
        return np.array([rates[(v.id, i)][name] for i in range(v.parallelism)], dtype=np.float64)

    rec_in = {v.id: np.nan_to_num(column(v, "numRecordsIn"), nan=0.0) for v in vertices}
    rec_out = {v.id: np.nan_to_num(column(v, "numRecordsOut"), nan=0.0) for v in vertices}
    bytes_in = {v.id: np.nan_to_num(column(v, "numBytesIn"), nan=0.0) for v in vertices}
    bytes_out = {v.id: np.nan_to_num(column(v, "numBytesOut"), nan=0.0) for v in vertices}

    srcs, dsts, pair_rates, pair_bytes, edge_report = [], [], [], [], []
    for v in vertices:
        for upstream, strategy in v.inputs:
            u = vertices[index[upstream]]
            s, d, weight, exact = pair_weights(strategy, u.parallelism, v.parallelism, rec_in[v.id])
            if strategy not in SHIP_STRATEGIES:
                warnings.append(f"ship strategy {strategy!r} ({u.name} -> {v.name}) is read as HASH (receivers' shares)")
            if strategy == "FORWARD" and u.parallelism != v.parallelism:
                warnings.append(f"FORWARD {u.name} -> {v.name} with parallelism {u.parallelism} -> {v.parallelism}: "
                                f"pointwise pairs used")
            r = rec_out[u.id][s] * weight
            total_from = "senders"
            if len(v.inputs) == 1 and r.sum() > 0 and rec_in[v.id].sum() > 0:
                r = r * (rec_in[v.id].sum() / r.sum())
                total_from = "receivers"
            bpr = _bytes_per_record(rec_in[v.id], bytes_in[v.id], rec_out[u.id], bytes_out[u.id])
            srcs.append(s + offsets[index[u.id]])
            dsts.append(d + offsets[index[v.id]])
            pair_rates.append(r)
            pair_bytes.append(r * bpr[d])
            edge_report.append({"from": u.name, "to": v.name, "ship_strategy": strategy, "pairs": int(s.size),
                                "records_per_s": float(r.sum()), "bytes_per_s": float((r * bpr[d]).sum()),
                                "total_from": total_from, "exact_split": exact})

    loads, fallback = _loads(vertices, rates, rec_in, rec_out)
    if fallback:
        warnings.append(f"no busy time for {len(fallback)} subtasks (Flink gives NaN for sources): their load is "
                        f"estimated (docs/engines.md, Flink)")
    operator_names = _unique_names(vertices)
    task_operator = np.repeat(np.arange(len(vertices)), [v.parallelism for v in vertices])
    cat = lambda parts, dtype: np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)
    graph = TaskGraph.build(
        name=last.name, operator_names=operator_names, task_operator=task_operator, load=loads,
        src=cat(srcs, np.int64), dst=cat(dsts, np.int64), rate=cat(pair_rates, np.float64),
        bytes_rate=cat(pair_bytes, np.float64), where=f"{capture.where}: job {capture.job_id}", load_unit=CORES)
    cluster, placement, tm_report = _placement(last, node_by, n, capture.job_id, warnings)
    measured: dict[str, float | None] = {}
    for name in ("numBytesIn", "numBytesInLocal", "numBytesInRemote", "numRecordsIn", "numRecordsOut"):
        values = [rates[(v.id, i)][name] for v in vertices for i in range(v.parallelism)]
        known = [x for x in values if math.isfinite(x)]
        measured[name] = float(sum(max(x, 0.0) for x in known)) if known else None
    report = {
        "engine": "flink",
        "job_id": capture.job_id,
        "job_name": last.name,
        "state": last.state,
        "flink_version": last.flink_version,
        "url": capture.url,
        "snapshots": len(states),
        "rates_from": "counters" if dt > 0 else "meters",
        "window_s": dt,
        "job_age_s": last.duration_s,
        "node_by": node_by,
        "vertices": [{"id": v.id, "name": name, "parallelism": v.parallelism, "first_task": int(offsets[k]),
                      "inputs": [{"from": vertices[index[u]].name, "ship_strategy": st} for u, st in v.inputs],
                      "records_in_per_s": float(rec_in[v.id].sum()), "records_out_per_s": float(rec_out[v.id].sum()),
                      "busy_cores": float(loads[offsets[k]:offsets[k + 1]].sum())}
                     for k, (v, name) in enumerate(zip(vertices, operator_names))],
        "edges": edge_report,
        "load_fallback_tasks": fallback,
        "measured_per_s": {"bytes_in": measured["numBytesIn"], "bytes_in_local": measured["numBytesInLocal"],
                           "bytes_in_remote": measured["numBytesInRemote"],
                           "records_in": measured["numRecordsIn"], "records_out": measured["numRecordsOut"]},
        "taskmanagers": tm_report,
    }
    return FlinkReading(graph, placement, cluster, report, tuple(warnings))


def _bytes_per_record(rec_in: np.ndarray, bytes_in: np.ndarray, rec_out: np.ndarray, bytes_out: np.ndarray) -> np.ndarray:
    """Bytes per record at each receiver: its own ``numBytesIn / numRecordsIn`` (what it read
    off the wire, all its inputs together), else its vertex's average, else the senders'
    ``numBytesOut / numRecordsOut`` (Flink counts a sender's bytes per finished buffer), else 0."""
    total_in = rec_in.sum()
    if total_in > 0:
        average = bytes_in.sum() / total_in
    elif rec_out.sum() > 0:
        average = bytes_out.sum() / rec_out.sum()
    else:
        average = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        own = np.where(rec_in > 0, bytes_in / np.where(rec_in > 0, rec_in, 1), average)
    return own


def _loads(vertices: Sequence[VertexInfo], rates: Mapping[tuple[str, int], Mapping[str, float]],
           rec_in: Mapping[str, np.ndarray], rec_out: Mapping[str, np.ndarray]) -> tuple[np.ndarray, list[int]]:
    """Busy cores per subtask: busy ms per second / 1000 (``accumulateBusyTimeMs`` differenced,
    else the ``busyTimeMsPerSecond`` gauge). Where Flink gives NaN (sources): ``1 - idle -
    back-pressured`` when the subtask reports idle time, else the job's median busy time per
    record processed times the subtask's records (in, or out for a source), else 0."""
    loads, unknown, per_record = [], [], []
    offset = 0
    for v in vertices:
        for i in range(v.parallelism):
            r = rates[(v.id, i)]
            busy = r["accumulateBusyTimeMs"]
            idle, pressured = r["idleTimeMsPerSecond"], r["backPressuredTimeMsPerSecond"]
            records = rec_in[v.id][i] if v.inputs else rec_out[v.id][i]
            if not math.isfinite(busy) and math.isfinite(idle) and idle > 0:
                busy = max(0.0, 1000.0 - idle - (pressured if math.isfinite(pressured) else 0.0))
            if math.isfinite(busy):
                busy = min(max(busy, 0.0), 1000.0)
                loads.append(busy / 1000.0)
                if records > 0:
                    per_record.append(busy / 1000.0 / records)
            else:
                loads.append(math.nan)
                unknown.append((offset + i, records))
        offset += v.parallelism
    out = np.asarray(loads, dtype=np.float64)
    cost = float(np.median(per_record)) if per_record else 0.0
    for task, records in unknown:
        out[task] = min(1.0, cost * records)
    return out, [t for t, _ in unknown]


def _unique_names(vertices: Sequence[VertexInfo]) -> list[str]:
    seen: dict[str, int] = {}
    for v in vertices:
        seen[v.name] = seen.get(v.name, 0) + 1
    return [v.name if seen[v.name] == 1 else f"{v.name} ({v.id[:8]})" for v in vertices]


def _placement(state: JobState, node_by: str, n: int, job_id: str, warnings: list[str]):
    """The observed cluster (every registered TaskManager) and each subtask's node and worker."""
    tms = {tm.id: tm for tm in state.taskmanagers}
    for v in state.vertices:
        for s in v.subtasks:
            if s.taskmanager and s.taskmanager not in tms:
                warnings.append(f"subtask {v.name}[{s.index}] runs on TaskManager {s.taskmanager!r}, which "
                                f"/taskmanagers does not list; it gets the largest known TaskManager's resources")
                like = max(state.taskmanagers, key=lambda t: t.cores, default=None)
                tms[s.taskmanager] = TaskManagerInfo(
                    s.taskmanager, s.endpoint_host or _host_of(s.taskmanager), like.slots if like else 1,
                    like.cores if like else 1.0, like.flink_cores if like else 1.0,
                    like.memory_mb if like else Node.__dataclass_fields__["ram_mb"].default)
    if not tms:
        raise InputError(f"job {job_id}: no TaskManager is registered and no subtask is deployed")
    ordered = sorted(tms.values(), key=lambda t: (t.host, t.id))
    if node_by == "taskmanager":
        nodes = [Node(name=tm.id, capacity=min(tm.flink_cores, tm.cores), slots=1, cores=max(1, math.ceil(tm.cores)),
                      ram_mb=tm.memory_mb) for tm in ordered]
        node_of_tm = {tm.id: (k, 0) for k, tm in enumerate(ordered)}
    else:
        hosts: dict[str, list[TaskManagerInfo]] = {}
        for tm in ordered:
            hosts.setdefault(tm.host, []).append(tm)
        nodes, node_of_tm = [], {}
        for k, (host, group) in enumerate(hosts.items()):
            cores = max(tm.cores for tm in group)
            nodes.append(Node(name=host, capacity=cores, slots=len(group), cores=max(1, math.ceil(cores)),
                              ram_mb=sum(tm.memory_mb for tm in group)))
            for w, tm in enumerate(group):
                node_of_tm[tm.id] = (k, w)
    node_of = np.full(n, -1, dtype=np.int64)
    worker_of = np.full(n, NO_WORKER, dtype=np.int64)
    unplaced = []
    t = 0
    for v in state.vertices:
        for s in v.subtasks:
            if s.taskmanager in node_of_tm:
                node_of[t], worker_of[t] = node_of_tm[s.taskmanager]
            else:
                unplaced.append(f"{v.name}[{s.index}] ({s.status})")
            t += 1
    if unplaced:
        warnings.append(f"{len(unplaced)} subtasks run on no TaskManager (node -1 in the placement): "
                        f"{', '.join(unplaced[:5])}{' ...' if len(unplaced) > 5 else ''}")
    cluster = Cluster(name=f"flink-{state.name}", nodes=tuple(nodes), capacity_unit=CORES)
    placement = Placement.build(node_of, worker_of, {"engine": "flink", "job_id": job_id, "node_by": node_by,
                                                     "current": True})
    return cluster, placement, {tm.id: {"host": tm.host, "slots": tm.slots, "cores": tm.cores} for tm in ordered}


# ---------------------------------------------------------------------- saved files
def save_capture(capture: Capture, directory: str | Path) -> Path:
    """Write ``capture.json`` and one directory per snapshot (layout in the module docstring)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    entries = []
    for k, snap in enumerate(capture.snapshots):
        root = directory / str(k)
        for key, doc in sorted(snap.documents.items()):
            path = root / f"{key}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        entries.append({"dir": str(k), "time": snap.time})
    manifest = {"format": FORMAT, "url": capture.url, "job_id": capture.job_id, "snapshots": entries}
    (directory / CAPTURE_FILE).write_text(json.dumps(manifest, indent=1) + "\n")
    return directory


def _read_tree(root: Path) -> dict[str, Any]:
    documents = {}
    for path in sorted(root.rglob("*.json")):
        key = path.relative_to(root).as_posix()[: -len(".json")]
        if key == "capture":
            continue
        documents[key] = read_document(path)
    return documents


def load_capture(directory: str | Path) -> Capture:
    """Read what :func:`save_capture` wrote, or a bare directory of REST responses."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(f"{directory}: not a directory")
    manifest_path = directory / CAPTURE_FILE
    if manifest_path.is_file():
        manifest = read_document(manifest_path)
        w = str(manifest_path)
        if _get(manifest, "format", w, str) != FORMAT:
            raise InputError(f"{w}.format: expected {FORMAT!r}")
        job_id = _get(manifest, "job_id", w, str)
        snapshots = []
        for k, entry in enumerate(_get(manifest, "snapshots", w, list)):
            ew = f"{w}.snapshots[{k}]"
            sub = _get(entry, "dir", ew, str)
            when = _get(entry, "time", ew, (int, float))
            root = directory / sub
            if not root.is_dir():
                raise InputError(f"{ew}.dir: {root} is not a directory")
            snapshots.append(Snapshot(float(when), _read_tree(root), str(root)))
        if not snapshots:
            raise InputError(f"{w}.snapshots: empty")
        url = manifest.get("url") if isinstance(manifest.get("url"), str) else None
        return Capture(job_id, tuple(snapshots), url, str(directory))
    documents = _read_tree(directory)
    jobs = sorted(key.split("/")[1] for key in documents if re.fullmatch(r"jobs/[^/]+", key))
    if len(jobs) != 1:
        raise InputError(f"{directory}: expected {CAPTURE_FILE} or exactly one jobs/<job id>.json, found "
                         f"{len(jobs)}{': ' + ', '.join(jobs) if jobs else ''}")
    job = documents[f"jobs/{jobs[0]}"]
    now = job.get("now") if isinstance(job, dict) else None
    when = float(now) / 1000.0 if isinstance(now, (int, float)) and not isinstance(now, bool) else 0.0
    return Capture(jobs[0], (Snapshot(when, documents, str(directory)),), None, str(directory))


# ---------------------------------------------------------------------------- live
class FlinkRest:
    """A JobManager's REST API (``http://host:8081``): JSON over ``urllib`` with a timeout;
    an unreachable server or an HTTP error is one ``InputError``."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise InputError(f"--url: {url!r} is not an http(s) URL of a Flink JobManager")
        if not (timeout > 0 and math.isfinite(timeout)):
            raise InputError(f"--timeout: {timeout!r}; must be a positive number of seconds")
        self.url = url.rstrip("/")
        self.timeout = timeout

    def get(self, path: str) -> Any:
        return get_json(f"{self.url}/{path.lstrip('/')}", self.timeout, "Flink JobManager", _flink_error)


def _flink_error(body: Any) -> str:
    """The first line of the first of Flink's ``{"errors": [...]}``."""
    errors = body.get("errors") or []
    return str(errors[0]).splitlines()[0][:200] if errors else ""


def running_job(rest: FlinkRest) -> str:
    """The id of the only RUNNING job (else an error listing the jobs)."""
    jobs = _get(rest.get("/jobs/overview"), "jobs", f"{rest.url}/jobs/overview", list)
    running = [j.get("jid") for j in jobs if isinstance(j, dict) and j.get("state") == "RUNNING"]
    if len(running) != 1:
        listed = ", ".join(f"{j.get('jid')} ({j.get('name')}, {j.get('state')})" for j in jobs if isinstance(j, dict))
        raise InputError(f"{rest.url}: {len(running)} running jobs; give --job-id ({listed or 'no jobs'})")
    return str(running[0])


def fetch_interval(rest: FlinkRest) -> float:
    """``metrics.fetcher.update-interval`` of the JobManager, seconds (default 10)."""
    try:
        config = rest.get("/jobmanager/config")
    except HTTPStatusError:
        return DEFAULT_FETCH_INTERVAL_S
    for item in config if isinstance(config, list) else []:
        if isinstance(item, dict) and item.get("key") == "metrics.fetcher.update-interval":
            text = str(item.get("value", "")).strip().lower()
            match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(ms|s|min)?", text)
            if match:
                scale = {"ms": 1e-3, "s": 1.0, "min": 60.0, None: 1e-3}[match.group(2)]
                return float(match.group(1)) * scale
    return DEFAULT_FETCH_INTERVAL_S


def _counters(job: Any) -> tuple:
    """The job's per-vertex IO counters (``/jobs/:jid``), all from the JobManager's cache."""
    out = []
    for vertex in job.get("vertices", []) if isinstance(job, dict) else []:
        metrics = vertex.get("metrics") or {}
        out.append((vertex.get("id"), metrics.get("read-records"), metrics.get("write-records"),
                    metrics.get("read-bytes"), metrics.get("write-bytes")))
    return tuple(out)


def take_snapshot(rest: FlinkRest, job_id: str, interval_s: float | None = None, poll_s: float = 0.2,
                  clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> Snapshot:
    """Every document of the job from one metric fetch of the JobManager, and the fetch time.

    Polls ``/jobs/:jid`` every ``poll_s`` until its counters change (the JobManager fetched
    metrics, asked by the poll before: that poll's time is the sample time; an idle job whose
    counters stay put for ``interval_s`` + 2 s is sampled at the last poll), then reads the
    plan, vertices, every subtask's metrics and the TaskManagers, and checks that the counters
    did not change meanwhile (else it starts over, at most three times).
    """
    interval_s = fetch_interval(rest) if interval_s is None else interval_s
    job_path = f"/jobs/{quote(job_id, safe='')}"
    for _attempt in range(3):
        t_prev = clock()
        seen = _counters(rest.get(job_path))
        deadline = t_prev + interval_s + 2.0
        sample = None
        while sample is None:
            sleep(poll_s)
            t_now = clock()
            job = rest.get(job_path)
            if _counters(job) != seen:
                sample = t_prev
            elif t_now > deadline:
                sample = t_now
            t_prev = t_now
        documents = _read_job(rest, job_id, job)
        if _counters(rest.get(job_path)) == _counters(job):
            return Snapshot(sample, documents, rest.url)
    raise InputError(f"{rest.url}: the job's metrics changed while they were read, three times; "
                     f"is metrics.fetcher.update-interval shorter than a read of the job ({interval_s:g} s)?")


def _read_job(rest: FlinkRest, job_id: str, job: Any) -> dict[str, Any]:
    key = f"jobs/{job_id}"
    documents: dict[str, Any] = {key: job}
    try:
        documents["overview"] = rest.get("/overview")
    except HTTPStatusError:
        pass
    documents[f"{key}/plan"] = rest.get(f"/{quote(key, safe='/')}/plan")
    documents["taskmanagers"] = rest.get("/taskmanagers")
    get = ",".join(METRIC_NAMES)
    where = f"{rest.url}/{key}"
    for k, vertex in enumerate(_get(job, "vertices", where, list)):
        vid = _get(vertex, "id", f"{where}.vertices[{k}]", str)
        vkey = f"{key}/vertices/{vid}"
        details = rest.get(f"/{quote(vkey, safe='/')}")
        documents[vkey] = details
        for m, sub in enumerate(_get(details, "subtasks", f"{rest.url}/{vkey}", list)):
            index = _get(sub, "subtask", f"{rest.url}/{vkey}.subtasks[{m}]", int)
            mkey = f"{vkey}/subtasks/{index}/metrics"
            documents[mkey] = rest.get(f"/{quote(mkey, safe='/')}?get={get}")
    return documents


def capture_live(url: str, job_id: str | None = None, window_s: float = 10.0, timeout: float = 10.0,
                 poll_s: float = 0.2, save_dir: str | Path | None = None) -> Capture:
    """Snapshots of a running job: one, or two ``window_s`` apart (``window_s`` > 0, the
    default: rates from counter differences). ``job_id`` defaults to the only running job;
    ``save_dir`` keeps the responses (:func:`save_capture`)."""
    if not (window_s >= 0 and math.isfinite(window_s)):
        raise InputError(f"--window: {window_s!r}; must be a number of seconds >= 0")
    rest = FlinkRest(url, timeout)
    job_id = job_id or running_job(rest)
    interval = fetch_interval(rest)
    first = take_snapshot(rest, job_id, interval, poll_s)
    snapshots = [first]
    if window_s > 0:
        # the next fetch cannot come before ``interval`` after the first: sleep past both
        time.sleep(max(0.0, first.time + max(window_s, interval) - time.time() - poll_s))
        snapshots.append(take_snapshot(rest, job_id, interval, poll_s))
    capture = Capture(job_id, tuple(snapshots), rest.url, rest.url)
    if save_dir is not None:
        save_capture(capture, save_dir)
    return capture


def read(url: str | None = None, job_id: str | None = None, directory: str | Path | None = None,
         window_s: float = 10.0, timeout: float = 10.0, node_by: str = "taskmanager",
         save_dir: str | Path | None = None) -> FlinkReading:
    """A live JobManager (``url``, ``job_id`` optional) or a saved capture (``directory``)."""
    if (url is None) == (directory is None):
        raise InputError("give either --url URL [--job-id JID] (a live Flink JobManager) or --dir DIR (saved responses)")
    if directory is not None:
        if job_id is not None:
            raise InputError("--job-id goes with --url; a saved capture names its job")
        capture = load_capture(directory)
    else:
        capture = capture_live(url, job_id, window_s, timeout, save_dir=save_dir)
    return read_capture(capture, node_by=node_by)
