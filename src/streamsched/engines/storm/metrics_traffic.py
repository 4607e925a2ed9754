"""Storm metrics -> application traffic between tasks and task loads (plain Python, no Spark).

The readers (:mod:`.metrics_log` for ``LoggingMetricsConsumer`` files, :mod:`.metrics_csv` for
the CSV metrics reporter) turn each line or row into a :class:`Record`; :class:`Topology`
collects the records of one topology, checks them, and estimates.

What Storm reports (checked against storm-client's source):

- Storm <= 2.2 built-in metrics (``daemon/metrics/BuiltinBoltMetrics.java``,
  ``metric/internal/MultiCountStatAndMetric.java``): maps per metrics bucket, reset at each
  report: ``__execute-count {upstream:stream=n}``, ``__execute-latency {upstream:stream=ms}``,
  ``__transfer-count {stream=n}`` (and ``__emit-count``, ``__ack-count``, ...).
- Storm >= 2.3 (STORM-3673, ``metrics2/TaskMetrics.java``, ``metrics2/RateCounter.java``): one
  metric per key: ``__execute-count-<upstream>:<stream>`` and ``__transfer-count-<stream>`` are
  cumulative counters (each with a ``.m1_rate`` gauge), ``__execute-latency-<upstream>:<stream>``
  a gauge (ms), ``__capacity`` a gauge (busy fraction, Storm >= 2.3, STORM-3697).
  ``LoggingMetricsConsumer`` cuts names to 23 characters, so a counter and its ``.m1_rate`` gauge
  share a name: Java prints the counter as a long (``12``) and the gauge as a double (``0.2``).
- System components and streams (``daemon/StormCommon.java``, ``Constants.java``): ``__acker``,
  ``__metrics<consumer class>`` (Storm 1.x) / ``__metrics_<class>`` (2.x), ``__system`` (task -1,
  one per worker); streams ``__ack_init``, ``__ack_ack``, ``__metrics``, ``__tick``, ... : every id
  starting with ``__``. They never enter the application graph.

Pair rates. Storm counts tuples per receiving task x and (upstream component U, stream s),
never per task pair. The tuples x executed from U on s are split over U's tasks u in proportion
to what each transferred on s over the input: ``R(u, x) = count(x <- U:s) * T(u, s) /
sum_{u' in U} T(u', s)`` (over all streams of u when none matches; evenly when U's tasks
transferred nothing). Exact for shuffle and all grouping; for fields or global grouping, an
estimate (it assumes every sender spreads over the receivers alike).
"""

from __future__ import annotations

import gzip
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from streamsched.engines import MAX_COUNT
from streamsched.engines.storm.metrics_csv import parse_metric_name, read_rows
from streamsched.engines.storm.metrics_log import (
    DUPLICATE, MALFORMED, MISSING, NEGATIVE, OUT_OF_RANGE, WRONG_TYPE, LineError, is_integer, number,
    parse_java_map, parse_line, read_lines, topology_from_path)
from streamsched.errors import InputError

SYSTEM_PREFIX = "__"
#: Storm <= 2.2 map-valued metrics keyed by stream or upstream:stream.
MAP_METRICS = ("__emit-count", "__transfer-count", "__execute-count", "__execute-latency", "__process-latency",
               "__ack-count", "__fail-count", "__complete-latency")
USED_MAPS = {"__execute-count": "execute", "__execute-latency": "latency", "__transfer-count": "transfer"}
#: Storm >= 2.3 names: base + key (TaskMetrics.java).
V2_BASES = ("__execute-count-", "__execute-latency-", "__transfer-count-", "__emit-count-", "__ack-count-",
            "__fail-count-", "__process-latency-", "__complete-latency-", "__execute-jitter-",
            "__process-jitter-", "__complete-jitter-")
USED_V2 = {"__execute-count-": "execute", "__execute-latency-": "latency", "__transfer-count-": "transfer"}
CAPACITY = "__capacity"
#: A cumulative counter's first report is counted from the counter's start when its rate (value
#: / report interval) is at most this times the next interval's rate (:meth:`Topology._deltas`).
FIRST_SAMPLE_RATIO = 2.0
REPORTER_HINT = ("LoggingMetricsConsumer cuts metric names to 23 characters; read a Storm metrics reporter "
                 "that keeps full names instead (topology.metrics.reporters, e.g. "
                 "org.apache.storm.metrics2.reporters.CsvStormReporter)")


