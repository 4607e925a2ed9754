"""``streamsched collect storm-ui`` and ``collect flink``: poll an engine's REST API at an
interval and write each interval's counts as immutable chunk files for ``watch`` (and ingest).

Plain Python (no Spark). Both APIs give cumulative counters: Storm UI's ``:all-time`` window
(counts since each executor started; :mod:`streamsched.engines.storm.ui_rest`) and Flink's
subtask counters (since each subtask attempt started; :mod:`streamsched.engines.flink`, one
consistent snapshot per poll with :func:`~streamsched.engines.flink.take_snapshot`). A poll
takes a reading and subtracts the previous one; the engine reader then splits the interval's
counts into task pairs and busy cores exactly as ``read-engine`` does from a capture
(:func:`.ui_rest.estimate`, :func:`.flink.read_capture`):

- traffic rows ``timestamp, topology, src_task, dst_task, tuples, bytes``: the pair's tuples
  (and bytes, Flink only) counted in the interval, timestamped at the poll that closes it (the
  native format's "counted since the previous sample"); ``topology`` is the topology's or job's
  name, tasks as ``read-engine`` numbers them (Storm: an executor's first task; Flink: the
  subtask's position in the job's vertices);
- load rows ``timestamp, topology, task, operator, load``: busy cores over the interval.

**Counter resets.** A counter below its previous reading, a Storm executor whose uptime fell
(its worker restarted) or a Flink subtask with a new attempt counts from zero: the interval
gets what it counted since its restart. An executor or subtask that has no previous reading and
ran longer than the interval cannot be split: it counts nothing this interval and is
differenced from the next poll on. A Storm executor the UI no longer reports (rebalanced, its
worker died) counted something since the last reading that is lost with it. Each case is listed in the chunk's sidecar (``resets``) and
printed by the command; a rescaled Flink job (the vertices' parallelism changed) falls back to
Flink's 60 s meters, as the reader does, with its warning.

**Running placement.** ``collect flink`` also keeps ``.running-<source>.json`` (hidden, so the
watch's file source skips it): the job's placement on its TaskManagers at the latest poll, as a
``streamsched.placement/1`` file (node names = TaskManager ids, as ``read-engine`` writes its
cluster) with the poll's ``time``. ``watch`` starts from it and measures each window's
inter-node traffic on it (:func:`running_placement`).

**Files.** Chunk ``traffic-<source>-<seq>.csv`` and ``load-<source>-<seq>.csv`` with sidecars
``.<chunk>.json`` (source, URL, the interval's poll times ``covers``, resets, warnings, rows).
The state ``.collect-<source>.json`` holds the last reading (the base of the next difference)
and the next sequence number. A poll first saves the state with the new reading and the chunks
it produced (``pending``), then writes the chunks (hidden temporary name, then rename), then
clears ``pending``: a kill before the state save loses nothing (the next poll differences over
the longer interval), a kill after it is finished by the next start (a chunk already in place
is not written again). So a restart neither loses nor repeats a count.

**Deadlines.** The poll loop runs until stopped (or the command's ``--timeout``); each reading
(every request of one poll; for Flink also the wait for the JobManager's next metrics fetch)
ends by ``--read-timeout`` seconds after it starts (``rest_client.READ_TIMEOUT_S`` by default)
and each request by ``--http-timeout`` (``REQUEST_TIMEOUT_S``). A reading cut off is a failed
reading: after a good one it is reported and the next poll tries again.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable


from streamsched.engines import arithmetic, flink
from streamsched.engines.rest_client import Deadline, reading_deadline, request_timeout
from streamsched.engines.storm import ui_rest
from streamsched.errors import InputError
from streamsched.metrics import remote_traffic
from streamsched.model.paths import safe_name
from streamsched.model.taskgraph import TaskGraph
from streamsched.pipeline.collect import _write_atomic
from streamsched.pipeline.native_reader import fields_of

#: Storm UI window of the collector's requests: counts since each executor started.
STORM_WINDOW = ":all-time"
#: The option that sets each reading's deadline (``rest_client.READ_TIMEOUT_S`` by default).
READ_OPTION = "--read-timeout"
#: Seconds an uptime may exceed the interval and still count as a start inside it (the UI
#: rounds uptimes to seconds, and the poll itself takes time).
UPTIME_SLACK_S = 2.0


def _csv(kind: str, rows: list[tuple]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(fields_of(kind))
    writer.writerows(rows)
    return out.getvalue()


def graph_rows(graph: TaskGraph, when: float, seconds: float) -> tuple[list[tuple], list[tuple]]:
    """(traffic rows, load rows) of an interval's graph: rates x ``seconds`` = counts; loads."""
    ids = graph.task_ids
    traffic = [(repr(when), graph.name, int(ids[s]), int(ids[d]), repr(float(r) * seconds), repr(float(b) * seconds))
               for s, d, r, b in zip(graph.src, graph.dst, graph.rate, graph.bytes_rate)]
    load = [(repr(when), graph.name, int(ids[k]), graph.operator_names[graph.task_operator[k]], repr(float(graph.load[k])))
            for k in range(graph.n_tasks)]
    return traffic, load


