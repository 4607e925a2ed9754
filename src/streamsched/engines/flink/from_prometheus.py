"""A Flink job's per-subtask counters from Prometheus (Flink's Prometheus reporter), as the same
graphs, placements and clusters the REST reader builds (docs/engines.md, "Flink metrics from
Prometheus").

**What Flink exposes** (flink-metrics-prometheus, ``AbstractPrometheusReporter``; checked on the
reporter running here): every metric as a Prometheus gauge named ``flink_`` + the group's
logical scope joined by ``_`` + the metric name, its labels the group's variables without the
angle brackets, label values with every character outside ``[a-zA-Z0-9:_]`` replaced by ``_``
(:func:`label_value`; ``tm-1`` becomes ``tm_1``, ``Calc[2]`` ``Calc_2_``). A subtask's metrics
are ``flink_taskmanager_job_task_<name>`` with the labels ``job_id``, ``job_name``,
``task_id`` (the JobVertexID), ``task_name``, ``subtask_index``, ``task_attempt_id``,
``task_attempt_num``, ``tm_id`` and ``host``. Counters read: :data:`COUNTERS`.

**Reading** (:class:`PrometheusApi`): ``/api/v1/query_range`` only, at the user's ``step``; an
answer with ``warnings`` (a partial result) is refused, and so is a range of more than
:data:`MAX_POINTS` steps (Prometheus' own limit) or a job with more than ``max_series``
series (counted first with one cheap query, checked again on every answer), which bounds every
answer's size.

**Counts and resets.** Each series (one attempt of one subtask: a restart or a rescale starts
new attempts, hence new series) is read at the grid ``start + k step``. Between two points a
record or byte counter that fell was reset and counts its new value, Prometheus' own rule in
``rate()``/``increase()`` (``extrapolatedRate``), without the extrapolation to the range's
ends: counts are taken between grid points only. A series that appears after the range's first
point began inside it (a restarted or new subtask; Flink starts its counters at 0) and counts
from zero. Flink's accumulated time counters (``accumulate*TimeMs``) dip by a few ms within an
attempt (seen on REST): a dip there is no reset, the count goes on from the highest value.
Every reset and start met is listed (:class:`Interval` ``resets``).

**The topology** (vertices in order, ship strategies, TaskManagers' resources) is not in the
metrics: it comes from the JobManager's REST API (``/jobs/:jid``, ``/jobs/:jid/plan``,
``/taskmanagers``; the JobManager keeps a finished job for a while, and Flink's HistoryServer
answers the same job paths) or from a saved read (``read-engine flink``'s ``flink-rest/``).
Parallelism, attempts and the TaskManager of each subtask come from the labels, interval by
interval, so a rescale inside the range is read as it happened. Each interval becomes two
synthetic REST snapshots (counters zero, then the interval's counts) read by
:func:`~streamsched.engines.flink.read_capture`: the same graph rules as a REST reading.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence
from urllib.parse import urlencode, urlsplit

import numpy as np

from streamsched.engines.flink.capture import load_capture
from streamsched.engines.flink.documents import Capture, FlinkReading, Snapshot, _get
from streamsched.engines.flink.estimate import read_capture
from streamsched.engines.rest_client import Deadline, get_json
from streamsched.errors import InputError

PREFIX = "flink_taskmanager_job_task_"
#: Record and byte counters: a fall is a reset (Prometheus' rule).
RECORD_COUNTERS = ("numRecordsIn", "numRecordsOut", "numBytesIn", "numBytesOut", "numBytesInLocal", "numBytesInRemote")
#: Accumulated time counters (ms): a dip is no reset.
TIME_COUNTERS = ("accumulateBusyTimeMs", "accumulateIdleTimeMs", "accumulateBackPressuredTimeMs")
COUNTERS = RECORD_COUNTERS + TIME_COUNTERS
#: Most points per series Prometheus returns (``exceeded maximum resolution of 11,000 points``).
MAX_POINTS = 11000
#: Default bound of the series of one counter of one job (``--max-series``).
MAX_SERIES = 5000
_INVALID = re.compile(r"[^a-zA-Z0-9:_]")
_LABELS = ("task_id", "subtask_index", "task_attempt_id", "task_attempt_num", "tm_id")


def label_value(text: str) -> str:
    """A name as Flink's Prometheus reporter writes it into a label value
    (``AbstractPrometheusReporter.replaceInvalidChars``)."""
    return _INVALID.sub("_", text)


def _prometheus_error(body: Any) -> str:
    """Prometheus' ``{"status": "error", "errorType", "error"}``."""
    return f"{body.get('errorType', '')}: {str(body.get('error', ''))[:200]}".strip(": ")