def is_system(name: str) -> bool:
    """A Storm system component or stream id (``__acker``, ``__system``, ``__ack_ack``, ...)."""
    return name.startswith(SYSTEM_PREFIX)


@dataclass(slots=True)
class Entry:
    """What a record says about traffic or load: ``metric`` execute | transfer | latency |
    capacity; ``upstream`` the sending component (execute, latency; ``upstream_cut``: only its
    first characters are known), ``stream`` the stream (``stream_cut``: its first characters)."""

    metric: str
    value: float
    upstream: str = ""
    stream: str = ""
    upstream_cut: bool = False
    stream_cut: bool = False


@dataclass(slots=True)
class Record:
    """One line or row. ``reason`` None = valid (then ``system`` or an application record);
    ``kind``: map | counter | gauge | other; ``cut``: the name may have been cut."""

    source: str
    line: int
    raw: str
    reason: str | None = None
    detail: str = ""
    system: bool = False
    timestamp: float = math.nan
    task: int = 0
    component: str = ""
    name: str = ""
    value: str = ""
    kind: str = "other"
    cut: bool = False
    entries: list[Entry] = field(default_factory=list)

    def reject(self, reason: str, detail: str) -> "Record":
        self.reason, self.detail = reason, detail
        return self

    def where(self) -> str:
        return f"{self.source}: line {self.line}"


def _key_is_system(key: str) -> bool:
    return any(is_system(part) for part in key.split(":"))


def _check_value(record: Record, text: str, what: str) -> float | None:
    """A used value: a number in [0, 2^63] (``MAX_COUNT``: Storm's counts are Java longs), else
    the record is rejected (wrong type; negative, not finite or above 2^63)."""
    value = number(text)
    if value is None:
        record.reject(WRONG_TYPE, f"{what} {text!r} is not a number")
        return None
    if not 0 <= value <= MAX_COUNT:
        record.reject(NEGATIVE, f"{what} {text!r} is negative, not finite or above 2^63 (no Storm count is)")
        return None
    return value


def interpret(record: Record, time_range: tuple[float, float], kind_hint: str | None = None) -> Record:
    """Fill ``system``, ``kind``, ``entries`` of a record whose header was read (timestamp, task,
    component, name, value), or reject it. Checks, the first failing one is the reason: the
    value of a used metric (``malformed`` map, ``wrong_type``, ``negative_count``), then the
    timestamp range. A record of a system component, or whose keys are all system streams or
    components, is ``system`` without value checks. ``kind_hint`` (counter | gauge | other)
    comes from a reporter that says what a metric is (CSV header); log lines say it by how the
    value is printed."""
    name, text = record.name, record.value
    if is_system(record.component):
        record.system = True
        return record
    if name in MAP_METRICS and text.startswith("{"):
        record.kind = "map"
        entries = parse_java_map(text)
        used = USED_MAPS.get(name)
        if entries is None:
            if used:
                return record.reject(MALFORMED, f"{name}: value {text!r} is not a map {{key=value, ...}}")
            return _in_range(record, time_range)
        if entries and all(_key_is_system(k) for k in entries):
            record.system = True
            return record
        if used:
            for key, value_text in entries.items():
                if _key_is_system(key):
                    continue
                if used != "transfer" and ":" not in key:
                    return record.reject(MALFORMED, f"{name}: key {key!r} is not upstream:stream")
                value = _check_value(record, value_text, f"{name} {key}")
                if value is None:
                    return record
                upstream, _, stream = key.partition(":") if used != "transfer" else ("", "", key)
                record.entries.append(Entry(used, value, upstream, stream))
        return _in_range(record, time_range)
    base = next((b for b in V2_BASES if name.startswith(b)), None)
    if base is not None or name == CAPACITY:
        key = name[len(base):] if base else ""
        if base and _key_is_system(key):
            record.system = True
            return record
        record.kind = kind_hint or ("counter" if is_integer(text) else "gauge")
        used = USED_V2.get(base) if base else "capacity"
        if used is None or record.kind == "other":
            return _in_range(record, time_range)
        if record.kind == "gauge" and used in ("execute", "transfer"):  # .m1_rate of a rate counter
            return _in_range(record, time_range)
        if kind_hint is None and name.endswith((".m1_rate", ".m5_rate", ".m15_rate", ".mean_rate")):
            return _in_range(record, time_range)
        value = _check_value(record, text, name)
        if value is None:
            return record
        entry = Entry(used, value)
        if used in ("execute", "latency"):
            upstream, colon, stream = key.partition(":")
            entry.upstream, entry.stream = upstream, stream
            entry.upstream_cut = record.cut and not colon
            entry.stream_cut = record.cut
        elif used == "transfer":
            entry.stream, entry.stream_cut = key, record.cut
        record.entries.append(entry)
        return _in_range(record, time_range)
    record.kind = kind_hint or "other"
    return _in_range(record, time_range)


