"""Batch ingest: files -> validation (nothing lost) -> windowed rates -> snapshots.

Steps (each a ``DataFrame -> DataFrame`` function): :mod:`.sources` reads every file into
records with a row-level ``reason``; :func:`settle` groups identical keys (a second row for the
same topology, timestamp and task pair / task is a ``duplicate``) and marks traffic naming
undeclared tasks ``unknown_task``; :func:`aggregate` turns accepted rows into R(ti, tj) and
L(ti) (i-scheduler.txt 4.1, t3-scheduler.txt 4.1); the driver collects the small weighted graph
and :mod:`.store` writes one snapshot per topology. Every run reports
``rows_read = rows_accepted + sum(rows_quarantined.values())``.
"""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from typing import Any

import numpy as np
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamsched.errors import InputError
from streamsched.model.taskgraph import TaskGraph
from streamsched.pipeline import schema as S
from streamsched.pipeline import sources
from streamsched.pipeline.store import write_run_report, write_snapshot

TRAFFIC_KEY = ["topology", "timestamp", "src_task", "dst_task"]
#: The operator is part of the load key: a string aggregate would force a sort-based aggregation.
LOAD_KEY = ["topology", "timestamp", "task", "operator"]


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


# --------------------------------------------------------------------------- validation
def settle(rows: DataFrame, key: list[str], values: list[str]) -> DataFrame:
    """Group rows by their key: one row per distinct key with ``copies``; rejected rows keep their
    own group (source, raw). The kept copy of duplicates carries the smallest values."""
    bad = F.col("reason").isNotNull()
    grouped = rows.select(
        "kind", "reason", *key, *values,
        F.when(bad, F.col("raw")).alias("raw"), F.when(bad, F.col("source")).alias("source"),
    ).groupBy("kind", "reason", "raw", "source", *key).agg(
        F.count(F.lit(1)).alias("copies"), *[F.min(v).alias(v) for v in values])
    return grouped


def mark_unknown(traffic: DataFrame, declared: DataFrame) -> DataFrame:
    """Accepted traffic naming a task its topology does not declare -> ``unknown_task``
    (topologies that declare no task at all are not checked). ``declared``: topology, task
    (small: collected by the caller and broadcast)."""
    topologies = declared.select("topology").distinct().withColumn("_declared", F.lit(True))
    src = declared.select("topology", F.col("task").alias("src_task"), F.lit(True).alias("_src"))
    dst = declared.select("topology", F.col("task").alias("dst_task"), F.lit(True).alias("_dst"))
    out = (traffic.join(F.broadcast(topologies), "topology", "left")
           .join(F.broadcast(src), ["topology", "src_task"], "left")
           .join(F.broadcast(dst), ["topology", "dst_task"], "left"))
    unknown = F.col("reason").isNull() & F.col("_declared").isNotNull() & (
        F.col("_src").isNull() | F.col("_dst").isNull())
    return out.withColumn("reason", F.when(unknown, F.lit(S.UNKNOWN_TASK)).otherwise(F.col("reason"))).drop(
        "_declared", "_src", "_dst")


def quarantine_rows(settled: DataFrame, key: list[str], values: list[str]) -> DataFrame:
    """One row per rejected input row: rejected groups repeated ``copies`` times, and the
    ``copies - 1`` extra rows of every accepted key as ``duplicate``."""
    rejected = settled.filter(F.col("reason").isNotNull()).select(
        "source", "kind",
        F.coalesce(F.col("raw"), F.to_json(F.struct(*key, *values))).alias("raw"), "reason",
        F.explode(F.array_repeat(F.lit(1), F.col("copies").cast("int"))).alias("_"))
    duplicates = settled.filter(F.col("reason").isNull() & (F.col("copies") > 1)).select(
        F.lit(None).cast("string").alias("source"), "kind",
        F.to_json(F.struct(*key, *values)).alias("raw"), F.lit(S.DUPLICATE).alias("reason"),
        F.explode(F.array_repeat(F.lit(1), (F.col("copies") - 1).cast("int"))).alias("_"))
    return rejected.unionByName(duplicates).drop("_")


def count_rows(settled: DataFrame) -> DataFrame:
    """(reason, rows) of a settled frame: accepted keys count once, their extra copies as
    duplicates, rejected groups ``copies`` times."""
    return settled.select(
        F.explode(F.array(
            F.struct(F.col("reason").alias("reason"), F.when(F.col("reason").isNull(), F.lit(1))
                     .otherwise(F.col("copies")).alias("rows")),
            F.struct(F.lit(S.DUPLICATE).alias("reason"), F.when(F.col("reason").isNull(), F.col("copies") - 1)
                     .otherwise(F.lit(0)).alias("rows")),
        )).alias("c")).groupBy("c.reason").agg(F.sum("c.rows").alias("rows"))