class PrometheusApi:
    """Prometheus' HTTP API (``http://host:9090``) through the engines' HTTP layer."""

    def __init__(self, url: str, timeout: float = 10.0, deadline: Deadline | None = None,
                 max_series: int = MAX_SERIES) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise InputError(f"--prometheus: {url!r} is not an http(s) URL of a Prometheus server")
        if isinstance(max_series, bool) or not isinstance(max_series, int) or max_series < 1:
            raise InputError(f"--max-series: {max_series!r}; must be a whole number >= 1")
        self.url, self.timeout, self.deadline, self.max_series = url.rstrip("/"), timeout, deadline, max_series

    def query_range(self, query: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """The matrix of ``query`` over [start, end] every ``step`` s: ``[{"metric", "values"}]``."""
        if (end - start) / step + 1 > MAX_POINTS:
            raise InputError(f"--step {step:g} s: {(end - start) / step + 1:.0f} points per series over the range; "
                             f"Prometheus gives at most {MAX_POINTS}: give a larger --step or a shorter range")
        address = f"{self.url}/api/v1/query_range?" + urlencode(
            {"query": query, "start": repr(float(start)), "end": repr(float(end)),
             "step": f"{int(round(step * 1000))}ms"})  # a float step is cut to whole ns, then ms: drift
        body = get_json(address, self.timeout, "Prometheus", _prometheus_error, self.deadline)
        where = f"{self.url}/api/v1/query_range ({query})"
        if not isinstance(body, dict) or body.get("status") != "success":
            raise InputError(f"{where}: not a Prometheus answer (status {body.get('status') if isinstance(body, dict) else None!r})")
        if body.get("warnings"):
            raise InputError(f"{where}: partial result, Prometheus warns: {str(body['warnings'][0])[:200]}")
        data = _get(body, "data", where, dict)
        if data.get("resultType") != "matrix":
            raise InputError(f"{where}.data.resultType: {data.get('resultType')!r}, expected 'matrix'")
        result = _get(data, "result", where, list)
        if len(result) > self.max_series:
            raise InputError(f"{where}: {len(result)} series, more than --max-series {self.max_series}")
        return result


@dataclass(frozen=True)
class TimeRange:
    """The grid ``start + k step``, k = 0 .. (end - start) / step, in whole milliseconds (as
    Prometheus reads times and steps)."""

    start: float
    end: float
    step: float

    def __post_init__(self) -> None:
        for name, value in (("--start", self.start), ("--end", self.end), ("--step", self.step)):
            if not math.isfinite(value):
                raise InputError(f"{name}: {value!r}; must be finite")
            object.__setattr__(self, name[2:], round(float(value), 3))
        if not self.step > 0:
            raise InputError(f"--step: {self.step!r}; must be > 0 s")
        if not self.end > self.start:
            raise InputError(f"--start {self.start:g} is not before --end {self.end:g}")

    @property
    def points(self) -> int:
        """Points of the grid, counted in whole ms as Prometheus counts them."""
        return round((self.end - self.start) * 1000) // round(self.step * 1000) + 1

    def time(self, k: int) -> float:
        return (round(self.start * 1000) + k * round(self.step * 1000)) / 1000


def parse_duration(text: str, option: str) -> float:
    """``90``, ``90s``, ``15m``, ``2h``, ``7d`` -> seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*", str(text))
    if not match:
        raise InputError(f"{option}: {text!r} is not a duration (e.g. 90s, 15m, 2h, 7d)")
    value = float(match.group(1)) * {"ms": 1e-3, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, None: 1}[match.group(2)]
    if not value > 0:
        raise InputError(f"{option}: {text!r}; must be > 0")
    return value


def parse_time(text: str, option: str) -> float:
    """Unix seconds, or an ISO 8601 time (``2024-05-01T10:00:00Z``)."""
    from datetime import datetime, timezone

    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"{option}: {text!r} is neither unix seconds nor an ISO 8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


# ------------------------------------------------------------------------------- the job
def find_job(api: PrometheusApi, job: str, grid: TimeRange) -> tuple[str, str]:
    """(job id, job name label) of the one job whose id is ``job`` or whose name is ``job``
    (compared as the reporter writes names) with subtask counters in the range."""
    span = f"{max(1, math.ceil(grid.end - grid.start + grid.step))}s"
    rows = api.query_range(f"count by (job_id, job_name) (count_over_time({PREFIX}numRecordsIn[{span}]))",
                           grid.end, grid.end, grid.step)
    seen = sorted({(str(r.get("metric", {}).get("job_id", "")), str(r.get("metric", {}).get("job_name", "")))
                   for r in rows if isinstance(r, dict) and isinstance(r.get("metric"), dict)})
    matches = [s for s in seen if s[0] == job] or [s for s in seen if s[1] == label_value(job)]
    listed = ", ".join(f"{name} ({jid})" for jid, name in seen[:10]) or "none"
    if not matches:
        raise InputError(f"{api.url}: no Flink job {job!r} has {PREFIX}numRecordsIn between {grid.start:.0f} and "
                         f"{grid.end:.0f} (jobs there: {listed})")
    if len(matches) > 1:
        raise InputError(f"{api.url}: {len(matches)} jobs named {job!r} between {grid.start:.0f} and {grid.end:.0f}: "
                         f"{', '.join(jid for jid, _ in matches)}; give --job with one id")
    return matches[0]


@dataclass
class Series:
    """One attempt of one subtask: its values on the grid (NaN where absent)."""

    task_id: str
    subtask: int
    attempt_id: str
    attempt: int
    taskmanager: str
    values: np.ndarray


def _series(result: list[dict[str, Any]], grid: TimeRange, where: str) -> list[Series]:
    out = []
    for k, item in enumerate(result):
        w = f"{where}.result[{k}]"
        metric = _get(item, "metric", w, dict)
        labels = {}
        for name in _LABELS:
            value = metric.get(name)
            if not isinstance(value, str):
                raise InputError(f"{w}.metric.{name}: missing (Flink's reporter sets it on every subtask metric)")
            labels[name] = value
        try:
            subtask, attempt = int(labels["subtask_index"]), int(labels["task_attempt_num"])
        except ValueError:
            raise InputError(f"{w}.metric: subtask_index {labels['subtask_index']!r} or task_attempt_num "
                             f"{labels['task_attempt_num']!r} is not a whole number") from None
        if subtask < 0 or attempt < 0:
            raise InputError(f"{w}.metric: negative subtask_index or task_attempt_num")
        values = np.full(grid.points, np.nan)
        present = np.zeros(grid.points, dtype=bool)
        for m, point in enumerate(_get(item, "values", w, list)):
            if not (isinstance(point, list) and len(point) == 2 and isinstance(point[0], (int, float))
                    and not isinstance(point[0], bool) and isinstance(point[1], str)):
                raise InputError(f"{w}.values[{m}]: expected [time, \"value\"], got {str(point)[:80]}")
            slot = int(round((point[0] - grid.start) / grid.step))
            if not 0 <= slot < grid.points or abs(point[0] - grid.time(slot)) > 0.0005:
                raise InputError(f"{w}.values[{m}]: time {point[0]!r} is not a point of the asked grid")
            try:
                values[slot] = float(point[1])
            except ValueError:
                raise InputError(f"{w}.values[{m}]: {point[1][:40]!r} is not a number") from None
            present[slot] = True
        # absent points are -inf; NaN (Flink's NaN gauge: no busy time for sources) stays NaN
        out.append(Series(labels["task_id"], subtask, labels["task_attempt_id"], attempt, labels["tm_id"],
                          np.where(present, values, -np.inf)))
    return out


def cumulative(values: np.ndarray, resets_fall: bool) -> tuple[np.ndarray, list[int], bool]:
    """Counts since the grid's first point at every point (carried over absent points, -inf),
    the grid indexes where the counter fell (``resets_fall``: counted from zero there), and
    whether the series started inside the range (its first point after point 0: counted from
    zero). A series of NaN values only: NaN throughout (NaN points among numbers are skipped)."""
    out = np.zeros(values.size)
    seen = ~np.isneginf(values)
    if not seen.any():
        return out, [], False
    if np.isnan(values[seen]).all():
        return np.full(values.size, np.nan), [], False
    started = int(np.argmax(seen)) > 0
    usable = np.nonzero(np.isfinite(values))[0]
    first = int(usable[0])
    total = float(values[first]) if started else 0.0
    previous = highest = float(values[first])
    falls = []
    out[first:] = total
    for k in usable[1:]:
        v = float(values[k])
        if resets_fall:
            if v < previous:
                falls.append(int(k))
                total += v
            else:
                total += v - previous
        elif v > highest:
            total += v - highest
            highest = v
        previous = v
        out[k:] = total
    return out, falls, started


# ------------------------------------------------------------------------------ topology
def topology_documents(url: str | None, directory: str | None, job_id: str, timeout: float = 10.0,
                       deadline: Deadline | None = None) -> tuple[dict[str, Any], str]:
    """The job's REST documents that hold its topology (``jobs/<jid>``, its plan,
    ``taskmanagers`` when there is one) from a JobManager or HistoryServer (``url``) or a
    saved read (``directory``); and where they came from."""
    from urllib.parse import quote

    from streamsched.engines.flink.rest import FlinkRest, _check_job
    from streamsched.engines.rest_client import HTTPStatusError

    if (url is None) == (directory is None):
        raise InputError("the job's topology (vertices, ship strategies) is not in Prometheus: give --flink-url "
                         "(its JobManager or HistoryServer) or --flink-dir (a saved read-engine flink-rest/)")
    if directory is not None:
        capture = load_capture(directory)
        if capture.job_id != job_id:
            raise InputError(f"{directory}: a read of job {capture.job_id}, not of {job_id}")
        return dict(capture.snapshots[-1].documents), str(directory)
    rest = FlinkRest(url, timeout, deadline)
    key = f"jobs/{job_id}"
    documents = {key: _check_job(rest.get(f"/{quote(key, safe='/')}"), job_id, f"{rest.url}/{key}")}
    documents[f"{key}/plan"] = rest.get(f"/{quote(key, safe='/')}/plan")
    try:
        documents["taskmanagers"] = rest.get("/taskmanagers")
    except HTTPStatusError:  # a HistoryServer has none
        documents["taskmanagers"] = {"taskmanagers": []}
    return documents, rest.url


# ------------------------------------------------------------------------------ intervals
@dataclass
class Interval:
    """One interval's reading and what the sidecar says about it."""

    start: float
    end: float
    reading: FlinkReading
    resets: list[dict[str, Any]] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass
class PrometheusRead:
    """Every interval of a range, and the job."""

    job_id: str
    job_name: str
    intervals: list[Interval]
    series: int
    resets: int
    topology_from: str


def read_range(api: PrometheusApi, job: str, grid: TimeRange, interval_s: float | None = None,
               flink_url: str | None = None, flink_dir: str | None = None, node_by: str = "taskmanager",
               timeout: float = 10.0, deadline: Deadline | None = None) -> PrometheusRead:
    """The job's graph, placement and cluster over each interval of ``interval_s`` seconds (a
    multiple of the step; None: the whole range as one interval) from the range's start."""
    job_id, _label = find_job(api, job, grid)
    documents, topology_from = topology_documents(flink_url, flink_dir, job_id, timeout, deadline)
    span = grid.points - 1
    per = span
    if interval_s is not None:
        interval_ms, step_ms = round(interval_s * 1000), round(grid.step * 1000)
        if interval_ms < step_ms or interval_ms % step_ms:
            raise InputError(f"--interval {interval_s:g} s: must be a whole multiple of --step {grid.step:g} s")
        per = interval_ms // step_ms
    if span < 1:
        raise InputError(f"the range {grid.start:g} .. {grid.end:g} holds less than one --step {grid.step:g} s")
    bounds = list(range(0, span + 1, per))
    if bounds[-1] != span:
        bounds.append(span)  # a last, shorter interval up to the range's end
    counts: dict[str, list[Series]] = {}
    expected = _count_series(api, job_id, grid)
    if expected > api.max_series:
        raise InputError(f"{api.url}: job {job_id} has {expected} {PREFIX}numRecordsIn series in the range, more than "
                         f"--max-series {api.max_series}")
    for name in COUNTERS:
        query = f'{PREFIX}{name}{{job_id="{job_id}"}}'
        counts[name] = _series(api.query_range(query, grid.start, grid.end, grid.step), grid,
                               f"{api.url}/api/v1/query_range ({query})")
    return _intervals(job_id, documents, topology_from, counts, grid, bounds, node_by)


