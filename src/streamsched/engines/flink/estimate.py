"""Graph, placement and cluster of one job from a capture (rates from counter differences)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from streamsched.engines.flink.documents import (
    CLOCK_GAUGES,
    COUNTERS,
    METER_OF,
    METER_SPAN_S,
    NODE_BY,
    SHIP_STRATEGIES,
    Capture,
    FlinkReading,
    JobState,
    Snapshot,
    TaskManagerInfo,
    VertexInfo,
    _host_of,
    parse_snapshot,
)
from streamsched.engines.flink.traffic import pair_weights
from streamsched.errors import InputError
from streamsched.model.cluster import Cluster, Node
from streamsched.model.contention import ContentionProfile, with_profile
from streamsched.model.placement import NO_WORKER, Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.model.units import CORES


@dataclass(frozen=True)
class Window:
    """One TaskManager's window: from the poll that saw one fresh answer of it in the
    JobManager's cache (``start``) to the poll that saw a later one (``end``); its length
    ``seconds`` by the TaskManager's own clock where its subtasks give one (``clock``
    ``"taskmanager"``: exact however late the answers travelled), else ``end - start``
    (``"polls"``); ``uncertainty_s``: how long before each poll the answers may have arrived."""

    start: float
    end: float
    seconds: float
    clock: str
    uncertainty_s: float


def _elapsed_ms(metrics: Mapping[str, float]) -> float:
    """Milliseconds since the subtask's task started, as its TaskManager read them
    (:data:`CLOCK_GAUGES`); NaN where Flink gives no busy time or clamped it at 0."""
    busy = metrics.get("accumulateBusyTimeMs", math.nan)
    parts = [busy] + [metrics.get(name, math.nan) for name in CLOCK_GAUGES]
    return sum(parts) if busy > 0 and all(math.isfinite(x) for x in parts) else math.nan


def _windows(first: JobState, last: JobState, snaps: tuple[Snapshot, Snapshot], clocks: bool = True
             ) -> dict[str, Window]:
    """Per TaskManager of ``last``: its window (:class:`Window`), its subtasks' clocks differenced
    (the median over the subtasks of one attempt in both snapshots; ``clocks``) or its polled
    times."""
    before = {(v.id, s.index): s for v in first.vertices for s in v.subtasks}
    ticks: dict[str, list[float]] = {}
    for v in last.vertices:
        for s in v.subtasks:
            old = before.get((v.id, s.index))
            if clocks and old is not None and old.attempt == s.attempt and old.taskmanager == s.taskmanager:
                ticks.setdefault(s.taskmanager, []).append((_elapsed_ms(s.metrics) - _elapsed_ms(old.metrics)) / 1000.0)
    out = {}
    for tm in sorted({s.taskmanager for v in last.vertices for s in v.subtasks} | {t.id for t in last.taskmanagers}):
        (b0, t0), (b1, t1) = (snap.taskmanagers.get(tm, (snap.time, snap.time)) for snap in snaps)
        clocked = [x for x in ticks.get(tm, []) if x > 0]
        seconds = float(np.median(clocked)) if clocked else t1 - t0
        out[tm] = Window(t0, t1, seconds, "taskmanager" if clocked else "polls", max(t0 - b0, t1 - b1))
    return out


def _rates(first: JobState, last: JobState,
           windows: Mapping[str, Window] | None) -> tuple[dict[tuple[str, int], dict[str, float]], list[str]]:
    """Per (vertex id, subtask) the rate of every counter: its differences between the first
    and the last snapshot over its TaskManager's window (``windows``; None: one snapshot) when
    the subtask ran one attempt on one TaskManager throughout, else the last snapshot's meter."""
    before = {(v.id, s.index): s for v in first.vertices for s in v.subtasks} if windows else {}
    out: dict[tuple[str, int], dict[str, float]] = {}
    from_meters: list[str] = []
    for v in last.vertices:
        for s in v.subtasks:
            old = before.get((v.id, s.index))
            window = windows.get(s.taskmanager) if windows else None
            same = (old is not None and window is not None and window.seconds > 0 and old.attempt == s.attempt
                    and old.taskmanager == s.taskmanager)
            rates: dict[str, float] = {}
            for name in COUNTERS:
                value = s.metrics.get(name, math.nan)
                if (same and math.isfinite(value)
                        and math.isfinite(old.metrics.get(name, math.nan)) and value >= old.metrics[name]):
                    rates[name] = (value - old.metrics[name]) / window.seconds
                else:
                    rates[name] = s.metrics.get(METER_OF[name], math.nan)
                    if windows and name in ("numRecordsIn", "numRecordsOut") and not same:
                        from_meters.append(f"{v.name}[{s.index}]")
            for name in ("idleTimeMsPerSecond", "backPressuredTimeMsPerSecond"):
                rates[name] = s.metrics.get(name, math.nan)
            out[(v.id, s.index)] = rates
    return out, sorted(set(from_meters))