class RestCollector:
    """State, chunk writing and the poll loop; subclasses read and difference their engine."""

    source = "rest"

    def __init__(self, out: str | Path, name: str, url: str, clock: Callable[[], float] = time.time):
        self.out, self.url, self.clock = Path(out), url, clock
        self.stem = f"{self.source}-{safe_name(name)}"
        self.out.mkdir(parents=True, exist_ok=True)
        self.state_file = self.out / f".collect-{self.stem}.json"
        try:
            self.state = json.loads(self.state_file.read_text())
        except FileNotFoundError:
            self.state = {"source": self.source, "url": url, "seq": 1, "previous": None, "pending": []}
        except (ValueError, UnicodeDecodeError) as exc:
            raise InputError(f"{self.state_file}: corrupt collector state (not JSON: {exc}); remove it to start "
                             f"again (the counts since the last chunk are then not collected)") from None
        self._check_state()
        self._write_pending()

    def _check_state(self) -> None:
        """The state must be this kind of collector's and of the shape :meth:`poll` writes."""
        state, where = self.state, f"{self.state_file}: corrupt collector state"
        if not isinstance(state, dict):
            raise InputError(f"{where} (not an object); remove it to start again")
        seq = state.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
            raise InputError(f"{where} (seq: {seq!r}); remove it to start again")
        if not isinstance(state.get("pending"), list) or not all(
                isinstance(c, dict) and isinstance(c.get("name"), str) and isinstance(c.get("text"), str)
                and isinstance(c.get("sidecar"), dict) for c in state["pending"]):
            raise InputError(f"{where} (pending chunks); remove it to start again")
        previous = state.get("previous")
        if previous is not None and not (isinstance(previous, dict) and isinstance(previous.get("documents"), dict)
                                         and isinstance(previous.get("time"), (int, float))):
            raise InputError(f"{where} (previous reading); remove it to start again")
        if state.get("source") != self.source:
            raise InputError(f"{self.state_file}: the state of a {state.get('source')!r} collector, not of "
                             f"{self.source!r}: collect each into its own --out")

    # ------------------------------------------------------------------ engine
    def read(self) -> dict[str, Any]:
        """One reading: ``{"time": unix s, "documents": {...}}`` (JSON-ready)."""
        raise NotImplementedError

    def interval(self, previous: dict[str, Any], current: dict[str, Any]) -> tuple[TaskGraph, dict[str, Any]]:
        """The interval's graph (rates over it) and what the sidecar says (resets, warnings)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ files
    def _save(self) -> None:
        _write_atomic(self.state_file, json.dumps(self.state, sort_keys=True).encode())

    def _write_pending(self) -> None:
        for chunk in self.state["pending"]:
            path = self.out / chunk["name"]
            if not path.exists():
                _write_atomic(self.out / f".{chunk['name']}.json", json.dumps(chunk["sidecar"], sort_keys=True).encode())
                _write_atomic(path, chunk["text"].encode())
        if self.state["pending"]:
            self.state["pending"] = []
            self._save()

    def poll(self) -> dict[str, Any] | None:
        """Take a reading; from the second on, write the interval's chunks. Returns the
        traffic chunk's sidecar (None for the first reading, or when the clock did not advance)."""
        current = self.read()
        previous = self.state["previous"]
        if previous is None:
            self.state["previous"] = current
            self._save()
            return None
        seconds = current["time"] - previous["time"]
        if not seconds > 0:
            return None  # the clock went back: keep the older base
        graph, info = self.interval(previous, current)
        traffic, load = graph_rows(graph, current["time"], seconds)
        seq = self.state["seq"]
        side = {"source": self.source, "url": self.url, "name": graph.name, "covers": [previous["time"], current["time"]],
                "seconds": seconds, **info}
        pending = []
        for kind, rows in (("traffic", traffic), ("load", load)):
            name = f"{kind}-{self.stem}-{seq:08d}.csv"
            pending.append({"name": name, "text": _csv(kind, rows), "sidecar": {**side, "kind": kind, "rows": len(rows)}})
        self.state.update(previous=current, seq=seq + 1, pending=pending)
        self._save()
        self._write_pending()
        return pending[0]["sidecar"]

    def follow(self, interval_s: float, timeout_s: float | None = None,
               report: Callable[[dict[str, Any]], None] = lambda side: None,
               report_error: Callable[[str], None] = lambda message: None) -> None:
        """Poll every ``interval_s`` seconds (from one poll's start to the next) until ``timeout_s``.
        A failed reading (the server down, a bad answer) after a good one is reported and the
        next poll tries again: its difference then covers the longer interval, nothing is lost.
        A failure before any good reading of this process is raised (a wrong URL or id)."""
        started = time.monotonic()
        end = math.inf if timeout_s is None else started + timeout_s
        succeeded = False
        while time.monotonic() < end:
            began = time.monotonic()
            try:
                side = self.poll()
                succeeded = True
            except InputError as exc:
                if not succeeded:
                    raise
                report_error(str(exc))
                side = None
            if side is not None:
                report(side)
            time.sleep(max(0.0, min(interval_s - (time.monotonic() - began), end - time.monotonic())))