def _count_series(api: PrometheusApi, job_id: str, grid: TimeRange) -> int:
    span = f"{max(1, math.ceil(grid.end - grid.start + grid.step))}s"
    rows = api.query_range(f'count(count_over_time({PREFIX}numRecordsIn{{job_id="{job_id}"}}[{span}]))',
                           grid.end, grid.end, grid.step)
    try:
        return int(float(rows[0]["values"][-1][1])) if rows else 0
    except (KeyError, IndexError, TypeError, ValueError):
        raise InputError(f"{api.url}: the series count of job {job_id} is not a number") from None


def _intervals(job_id: str, documents: Mapping[str, Any], topology_from: str, counts: Mapping[str, list[Series]],
               grid: TimeRange, bounds: Sequence[int], node_by: str) -> PrometheusRead:
    key = f"jobs/{job_id}"
    job = _get(documents.get(key), "vertices", f"{topology_from}/{key}", list)
    name = _get(documents[key], "name", f"{topology_from}/{key}", str)
    taskmanagers = documents.get("taskmanagers") or {"taskmanagers": []}
    tm_ids = {label_value(str(tm.get("id"))): str(tm.get("id")) for tm in taskmanagers.get("taskmanagers", [])
              if isinstance(tm, dict)}
    # per (vertex, subtask): its series' cumulative counts per counter; per attempt one series
    # (its first counter's) tells where it ran and when it was there
    cum: dict[tuple[str, int], dict[str, list[np.ndarray]]] = {}
    attempts: dict[tuple[str, int, str], Series] = {}
    events: list[tuple[int, dict[str, Any]]] = []
    names = {str(v.get("id")): str(v.get("name")) for v in job if isinstance(v, dict)}
    for counter, series in counts.items():
        for s in series:
            if s.task_id not in names:
                continue  # a vertex the topology does not list (another job version): left out
            values, falls, started = cumulative(s.values, counter in RECORD_COUNTERS)
            cum.setdefault((s.task_id, s.subtask), {}).setdefault(counter, []).append(values)
            label = f"{names[s.task_id]}[{s.subtask}]"
            tm = tm_ids.get(s.taskmanager, s.taskmanager)
            if (s.task_id, s.subtask, s.attempt_id) not in attempts:
                attempts[(s.task_id, s.subtask, s.attempt_id)] = s
                if started:
                    events.append((int(np.argmax(~np.isneginf(s.values))),
                                   {"subtask": label, "taskmanager": tm, "reason": f"attempt {s.attempt} started",
                                    "counted": "since its start"}))
            for k in falls:
                events.append((k, {"subtask": label, "taskmanager": tm,
                                   "reason": f"{counter} fell (attempt {s.attempt})", "counted": "since the reset"}))
    intervals = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        if all(np.isneginf(s.values[lo:hi + 1]).all() for s in attempts.values()):
            continue  # the job did not run then (before its start, after its end): no chunk
        docs, missing = _interval_documents(job_id, documents, job, cum, attempts, lo, hi, tm_ids, grid.step)
        seconds = (hi - lo) * grid.step
        capture = Capture(job_id, (Snapshot(grid.time(lo), docs[0], topology_from),
                                   Snapshot(grid.time(hi), docs[1], topology_from)), topology_from, topology_from)
        reading = read_capture(capture, node_by=node_by)
        reading.report.update(rates_from="prometheus", window_s=seconds)
        if missing:
            reading = replace(reading, warnings=reading.warnings + (
                f"no series in Prometheus for {len(missing)} counters of running subtasks (counted as unknown): "
                f"{', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}",))
        resets = [e for k, e in events if lo < k <= hi]
        intervals.append(Interval(grid.time(lo), grid.time(hi), reading, resets))
    met = sum(1 for _, e in events)
    return PrometheusRead(job_id, name, intervals, sum(len(s) for s in counts.values()), met, topology_from)


