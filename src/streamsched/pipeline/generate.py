"""Synthetic monitoring data for any workload and placement, with noise, skew and dirty rows.

Plain numpy + pyarrow, written in chunks, so it scales from thousands to hundreds of millions of
rows without Spark. Model: edge e of the task graph carries ``r_e = rate[e] * rate_scale * m_e``
tuples/s with a fixed per-pair skew factor ``m_e = exp(skew * N(0,1))``; every ``interval_s``
each pair reports ``round(r_e * interval_s * n)`` tuples with noise ``n = exp(noise * N(0,1))``
(exactly ``r_e * interval_s`` when ``noise = 0``), bytes = tuples x bytes per tuple. Each task
reports its load (``load[t]``, with the same noise) every interval. A share ``dirty`` of extra
rows is dirty, one kind after another (see :data:`DIRTY_KINDS`); the returned summary says how
many of each were written, so an ingest run can be checked against it.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from streamsched.errors import InputError
from streamsched.model.cluster import Cluster
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


def generate_metrics(graph: TaskGraph, out: str | Path, rows: int = 100_000, fmt: str = "csv",
                     placement: Placement | None = None, cluster: Cluster | None = None,
                     seed: int = 0, dirty: float = 0.01, noise: float = 0.1, skew: float = 0.0,
                     rate_scale: float = 100.0, interval_s: float = 1.0, start: float = DEFAULT_START,
                     rows_per_file: int = 1_000_000, topology: str | None = None) -> dict[str, Any]:
    """Write about ``rows`` traffic rows (whole intervals) plus load samples into ``out``."""
    if fmt not in FORMATS:
        raise InputError(f"--format {fmt!r}: not one of {', '.join(FORMATS)}")
    for name, value, low in (("rows", rows, 1), ("rows_per_file", rows_per_file, 1)):
        if value < low:
            raise InputError(f"--{name.replace('_', '-')}: must be >= {low}, got {value}")
    if not 0 <= dirty < 1:
        raise InputError(f"--dirty: must be in [0, 1), got {dirty}")
    if noise < 0 or skew < 0 or rate_scale <= 0 or interval_s <= 0:
        raise InputError("--noise and --skew must be >= 0; --rate-scale and --interval must be > 0")
    if graph.n_edges == 0:
        raise InputError(f"graph {graph.name!r} has no edges to generate traffic for")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    topo = topology or graph.name
    multiplier = np.exp(skew * rng.standard_normal(graph.n_edges)) if skew > 0 else np.ones(graph.n_edges)
    pair_rate = graph.rate * rate_scale * multiplier
    per_tuple = np.where(graph.rate > 0, graph.bytes_rate / np.where(graph.rate > 0, graph.rate, 1), 0.0)
    per_tuple = np.where(per_tuple > 0, per_tuple, 100.0)
    intervals = max(1, math.ceil(rows / graph.n_edges))
    summary: dict[str, Any] = {
        "topology": topo, "format": fmt, "intervals": intervals, "interval_s": interval_s,
        "start": start, "end": start + (intervals - 1) * interval_s, "seed": seed,
        "traffic_rows": 0, "load_rows": 0, "dirty": {}, "files": [],
        "expected_rate": {"src": graph.task_ids[graph.src].tolist()[:10_000],
                          "dst": graph.task_ids[graph.dst].tolist()[:10_000],
                          "tuples_per_s": pair_rate.tolist()[:10_000]},
    }
    if fmt == "storm-log":
        _storm_log(graph, out, intervals, pair_rate, placement, cluster, start, interval_s, topo, summary)
        return _finish(out, summary)
    kinds = [k for k in DIRTY_KINDS if fmt != "parquet" or k not in TEXT_ONLY]
    intervals_per_chunk = max(1, rows_per_file // graph.n_edges)
    dirty_count = 0
    for chunk, first in enumerate(range(0, intervals, intervals_per_chunk)):
        n_int = min(intervals_per_chunk, intervals - first)
        ts = start + (first + np.repeat(np.arange(n_int), graph.n_edges)) * interval_s
        edge = np.tile(np.arange(graph.n_edges), n_int)
        expected = pair_rate[edge] * interval_s
        tuples = expected if noise == 0 else np.round(expected * np.exp(noise * rng.standard_normal(edge.size)))
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
        load = graph.load[task] * (np.exp(noise * rng.standard_normal(task.size)) if noise > 0 else 1.0)
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
    return _finish(out, summary)


def _finish(out: Path, summary: dict[str, Any]) -> dict[str, Any]:
    summary["expected_quarantine"] = {}
    for kind, n in summary["dirty"].items():
        reason = DIRTY_KINDS[kind]
        summary["expected_quarantine"][reason] = summary["expected_quarantine"].get(reason, 0) + n
    (out / "_generator.json").write_text(json.dumps(summary, indent=1))
    return summary


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


def _storm_log(graph: TaskGraph, out: Path, intervals: int, pair_rate: np.ndarray, placement: Placement | None,
               cluster: Cluster | None, start: float, interval_s: float, topo: str, summary: dict) -> None:
    """Storm ``LoggingMetricsConsumer`` lines (no dirty rows): per receiving task one
    ``__execute-count`` keyed by upstream component, per sending task one ``__transfer-count``."""
    hosts = [n.name for n in cluster.nodes] if cluster is not None else [f"node-{k}" for k in range(4)]
    node_of = placement.node_of if placement is not None else np.arange(graph.n_tasks) % len(hosts)
    worker_of = placement.worker_of if placement is not None else np.zeros(graph.n_tasks, int)
    ops = graph.operator_names
    lines = []
    for i in range(intervals):
        ts = int(start + i * interval_s)
        received: dict[int, dict[str, float]] = {}
        sent = np.zeros(graph.n_tasks)
        for e in range(graph.n_edges):
            s, d = int(graph.src[e]), int(graph.dst[e])
            key = f"{ops[graph.task_operator[s]]}:default"
            received.setdefault(d, {})[key] = received.get(d, {}).get(key, 0.0) + pair_rate[e] * interval_s
            sent[s] += pair_rate[e] * interval_s
        for t in range(graph.n_tasks):
            host = f"{hosts[node_of[t]]:<15}:{6700 + max(int(worker_of[t]), 0):<4}"
            who = f"{int(graph.task_ids[t]):>3}:{ops[graph.task_operator[t]]:<11}"
            if sent[t] > 0:
                lines.append(f"{ts}\t{host}\t{who}\t{'__transfer-count':<23}\t{{default={sent[t]:g}}}")
            if t in received:
                counts = ", ".join(f"{k}={v:g}" for k, v in received[t].items())
                latency = ", ".join(f"{k}=1" for k in received[t])
                lines.append(f"{ts}\t{host}\t{who}\t{'__execute-count':<23}\t{{{counts}}}")
                lines.append(f"{ts}\t{host}\t{who}\t{'__execute-latency':<23}\t{{{latency}}}")
    path = out / "worker-6700-metrics.log"
    path.write_text("\n".join(lines) + "\n")
    summary["traffic_rows"] = len(lines)
    summary["files"].append(str(path))
