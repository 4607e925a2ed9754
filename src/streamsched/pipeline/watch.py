"""``streamsched watch``: Structured Streaming over a directory of arriving native metric files.

Two streaming queries read the directory (``traffic*.csv`` and ``load*.csv``, the native
columns): invalid rows (row-level checks of :func:`.row_checks.validate_text`) go to the
quarantine Parquet ``<store>/quarantine/watch``; valid rows are grouped by tumbling event-time
windows of ``window_s`` seconds with a watermark ``lateness_s`` behind the latest event (append
mode: a window is final, and emitted, once a later event moves the watermark past its end). Each
emitted window becomes a snapshot (rates = tuples in the window / ``window_s``, load = mean of
samples) and goes to the re-planning step the caller hands in (the CLI gives a
:class:`streamsched.schedulers.replanning.Replanner`; the pipeline imports no scheduler), which
re-plans and emits a new assignment only when a task moves. Rows later than the watermark are dropped by Spark; their
number is reported (``rows_dropped_late``). Duplicates and unknown tasks are checked by batch
``ingest`` only.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streamsched.model.cluster import Cluster
from streamsched.model.taskgraph import TaskGraph
from streamsched.pipeline import sources
from streamsched.pipeline.row_checks import validate_text
from streamsched.pipeline import schema as S
from streamsched.pipeline.ingest import build_graphs
from streamsched.pipeline.session import python_workers
from streamsched.pipeline.store import write_snapshot

_COMBINED = ["ts", "topology", "kind", "src_task", "dst_task", "operator", "tuples", "bytes", "load"]


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


def _combined(valid: DataFrame, kind: str) -> DataFrame:
    ts = F.timestamp_seconds(F.col("timestamp")).alias("ts")
    if kind == "traffic":
        return valid.select(ts, "topology", F.lit(kind).alias("kind"), "src_task", "dst_task",
                            F.lit(None).cast("string").alias("operator"), "tuples", "bytes",
                            F.lit(None).cast("double").alias("load"))
    return valid.select(ts, "topology", F.lit(kind).alias("kind"), F.col("task").alias("src_task"),
                        F.lit(None).cast("bigint").alias("dst_task"), "operator",
                        F.lit(None).cast("double").alias("tuples"), F.lit(None).cast("double").alias("bytes"), "load")


class Replanning(Protocol):
    """What the watch hands every final window's graph and every cluster change to."""

    decisions: list

    def on_graph(self, graph: TaskGraph, snapshot: str | None = None) -> Any: ...

    def on_cluster(self, cluster: Cluster) -> Any: ...