def _interval_documents(job_id: str, documents: Mapping[str, Any], job: list, cum, attempts, lo: int, hi: int,
                        tm_ids: Mapping[str, str], step: float) -> tuple[tuple[dict[str, Any], dict[str, Any]], list[str]]:
    """(zero snapshot, counts snapshot) of the interval [lo, hi] in REST shape, and the record
    counters running subtasks have no series of (``name[i].counter``)."""
    key = f"jobs/{job_id}"
    seconds = (hi - lo) * step
    base: dict[str, Any] = {k: v for k, v in documents.items() if k in (f"{key}/plan", "taskmanagers", "overview")}
    base.setdefault("taskmanagers", {"taskmanagers": []})
    last = dict(base)
    vertices, missing = [], []
    for vertex in job:
        vid = str(vertex.get("id"))
        alive = [s for (v, _i, _a), s in attempts.items() if v == vid and not np.isneginf(s.values[lo:hi + 1]).all()]
        # parallelism: the subtasks there at the interval's end, else (all gone) the largest
        # index seen in it, else REST's
        at_end = [s.subtask for s in alive if not np.isneginf(s.values[hi])]
        if at_end or alive:
            parallelism = max(at_end or [s.subtask for s in alive]) + 1
        else:
            parallelism = int(vertex.get("parallelism", 1))
        vertices.append({**vertex, "parallelism": parallelism})
        subtasks = []
        for index in range(parallelism):
            mine = [s for s in alive if s.subtask == index]
            current = max(mine, key=lambda s: (int(np.nonzero(~np.isneginf(s.values[:hi + 1]))[0][-1]), s.attempt),
                          default=None)
            subtasks.append({"subtask": index, "attempt": current.attempt if current else 0,
                             "status": "RUNNING" if current else "UNKNOWN",
                             "taskmanager-id": tm_ids.get(current.taskmanager, current.taskmanager) if current else ""})
            zero, counted = [], []
            for counter, arrays in cum.get((vid, index), {}).items():
                total = sum(float(a[hi] - a[lo]) for a in arrays)
                if not math.isfinite(total):
                    continue
                counted.append({"id": counter, "value": repr(max(total, 0.0))})
                zero.append({"id": counter, "value": "0"})
            for counter, meter in (("accumulateIdleTimeMs", "idleTimeMsPerSecond"),
                                   ("accumulateBackPressuredTimeMs", "backPressuredTimeMsPerSecond")):
                value = next((float(m["value"]) for m in counted if m["id"] == counter), None)
                if value is not None:
                    counted.append({"id": meter, "value": repr(value / seconds)})
            if current is not None:
                missing += [f"{vertex.get('name')}[{index}].{c}" for c in RECORD_COUNTERS if c not in cum.get((vid, index), {})]
            mkey = f"{key}/vertices/{vid}/subtasks/{index}/metrics"
            base[mkey], last[mkey] = zero, counted
        base[f"{key}/vertices/{vid}"] = last[f"{key}/vertices/{vid}"] = {"id": vid, "subtasks": subtasks}
    job_doc = {"jid": job_id, "name": documents[key].get("name"), "state": "RUNNING",
               "duration": 1e12, "vertices": vertices}
    base[key] = last[key] = job_doc
    return (base, last), missing