def read_capture(capture: Capture, node_by: str = "taskmanager", own_windows: bool = True) -> FlinkReading:
    """Graph, current placement and observed cluster of the captured job.

    ``own_windows``: each TaskManager's rates over its own window (:func:`_windows`), or (False)
    every rate over the snapshots' times, so that a rate times the window is the counter's
    difference (what a collector of counts needs).

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
    ends = (capture.snapshots[0], capture.snapshots[-1])
    if not own_windows:
        ends = tuple(Snapshot(snap.time, snap.documents, snap.where) for snap in ends)
    windows = _windows(first, last, ends, own_windows) if dt > 0 else None
    rates, from_meters = _rates(first, last, windows)
    if from_meters:
        warnings.append(f"subtasks restarted or moved during the window, their rates are Flink's 60 s meters: "
                        f"{', '.join(from_meters[:5])}{' ...' if len(from_meters) > 5 else ''}")
    hosting = sorted({s.taskmanager for v in last.vertices for s in v.subtasks if windows and s.taskmanager in windows})
    if hosting:
        dt = float(np.median([windows[tm].seconds for tm in hosting]))
        short = [tm for tm in hosting if not windows[tm].seconds > 0]
        if short:
            raise InputError(f"{capture.where}: TaskManager {short[0]!r} has no window between the snapshots "
                             f"(the same answer of it in both)")
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
        bytes_rate=cat(pair_bytes, np.float64), where=f"{capture.where}: job {capture.job_id}", load_unit=CORES,
        slot_group=[v.slot_sharing_group for v in vertices])
    profile = _contention_profile(vertices, operator_names, index, loads, bytes_out, offsets)
    graph = with_profile(graph, profile, f"{capture.where}: job {capture.job_id}")
    cluster, placement, tm_report = _placement(last, node_by, n, capture.job_id, warnings)
    traffic = (("bytes_in_per_s", "numBytesIn"), ("bytes_in_remote_per_s", "numBytesInRemote"),
               ("bytes_out_per_s", "numBytesOut"))
    for row in tm_report.values():  # each TaskManager's own traffic: its subtasks' rates over its window
        row.update({key: 0.0 for key, _ in traffic})
    for v in vertices:
        for s in v.subtasks:
            for key, name in traffic if s.taskmanager in tm_report else ():
                value = rates[(v.id, s.index)][name]
                tm_report[s.taskmanager][key] += max(value, 0.0) if math.isfinite(value) else 0.0
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
        "windows": {tm: {"start": windows[tm].start, "end": windows[tm].end, "seconds": windows[tm].seconds,
                         "clock": windows[tm].clock, "uncertainty_s": windows[tm].uncertainty_s} for tm in hosting},
        "windows_overlap_s": (max(0.0, min(windows[tm].end for tm in hosting) - max(windows[tm].start for tm in hosting))
                              if hosting else None),
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
        "contention": {
            "measured": list(profile.measured),
            "not_measured": {"state": "Flink's REST metrics give no state access rate per subtask (RocksDB's "
                                      "native metrics are off by default): state costs are 0"},
            "per_task": {"compute": "busy cores (busy time ms/s / 1000)",
                         "network": "bytes out per second (numBytesOut), per downstream operator"},
            "operators": [{"name": name, "compute": float(profile.cost[k, 0]), "network": float(profile.cost[k, 2]),
                           "outbound": profile.outbound[k]} for k, name in enumerate(operator_names)],
        },
    }
    return FlinkReading(graph, placement, cluster, report, tuple(warnings))


def _contention_profile(vertices: Sequence[VertexInfo], names: list[str], index: Mapping[str, int], loads: np.ndarray,
                        bytes_out: Mapping[str, np.ndarray], offsets: np.ndarray) -> ContentionProfile:
    """CAPSys's per-task vector of each vertex: compute = mean busy cores of its subtasks,
    network = mean bytes out per second over its downstream vertices (CAPS charges it per link),
    state not measured; a vertex's link type is its outputs' ship strategy (``FORWARD`` only
    when all are, ``REBALANCE`` when all are, else ``HASH``)."""
    downstream: list[list[int]] = [[] for _ in vertices]
    strategies: list[set[str]] = [set() for _ in vertices]
    for k, v in enumerate(vertices):
        for upstream, strategy in v.inputs:
            downstream[index[upstream]].append(k)
            strategies[index[upstream]].add(strategy)
    cost = np.zeros((len(vertices), 3))
    outbound = []
    for k, v in enumerate(vertices):
        cost[k, 0] = float(loads[offsets[k]:offsets[k + 1]].mean())
        cost[k, 2] = float(bytes_out[v.id].mean()) / max(len(downstream[k]), 1)
        kinds = strategies[k]
        outbound.append("" if not kinds else "FORWARD" if kinds == {"FORWARD"} else
                        "REBALANCE" if kinds == {"REBALANCE"} else "HASH")
    cost.setflags(write=False)
    return ContentionProfile(tuple(names), tuple(v.parallelism for v in vertices), cost, tuple(outbound),
                             tuple(tuple(d) for d in downstream), measured=("compute", "network"))


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
                      ram_mb=tm.memory_mb, task_slots=max(tm.slots, 0)) for tm in ordered]
        node_of_tm = {tm.id: (k, 0) for k, tm in enumerate(ordered)}
    else:
        hosts: dict[str, list[TaskManagerInfo]] = {}
        for tm in ordered:
            hosts.setdefault(tm.host, []).append(tm)
        nodes, node_of_tm = [], {}
        for k, (host, group) in enumerate(hosts.items()):
            cores = max(tm.cores for tm in group)
            nodes.append(Node(name=host, capacity=cores, slots=len(group), cores=max(1, math.ceil(cores)),
                              ram_mb=sum(tm.memory_mb for tm in group), task_slots=sum(max(tm.slots, 0) for tm in group)))
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