# ---------------------------------------------------------------------------- Storm UI
def storm_interval(previous: ui_rest.StormUIData, current: ui_rest.StormUIData,
                   seconds: float) -> tuple[ui_rest.StormUIData, list[dict[str, Any]]]:
    """The interval's counts as UI data over a window of ``seconds`` (every executor's
    ``uptime_s``), for :func:`.ui_rest.estimate`; and the resets.

    Per executor: ``emitted``, ``transferred``, ``executed`` differenced; busy time = the
    interval's executions x the all-time ``executeLatency`` (Storm rounds it to 3 decimals,
    so differencing ``executed x latency`` of two readings is noise). Per bolt input
    (``inputStats``, a component total): differenced when none of the bolt's executors reset,
    else the input's share of the bolt's all-time executions times the interval's executions."""
    before = {(e.component, e.start, e.end): e for e in previous.executors}
    executors, resets, reset_components = [], [], set()
    for e in current.executors:
        names = ("emitted", "transferred") + (("executed",) if e.executed is not None else ())
        old = before.get((e.component, e.start, e.end))
        label = f"{e.component}[{e.start}-{e.end}]"
        if old is not None and e.uptime_s >= old.uptime_s and all(getattr(e, n) >= getattr(old, n) for n in names):
            delta = {n: getattr(e, n) - getattr(old, n) for n in names}
        else:
            reset_components.add(e.component)
            why = ("no earlier reading" if old is None else
                   f"uptime fell from {old.uptime_s:g} to {e.uptime_s:g} s" if e.uptime_s < old.uptime_s else
                   "a counter fell")
            if e.uptime_s <= seconds + UPTIME_SLACK_S:
                delta = {n: getattr(e, n) for n in names}
                resets.append({"executor": label, "host": e.host, "port": e.port, "reason": why,
                               "counted": "since its start"})
            else:
                delta = {n: 0.0 for n in names}
                resets.append({"executor": label, "host": e.host, "port": e.port, "reason": why,
                               "counted": "nothing (it ran longer than the interval); from the next poll on"})
        executors.append(replace(e, uptime_s=seconds, capacity=None, **delta))
    now = {(e.component, e.start, e.end) for e in current.executors}
    for (component, start, end), e in before.items():
        if (component, start, end) not in now:
            resets.append({"executor": f"{component}[{start}-{end}]", "host": e.host, "port": e.port,
                           "reason": "gone (rebalanced, or its worker died)",
                           "counted": "nothing since the previous reading (the UI no longer reports it)"})
    executed_now: dict[str, float] = {}
    executed_delta: dict[str, float] = {}
    for e, d in zip(current.executors, executors):
        if e.executed is not None:
            executed_now[e.component] = executed_now.get(e.component, 0.0) + e.executed
            executed_delta[e.component] = executed_delta.get(e.component, 0.0) + d.executed
    old_inputs = {(i.bolt, i.component, i.stream): i.executed for i in previous.inputs}
    rows = {}
    for i in current.inputs:
        rows.setdefault(i.bolt, []).append(i)
    inputs = []
    for bolt, bolt_inputs in rows.items():
        keys = [(i.bolt, i.component, i.stream) for i in bolt_inputs]
        differenced = bolt not in reset_components and all(k in old_inputs and i.executed >= old_inputs[k]
                                                             for k, i in zip(keys, bolt_inputs))
        for k, i in zip(keys, bolt_inputs):
            if differenced:
                count = i.executed - old_inputs[k]
            else:
                total = executed_now.get(bolt, 0.0)
                count = i.executed / total * executed_delta.get(bolt, 0.0) if total > 0 else 0.0
            inputs.append(replace(i, executed=count))
    return replace(current, window=STORM_WINDOW, executors=tuple(executors), inputs=tuple(inputs)), resets