def read(prometheus_url: str, window_s: float, step: float, url: str | None = None, job_id: str | None = None,
         directory: str | None = None, node_by: str = "taskmanager", timeout: float = 60.0,
         now: float | None = None) -> tuple[FlinkReading, PrometheusRead]:
    """``read-engine flink --prometheus``: the job's rates over the last ``window_s`` seconds
    (ending at the last ``step`` boundary) from Prometheus, its topology from the JobManager
    (``url``; ``job_id`` defaults to the only running job) or a saved read (``directory``)."""
    import time

    from streamsched.engines.flink.rest import FlinkRest, running_job

    if (url is None) == (directory is None):
        raise InputError("give either --url URL [--job-id JID] (the job's JobManager) or --dir DIR (a saved read)")
    if not (math.isfinite(window_s) and window_s > 0):
        raise InputError(f"--window: {window_s!r}; with --prometheus it is the range read, > 0 s")
    deadline = Deadline(timeout)
    if directory is not None:
        job_id = load_capture(directory).job_id
    elif job_id is None:
        job_id = running_job(FlinkRest(url, min(timeout, 10.0), deadline))
    end = math.floor((time.time() if now is None else now) / step) * step
    grid = TimeRange(end - window_s, end, step)
    api = PrometheusApi(prometheus_url, min(timeout, 30.0), deadline)
    result = read_range(api, job_id, grid, None, flink_url=url, flink_dir=directory, node_by=node_by,
                        timeout=min(timeout, 10.0), deadline=deadline)
    return result.intervals[-1].reading, result
