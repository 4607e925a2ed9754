"""``streamsched watch``: Structured Streaming over a directory of arriving native metric files.

One streaming query reads the directory (``traffic*.csv`` and ``load*.csv``, the native
columns); every micro-batch goes through :meth:`Watch._on_batch` (``foreachBatch``): the row
checks of :func:`.row_checks.validate_text` run on it (``mapInArrow``), invalid rows go to the
quarantine Parquet ``<store>/quarantine/watch/batch-<id>``, and one Spark aggregation gives, per
tumbling event-time window of ``window_s`` seconds, the sums of the valid rows and the counts of
every row (accepted, quarantined by reason). The driver keeps the open windows' partial sums and
a watermark ``lateness_s`` behind the latest valid event; a window is final, and emitted, once
the watermark reaches its end. A row whose window was already emitted is dropped late (counted).
Each emitted window becomes a snapshot (rates = tuples in the window / ``window_s``, load = mean
of samples) whose manifest's ``rows`` holds its accounting, and goes to the re-planning step the
caller hands in (the CLI gives a :class:`streamsched.schedulers.replanning.Replanner`; the
pipeline imports no scheduler).

Nothing is lost silently: per window and per run ``read = accepted + sum(quarantined) +
dropped_late`` (checked; quarantined rows without a usable timestamp belong to no window and
are counted per run only). Spark takes each file's first line as its header; a first line that
is not the kind's native header (a binary file, columns in another order) is one more
quarantined record, ``bad_header``. The driver's state (open windows, watermark, files seen) is written
atomically to ``<store>/checkpoints/watch/state.json`` after each micro-batch, with the batch id,
so a restart continues where the last run stopped and a replayed batch is not counted twice
(a window whose snapshot a killed run wrote before saving its state keeps that snapshot).
Spark's file source treats files as immutable: each file's size and mtime are recorded when
its rows are first seen, and a file that changed afterwards is reported
(``files_changed_after_read``), never re-read. Files in the directory that match neither
pattern are reported as ``files_ignored`` (names starting with ``.`` or ``_``, temporary names
of writers, are skipped silently, as Spark does). Duplicates and unknown tasks are checked by
batch ``ingest`` only.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import math
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streamsched.model.cluster import Cluster
from streamsched.model.taskgraph import TaskGraph
from streamsched.pipeline import sources
from streamsched.pipeline.native_reader import fields_of
from streamsched.pipeline.row_checks import validate_text
from streamsched.pipeline import schema as S
from streamsched.pipeline.ingest import build_graphs
from streamsched.pipeline.session import python_workers
from streamsched.model.units import TASKS
from streamsched.pipeline.store import list_snapshots, read_manifest, write_snapshot

PATTERNS = ("traffic*.csv", "load*.csv")
STATE_VERSION = 1
KEEP_WINDOWS = 1000
INTERRUPTED = "watch: batch interrupted by the run's stop"
STREAMING_LOGGER = "org.apache.spark.sql.execution.streaming"
_COLUMNS = ["source", "kind", "reason", "raw", "ts", "topology", "a", "b", "operator", "v1", "v2"]


def _stream(spark: SparkSession, directory: Path, kind: str, options: sources.Options) -> DataFrame:
    schema = S.TRAFFIC if kind == "traffic" else S.LOAD
    text = T.StructType(S.as_text(schema).fields + [T.StructField("_corrupt_record", T.StringType())])
    raw = (spark.readStream.schema(text).option("header", True).option("mode", "PERMISSIVE")
           .option("columnNameOfCorruptRecord", "_corrupt_record")
           .option("pathGlobFilter", f"{kind}*.csv").csv(str(directory))
           .withColumn("source", F.input_file_name()))
    checked = T.StructType([T.StructField("source", T.StringType()), T.StructField("kind", T.StringType()),
                            T.StructField("reason", T.StringType()), *schema.fields,
                            T.StructField("raw", T.StringType())])

    def validate(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield validate_text(batch, kind, options.time_range)

    return raw.mapInArrow(validate, checked)


def _combined(checked: DataFrame, kind: str) -> DataFrame:
    """Checked rows of one kind as the common columns :data:`_COLUMNS`."""
    if kind == "traffic":
        values = [F.col("src_task").alias("a"), F.col("dst_task").alias("b"),
                  F.lit(None).cast("string").alias("operator"), F.col("tuples").alias("v1"),
                  F.col("bytes").alias("v2")]
    else:
        values = [F.col("task").alias("a"), F.lit(None).cast("bigint").alias("b"), "operator",
                  F.col("load").alias("v1"), F.lit(None).cast("double").alias("v2")]
    return checked.select("source", "kind", "reason", "raw", F.col("timestamp").cast("double").alias("ts"),
                          "topology", *values)


class Replanning(Protocol):
    """What the watch hands every final window's graph and every cluster change to."""

    decisions: list

    def on_graph(self, graph: TaskGraph, snapshot: str | None = None) -> Any: ...

    def on_cluster(self, cluster: Cluster) -> Any: ...


