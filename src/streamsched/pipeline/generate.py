"""Synthetic monitoring data for any workload and placement, with noise, skew and dirty rows.

Plain numpy + pyarrow, written in chunks, so it scales from thousands to hundreds of millions of
rows without Spark. Model: edge e of the task graph carries ``r_e = rate[e] * rate_scale * m_e``
tuples/s (``rate_scale`` 1: the declared rates) with a fixed per-pair skew factor
``m_e = exp(skew * N(0,1))``; every ``interval_s`` each pair reports ``r_e * interval_s * n``
tuples, rounded up or down at random (unbiased: a pair of 0.3 tuples/s is not rounded away),
with mean-one noise ``n = exp(noise * N(0,1) - noise^2 / 2)`` (exactly ``r_e * interval_s`` when
``noise = 0``), bytes = tuples x bytes per tuple. Each task reports its load every interval, with
the same noise: ``load[t]``, or with a :class:`~streamsched.model.costs.CostModel` the busy cores
its tuples of that interval cost under the placement of the moment (``placement`` may be a list:
the intervals are cut into as many equal phases, one placement each, so that a snapshot per
phase can tell per-operator cost from remote-tuple cost). A share ``dirty`` of extra rows is
dirty, one kind after another (see :data:`DIRTY_KINDS`); the returned summary says how many of
each were written, so an ingest run can be checked against it.
"""

from __future__ import annotations

import io
import json
import math
import shutil
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from streamsched.errors import InputError
from streamsched.model.cluster import Cluster
from streamsched.model.costs import CostModel, crossing_edges, processed
from streamsched.model.paths import staged_directory
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph

#: Dirty row kinds -> the quarantine reason ingest must give them.
DIRTY_KINDS = {
    "malformed": "malformed",
    "wrong_type": "wrong_type",
    "negative": "negative_count",
    "unknown_task": "unknown_task",
    "out_of_range": "timestamp_out_of_range",
    "duplicate": "duplicate",
    "missing": "missing_field",
}
TEXT_ONLY = ("malformed", "wrong_type")
FORMATS = ("csv", "jsonl", "parquet", "storm-log")
DEFAULT_START = 1_700_000_000.0


#: Bytes one generated traffic row takes on disk (generous, per format; load rows come on top
#: with the factor below), for the free-space check before anything is written.
BYTES_PER_ROW = {"csv": 90, "jsonl": 180, "parquet": 60, "storm-log": 260}
LOAD_ROW_FACTOR = 1.5
#: Largest per-pair rate generated (tuples/s): counts above it lose integer precision.
MAX_RATE = 1e15


def check_disk_space(out: Path, rows: int, fmt: str, n_edges: int, dirty: float) -> None:
    """Refuse (exit 2) ``rows`` rows that would not fit in the free space of ``out``'s file system."""
    rows = max(1, math.ceil(rows / max(1, n_edges))) * max(1, n_edges)  # whole intervals
    need = int(rows * (1 + dirty) * BYTES_PER_ROW.get(fmt, 260) * LOAD_ROW_FACTOR)
    existing = out.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    free = shutil.disk_usage(existing).free
    if need > free:
        raise InputError(f"--rows {rows:,}: about {need / 1e9:,.1f} GB of {fmt} files, more than the "
                         f"{free / 1e9:,.1f} GB free on {existing}")


def generate_metrics(graph: TaskGraph, out: str | Path, **options: Any) -> dict[str, Any]:
    """:func:`_generate` (its options) into a staged ``out`` (:func:`staged_directory`: ``out``
    appears complete or not at all); the summary and ``_generator.json`` name each file where
    it ends up."""
    out = Path(out)
    with staged_directory(out) as stage:
        summary = _generate(graph, stage, **options)
        summary["files"] = [str(out / Path(f).relative_to(stage)) for f in summary["files"]]
        summary["expected_quarantine"] = {}
        for kind, n in summary["dirty"].items():
            reason = DIRTY_KINDS[kind]
            summary["expected_quarantine"][reason] = summary["expected_quarantine"].get(reason, 0) + n
        (stage / "_generator.json").write_text(json.dumps(summary, indent=1))
    return summary