class StormUICollector(RestCollector):
    """Polls ``/api/v1/topology/<id>`` and its component pages (window ``:all-time``)."""

    source = "storm"

    def __init__(self, url: str, topology_id: str, out: str | Path, timeout: float | None = None,
                 clock: Callable[[], float] = time.time, deadline: Deadline | None = None,
                 read_timeout: float | None = None):
        if not topology_id:
            raise InputError("--topology-id: give the id Storm gave the topology (e.g. wordcount-3-1714557000)")
        self.topology_id, self.timeout, self.deadline = topology_id, request_timeout(timeout), deadline
        self.read_timeout = reading_deadline(read_timeout, READ_OPTION).seconds  # checked now, not at the first poll
        super().__init__(out, topology_id, url, clock)

    def read(self) -> dict[str, Any]:
        when = self.clock()
        documents = ui_rest.fetch_documents(self.url, self.topology_id, STORM_WINDOW, self.timeout,
                                            reading_deadline(self.read_timeout, READ_OPTION, self.deadline))
        ui_rest.from_documents(documents, self.url, STORM_WINDOW)  # a bad answer fails now, not at the next poll
        return {"time": when, "documents": documents}

    def interval(self, previous, current):
        before = ui_rest.from_documents(previous["documents"], self.url, STORM_WINDOW)
        after = ui_rest.from_documents(current["documents"], self.url, STORM_WINDOW)
        data, resets = storm_interval(before, after, current["time"] - previous["time"])
        reading = ui_rest.estimate(data)
        spouts = sorted(int(reading.graph.task_ids[k]) for k in range(reading.graph.n_tasks)
                        if reading.graph.operator_names[reading.graph.task_operator[k]] in
                        {c.name for c in after.components if c.kind == "spout"})
        return reading.graph, {"topology_id": self.topology_id, "resets": resets, "warnings": list(reading.warnings),
                               "current": remote_traffic(reading.graph, reading.placement),
                               "load_estimated_tasks": spouts, "load_unit": reading.graph.load_unit}


# ------------------------------------------------------------------------------- Flink
#: Flink counters that only grow within a subtask attempt (``accumulateBusyTimeMs`` is not one:
#: it fell between the two readings of tests/fixtures/flink/live-job; the reader then takes
#: the busy-time gauge instead).
MONOTONE_COUNTERS = tuple(n for n in flink.COUNTERS if n != "accumulateBusyTimeMs")


