"""Batch ingest: files -> validation (nothing lost) -> windowed rates -> snapshots.

Two Spark jobs, loads first (their tasks are the declared tasks the traffic check needs), then
traffic. Each job: one task per native file parses, checks and packs it into blocks with
pyarrow (:func:`.blocks.read_blocks`, Arrow's CSV reader being several times faster than
Spark's); the other sources (:mod:`.sources`) are read by Spark and packed the same way; the
blocks are grouped by task pair (or task) and :func:`.merge.merge_group` finds duplicates and
unknown tasks and reduces each group to a summary; everything is written once, as one Parquet
dataset whose column ``part`` tells summaries, rejected rows and counts apart. The driver then
computes the rates R(ti, tj) and loads L(ti) of the window from the summaries (i-scheduler.txt
4.1, t3-scheduler.txt 4.1) and :mod:`.store` writes one snapshot per topology. Every run checks
and reports ``rows_read = rows_accepted + sum(rows_quarantined.values()) + rows_system`` (``rows_system``:
lines of Storm's own components and streams, neither traffic nor quarantine). An ingest that
accepts no row, or gives no traffic between tasks, is an InputError saying why.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
import uuid
from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from streamsched.errors import InputError
from streamsched.model.taskgraph import TaskGraph
from streamsched.model.units import CORES, TASKS, check_unit
from streamsched.pipeline import schema as S
from streamsched.pipeline import sources
from streamsched.pipeline.blocks import BLOCK as ARROW_BLOCK, floats, pack_frame, read_blocks
from streamsched.pipeline.merge import GROUP, MergeWindow, merge_sorted
from streamsched.pipeline.native_reader import check_header
from streamsched.pipeline.session import python_workers
from streamsched.pipeline.store import (claim_tmp, find_ingested, input_key, record_ingested, release_tmp,
                                        write_run_report, write_snapshot)

BLOCK = from_arrow_schema(ARROW_BLOCK)


@dataclass(frozen=True)
class Window:
    """Sliding window of ``seconds`` ending at ``end`` (None = the latest accepted timestamp per
    topology), or exponential weighting with ``half_life_s`` when that is set."""

    seconds: float = 60.0
    half_life_s: float | None = None
    end: float | None = None

    def __post_init__(self) -> None:
        if not self.seconds > 0:
            raise InputError(f"--window: must be > 0 seconds, got {self.seconds}")
        if self.half_life_s is not None and not self.half_life_s > 0:
            raise InputError(f"--half-life: must be > 0 seconds, got {self.half_life_s}")

    def describe(self, end: float) -> dict[str, Any]:
        if self.half_life_s is not None:
            return {"kind": "ewma", "half_life_s": self.half_life_s, "end": end}
        return {"kind": "sliding", "seconds": self.seconds, "start": end - self.seconds, "end": end}


# --------------------------------------------------------------------------- progress
class Progress:
    """What a long ingest has done so far, handed to ``report`` every ``every_s`` seconds from a
    background thread, and once more at the end: ``step`` (``loads``, ``traffic``,
    ``snapshots``, ``done``), ``files`` (native files), ``files_read`` and ``rows_read`` (of
    those; counted by Spark accumulators, which grow as the read tasks end), ``elapsed_s``."""

    def __init__(self, spark: SparkSession, report: Callable[[dict[str, Any]], None], every_s: float, files: int):
        self.report, self.every_s, self.files = report, every_s, files
        self.files_read = spark.sparkContext.accumulator(0)
        self.rows_read = spark.sparkContext.accumulator(0)
        self.step = "loads"
        self.started = time.perf_counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="ingest-progress", daemon=True)
        self._thread.start()

    def state(self) -> dict[str, Any]:
        return {"step": self.step, "files": self.files, "files_read": self.files_read.value,
                "rows_read": self.rows_read.value, "elapsed_s": time.perf_counter() - self.started}

    def _tick(self) -> None:
        while not self._stop.wait(self.every_s):
            self.report(self.state())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def finish(self, rows_read: int) -> None:
        """The last report: ``step`` ``done``, the run's rows read (of every source)."""
        self.step = "done"
        self.report({**self.state(), "rows_read": rows_read})