# --------------------------------------------------------------------------- aggregation
def aggregate(traffic: DataFrame, load: DataFrame, ends: DataFrame, window: Window) -> tuple[DataFrame, DataFrame]:
    """Accepted rows -> per-pair rates (tuples/s, bytes/s) and per-task load.

    Sliding window: ``R = sum of tuples with end - W < t <= end, / W``; ``L`` = mean of the load
    samples in the window. Exponential weighting with half-life h: a row of age a weighs
    ``w = 2^(-a/h)``; ``R = sum(tuples * w) / (h / ln 2)`` (the integral of w, so a constant rate
    is recovered exactly) and ``L = sum(load * w) / sum(w)``. ``ends``: topology, end.
    """
    def windowed(df: DataFrame) -> DataFrame:
        df = df.join(F.broadcast(ends), "topology")
        age = F.col("end") - F.col("timestamp")
        if window.half_life_s is None:
            return df.filter((age >= 0) & (age < window.seconds)).withColumn("w", F.lit(1.0))
        return df.filter(age >= 0).withColumn("w", F.pow(F.lit(2.0), -age / window.half_life_s))

    span = window.seconds if window.half_life_s is None else window.half_life_s / math.log(2)
    rates = windowed(traffic).groupBy("topology", "src_task", "dst_task").agg(
        (F.sum(F.col("tuples") * F.col("w")) / span).alias("rate"),
        (F.sum(F.col("bytes") * F.col("w")) / span).alias("bytes_rate"),
        F.count(F.lit(1)).alias("samples"))
    loads = windowed(load).groupBy("topology", "task").agg(
        (F.sum(F.col("load") * F.col("w")) / F.sum("w")).alias("load"))
    return rates, loads


def build_graphs(rates: list, loads: list, tasks: list, default_load: float) -> dict[str, tuple[TaskGraph, int]]:
    """Collected rows -> one TaskGraph per topology (and how many tasks got ``default_load``).

    Tasks are every declared task plus every task named by a rate or a load sample; a task's
    operator is the one declared (``task`` when none is); a task without load samples in the
    window gets ``default_load`` (the core readers' convention for graphs without loads)."""
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
        graph = TaskGraph.build(
            name=topo, operator_names=names,
            task_operator=[op_index[operator_of.get(t, "task")] for t in ids],
            load=[load_of.get(t, default_load) for t in ids],
            src=np.array([index[int(r["src_task"])] for r in edges], dtype=np.int64),
            dst=np.array([index[int(r["dst_task"])] for r in edges], dtype=np.int64),
            rate=[float(r["rate"]) for r in edges], bytes_rate=[float(r["bytes_rate"]) for r in edges],
            task_ids=ids, where=f"topology {topo!r}")
        out[topo] = (graph, defaulted)
    return out