def flink_baseline(previous: flink.Snapshot, current: flink.Snapshot,
                   job_id: str) -> tuple[flink.Snapshot, list[dict[str, Any]]]:
    """``previous`` with a zero baseline for every subtask of ``current`` that restarted (a new
    attempt) or whose record or byte counter fell; and those resets. A subtask or vertex the previous reading
    lacks is left to the reader (a rescale: it falls back to the meters, with a warning)."""
    before = flink.parse_snapshot(previous.documents, job_id, previous.where)
    after = flink.parse_snapshot(current.documents, job_id, current.where)
    old = {(v.id, s.index): s for v in before.vertices for s in v.subtasks}
    documents = copy.deepcopy(dict(previous.documents))
    resets = []
    counters = set(flink.COUNTERS) | {flink.ALIASES.get(n, n) for n in flink.COUNTERS}
    for v in after.vertices:
        for s in v.subtasks:
            o = old.get((v.id, s.index))
            if o is None:
                continue
            fell = [n for n in MONOTONE_COUNTERS if math.isfinite(s.metrics.get(n, math.nan))
                    and math.isfinite(o.metrics.get(n, math.nan)) and s.metrics[n] < o.metrics[n]]
            if o.attempt == s.attempt and not fell:
                continue
            resets.append({"subtask": f"{v.name}[{s.index}]", "taskmanager": s.taskmanager,
                           "reason": f"attempt {o.attempt} -> {s.attempt}" if o.attempt != s.attempt
                           else f"{', '.join(fell)} fell", "counted": "since its restart"})
            vkey = f"jobs/{job_id}/vertices/{v.id}"
            for sub in documents[vkey]["subtasks"]:
                if sub.get("subtask") == s.index:
                    sub["attempt"] = s.attempt
            mkey = f"{vkey}/subtasks/{s.index}/metrics"
            documents[mkey] = [{"id": m["id"], "value": "0" if m.get("id") in counters else m.get("value")}
                               for m in current.documents[mkey]]
    return flink.Snapshot(previous.time, documents, previous.where), resets


def running_placement(directory: str | Path, graph: TaskGraph, cluster) -> Any:
    """The job's running placement a collector in ``directory`` last saw for ``graph``'s job
    (``.running-*.json`` naming it), as a placement on ``cluster``; None when there is none.
    ``InputError`` when it names a node ``cluster`` does not have."""
    from streamsched.model.placement import Placement

    found = None
    for path in sorted(Path(directory).glob(".running-*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # being replaced: the next window reads it
        if isinstance(data, dict) and data.get("graph") == graph.name and (
                found is None or data.get("time", 0) > found[1].get("time", 0)):
            found = (path, data)
    if found is None:
        return None
    return Placement.from_dict(found[1], graph, cluster, where=str(found[0]))


class FlinkCollector(RestCollector):
    """Polls the JobManager (``http://host:8081``): one consistent snapshot of the job per poll."""

    source = "flink"

    def __init__(self, url: str, out: str | Path, job_id: str | None = None, timeout: float | None = None,
                 clock: Callable[[], float] = time.time, poll_s: float = 0.2, deadline: Deadline | None = None,
                 read_timeout: float | None = None):
        self.deadline = deadline
        self.read_timeout = reading_deadline(read_timeout, READ_OPTION).seconds
        self.rest = flink.FlinkRest(url, timeout, self._reading())  # the job and its fetch interval: one reading
        self.job_id = job_id or flink.running_job(self.rest)
        self.poll_s = poll_s
        self.fetch_interval = flink.fetch_interval(self.rest)
        super().__init__(out, self.job_id, self.rest.url, clock)

    def _reading(self) -> Deadline:
        return reading_deadline(self.read_timeout, READ_OPTION, self.deadline)

    def read(self) -> dict[str, Any]:
        self.rest.deadline = self._reading()
        snap = flink.take_snapshot(self.rest, self.job_id, self.fetch_interval, self.poll_s, clock=self.clock)
        flink.parse_snapshot(snap.documents, self.job_id, self.url)  # a bad answer fails now
        return {"time": snap.time, "documents": dict(snap.documents)}

    def interval(self, previous, current):
        before = flink.Snapshot(previous["time"], previous["documents"], self.url)
        after = flink.Snapshot(current["time"], current["documents"], self.url)
        base, resets = flink_baseline(before, after, self.job_id)
        with arithmetic(f"{self.url}: job {self.job_id}"):
            reading = flink.read_capture(flink.Capture(self.job_id, (base, after), self.url, self.url),
                                         own_windows=False)  # counts: rate x interval = difference
        document = {**reading.placement.to_dict(reading.graph, reading.cluster), "time": current["time"]}
        _write_atomic(self.out / f".running-{self.stem}.json", json.dumps(document, default=float).encode())
        return reading.graph, {"job_id": self.job_id, "resets": resets, "warnings": list(reading.warnings),
                               "current": remote_traffic(reading.graph, reading.placement),
                               "rates_from": reading.report["rates_from"],
                               "load_estimated_tasks": [int(t) for t in reading.report["load_fallback_tasks"]],
                               "load_unit": reading.graph.load_unit}