def _counts() -> dict[str, Any]:
    return {"read": 0, "accepted": 0, "quarantined": {}, "dropped_late": 0}


def _add(counts: dict[str, Any], reason: str | None, n: int, late: bool) -> None:
    counts["read"] += n
    if reason is not None:
        counts["quarantined"][reason] = counts["quarantined"].get(reason, 0) + n
    elif late:
        counts["dropped_late"] += n
    else:
        counts["accepted"] += n


def balanced(counts: dict[str, Any]) -> bool:
    """``read == accepted + sum(quarantined) + dropped_late``."""
    return counts["read"] == counts["accepted"] + sum(counts["quarantined"].values()) + counts["dropped_late"]


def _header_problem(path: str) -> dict[str, str] | None:
    """The quarantine record of a file whose first line is not its kind's native header."""
    kind = "traffic" if fnmatch.fnmatchcase(os.path.basename(path), PATTERNS[0]) else "load"
    try:
        with open(path, "rb") as handle:
            first = handle.readline(1 << 16).decode("utf-8", "replace").rstrip("\r\n")
    except OSError as exc:
        first = f"<unreadable: {exc.strerror or exc}>"
    if [c.strip().strip('"') for c in first.split(",")] == list(fields_of(kind)):
        return None
    return {"source": path, "kind": kind, "raw": first[:1000], "reason": "bad_header"}


@contextlib.contextmanager
def _quiet_streaming_errors(spark: SparkSession):
    """Spark's streaming loggers off while the run stops its own query: a batch that stop
    interrupts is read again by the next run (:meth:`Watch._on_batch`), not an error, yet Spark
    would log it as the query's error with the batch's Python traceback. A real error still
    reaches :meth:`Watch.run` through the query's exception."""
    log4j = spark.sparkContext._jvm.org.apache.logging.log4j
    logger = log4j.LogManager.getLogger(STREAMING_LOGGER)
    level = logger.getLevel()
    log4j.core.config.Configurator.setLevel(STREAMING_LOGGER, log4j.Level.OFF)
    try:
        yield
    finally:
        log4j.core.config.Configurator.setLevel(STREAMING_LOGGER, level)


def _local_path(source: str) -> str:
    parsed = urlparse(source)
    return unquote(parsed.path) if parsed.scheme in ("file", "") else source