def _in_range(record: Record, time_range: tuple[float, float]) -> Record:
    low, high = time_range
    if not low <= record.timestamp <= high:
        record.entries.clear()
        return record.reject(OUT_OF_RANGE, f"timestamp {record.timestamp:.0f} outside {low:.0f}..{high:.0f}")
    return record


# --------------------------------------------------------------------------- estimation
@dataclass
class Estimate:
    """What one topology's records give: traffic rows (timestamp, src task, dst task, tuples),
    load rows (timestamp, task, component, load in busy cores), the application tasks (task ->
    component) and notes saying why something gave no traffic."""

    traffic: list[tuple[float, int, int, float]] = field(default_factory=list)
    load: list[tuple[float, int, str, float]] = field(default_factory=list)
    tasks: dict[int, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _compatible(a: str, a_cut: bool, b: str, b_cut: bool) -> bool:
    """Whether two stream names, each maybe only a prefix, can be the same stream."""
    if a_cut and b_cut:
        return a.startswith(b) or b.startswith(a)
    if a_cut:
        return b.startswith(a)
    if b_cut:
        return a.startswith(b)
    return a == b


class Topology:
    """The records of one topology, from every file of it, in file and line order."""

    def __init__(self, name: str, time_range: tuple[float, float], storm_interval_s: float = 60.0):
        self.name = name
        self.time_range = time_range
        self.storm_interval_s = storm_interval_s
        self.records: list[Record] = []
        self.components: set[str] = set()

    def add(self, record: Record) -> None:
        self.records.append(record)
        if record.component and (record.reason is None or record.system):
            self.components.add(record.component)

    # -- checks between records
    def mark_duplicates(self) -> None:
        """A second valid application record of the same (timestamp, task, metric name, kind)
        is a ``duplicate`` (the first in file and line order is kept). Where the name may have
        been cut, several counters can share it (streams of one upstream differing after the
        cut): there only a repeat of the same value is a duplicate, other values are summed."""
        seen: dict[tuple, set[str] | None] = {}
        for r in self.records:
            if r.reason is not None or r.system:
                continue
            key = (r.timestamp, r.task, r.name, r.kind)
            values = seen.get(key, ...)
            if values is ...:
                seen[key] = {r.value} if r.cut else None
            elif values is None or r.value in values:
                r.reject(DUPLICATE, f"a second {r.name!r} of task {r.task} at {r.timestamp:.0f}")
                r.entries.clear()
            else:
                values.add(r.value)

    def _resolve(self) -> None:
        """Cut upstream names (``__execute-count-sentenc``) -> the one component id of the
        topology they begin; for latencies, among the upstreams the same task executed from.
        Several candidates: InputError naming them."""
        app = sorted(c for c in self.components if not is_system(c))
        ambiguous: list[tuple[Record, list[str]]] = []
        executed_from: dict[int, set[str]] = defaultdict(set)
        for metric in ("execute", "latency"):
            for r in self._valid():
                for e in r.entries:
                    if e.metric != metric:
                        continue
                    if e.upstream_cut:
                        found = [c for c in app if c.startswith(e.upstream)]
                        if len(found) > 1 and metric == "latency":
                            narrowed = [c for c in found if c in executed_from[r.task]]
                            found = narrowed if len(narrowed) == 1 else found
                        if len(found) == 1:
                            e.upstream, e.upstream_cut = found[0], False
                        elif len(found) > 1:
                            ambiguous.append((r, found))
                    if metric == "execute" and not e.upstream_cut:
                        executed_from[r.task].add(e.upstream)
        if ambiguous:
            by_name: dict[tuple[str, tuple[str, ...]], list[Record]] = defaultdict(list)
            for r, found in ambiguous:
                by_name[(r.name, tuple(found))].append(r)
            said = []
            for (name, found), rs in by_name.items():
                tasks = sorted({r.task for r in rs})
                said.append(f"{name!r} (task{'s' if len(tasks) > 1 else ''} {', '.join(map(str, tasks))}, "
                            f"from line {rs[0].line}) may name component " + " or ".join(repr(c) for c in found))
            raise InputError(f"{ambiguous[0][0].where()}: cut metric names are ambiguous: {'; '.join(said)}. "
                             f"{REPORTER_HINT}")

    def _valid(self):
        return (r for r in self.records if r.reason is None and not r.system)

    # -- the estimate
    def estimate(self) -> Estimate:
        """Duplicates marked, names resolved, counters differenced; traffic and loads."""
        self.mark_duplicates()
        self._resolve()
        out = Estimate()
        for r in self._valid():
            out.tasks.setdefault(r.task, r.component)
        senders: dict[str, list[int]] = defaultdict(list)
        for task, component in sorted(out.tasks.items()):
            senders[component].append(task)
        maps = [(r, e) for r in self._valid() if r.kind == "map" for e in r.entries]
        v2 = self._deltas(out.notes)
        v1_execute = any(e.metric == "execute" for _, e in maps)
        # Samples (timestamp, task, entry, interval s); Storm <= 2.2 maps win when both exist.
        samples = [(r.timestamp, r.task, e, self.storm_interval_s) for r, e in maps]
        if not v1_execute:
            samples += v2
        elif any(e.metric in ("execute", "transfer") for _, _, e, _ in v2):
            out.notes.append("both Storm <= 2.2 map metrics and v2 counters: the maps are used")
        gauges = [(r.timestamp, r.task, e) for r in self._valid() if r.kind in ("gauge", "other")
                  for e in r.entries]
        self._traffic(samples, senders, out)
        self._load(samples, gauges, out)
        if not any(e.metric == "execute" for _, _, e, _ in samples):
            counters = [e for r in self._valid() if r.kind == "counter" for e in r.entries if e.metric == "execute"]
            out.notes.append("cumulative __execute-count counters need two samples of a task; each had one"
                             if counters else "no application __execute-count (a task's tuples from an "
                             "upstream component) among the valid lines")
        return out

    def _deltas(self, notes: list[str] | None = None) -> list[tuple[float, int, Entry, float]]:
        """Cumulative counters -> (timestamp, task, entry with the count since the previous
        sample, seconds since it). Same-name counters of one sample are summed first; a value
        below the previous one is a restart (the count since the restart is the value itself).

        A series' first sample is counted **from the counter's start** (Storm's counters start at
        0 with the executor), as the count of one report interval (``storm_interval_s``), when
        its rate is at most :data:`FIRST_SAMPLE_RATIO` times the next interval's (the file
        begins with the executor, as ``worker.log.metrics`` does: a window of three reports then
        counts three intervals, not two, issue 27); else (a file that begins mid-run: the
        counter holds far more than one interval) it is the baseline. ``notes`` gets how many
        series went each way."""
        series: dict[tuple[int, str], dict[float, Entry]] = defaultdict(dict)
        for r in self._valid():
            if r.kind != "counter":
                continue
            for e in r.entries:
                at = series[(r.task, r.name)]
                if r.timestamp in at:
                    at[r.timestamp].value += e.value
                else:
                    at[r.timestamp] = Entry(e.metric, e.value, e.upstream, e.stream, e.upstream_cut, e.stream_cut)
        out = []
        from_start = baseline = 0
        for (task, _), at in series.items():
            previous = None
            times = sorted(at)
            if len(times) > 1:
                first, second = at[times[0]].value, at[times[1]].value
                next_rate = (second - first if second >= first else second) / (times[1] - times[0])
                if first / self.storm_interval_s <= FIRST_SAMPLE_RATIO * next_rate or first == 0:
                    entry = at[times[0]]
                    out.append((times[0], task, Entry(entry.metric, entry.value, entry.upstream, entry.stream,
                                                      entry.upstream_cut, entry.stream_cut), self.storm_interval_s))
                    from_start += 1
                else:
                    baseline += 1
            for ts in times:
                entry = at[ts]
                if previous is not None:
                    before = at[previous].value
                    delta = entry.value - before if entry.value >= before else entry.value
                    out.append((ts, task, Entry(entry.metric, delta, entry.upstream, entry.stream,
                                                entry.upstream_cut, entry.stream_cut), ts - previous))
                previous = ts
        if notes is not None and (from_start or baseline):
            notes.append(f"cumulative counters: the first report of {from_start} series counted from the counter's "
                         f"start (one {self.storm_interval_s:g} s report), of {baseline} taken as the baseline "
                         f"(the file begins mid-run)")
        return out

    def _traffic(self, samples, senders: dict[str, list[int]], out: Estimate) -> None:
        sent: dict[int, list[Entry]] = defaultdict(list)
        for _, task, e, _ in samples:
            if e.metric == "transfer" and not is_system(e.stream) and task in out.tasks:
                sent[task].append(e)
        pairs: dict[tuple[float, int, int], float] = defaultdict(float)
        unknown: set[str] = set()
        for ts, x, e, _ in samples:
            if e.metric != "execute" or e.value == 0:
                continue
            tasks = senders.get(e.upstream) if not e.upstream_cut else None
            if not tasks:
                unknown.add(e.upstream + ("..." if e.upstream_cut else ""))
                continue
            weights = [sum(s.value for s in sent[u] if _compatible(e.stream, e.stream_cut, s.stream, s.stream_cut))
                       for u in tasks]
            if sum(weights) <= 0:
                weights = [sum(s.value for s in sent[u]) for u in tasks]
            if sum(weights) <= 0:
                weights = [1.0] * len(tasks)
            total = sum(weights)
            for u, w in zip(tasks, weights):
                if w > 0:
                    pairs[(ts, u, x)] += e.value * w / total
        out.traffic = [(ts, u, x, v) for (ts, u, x), v in sorted(pairs.items())]
        if unknown:
            out.notes.append("tuples from components without tasks in these files were left out: "
                             + ", ".join(sorted(unknown)))

    def _load(self, samples, gauges, out: Estimate) -> None:
        """Busy fraction of a core per task and sample: ``__capacity`` where Storm reports it,
        else ``sum over upstream keys of count * execute latency (ms) / 1000 / interval``."""
        capacity: dict[tuple[float, int], list[float]] = defaultdict(list)
        latency: dict[tuple[float, int, str], list[tuple[Entry, float]]] = defaultdict(list)
        for ts, task, e in gauges:
            if e.metric == "capacity":
                capacity[(ts, task)].append(e.value)
            elif e.metric == "latency" and not e.upstream_cut:
                latency[(ts, task, e.upstream)].append((e, e.value))
        for ts, task, e, _ in samples:  # Storm <= 2.2 latency maps
            if e.metric == "latency":
                latency[(ts, task, e.upstream)].append((e, e.value))
        with_capacity = {task for _, task in capacity}
        busy: dict[tuple[float, int], float] = defaultdict(float)
        for ts, task, e, interval in samples:
            if e.metric != "execute" or task in with_capacity or e.upstream_cut or interval <= 0:
                continue
            found = [v for le, v in latency.get((ts, task, e.upstream), [])
                     if _compatible(e.stream, e.stream_cut, le.stream, le.stream_cut)]
            ms = sum(found) / len(found) if found else 0.0
            busy[(ts, task)] += e.value * ms / 1000.0 / interval
        for (ts, task), values in capacity.items():
            if task in out.tasks:
                busy[(ts, task)] = sum(values) / len(values)
        out.load = [(ts, task, out.tasks[task], v) for (ts, task), v in sorted(busy.items()) if task in out.tasks]


# --------------------------------------------------------------------------- reading files
def log_records(path: str, time_range: tuple[float, float]) -> Iterator[Record]:
    """The records of a ``LoggingMetricsConsumer`` file (:mod:`.metrics_log`), checked."""
    for line, text in read_lines(path):
        record = Record(source=path, line=line, raw=text)
        try:
            parsed = parse_line(text)
        except LineError as exc:
            yield record.reject(exc.reason, exc.detail)
            continue
        record.timestamp, record.task, record.component = parsed.timestamp, parsed.task, parsed.component
        record.name, record.value, record.cut = parsed.name, parsed.value, parsed.cut
        yield interpret(record, time_range)


def csv_records(path: str, time_range: tuple[float, float]) -> Iterator[Record]:
    """The records (rows) of a CSV reporter file (:mod:`.metrics_csv`), checked."""
    metric, kind, rows = read_rows(path)
    system = is_system(metric.component) or (metric.stream is not None and is_system(metric.stream))
    for line, text in rows:
        record = Record(source=path, line=line, raw=text, task=metric.task, component=metric.component,
                        name=metric.name)
        fields = text.split(",")
        if len(fields) < 2 or (kind != "other" and len(fields) != 2):
            yield record.reject(MALFORMED, f"{len(fields)} comma-separated fields, expected "
                                           f"{'2' if kind != 'other' else 'at least 2'}")
            continue
        if not fields[0].strip() or not fields[1].strip():
            yield record.reject(MISSING, "empty " + ("timestamp" if not fields[0].strip() else "value"))
            continue
        ts = number(fields[0])
        if ts is None:
            yield record.reject(WRONG_TYPE, f"timestamp {fields[0].strip()!r} is not a number")
            continue
        record.timestamp, record.value = ts, fields[1].strip()
        if system:
            record.system = True
            yield record
            continue
        yield interpret(record, time_range, kind_hint=kind)


def topology_of(path: str | Path, fmt: str, given: str | None) -> str:
    """The topology a file belongs to: ``given``, else the one its path or name says
    (workers-artifacts/<topology id>/..., storm.worker.<topology id>...), else ``topology``."""
    if given:
        return given
    if fmt == "storm-csv":
        try:
            return parse_metric_name(Path(path).name).topology
        except ValueError:
            return "topology"
    return topology_from_path(path) or "topology"


@dataclass
class FileCount:
    """Per file: records read, accepted, system, and the rejected lines (line, reason, detail)."""

    read: int = 0
    accepted: int = 0
    system: int = 0
    rejected: list[tuple[int, str, str]] = field(default_factory=list)


def read_topology(files: list[tuple[str, str]], topology: str, time_range: tuple[float, float],
                  storm_interval_s: float = 60.0) -> tuple[Topology, Estimate, dict[str, FileCount]]:
    """Every file (path, format ``storm-log`` | ``storm-csv``) of one topology -> its records,
    the estimate and the counts per file. InputError for a file that cannot be read as its
    format or for ambiguous cut names."""
    top = Topology(topology, time_range, storm_interval_s)
    for path, fmt in files:
        reader = csv_records if fmt == "storm-csv" else log_records
        try:
            for record in reader(path, time_range):
                top.add(record)
        except OSError as exc:
            raise InputError(f"{path}: {exc.strerror or exc}") from None
        except (EOFError, gzip.BadGzipFile) as exc:
            raise InputError(f"{path}: not a readable gzip file ({exc})") from None
    estimate = top.estimate()
    counts: dict[str, FileCount] = {path: FileCount() for path, _ in files}
    for r in top.records:
        c = counts[r.source]
        c.read += 1
        if r.reason is not None:
            c.rejected.append((r.line, r.reason, r.detail))
        elif r.system:
            c.system += 1
        else:
            c.accepted += 1
    return top, estimate, counts


def line_ranges(lines: list[int], limit: int = 8) -> str:
    """[1, 2, 3, 7] -> ``1-3, 7`` (at most ``limit`` ranges, then ``...``)."""
    runs: list[list[int]] = []
    for n in sorted(lines):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    text = [f"{a}-{b}" if b > a else f"{a}" for a, b in runs[:limit]]
    return ", ".join(text) + (", ..." if len(runs) > limit else "")