# --------------------------------------------------------------------------- the run
def ingest(spark: SparkSession, paths: list[str | Path], store: str | Path, window: Window = Window(),
           options: sources.Options | None = None, fmt: str | None = None,
           default_load: float = 1.0) -> dict[str, Any]:
    """Read, validate, aggregate and snapshot ``paths``; returns (and stores) the run report."""
    options = options or sources.Options()
    started = time.perf_counter()
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:6]
    groups = sources.group_files(paths, fmt)
    traffic_rows, load_rows, records, traffic, load, tasks = [], [], [], [], [], []
    for name, files in groups.items():
        if name in ("native-traffic", "native-load"):
            rows = sources.read_native(spark, files, name.split("-")[1], options).records
            (traffic_rows if name == "native-traffic" else load_rows).append(rows)
        elif name == "aniello-traffic":
            traffic_rows.append(sources.read_aniello(spark, files, name, options).records)
        elif name == "aniello-load":
            rows = sources.read_aniello(spark, files, name, options).records
            records.append(rows.select("source", "kind", "raw", "reason"))
            good = sources.expand_executor_load(rows.filter(F.col("reason").isNull()))
            load.append(good)
            tasks.append(good.select("topology", "task", "operator"))
        else:
            reader = sources.read_storm_log if name == "storm-log" else sources.read_sendgraph
            got = reader(spark, files, options)
            records.append(got.records)
            for bucket, frame in ((traffic, got.traffic), (load, got.load), (tasks, got.tasks)):
                if frame is not None:
                    bucket.append(frame)
    counts: list[DataFrame] = []
    cached: list[DataFrame] = []
    quarantine = [r.filter(F.col("reason").isNotNull()) for r in records]
    counts += [r.groupBy("reason").agg(F.count(F.lit(1)).alias("rows")) for r in records]
    load_values = ["load"]
    if load_rows:
        settled_load = settle(reduce(DataFrame.unionByName, load_rows), LOAD_KEY, load_values).cache()
        cached.append(settled_load)
        good = settled_load.filter(F.col("reason").isNull())
        load.append(good.select("timestamp", "topology", "task", "operator", "load"))
        tasks.append(good.select("topology", "task", "operator"))
        quarantine.append(quarantine_rows(settled_load, LOAD_KEY, load_values))
        counts.append(count_rows(settled_load))
    traffic_values = ["tuples", "bytes"]
    if traffic_rows:
        settled = settle(reduce(DataFrame.unionByName, traffic_rows), TRAFFIC_KEY, traffic_values)
        if tasks:
            declared = reduce(DataFrame.unionByName, tasks).select("topology", "task").distinct().collect()
            if declared:
                settled = mark_unknown(settled, spark.createDataFrame(declared, "topology string, task bigint"))
        settled = settled.cache()
        cached.append(settled)
        traffic.append(settled.filter(F.col("reason").isNull()).select(
            "timestamp", "topology", "src_task", "dst_task", "tuples", "bytes"))
        quarantine.append(quarantine_rows(settled, TRAFFIC_KEY, traffic_values))
        counts.append(count_rows(settled))
    per_reason: dict[str, int] = {}
    for row in reduce(DataFrame.unionByName, counts).groupBy("reason").agg(F.sum("rows").alias("rows")).collect():
        per_reason[row["reason"] or "accepted"] = per_reason.get(row["reason"] or "accepted", 0) + int(row["rows"])
    accepted = per_reason.pop("accepted", 0)
    quarantined = {r: n for r, n in sorted(per_reason.items()) if n}
    quarantine_path = None
    if quarantined:
        quarantine_path = Path(store) / "quarantine" / run_id
        reduce(DataFrame.unionByName, quarantine).coalesce(1).write.parquet(str(quarantine_path))
    empty_traffic = spark.createDataFrame([], S.TRAFFIC)
    empty_load = spark.createDataFrame([], S.LOAD)
    traffic_df = reduce(DataFrame.unionByName, traffic, empty_traffic)
    load_df = reduce(DataFrame.unionByName, load, empty_load)
    task_df = reduce(DataFrame.unionByName, tasks, empty_load.select("topology", "task", "operator"))
    if window.end is not None:
        ends = {r["topology"]: window.end for r in task_df.select("topology").union(
            traffic_df.select("topology")).distinct().collect()}
    else:
        stamps = traffic_df.select("topology", "timestamp").unionByName(load_df.select("topology", "timestamp"))
        ends = {r["topology"]: float(r["end"]) for r in stamps.groupBy("topology").agg(
            F.max("timestamp").alias("end")).collect()}
    snapshots = []
    if ends:
        ends_df = spark.createDataFrame([(t, e) for t, e in ends.items()], "topology string, end double")
        rates, loads = aggregate(traffic_df, load_df, ends_df, window)
        graphs = build_graphs(rates.collect(), loads.collect(), task_df.distinct().collect(), default_load)
        source_files = sorted(str(f) for files in groups.values() for f in files)
        for topo, (graph, defaulted) in graphs.items():
            manifest = {
                "schema_version": S.SCHEMA_VERSION,
                "window": window.describe(ends.get(topo, 0.0)),
                "sources": source_files,
                "formats": sorted(groups),
                "run_id": run_id,
                "rows": {"read": accepted + sum(quarantined.values()), "accepted": accepted,
                         "quarantined": quarantined},
                "tasks_with_default_load": defaulted,
                "default_load": default_load,
            }
            snapshots.append(str(write_snapshot(store, graph, manifest)))
    for frame in cached:
        frame.unpersist()
    report = {
        "run_id": run_id,
        "rows_read": accepted + sum(quarantined.values()),
        "rows_accepted": accepted,
        "rows_quarantined": quarantined,
        "quarantine": str(quarantine_path) if quarantine_path else None,
        "snapshots": snapshots,
        "formats": {k: len(v) for k, v in sorted(groups.items())},
        "wall_time_s": time.perf_counter() - started,
    }
    write_run_report(store, run_id, report)
    return report