class Watch:
    """The running pair of queries and what they produced (snapshots, decisions)."""

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
        self.rows_dropped_late = 0
        self._lock = threading.Lock()
        self.checkpoint = self.store / "checkpoints" / "watch"

    def check_cluster(self) -> None:
        """Re-read the cluster file when it changed (a node joined or left) and repair."""
        if self.cluster_file is None:
            return
        mtime = self.cluster_file.stat().st_mtime
        if mtime != self.cluster_mtime:
            self.cluster_mtime = mtime
            with self._lock:
                self.replanner.on_cluster(self.cluster_loader(self.cluster_file))

    def _on_windows(self, batch: DataFrame, batch_id: int) -> None:
        rows = batch.collect()
        self.check_cluster()
        windows: dict[tuple[str, Any], list] = {}
        for r in rows:
            windows.setdefault((r["topology"], r["window"]["end"]), []).append(r)
        for (topo, end), group in sorted(windows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            rates = [{"topology": topo, "src_task": r["src_task"], "dst_task": r["dst_task"],
                      "rate": r["tuples"] / self.window_s, "bytes_rate": (r["bytes"] or 0.0) / self.window_s}
                     for r in group if r["kind"] == "traffic"]
            loads = [{"topology": topo, "task": r["src_task"], "load": r["load"]} for r in group if r["kind"] == "load"]
            tasks = [{"topology": topo, "task": r["src_task"], "operator": r["operator"]}
                     for r in group if r["kind"] == "load"]
            graph, defaulted = build_graphs(rates, loads, tasks, self.default_load)[topo]
            end_s = end.timestamp()
            manifest = {
                "schema_version": S.SCHEMA_VERSION,
                "window": {"kind": "tumbling", "seconds": self.window_s, "start": end_s - self.window_s, "end": end_s},
                "sources": [str(self.directory)], "formats": ["native-traffic", "native-load"],
                "run_id": f"watch-batch-{batch_id}",
                "rows": {"in_window": int(sum(r["rows"] for r in group))},
                "tasks_with_default_load": defaulted, "default_load": self.default_load,
            }
            with self._lock:
                path = str(write_snapshot(self.store, graph, manifest))
                self.snapshots.append(path)
                self.replanner.on_graph(graph, path)

    def start(self, available_now: bool = False, poll_s: float = 5.0) -> list:
        """Start both queries; ``available_now`` processes the files present and stops."""
        valid, bad = [], []
        for kind in ("traffic", "load"):
            with python_workers(self.spark):
                df = _stream(self.spark, self.directory, kind, self.options)
            bad.append(df.filter(F.col("reason").isNotNull()).select("source", "kind", "raw", "reason"))
            valid.append(_combined(df.filter(F.col("reason").isNull()), kind))
        trigger = {"availableNow": True} if available_now else {"processingTime": f"{poll_s} seconds"}
        quarantine = (bad[0].unionByName(bad[1]).writeStream.format("parquet")
                      .option("path", str(self.store / "quarantine" / "watch"))
                      .option("checkpointLocation", str(self.checkpoint / "quarantine"))
                      .trigger(**trigger).start())
        windows = (valid[0].unionByName(valid[1]).withWatermark("ts", f"{int(self.lateness_s * 1000)} milliseconds")
                   .groupBy(F.window("ts", f"{int(self.window_s * 1000)} milliseconds"), "topology", "kind",
                            "src_task", "dst_task", "operator")
                   .agg(F.sum("tuples").alias("tuples"), F.sum("bytes").alias("bytes"),
                        F.avg("load").alias("load"), F.count(F.lit(1)).alias("rows"))
                   .writeStream.outputMode("append").foreachBatch(self._on_windows)
                   .option("checkpointLocation", str(self.checkpoint / "windows"))
                   .trigger(**trigger).start())
        self.queries = [quarantine, windows]
        return self.queries

    def run(self, available_now: bool = False, poll_s: float = 5.0, timeout_s: float | None = None) -> dict[str, Any]:
        """Run until the files are processed (``available_now``), ``timeout_s`` or Ctrl-C."""
        queries = self.start(available_now, poll_s)
        started = time.monotonic()
        try:
            while any(q.isActive for q in queries):
                for q in queries:
                    q.awaitTermination(poll_s)
                self.check_cluster()
                if timeout_s is not None and time.monotonic() - started > timeout_s:
                    break
        finally:
            for q in queries:
                q.stop()
        for q in queries:
            for progress in q.recentProgress:
                for op in progress.get("stateOperators", []):
                    self.rows_dropped_late += int(op.get("numRowsDroppedByWatermark", 0))
        return self.report()

    def report(self) -> dict[str, Any]:
        return {
            "snapshots": list(self.snapshots),
            "decisions": [d.to_dict() for d in self.replanner.decisions],
            "assignments_emitted": sum(d.emitted for d in self.replanner.decisions),
            "rows_dropped_late": self.rows_dropped_late,
            "quarantine": str(self.store / "quarantine" / "watch"),
        }


def watch(spark: SparkSession, directory: str | Path, store: str | Path, replanner: Replanning, **kwargs) -> Watch:
    """A :class:`Watch` over ``directory`` (call ``.run()``)."""
    return Watch(spark, directory, store, replanner, **kwargs)