# --------------------------------------------------------------------------- packing in Spark
def _frame(df: DataFrame, **columns: Column) -> DataFrame:
    """``df`` as rows of :data:`BLOCK`: the given columns, the others null."""
    return df.select(*[columns[f.name].cast(f.dataType).alias(f.name) if f.name in columns
                       else F.lit(None).cast(f.dataType).alias(f.name) for f in BLOCK.fields])


def _native(spark: SparkSession, files: list[Path], kind: str, options: sources.Options,
            progress: Progress | None = None) -> DataFrame:
    """Native files read into blocks by :func:`.blocks.read_blocks`, in two Spark tasks per core
    (each a Python worker to feed; a task costs a few tenths of a second to start), the files
    dealt largest first to the least loaded task; ``progress`` counts the files and records."""
    tasks = min(len(files), 2 * spark.sparkContext.defaultParallelism)
    share: list[list[str]] = [[] for _ in range(tasks)]  # task k (row id k of spark.range) reads share[k]
    size = [0] * tasks
    for f in sorted(files, key=lambda f: (-f.stat().st_size, str(f))):
        k = size.index(min(size))
        share[k].append(str(f))
        size[k] += f.stat().st_size

    time_range = options.time_range  # not ``options``: the tasks would import .sources (and Spark SQL)
    files_read, rows_read = (progress.files_read, progress.rows_read) if progress is not None else (None, None)

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for task in batch.column("id").to_pylist():
                for path in share[task]:
                    for block in read_blocks(path, kind, time_range):
                        if rows_read is not None and block.column("part")[0].as_py() == "count":
                            rows_read.add(block.column("rows")[0].as_py())
                        yield block
                    if files_read is not None:
                        files_read.add(1)

    return spark.range(tasks, numPartitions=tasks).mapInArrow(read, BLOCK)