def _generate(graph: TaskGraph, out: Path, rows: int = 100_000, fmt: str = "csv",
              placement: Placement | Sequence[Placement] | None = None, cluster: Cluster | None = None,
              seed: int = 0, dirty: float = 0.01, noise: float = 0.1, skew: float = 0.0,
              rate_scale: float = 1.0, interval_s: float = 1.0, start: float = DEFAULT_START,
              rows_per_file: int = 1_000_000, topology: str | None = None,
              costs: CostModel | None = None) -> dict[str, Any]:
    """Write about ``rows`` traffic rows (whole intervals) plus load samples into ``out``; with
    ``costs``, loads in busy cores that follow it (one phase per placement)."""
    if fmt not in FORMATS:
        raise InputError(f"--format {fmt!r}: not one of {', '.join(FORMATS)}")
    for name, value, low in (("rows", rows, 1), ("rows_per_file", rows_per_file, 1)):
        if value < low:
            raise InputError(f"--{name.replace('_', '-')}: must be >= {low}, got {value}")
    if not 0 <= dirty < 1:
        raise InputError(f"--dirty: must be in [0, 1), got {dirty}")
    for name, value in (("noise", noise), ("skew", skew), ("rate-scale", rate_scale), ("interval", interval_s)):
        if not math.isfinite(value):
            raise InputError(f"--{name}: must be a finite number, got {value}")
    if noise < 0 or skew < 0 or rate_scale <= 0 or interval_s <= 0:
        raise InputError("--noise and --skew must be >= 0; --rate-scale and --interval must be > 0")
    if graph.n_edges == 0:
        raise InputError(f"graph {graph.name!r} has no edges to generate traffic for")
    placements = [] if placement is None else [placement] if isinstance(placement, Placement) else list(placement)
    intervals = max(1, math.ceil(rows / graph.n_edges))
    if len(placements) > intervals:
        raise InputError(f"--placement: {len(placements)} placements (one phase each) but only {intervals} "
                         f"intervals of {graph.n_edges} rows; give more --rows")
    for k, p in enumerate(placements):
        if p.n_tasks != graph.n_tasks:
            raise InputError(f"--placement #{k + 1}: {p.n_tasks} tasks, graph {graph.name!r} has {graph.n_tasks}")
    if fmt == "storm-log" and len(placements) > 1:
        raise InputError("--placement: --format storm-log takes one placement (a worker log has one host layout)")
    if costs is not None and costs.remote_cpu_per_tuple > 0 and not placements:
        raise InputError("--remote-cpu-per-tuple: give --placement (which tuples leave their worker depends on it)")
    task_cost = costs.operator_cost(graph) if costs is not None else None
    check_disk_space(out, rows, fmt, graph.n_edges, dirty)
    rng = np.random.default_rng(seed)
    topo = topology or graph.name
    multiplier = np.exp(skew * rng.standard_normal(graph.n_edges)) if skew > 0 else np.ones(graph.n_edges)
    pair_rate = graph.rate * rate_scale * multiplier
    if not np.all(np.isfinite(pair_rate)) or float(pair_rate.max(initial=0.0)) > MAX_RATE:
        raise InputError(f"--rate-scale {rate_scale:g}: the graph's rates times it exceed {MAX_RATE:g} tuples/s")
    per_tuple = np.where(graph.rate > 0, graph.bytes_rate / np.where(graph.rate > 0, graph.rate, 1), 0.0)
    per_tuple = np.where(per_tuple > 0, per_tuple, 100.0)
    phase_length = intervals // max(1, len(placements))
    phase_of = np.minimum(np.arange(intervals) // phase_length, max(0, len(placements) - 1))
    crossing = (np.stack([crossing_edges(graph, p) for p in placements]) if costs is not None and placements
                else np.zeros((1, graph.n_edges), bool))
    summary: dict[str, Any] = {
        "topology": topo, "format": fmt, "intervals": intervals, "interval_s": interval_s,
        "start": start, "end": start + (intervals - 1) * interval_s, "seed": seed, "rate_scale": rate_scale,
        "traffic_rows": 0, "load_rows": 0, "dirty": {}, "files": [],
        "load_unit": "cores" if costs is not None else graph.load_unit,
        "cost_model": costs.to_dict() if costs is not None else None,
        "phases": [_phase(k, phase_of, start, interval_s) for k in range(len(placements))],
        "expected_rate": {"src": graph.task_ids[graph.src].tolist()[:10_000],
                          "dst": graph.task_ids[graph.dst].tolist()[:10_000],
                          "tuples_per_s": pair_rate.tolist()[:10_000]},
    }
    if fmt == "storm-log":
        if costs is None:
            task_load = graph.load
        else:
            task_load = (costs.loads(graph, placements[0], pair_rate) if placements
                         else task_cost * processed(graph, pair_rate))
        _storm_log(graph, out, intervals, pair_rate, placements[0] if placements else None, cluster, start, interval_s,
                   topo, summary, dirty, rng, task_load)
        return summary
    kinds = [k for k in DIRTY_KINDS if fmt != "parquet" or k not in TEXT_ONLY]
    intervals_per_chunk = max(1, rows_per_file // graph.n_edges)
    dirty_count = 0
    for chunk, first in enumerate(range(0, intervals, intervals_per_chunk)):
        n_int = min(intervals_per_chunk, intervals - first)
        ts = start + (first + np.repeat(np.arange(n_int), graph.n_edges)) * interval_s
        edge = np.tile(np.arange(graph.n_edges), n_int)
        expected = pair_rate[edge] * interval_s
        tuples = expected if noise == 0 else np.floor(
            expected * _mean_one(noise, rng, edge.size) + rng.random(edge.size))
        traffic = {
            "timestamp": ts, "topology": np.full(edge.size, topo, dtype=object),
            "src_task": graph.task_ids[graph.src][edge], "dst_task": graph.task_ids[graph.dst][edge],
            "tuples": tuples, "bytes": tuples * per_tuple[edge],
        }
        n_dirty = int(round(edge.size * dirty))
        dirty_lines = []
        for k in range(n_dirty):
            kind = kinds[(dirty_count + k) % len(kinds)]
            row = int(rng.integers(edge.size))
            dirty_lines.append(_dirty_row(kind, {c: v[row] for c, v in traffic.items()}, graph))
            summary["dirty"][kind] = summary["dirty"].get(kind, 0) + 1
        dirty_count += n_dirty
        t_ts = start + (first + np.repeat(np.arange(n_int), graph.n_tasks)) * interval_s
        task = np.tile(np.arange(graph.n_tasks), n_int)
        if costs is None:
            load = graph.load[task]
        else:  # the busy cores of each interval's tuples under that interval's placement
            interval = np.repeat(np.arange(n_int), graph.n_edges)
            done = tuples / interval_s
            remote = done * crossing[phase_of[first + interval], edge]
            ends = [np.bincount(interval * graph.n_tasks + ends_of[edge], weights=w, minlength=task.size)
                    for ends_of in (graph.dst, graph.src) for w in (done, remote)]
            load = (task_cost[task] * np.where(ends[0] > 0, ends[0], ends[2])
                    + costs.remote_cpu_per_tuple * (ends[1] + ends[3]) / 2)
        load = load * (_mean_one(noise, rng, task.size) if noise > 0 else 1.0)
        loads = {
            "timestamp": t_ts, "topology": np.full(task.size, topo, dtype=object),
            "task": graph.task_ids[task],
            "operator": np.asarray(graph.operator_names, dtype=object)[graph.task_operator[task]],
            "load": load,
        }
        summary["traffic_rows"] += edge.size + n_dirty
        summary["load_rows"] += task.size
        summary["files"].append(_write(out / f"traffic-{chunk:05d}", fmt, traffic, dirty_lines))
        summary["files"].append(_write(out / f"load-{chunk:05d}", fmt, loads, []))
    return summary


def _mean_one(noise: float, rng: np.random.Generator, size: int) -> np.ndarray:
    """Lognormal factors of mean 1: ``exp(noise * N(0,1) - noise^2 / 2)``."""
    return np.exp(noise * rng.standard_normal(size) - noise * noise / 2)


def _phase(k: int, phase_of: np.ndarray, start: float, interval_s: float) -> dict[str, Any]:
    """Placement ``k``'s phase: its first and last sample timestamps, and the ingest window
    (``--window``, ``--until``) that holds exactly its samples."""
    mine = np.flatnonzero(phase_of == k)
    first, last = start + mine[0] * interval_s, start + mine[-1] * interval_s
    return {"placement": k, "first": first, "last": last, "until": last, "window_s": mine.size * interval_s}


def _dirty_row(kind: str, row: dict[str, Any], graph: TaskGraph) -> dict[str, Any]:
    """One dirty row built from a clean one (a dict whose values may be text)."""
    row = dict(row)
    if kind == "malformed":
        return {"_line": f"{row['timestamp']},{row['topology']},{row['src_task']}"}
    if kind == "wrong_type":
        row["tuples"] = "twelve"
    elif kind == "negative":
        row["tuples"] = -abs(float(row["tuples"])) - 1.0
    elif kind == "unknown_task":
        row["dst_task"] = int(graph.task_ids.max()) + 1000
    elif kind == "out_of_range":
        row["timestamp"] = 1000.0
    elif kind == "missing":
        row["topology"] = ""
    return row  # duplicate: the clean row again


def _write(stem: Path, fmt: str, columns: dict[str, np.ndarray], dirty: list[dict[str, Any]]) -> str:
    table = pa.table(columns)
    if fmt == "parquet":
        if dirty:
            table = pa.concat_tables([table, pa.Table.from_pylist(
                [{k: (v.item() if isinstance(v, np.generic) else v) for k, v in d.items()} for d in dirty],
                schema=table.schema)])
        path = stem.with_suffix(".parquet")
        pq.write_table(table, path)
        return str(path)
    path = stem.with_suffix(f".{fmt}")
    with open(path, "wb") as handle:
        if fmt == "csv":
            buffer = io.BytesIO()
            pcsv.write_csv(table, buffer, pcsv.WriteOptions(quoting_style="none"))
            handle.write(buffer.getvalue())
            for d in dirty:
                line = d["_line"] if "_line" in d else ",".join(_text(d[c]) for c in columns)
                handle.write((line + "\n").encode())
        else:
            for record in table.to_pylist():
                handle.write((json.dumps(record) + "\n").encode())
            for d in dirty:
                line = d["_line"] if "_line" in d else json.dumps({c: _plain(d[c]) for c in columns})
                handle.write((line + "\n").encode())
    return str(path)


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _text(value: Any) -> str:
    value = _plain(value)
    if isinstance(value, float) and value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return str(value)


#: Storm's metrics consumer component id (Storm 2.x: ``__metrics_`` + class, StormCommon.java).
STORM_CONSUMER = "__metrics_org.apache.storm.metric.LoggingMetricsConsumer"
#: Dirty Storm lines, each made from a valid ``__execute-count`` line placed next to it.
STORM_DIRTY = ("malformed", "wrong_type", "negative", "out_of_range", "duplicate", "missing")


def _storm_line(ts: int, host: str, port: int, task: int, component: str, name: str, value: str,
                start: float, logged: int | None = None) -> str:
    """One line as Storm's LoggingMetricsConsumer logs it through log4j2/worker.xml's METRICS
    appender (pattern ``%d %-8r %m%n``): log4j date and milliseconds since the worker started,
    then ``String.format("%d\\t%15s:%-4d\\t%3d:%-11s\\t", ...)``, the name padded and cut to 23
    characters, a tab, the value. ``logged``: when log4j wrote it (default ``ts``)."""
    logged = ts if logged is None else logged
    elapsed = int((logged - start) * 1000) + 1200 + task % 7
    date = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(logged + 1)) + f",{elapsed % 1000:03d}"
    return (f"{date} {elapsed:<8} {ts}\t{host:>15}:{port:<4}\t{task:>3}:{component:<11}\t"
            f"{(name + ' ' * 23)[:23]}\t{value}")


def _java_map(entries: dict[str, object]) -> str:
    return "{" + ", ".join(f"{k}={v}" for k, v in entries.items()) + "}"


def _storm_log(graph: TaskGraph, out: Path, intervals: int, pair_rate: np.ndarray, placement: Placement | None,
               cluster: Cluster | None, start: float, interval_s: float, topo: str, summary: dict,
               dirty: float, rng: np.random.Generator, task_load: np.ndarray) -> None:
    """What a Storm <= 2.2 worker's ``LoggingMetricsConsumer`` writes: one
    ``workers-artifacts/<topology id>/<port>/worker.log.metrics`` with the log4j prefix, the
    map-valued built-in metrics of every task each ``interval_s`` (``__execute-count`` keyed by
    upstream:stream, ``__transfer-count`` by stream, latencies, ...), Storm's own components
    (``__acker``, the consumer, ``__system`` task -1 on every worker) and streams (``__ack_init``,
    ``__ack_ack``, ``__metrics``, ``__tick``). Each pair carries ``round(rate * interval_s)``
    tuples per interval (no noise); one stream per (component, downstream component). The
    latencies make each bolt's busy fraction ``task_load`` with ``--storm-interval interval_s``.
    ``dirty`` adds that share of dirty lines (:data:`STORM_DIRTY`), each next to the valid line
    it was made from. ``summary["expected_rate"]`` holds the rates ingest recovers: Storm reports
    per (task, upstream component, stream) only, so the estimate splits a receiver's count over
    the senders by what each transferred (exact for shuffle-like traffic)."""
    hosts = [n.name for n in cluster.nodes] if cluster is not None else [f"node-{k}" for k in range(4)]
    node_of = placement.node_of if placement is not None else np.arange(graph.n_tasks) % len(hosts)
    worker_of = placement.worker_of if placement is not None else np.zeros(graph.n_tasks, int)
    ops = graph.operator_names
    ids = [int(t) for t in graph.task_ids]
    comp = [ops[graph.task_operator[t]] for t in range(graph.n_tasks)]
    workers = sorted({(int(node_of[t]), max(int(worker_of[t]), 0)) for t in range(graph.n_tasks)})
    slot = {w: (hosts[w[0]], 6700 + w[1]) for w in workers}
    where = [slot[(int(node_of[t]), max(int(worker_of[t]), 0))] for t in range(graph.n_tasks)]
    topology_id = f"{topo}-1-{int(start)}"
    # One stream per (component, downstream component): "default" for the first downstream.
    downstream: dict[str, list[str]] = {}
    for e in range(graph.n_edges):
        downstream.setdefault(comp[graph.src[e]], [])
        if comp[graph.dst[e]] not in downstream[comp[graph.src[e]]]:
            downstream[comp[graph.src[e]]].append(comp[graph.dst[e]])
    stream_of = {(u, d): ("default" if k == 0 else f"to_{d}") for u, ds in downstream.items()
                 for k, d in enumerate(sorted(ds))}
    tuples = np.round(pair_rate * interval_s)
    executed: dict[int, dict[str, float]] = {}      # task -> {upstream:stream: n}
    sent: dict[int, dict[str, float]] = {}          # task -> {stream: n}
    for e in range(graph.n_edges):
        s, d = int(graph.src[e]), int(graph.dst[e])
        stream = stream_of[(comp[s], comp[d])]
        key = f"{comp[s]}:{stream}"
        executed.setdefault(d, {})[key] = executed.get(d, {}).get(key, 0.0) + tuples[e]
        sent.setdefault(s, {})[stream] = sent.get(s, {}).get(stream, 0.0) + tuples[e]
    # The rates the Storm estimate recovers (metrics_traffic: count(x <- U:s) * T(u, s) / sum T).
    expected: dict[tuple[int, int], float] = {}
    for x, keys in executed.items():
        for key, n in keys.items():
            upstream, stream = key.split(":")
            senders = [u for u in range(graph.n_tasks) if comp[u] == upstream]
            total = sum(sent.get(u, {}).get(stream, 0.0) for u in senders)
            for u in senders:
                share = sent.get(u, {}).get(stream, 0.0)
                if n > 0 and share > 0:
                    expected[(ids[u], ids[x])] = expected.get((ids[u], ids[x]), 0.0) + n * share / total / interval_s
    acker, consumer = max(ids) + 1, max(ids) + 2
    first_host, first_port = slot[workers[0]]
    lines: list[str] = []
    app_lines: dict[int, tuple] = {}   # valid application __execute-count lines: index -> fields
    system = 0
    for i in range(intervals):
        ts = int(start + i * interval_s)

        def emit(t: int, host: str, port: int, component: str, name: str, value: str, is_system: bool) -> None:
            nonlocal system
            if is_system:
                system += 1
            elif name == "__execute-count":
                app_lines[len(lines)] = (ts, host, port, t, component, name, value)
            lines.append(_storm_line(ts, host, port, t, component, name, value, start))

        for host, port in (slot[w] for w in workers):
            emit(-1, host, port, "__system", "uptimeSecs", str(int(i * interval_s) + 5), True)
            emit(-1, host, port, "__system", "memory/heap", _java_map(
                {"unusedBytes": 80000000, "usedBytes": 177425408 + i, "maxBytes": 954728448}), True)
        spouts = sorted({comp[t] for t in sent if t not in executed})
        init = int(sum(v for t, keys in sent.items() if t not in executed for v in keys.values()))
        acks = {f"{c}:__ack_init": init for c in spouts}
        for t, keys in executed.items():
            acks[f"{comp[t]}:__ack_ack"] = acks.get(f"{comp[t]}:__ack_ack", 0) + int(sum(keys.values()))
        emit(acker, first_host, first_port, "__acker", "__execute-count", _java_map(acks), True)
        emit(acker, first_host, first_port, "__acker", "__transfer-count", _java_map({"__ack_ack": int(init)}), True)
        emit(consumer, first_host, first_port, STORM_CONSUMER, "__execute-count",
             _java_map({f"{c}:__metrics": 1 for c in sorted(set(comp))}), True)
        for t in sorted(range(graph.n_tasks), key=lambda t: (where[t], ids[t])):
            host, port = where[t]
            ack_stream = "__ack_ack" if t in executed else "__ack_init"
            streams = {k: int(v) for k, v in sent.get(t, {}).items()}
            received = sum(executed.get(t, {}).values())
            streams[ack_stream] = int(received if t in executed else sum(streams.values()))
            streams["__metrics"] = 1
            only_system = all(k.startswith("__") for k in streams)
            emit(ids[t], host, port, comp[t], "__emit-count", _java_map(streams), only_system)
            emit(ids[t], host, port, comp[t], "__transfer-count", _java_map(streams), only_system)
            emit(ids[t], host, port, comp[t], "__fail-count", "{}", False)
            if t in executed:
                keys = {k: int(v) for k, v in executed[t].items()}
                ms = float(task_load[t]) * 1000.0 * interval_s / received if received > 0 else 0.0
                emit(ids[t], host, port, comp[t], "__execute-count", _java_map(keys | {"__system:__tick": 1}), False)
                emit(ids[t], host, port, comp[t], "__execute-latency",
                     _java_map({k: ms for k in keys} | {"__system:__tick": 0.0}), False)
                emit(ids[t], host, port, comp[t], "__ack-count", _java_map(keys), False)
    n_dirty = int(round(len(app_lines) * dirty))
    summary["dirty"] = {}
    inserts: list[tuple[int, str]] = []
    for k, at in enumerate(sorted(rng.choice(sorted(app_lines), size=min(n_dirty, len(app_lines)),
                                             replace=False).tolist())):
        kind = STORM_DIRTY[k % len(STORM_DIRTY)]
        ts, host, port, t, component, name, value = app_lines[at]
        bad = {"malformed": lines[at][:-1],                       # cut before the map's closing brace
               "wrong_type": _storm_line(ts, host, port, t, component, name, value.replace("=", "=x", 1), start),
               "negative": _storm_line(ts, host, port, t, component, name, value.replace("=", "=-", 1), start),
               "out_of_range": _storm_line(1000, host, port, t, component, name, value, start, logged=ts),
               "duplicate": lines[at],
               "missing": _storm_line(ts, host, port, t, component, name, "", start)}[kind]
        inserts.append((at, bad))
        summary["dirty"][kind] = summary["dirty"].get(kind, 0) + 1
    for at, bad in sorted(inserts, reverse=True):
        lines.insert(at, bad)
    path = out / "workers-artifacts" / topology_id / str(first_port) / "worker.log.metrics"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    summary.update(topology=topology_id, traffic_rows=len(lines), system_rows=system, storm_interval_s=interval_s,
                   expected_rate={"src": [k[0] for k in expected], "dst": [k[1] for k in expected],
                                  "tuples_per_s": list(expected.values())})
    summary["files"].append(str(path))