class Watch:
    """The running query and what it produced (snapshots, decisions, accounting)."""

    def __init__(self, spark: SparkSession, directory: str | Path, store: str | Path, replanner: Replanning,
                 window_s: float = 60.0, lateness_s: float = 0.0, cluster_file: str | Path | None = None,
                 options: sources.Options | None = None, default_load: float = 1.0,
                 cluster_loader: Callable[[Path], Cluster] = Cluster.load):
        self.spark, self.directory, self.store = spark, Path(directory), Path(store)
        self.replanner, self.window_s, self.lateness_s = replanner, float(window_s), float(lateness_s)
        self.cluster_file = Path(cluster_file) if cluster_file else None
        self.cluster_mtime = self.cluster_file.stat().st_mtime if self.cluster_file else None
        self.cluster_loader = cluster_loader
        self.options, self.default_load = options or sources.Options(), default_load
        self.snapshots: list[str] = []
        self._lock = threading.Lock()
        self._stopping = False  # set by run() before it stops the query (see _on_batch)
        self._interrupted = False  # a batch's Spark calls were interrupted by that stop
        self.checkpoint = self.store / "checkpoints" / "watch"
        self.quarantine = self.store / "quarantine" / "watch"
        self.run_counts = _counts()          # rows of this run's micro-batches
        self.run_without_window: dict[str, int] = {}
        self.windows_touched: set[float] = set()
        self.state = self._load_state()

    # ------------------------------------------------------------------ state
    @property
    def state_file(self) -> Path:
        return self.checkpoint / "state.json"

    def _load_state(self) -> dict[str, Any]:
        try:
            state = json.loads(self.state_file.read_text())
        except FileNotFoundError:
            state = None
        if not state or state.get("version") != STATE_VERSION:
            state = {"version": STATE_VERSION, "batch_id": -1, "watermark": None, "open": {}, "counts": {},
                     "emitted": {}, "files": {}, "changed": {}}
        return state

    def _save_state(self) -> None:
        self.checkpoint.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".json.tmp")
        with open(tmp, "w") as handle:
            json.dump(self.state, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.state_file)

    # ------------------------------------------------------------------ files
    def check_files(self) -> None:
        """Files whose size or mtime changed since their rows were first read."""
        for path, (size, mtime) in self.state["files"].items():
            try:
                st = os.stat(path)
                now = [st.st_size, st.st_mtime]
            except FileNotFoundError:
                continue  # removed after reading: its rows were counted
            if now != [size, mtime] and path not in self.state["changed"]:
                self.state["changed"][path] = {"size_read": size, "size_now": now[0]}

    def ignored_files(self) -> list[str]:
        """Files of the directory that match neither pattern (and are not hidden)."""
        out = []
        for entry in sorted(os.scandir(self.directory), key=lambda e: e.name):
            if entry.name.startswith((".", "_")) or not entry.is_file():
                continue
            if not any(fnmatch.fnmatchcase(entry.name, p) for p in PATTERNS):
                out.append(entry.name)
        return out

    def check_cluster(self) -> None:
        """Re-read the cluster file when it changed (a node joined or left) and repair."""
        if self.cluster_file is None:
            return
        mtime = self.cluster_file.stat().st_mtime
        if mtime != self.cluster_mtime:
            self.cluster_mtime = mtime
            with self._lock:
                self.replanner.on_cluster(self.cluster_loader(self.cluster_file))

    def _quarantine_headers(self, bad: list[dict[str, str]], batch_id: int) -> None:
        """First lines that are not the kind's header: Spark skipped them as headers and read
        the rows by position; each is one quarantined record (``bad_header``, no window)."""
        if not bad:
            return
        _add(self.run_counts, "bad_header", len(bad), False)
        self.run_without_window["bad_header"] = self.run_without_window.get("bad_header", 0) + len(bad)
        target = self.quarantine / f"batch-{batch_id}-headers"
        target.mkdir(parents=True, exist_ok=True)
        table = pa.table({name: [r[name] for r in bad] for name in ("source", "kind", "raw", "reason")})
        pq.write_table(table, target / ".part-00000.parquet.tmp")
        os.replace(target / ".part-00000.parquet.tmp", target / "part-00000.parquet")

    # ------------------------------------------------------------------ micro-batches
    def _aggregate(self, batch: DataFrame) -> tuple[list, list]:
        """(groups, sources) of a micro-batch: sums and counts per window end, reason and key."""
        w = self.window_s
        low, high = self.options.time_range
        valid = F.col("reason").isNull()
        usable = F.col("ts").isNotNull() & (F.col("ts") >= low) & (F.col("ts") <= high) & (F.col("ts") != 0)
        end = F.when(valid | usable, (F.floor(F.col("ts") / w) + 1) * w)
        key = lambda c: F.when(valid, F.col(c))  # noqa: E731  (rejected rows: one group per reason)
        groups = (batch.groupBy(end.alias("end"), F.col("reason"), F.col("kind"), key("topology").alias("topology"),
                                key("a").alias("a"), key("b").alias("b"), key("operator").alias("operator"))
                  .agg(F.count(F.lit(1)).alias("n"), F.sum(F.when(valid, F.col("v1"))).alias("v1"),
                       F.sum(F.when(valid, F.col("v2"))).alias("v2"), F.max(F.when(valid, F.col("ts"))).alias("last"))
                  .collect())
        files = [r["source"] for r in batch.select("source").distinct().collect()]
        return groups, files

    def _on_batch(self, batch: DataFrame, batch_id: int) -> None:
        """One micro-batch: its Spark calls (:meth:`_aggregate`, the quarantine's write), then the
        accounting, snapshots and re-plans (:meth:`_commit`), which call no Spark. The run's own
        stop (Ctrl-C, the timeout, the live loop's stop) can interrupt only the Spark calls, before
        anything of the batch is counted, written or decided: that batch ends in a short exception
        and, not committed, is read again by the next run (counted once). The interrupted Spark
        call's Java trace, handed back in the query's error, would make Spark's own check "was this
        query stopped?" (a regex over that text, StreamExecution.isInterruptionException) overflow
        the stream thread's stack, printing about 1,000 frames on stderr. An error once the commit
        has begun is the query's error, stopping or not."""
        if batch_id <= self.state["batch_id"]:
            return  # replayed after a restart: already counted (state.json is written last)
        try:
            groups, files = self._read(batch, batch_id)
        except Exception:
            if self._stopping:
                self._interrupted = True
                raise RuntimeError(INTERRUPTED) from None
            raise
        self._commit(groups, files, batch_id)

    def _read(self, batch: DataFrame, batch_id: int) -> tuple[list, list[str]]:
        """The batch's Spark calls: :meth:`_aggregate`, and its rejected rows written to the quarantine."""
        batch = batch.persist()
        try:
            groups, files = self._aggregate(batch)
            if any(r["reason"] is not None for r in groups):
                (batch.filter(F.col("reason").isNotNull()).select("source", "kind", "raw", "reason")
                 .coalesce(1).write.mode("overwrite").parquet(str(self.quarantine / f"batch-{batch_id}")))
        finally:
            batch.unpersist()
        return groups, files

    def _commit(self, groups: list, files: list[str], batch_id: int) -> None:
        """Count the batch's rows per window, emit the windows the watermark closed, save the state."""
        state = self.state
        self.check_files()
        bad_headers = []
        for source in files:
            path = _local_path(source)
            if path not in state["files"]:
                try:
                    st = os.stat(path)
                    state["files"][path] = [st.st_size, st.st_mtime]
                except FileNotFoundError:
                    continue
                header = _header_problem(path)
                if header is not None:
                    bad_headers.append(header)
        self._quarantine_headers(bad_headers, batch_id)
        watermark = state["watermark"]
        latest = None
        for r in groups:
            n = int(r["n"])
            if r["end"] is None:
                _add(self.run_counts, r["reason"], n, False)
                self.run_without_window[r["reason"]] = self.run_without_window.get(r["reason"], 0) + n
                continue
            end = float(r["end"])
            late = r["reason"] is None and watermark is not None and end <= watermark
            _add(self.run_counts, r["reason"], n, late)
            label = repr(end)
            _add(state["counts"].setdefault(label, _counts()), r["reason"], n, late)
            self.windows_touched.add(end)
            if r["reason"] is not None or late:
                continue
            latest = r["last"] if latest is None else max(latest, r["last"])
            sums = state["open"].setdefault(label, {})
            k = json.dumps([r["topology"], r["kind"], r["a"], r["b"], r["operator"]])
            prev = sums.get(k, [0.0, 0.0, 0])
            sums[k] = [prev[0] + (r["v1"] or 0.0), prev[1] + (r["v2"] or 0.0), prev[2] + n]
        if latest is not None:
            candidate = float(latest) - self.lateness_s
            state["watermark"] = candidate if watermark is None else max(watermark, candidate)
        self.check_cluster()
        self._emit()
        state["batch_id"] = batch_id
        self._save_state()

    def _emit(self) -> None:
        """Every open window whose end the watermark reached, oldest first: snapshot + re-plan."""
        state = self.state
        watermark = state["watermark"]
        if watermark is None:
            return
        for label in sorted(state["open"], key=float):
            end = float(label)
            if end > watermark:
                break
            sums = state["open"].pop(label)
            counts = state["counts"].get(label, _counts())
            rates, loads, tasks = [], [], []
            for k, (v1, v2, n) in sums.items():
                topo, kind, a, b, operator = json.loads(k)
                if kind == "traffic":
                    rates.append({"topology": topo, "src_task": a, "dst_task": b, "rate": v1 / self.window_s,
                                  "bytes_rate": v2 / self.window_s})
                else:
                    loads.append({"topology": topo, "task": a, "load": v1 / max(n, 1), "_n": n})
                    tasks.append({"topology": topo, "task": a, "operator": operator})
            loads = self._mean_loads(loads)
            emitted = []
            unit = self.options.load_unit or TASKS
            for topo, (graph, defaulted) in build_graphs(rates, loads, tasks, self.default_load, unit).items():
                in_window = sum(n for k, (_, _, n) in sums.items() if json.loads(k)[0] == topo)
                manifest = {
                    "schema_version": S.SCHEMA_VERSION,
                    "window": {"kind": "tumbling", "seconds": self.window_s, "start": end - self.window_s, "end": end},
                    "sources": [str(self.directory)], "formats": ["native-traffic", "native-load"],
                    "run_id": f"watch-batch-{state['batch_id'] + 1}",
                    "rows": {**json.loads(json.dumps(counts)), "in_window": in_window,
                             "scope": "every topology of the window, as of its emission"},
                    "tasks_with_default_load": defaulted, "default_load": self.default_load,
                }
                with self._lock:
                    path = str(self._written_before(topo, end) or write_snapshot(self.store, graph, manifest))
                    self.snapshots.append(path)
                    emitted.append(path)
                    self.replanner.on_graph(graph, path)
            state["emitted"][label] = emitted
        # A run of days: keep the accounting of the last KEEP_WINDOWS emitted windows (rows late
        # for an older one are still counted, in a fresh entry).
        for label in sorted(state["emitted"], key=float)[:-KEEP_WINDOWS]:
            state["emitted"].pop(label)
            state["counts"].pop(label, None)

    def _written_before(self, topology: str, end: float) -> Path | None:
        """This watch's snapshot of the window ending at ``end``, when a run killed after
        writing it and before saving its state wrote it (the batch is then replayed)."""
        for path in reversed(list_snapshots(self.store, topology)):
            manifest = read_manifest(path)
            window = manifest.get("window", {})
            if window.get("kind") != "tumbling" or manifest.get("sources") != [str(self.directory)]:
                continue  # another run's (ingest, another directory)
            if window.get("end") == end and window.get("seconds") == self.window_s:
                return path
            if window.get("end", math.inf) < end:
                return None
        return None

    @staticmethod
    def _mean_loads(loads: list[dict]) -> list[dict]:
        """Load samples of a task under several operators' keys merged into one mean."""
        merged: dict[tuple, list] = {}
        for r in loads:
            key = (r["topology"], r["task"])
            total = merged.setdefault(key, [0.0, 0])
            total[0] += r["load"] * r["_n"]
            total[1] += r["_n"]
        return [{"topology": t, "task": k, "load": s / max(n, 1)} for (t, k), (s, n) in merged.items()]

    # ------------------------------------------------------------------ running
    def start(self, available_now: bool = False, poll_s: float = 5.0) -> list:
        """Start the query; ``available_now`` processes the files present and stops."""
        self._stopping = self._interrupted = False
        frames = []
        for kind in ("traffic", "load"):
            with python_workers(self.spark):
                frames.append(_combined(_stream(self.spark, self.directory, kind, self.options), kind))
        trigger = {"availableNow": True} if available_now else {"processingTime": f"{poll_s} seconds"}
        query = (frames[0].unionByName(frames[1]).writeStream.foreachBatch(self._on_batch)
                 .option("checkpointLocation", str(self.checkpoint / "stream"))
                 .trigger(**trigger).start())
        self.queries = [query]
        return self.queries

    def run(self, available_now: bool = False, poll_s: float = 5.0, timeout_s: float | None = None,
            stop: threading.Event | None = None) -> dict[str, Any]:
        """Run until the files are processed (``available_now``), ``timeout_s``, ``stop`` is set
        (seen within ``poll_s``: the live loop's stop between steps) or Ctrl-C."""
        queries = self.start(available_now, poll_s)
        started = time.monotonic()
        try:
            while any(q.isActive for q in queries) and not (stop is not None and stop.is_set()):
                for q in queries:
                    q.awaitTermination(poll_s)
                self.check_cluster()
                if timeout_s is not None and time.monotonic() - started > timeout_s:
                    break
        finally:
            self._stopping = True
            with _quiet_streaming_errors(self.spark):
                for q in queries:
                    q.stop()
        for q in queries:
            error = q.exception()
            if error is not None and not (self._interrupted and INTERRUPTED in str(error)):
                raise RuntimeError(f"watch: the streaming query failed: {error}")
        self.check_files()
        self._save_state()
        return self.report()

    def report(self) -> dict[str, Any]:
        state = self.state
        if not balanced(self.run_counts):
            raise RuntimeError(f"watch lost rows: {self.run_counts}")
        windows = []
        for end in sorted(self.windows_touched):
            label = repr(end)
            counts = state["counts"][label]
            if not balanced(counts):
                raise RuntimeError(f"watch lost rows in the window ending {end}: {counts}")
            windows.append({"end": end, **counts, "emitted": label in state["emitted"],
                            "snapshots": state["emitted"].get(label, [])})
        return {
            "snapshots": list(self.snapshots),
            "decisions": [d.to_dict() for d in self.replanner.decisions],
            "assignments_emitted": sum(d.emitted for d in self.replanner.decisions),
            "rows_read": self.run_counts["read"],
            "rows_accepted": self.run_counts["accepted"],
            "rows_quarantined": dict(sorted(self.run_counts["quarantined"].items())),
            "rows_quarantined_without_window": dict(sorted(self.run_without_window.items())),
            "rows_dropped_late": self.run_counts["dropped_late"],
            "windows": windows,
            "windows_open": len(state["open"]),
            "watermark": state["watermark"],
            "files_changed_after_read": sorted(state["changed"]),
            "files_ignored": self.ignored_files(),
            "quarantine": str(self.quarantine),
        }


def watch(spark: SparkSession, directory: str | Path, store: str | Path, replanner: Replanning, **kwargs) -> Watch:
    """A :class:`Watch` over ``directory`` (call ``.run()``)."""
    return Watch(spark, directory, store, replanner, **kwargs)