def _blocks(df: DataFrame, kind: str, checked: bool) -> DataFrame:
    """Accepted traffic / load rows of a Spark source -> blocks (:func:`.blocks.pack_frame`)."""
    if kind == "traffic":
        values = [F.col("src_task").alias("a"), F.col("dst_task").alias("b"), F.col("tuples").alias("v1"),
                  F.col("bytes").alias("v2")]
    else:
        values = [F.col("task").alias("a"), "operator", F.col("load").alias("v1")]
    source = F.col("source") if "source" in df.columns else F.lit(None).cast("string")
    rows = df.select(F.col("timestamp").cast("double"), "topology", source.alias("source"), *values)

    def pack(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield pack_frame(batch, kind, checked)

    return rows.mapInArrow(pack, BLOCK)


def _records(records: DataFrame, counted: bool) -> list[DataFrame]:
    """A Spark source's records -> its rejected rows and its counts (``read``; ``accepted`` too
    when ``counted``: rows still to check are counted by the merge instead)."""
    rejected = _frame(records.filter(F.col("reason").isNotNull()), part=F.lit("rejected"), kind=F.col("kind"),
                      a=F.abs(F.xxhash64("raw")) % 64, source=F.col("source"), raw=F.col("raw"),
                      reason=F.col("reason"))
    kinds = ["read"] + (["accepted"] if counted else [])
    totals = records.groupBy("kind").agg(F.count(F.lit(1)).alias("read"),
                                         F.count_if(F.col("reason").isNull()).alias("accepted"))
    counts = totals.select("kind", F.explode(F.array(*[F.struct(F.lit(k).alias("reason"), F.col(k).alias("rows"))
                                                      for k in kinds])).alias("c"))
    return [rejected, _frame(counts, part=F.lit("count"), kind=F.col("kind"), topology=F.col("kind"),
                             reason=F.col("c.reason"), rows=F.col("c.rows"))]


def _merge(frames: list[DataFrame], merge_window: MergeWindow, declared: dict[str, set[int]] | None,
           out: Path) -> None:
    """Group the blocks, merge every group (:func:`.merge.merge_group`) and append the result
    to ``out`` (:func:`_output`); a file that could not be read is an InputError."""
    def merge(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return merge_sorted(batches, merge_window, declared)

    # One partition per core; explicit, so adaptive execution does not coalesce it to fewer.
    blocks = reduce(DataFrame.unionByName, frames)
    blocks = blocks.repartition(blocks.sparkSession.sparkContext.defaultParallelism, *GROUP)
    merged = blocks.sortWithinPartitions(*GROUP).mapInArrow(merge, BLOCK)
    merged.write.mode("append").parquet(str(out))
    errors = _written(out, "error", ["raw"])
    if errors.num_rows:
        raise InputError(sorted(errors.column("raw").to_pylist())[0])


def _written(out: Path, part: str, columns: list[str] | None = None, tagged: bool = False) -> pa.Table:
    """The rows of one ``part`` that :func:`_merge` wrote to ``out``, read on the driver with
    pyarrow: a few summaries and counts, where a Spark job would cost more than reading them;
    ``tagged`` keeps the column ``part``."""
    keep = [f.name for f in ARROW_BLOCK if (columns is None or f.name in columns or (tagged and f.name == "part"))]
    return _output(out).to_table(columns=keep, filter=pc.field("part") == part)


def _output(out: Path) -> ds.Dataset:
    """What :func:`_merge` wrote to ``out`` (every ``part`` in the same files: a writer
    partitioned by ``part`` costs Spark a sort and a file per part and task)."""
    files = sorted(str(f) for f in out.glob("*.parquet")) if out.is_dir() else []
    return ds.dataset(files, format="parquet", schema=ARROW_BLOCK)


# --------------------------------------------------------------------------- windows
def window_rates(summaries: pa.Table, window: Window) -> tuple[dict[str, float], list[dict], list[dict]]:
    """Summaries (:func:`.merge.merge_group`) -> (window end per topology, rates, loads).

    Sliding window of W ending at E: ``R = sum of tuples with E - W < t <= E, / W`` and ``L`` =
    mean of the load samples in it. Half-life h: a row of age a weighs ``2^(-a/h)``;
    ``R = sum(tuples * w) / (h / ln 2)`` (the integral of w, so a constant rate is recovered
    exactly) and ``L = sum(load * w) / sum(w)``; a summary's sums, weighted from its ``last``,
    are scaled by ``2^(-(E - last)/h)``."""
    last = summaries.column("last").to_numpy(zero_copy_only=False)
    topo = np.asarray(summaries.column("topology").to_pylist(), object)
    ends: dict[str, float] = {}
    for t in set(topo.tolist()):
        mine = last[(topo == t) & np.isfinite(last)]
        if window.end is not None:
            ends[t] = float(window.end)
        elif mine.size:
            ends[t] = float(mine.max())
    end = np.array([ends.get(t, np.nan) for t in topo])
    if window.half_life_s is None:
        ts, lengths = floats(summaries.column("ts"))
        group = np.repeat(np.arange(len(topo)), lengths)
        inside = (ts > end[group] - window.seconds) & (ts <= end[group])
        n = np.bincount(group[inside], minlength=len(topo))
        v1 = np.bincount(group[inside], floats(summaries.column("v1"))[0][inside], minlength=len(topo))
        v2 = np.bincount(group[inside], floats(summaries.column("v2"))[0][inside], minlength=len(topo))
        rate, bytes_rate, load = v1 / window.seconds, v2 / window.seconds, v1 / np.maximum(n, 1)
        has = n > 0
    else:
        h = window.half_life_s
        scale = np.exp2(-(end - last) / h)
        ew = {c: np.nan_to_num(summaries.column(c).to_numpy(zero_copy_only=False)) for c in ("ew1", "ew2", "ewn")}
        span = h / math.log(2)
        rate, bytes_rate = ew["ew1"] * scale / span, ew["ew2"] * scale / span
        load = ew["ew1"] / np.where(ew["ewn"] > 0, ew["ewn"], 1.0)
        has = np.isfinite(last) & np.isfinite(end)
    kind = np.asarray(summaries.column("kind").to_pylist(), object)
    a = summaries.column("a").to_numpy(zero_copy_only=False)
    b = summaries.column("b").to_pylist()
    rates = [{"topology": topo[k], "src_task": int(a[k]), "dst_task": int(b[k]), "rate": float(rate[k]),
              "bytes_rate": float(bytes_rate[k])} for k in np.flatnonzero(has & (kind == "traffic"))]
    loads = [{"topology": topo[k], "task": int(a[k]), "load": float(load[k])}
             for k in np.flatnonzero(has & (kind == "load"))]
    return ends, rates, loads


def build_graphs(rates: list, loads: list, tasks: list, default_load: float | None,
                 load_unit: str = TASKS) -> dict[str, tuple[TaskGraph, int]]:
    """Collected rows -> one TaskGraph per topology (and how many tasks got the default load).

    Tasks are every declared task plus every task named by a rate or a load sample; a task's
    operator is the one declared (``task`` when none is); a task without load samples in the
    window gets ``default_load`` (the core readers' convention for graphs without loads), or
    with ``None`` the median of the topology's measured loads (Storm's spouts report no busy
    time; 1 when nothing was measured). Loads are in ``load_unit``."""
    topologies = sorted({r["topology"] for r in rates} | {r["topology"] for r in loads} | {r["topology"] for r in tasks})
    out = {}
    for topo in topologies:
        operator_of: dict[int, str] = {}
        for r in tasks:
            if r["topology"] == topo:
                operator_of.setdefault(int(r["task"]), r["operator"] or "task")
        load_of = {int(r["task"]): float(r["load"]) for r in loads if r["topology"] == topo}
        edges = [r for r in rates if r["topology"] == topo]
        ids = sorted(set(operator_of) | set(load_of) | {int(r["src_task"]) for r in edges}
                     | {int(r["dst_task"]) for r in edges})
        index = {t: k for k, t in enumerate(ids)}
        names = sorted({operator_of.get(t, "task") for t in ids})
        op_index = {name: k for k, name in enumerate(names)}
        defaulted = sum(1 for t in ids if t not in load_of)
        fallback = default_load if default_load is not None else (
            float(np.median(list(load_of.values()))) if load_of else 1.0)
        graph = TaskGraph.build(
            name=topo, operator_names=names,
            task_operator=[op_index[operator_of.get(t, "task")] for t in ids],
            load=[load_of.get(t, fallback) for t in ids], load_unit=load_unit,
            src=np.array([index[int(r["src_task"])] for r in edges], dtype=np.int64),
            dst=np.array([index[int(r["dst_task"])] for r in edges], dtype=np.int64),
            rate=[float(r["rate"]) for r in edges], bytes_rate=[float(r["bytes_rate"]) for r in edges],
            task_ids=ids, where=f"topology {topo!r}")
        out[topo] = (graph, defaulted)
    return out


def _load_unit(groups: dict[str, list[Path]], asked: str | None, default_load: float | None) -> tuple[str, float | None]:
    """(unit, default load) of an ingest: Storm's busy times are cores, the other sources'
    loads whatever ``asked`` says (tasks by default); both at once need ``asked``."""
    storm = any(name in sources.STORM_FORMATS for name in groups)
    if asked is not None:
        check_unit(asked, "--load-unit")
        if storm and asked != CORES:
            raise InputError(f"--load-unit {asked}: Storm metrics measure busy cores (use --load-unit cores)")
        return asked, None if storm else default_load
    if storm and any(name not in sources.STORM_FORMATS for name in groups):
        raise InputError("Storm metrics (loads in cores) and other sources in one ingest: say the other sources' "
                         "unit with --load-unit cores, or ingest them apart")
    return (CORES, None) if storm else (TASKS, default_load)


def _check_storm_files(counts: pa.Table) -> None:
    """A Storm metrics file none of whose lines was accepted, some rejected, is an InputError
    naming the file, its rejected lines and the first reason (the count rows of
    :func:`.sources.read_storm`)."""
    per_file: dict[str, dict[str, Any]] = {}
    for kind, source, why, n, raw in zip(*(counts.column(c).to_pylist()
                                           for c in ("kind", "source", "reason", "rows", "raw"))):
        if kind == "storm-line" and source:
            per_file.setdefault(source, {})[why] = raw if why in ("rejected_lines", "note") else n
    for source, c in sorted(per_file.items()):
        if c.get("accepted", 0) == 0 and "rejected_lines" in c:
            detail = json.loads(c["rejected_lines"])
            rejected = c.get("read", 0) - c.get("system", 0)
            system = f"; the other {c['system']} are Storm's own components and streams" if c.get("system") else ""
            raise InputError(f"{source}: no line accepted: {rejected} of {c.get('read', 0)} lines rejected "
                             f"(lines {detail['lines']}; first: {detail['first']}){system}")


# --------------------------------------------------------------------------- the run
def ingest(spark: SparkSession, paths: list[str | Path], store: str | Path, window: Window = Window(),
           options: sources.Options | None = None, fmt: str | None = None,
           default_load: float | None = 1.0, force: bool = False,
           progress: Callable[[dict[str, Any]], None] | None = None, progress_every_s: float = 5.0) -> dict[str, Any]:
    """Read, validate, aggregate and snapshot ``paths``; returns (and stores) the run report.
    ``progress`` gets a :class:`Progress` state every ``progress_every_s`` seconds and at the end.

    Files already ingested (same content hashes, same window and options) are not ingested
    again: the earlier run's report comes back with ``reused`` set, unless ``force``.

    The snapshots' loads are in ``options.load_unit``; by default Storm metrics give busy
    cores (tasks without a load sample, the spouts, get the median measured load) and the other
    sources ``tasks`` (tasks without a sample get ``default_load``)."""
    with python_workers(spark):
        return _ingest(spark, paths, store, window, options, fmt, default_load, force, progress, progress_every_s)


def _input_key(groups: dict[str, list[Path]], window: Window, options: sources.Options, fmt: str | None,
               default_load: float | None) -> str:
    return input_key([f for files in groups.values() for f in files],
                     {"window": [window.seconds, window.half_life_s, window.end], "format": fmt,
                      "options": repr(options), "default_load": default_load})


def already_ingested(paths: list[str | Path], store: str | Path, window: Window = Window(),
                     options: sources.Options | None = None, fmt: str | None = None,
                     default_load: float | None = 1.0) -> dict[str, Any] | None:
    """The report of an earlier ingest of the same contents and settings (no Spark needed), so
    the CLI can answer without starting a session."""
    return find_ingested(store, _input_key(sources.group_files(paths, fmt), window, options or sources.Options(),
                                           fmt, default_load))


def _frames(spark: SparkSession, groups: dict[str, list[Path]], options: sources.Options,
            progress: Progress | None = None) -> tuple[list[DataFrame], list[DataFrame], list[DataFrame]]:
    """(load frames, traffic frames, declared tasks) of every input format, as :data:`BLOCK`
    rows (blocks, rejected rows, counts) and (topology, task, operator) rows."""
    load_frames: list[DataFrame] = []
    traffic_frames: list[DataFrame] = []
    tasks: list[DataFrame] = []
    for name, files in groups.items():
        if name in ("native-traffic", "native-load"):
            kind = name.split("-")[1]
            (traffic_frames if kind == "traffic" else load_frames).append(_native(spark, files, kind, options, progress))
        elif name == "aniello-traffic":
            rows = sources.read_aniello(spark, files, name, options).records
            traffic_frames += _records(rows, counted=False)
            traffic_frames.append(_blocks(rows.filter(F.col("reason").isNull()), "traffic", checked=True))
        elif name == "aniello-load":
            rows = sources.read_aniello(spark, files, name, options).records
            load_frames += _records(rows.select("source", "kind", "raw", "reason"), counted=True)
            good = sources.expand_executor_load(rows.filter(F.col("reason").isNull()))
            load_frames.append(_blocks(good, "load", checked=False))
            tasks.append(good.select("topology", "task", "operator"))
        elif name == "sendgraph":
            got = sources.read_sendgraph(spark, files, options)
            load_frames += _records(got.records, counted=True)
            traffic_frames.append(_blocks(got.traffic, "traffic", checked=False))
            tasks.append(got.tasks)
    storm = {name: files for name, files in groups.items() if name in sources.STORM_FORMATS}
    if storm:
        rows = sources.read_storm(spark, storm, options)
        part = F.col("part")
        traffic_frames.append(_blocks(rows.filter(part == "traffic").select(
            "timestamp", "topology", "source", F.col("a").alias("src_task"), F.col("b").alias("dst_task"),
            F.col("value").alias("tuples"), F.lit(0.0).alias("bytes")), "traffic", checked=False))
        load_frames.append(_blocks(rows.filter(part == "load").select(
            "timestamp", "topology", "source", F.col("a").alias("task"), "operator", F.col("value").alias("load")),
            "load", checked=False))
        # Rejected lines, counts per file and InputErrors go through the merge as they are.
        other = rows.filter(part.isin("rejected", "count", "error"))
        load_frames.append(_frame(other, part=part, kind=F.lit("storm-line"), source=F.col("source"),
                                  topology=F.coalesce(F.col("source"), F.col("topology")),
                                  a=F.when(part == "rejected", F.abs(F.xxhash64("raw")) % 64),
                                  raw=F.col("raw"), reason=F.col("reason"), rows=F.col("rows")))
        tasks.append(rows.filter(part == "task").select("topology", F.col("a").alias("task"), "operator"))
    return load_frames, traffic_frames, tasks


def _ingest(spark: SparkSession, paths: list[str | Path], store: str | Path, window: Window,
            options: sources.Options | None, fmt: str | None, default_load: float,
            force: bool = False, report_progress: Callable[[dict[str, Any]], None] | None = None,
            progress_every_s: float = 5.0) -> dict[str, Any]:
    options = options or sources.Options()
    started = time.perf_counter()
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:6]
    groups = sources.group_files(paths, fmt)
    key = _input_key(groups, window, options, fmt, default_load)
    earlier = None if force else find_ingested(store, key)
    if earlier is not None:
        return {**earlier, "reused": True, "wall_time_s": time.perf_counter() - started}
    load_unit, default_load = _load_unit(groups, options.load_unit, default_load)
    for name in ("native-traffic", "native-load"):
        for f in groups.get(name, []):
            check_header(f, name.split("-")[1])
    merge_window = MergeWindow(window.seconds, window.half_life_s, window.end)
    progress = None
    if report_progress is not None:
        native = sum(len(groups.get(name, [])) for name in ("native-traffic", "native-load"))
        progress = Progress(spark, report_progress, progress_every_s, native)
    try:
        report = _run(spark, groups, store, window, options, merge_window, progress, default_load, load_unit,
                      run_id, started, paths)
    finally:
        if progress is not None:
            progress.stop()
    if progress is not None:
        progress.finish(report["rows_read"])
    record_ingested(store, key, report)
    return {**report, "reused": False}


def _run(spark: SparkSession, groups: dict[str, list[Path]], store: str | Path, window: Window,
         options: sources.Options, merge_window: MergeWindow, progress: Progress | None,
         default_load: float | None, load_unit: str, run_id: str, started: float,
         paths: list[str | Path]) -> dict[str, Any]:
    """The Spark jobs, the checks of the accounting, the snapshots and the run report."""
    load_frames, traffic_frames, tasks = _frames(spark, groups, options, progress)
    work = claim_tmp(store, run_id)
    try:
        declared_rows = [(r["topology"], int(r["task"]), r["operator"])
                         for r in reduce(DataFrame.unionByName, tasks).distinct().collect()] if tasks else []
        if load_frames:
            _merge(load_frames, merge_window, None, work)
            done = _written(work, "summary", ["kind", "topology", "a", "operator"])
            done = done.filter(pc.equal(done.column("kind"), "load"))
            declared_rows += list(zip(done.column("topology").to_pylist(), done.column("a").to_pylist(),
                                      done.column("operator").to_pylist()))
        declared: dict[str, set[int]] = {}
        for topo, task, _ in declared_rows:
            declared.setdefault(topo, set()).add(task)
        if traffic_frames:
            if progress is not None:
                progress.step = "traffic"
            _merge(traffic_frames, merge_window, declared, work)
        small = pa.concat_tables([_written(work, part, tagged=True) for part in ("summary", "count")])
        quarantine_path = None
        first_rejected = None
        output, is_rejected = _output(work), pc.field("part") == "rejected"
        reasons = output.to_table(columns=["reason"], filter=is_rejected).column("reason")
        rejected = {r["values"]: int(r["counts"]) for r in pc.value_counts(reasons).to_pylist()}
        if rejected:
            quarantine_path = Path(store) / "quarantine" / run_id
            columns = ["source", "kind", "raw", "reason"]
            ds.write_dataset(output.scanner(columns=columns, filter=is_rejected), quarantine_path, format="parquet",
                             basename_template="part-{i}.parquet")
            first_rejected = output.head(1, columns=columns, filter=is_rejected).to_pylist()[0]
    finally:
        release_tmp(work)
        with contextlib.suppress(OSError):
            work.parent.rmdir()  # only when no other run is using it
    part = np.asarray(small.column("part").to_pylist(), object)
    reason = np.asarray(small.column("reason").to_pylist(), object)
    rows = np.nan_to_num(small.column("rows").to_numpy(zero_copy_only=False)).astype(np.int64)
    read = int(rows[(part == "count") & (reason == "read")].sum())
    accepted = int(rows[(part == "count") & (reason == "accepted")].sum() + rows[part == "summary"].sum())
    system = int(rows[(part == "count") & (reason == "system")].sum())
    quarantined = dict(sorted(rejected.items()))
    if read != accepted + sum(quarantined.values()) + system:
        raise RuntimeError(f"ingest lost rows: read {read} != accepted {accepted} + quarantined {quarantined}"
                           f" + system {system}")
    counted = small.filter(pc.equal(small.column("part"), "count"))
    _check_storm_files(counted)
    summaries = small.filter(pc.equal(small.column("part"), "summary"))
    ends, rates, loads = window_rates(summaries, window)
    why = f"{read} rows read: {accepted} accepted, {sum(quarantined.values())} quarantined"
    why += f" {quarantined}" if quarantined else ""
    why += f", {system} of Storm's own components and streams" if system else ""
    if quarantine_path is not None:
        why += f"; quarantine: {quarantine_path}"
    if read and not accepted:
        first = (f"; first: {first_rejected['source']}: {first_rejected['reason']}: {first_rejected['raw'][:200]!r}"
                 if first_rejected is not None else "")
        raise InputError(f"no row accepted ({why}){first}")
    if not any(r["rate"] > 0 for r in rates):
        notes = [n for n, r in zip(counted.column("raw").to_pylist(), counted.column("reason").to_pylist())
                 if r == "note"]
        raise InputError(f"no traffic between tasks in {', '.join(map(str, paths))} ({why})"
                         + (f": {'; '.join(sorted(set(notes)))}" if notes else ""))
    if progress is not None:
        progress.step = "snapshots"
    task_rows = [{"topology": t, "task": k, "operator": o} for t, k, o in sorted(set(declared_rows), key=str)]
    snapshots = []
    source_files = sorted(str(f) for files in groups.values() for f in files)
    for topo, (graph, defaulted) in build_graphs(rates, loads, task_rows, default_load, load_unit).items():
        manifest = {
            "schema_version": S.SCHEMA_VERSION,
            "window": window.describe(ends.get(topo, window.end or 0.0)),
            "sources": source_files,
            "formats": sorted(groups),
            "run_id": run_id,
            "rows": {"read": read, "accepted": accepted, "quarantined": quarantined, "system": system},
            "tasks_with_default_load": defaulted,
            "default_load": default_load,
        }
        snapshots.append(str(write_snapshot(store, graph, manifest)))
    report = {
        "run_id": run_id,
        "rows_read": read,
        "rows_accepted": accepted,
        "rows_quarantined": quarantined,
        "rows_system": system,
        "quarantine": str(quarantine_path) if quarantine_path else None,
        "snapshots": snapshots,
        "formats": {k: len(v) for k, v in sorted(groups.items())},
        "wall_time_s": time.perf_counter() - started,
    }
    write_run_report(store, run_id, report)
    return report
