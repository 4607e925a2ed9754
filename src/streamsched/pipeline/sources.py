"""Spark readers of the foreign monitoring formats into the normalised schemas of :mod:`.schema`.

Every reader returns a :class:`Records`: one row per input record with the record's ``reason``
(None = accepted) for the run report and the quarantine, plus the accepted rows normalised into
traffic and load samples and the tasks the source declares (task -> operator). Row-level checks
(types, missing fields, negative counts, timestamp range) happen here; duplicates of Aniello
traffic rows and unknown tasks are found when :mod:`.ingest` merges them with the rest.

Sources, chosen by file name (or forced with ``fmt``):

- ``traffic*.{csv,jsonl,json,parquet}`` / ``load*.{...}``: our native format (columns of
  :data:`.schema.TRAFFIC` / :data:`.schema.LOAD`), read by :mod:`.native_reader` (pyarrow), not here;
- ``*.metrics`` (``worker.log.metrics``, rolled ``.metrics.<i>.gz``) and ``*.log``: Storm
  ``LoggingMetricsConsumer`` files; ``storm.worker.*.csv``: Storm's CSV metrics reporter (both read
  by :mod:`streamsched.engines.storm.metrics_traffic`, see :func:`read_storm`);
- ``sendgraph*.json``: Fischer's cumulative sendgraph snapshots (deltas, restarts);
- ``aniello-traffic*.csv`` / ``aniello-load*.csv``: Aniello's ``traffic`` and ``load`` tables.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from typing import Iterator

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema

from streamsched.engines.storm.metrics_csv import is_reporter_file
from streamsched.engines.storm.metrics_log import is_metrics_file
from streamsched.engines.storm.metrics_traffic import line_ranges, read_topology, topology_of
from streamsched.errors import InputError
from streamsched.pipeline.row_checks import DUPLICATE, MALFORMED, MISSING, NEGATIVE, OUT_OF_RANGE, WRONG_TYPE

FORMATS = ("native-traffic", "native-load", "storm-log", "storm-csv", "sendgraph", "aniello-traffic", "aniello-load")
STORM_FORMATS = ("storm-log", "storm-csv")
NATIVE_SUFFIXES = (".csv", ".jsonl", ".json", ".parquet")
#: Default accepted timestamp range: 2000-01-01 .. 2100-01-01 (epoch seconds).
DEFAULT_TIME_RANGE = (946684800.0, 4102444800.0)


@dataclass
class Options:
    """What readers need besides the files."""

    time_range: tuple[float, float] = DEFAULT_TIME_RANGE
    topology: str | None = None         # topology of rows without one (None: Storm files take it
                                        # from their path or name, sendgraph rows get "topology")
    storm_interval_s: float = 60.0      # topology.builtin.metrics.bucket.size.secs
    rate_interval_s: float = 60.0       # the period an Aniello rate (tuples/s) covers
    load_unit: str | None = None        # unit of the loads (None: cores for Storm metrics, else tasks)


@dataclass
class Records:
    """``records``: source, kind, raw, reason (one row per input record), plus the parsed values
    for the Aniello readers, whose accepted rows ingest packs itself. The other frames hold
    accepted rows only, normalised."""

    records: DataFrame
    traffic: DataFrame | None = None
    load: DataFrame | None = None
    tasks: DataFrame | None = None       # topology, task, operator


def detect_format(path: Path) -> str:
    name = path.name.lower()
    if is_metrics_file(name) or name.endswith(".log"):
        return "storm-log"
    if is_reporter_file(path.name):
        return "storm-csv"
    if name.startswith("sendgraph") and name.endswith(".json"):
        return "sendgraph"
    for prefix in ("aniello-traffic", "aniello-load"):
        if name.startswith(prefix) and name.endswith(".csv"):
            return prefix
    for prefix in ("traffic", "load"):
        if name.startswith(prefix) and name.endswith(NATIVE_SUFFIXES):
            return f"native-{prefix}"
    raise InputError(
        f"{path}: cannot tell the format from the name (traffic*/load*.csv|jsonl|parquet, *.metrics, *.log, "
        "storm.worker.*.csv, sendgraph*.json, aniello-traffic*/aniello-load*.csv); give --format")


def _storm_artifact(path: Path) -> bool:
    """A file of Storm's worker artifacts that holds no metrics (worker.log, worker.log.out,
    worker.yaml, gc.log, ...): skipped when a directory is read."""
    return "workers-artifacts" in path.parts and not is_metrics_file(path.name.lower())


def expand(paths: list[str | Path]) -> list[Path]:
    """Files named, and the files inside directories named (sorted; hidden and _-files skipped)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(f for f in p.rglob("*") if f.is_file() and not f.name.startswith((".", "_"))
                          and not _storm_artifact(f.absolute()))
        elif p.is_file():
            out.append(p)
        else:
            raise InputError(f"{p}: no such file or directory")
    if not out:
        raise InputError(f"no input files in {', '.join(map(str, paths))}")
    return out


# --------------------------------------------------------------------------- helpers
def _number(column: str, kind: str = "double") -> Column:
    return F.expr(f"try_cast(trim(`{column}`) as {kind})")


def _first_reason(*checks: tuple[Column, str]) -> Column:
    """The reason of the first failing check, else null."""
    expr = F.lit(None).cast("string")
    for condition, reason in reversed(checks):
        expr = F.when(condition, F.lit(reason)).otherwise(expr)
    return expr


def _typed(field: str, kind: str) -> tuple[Column, Column, Column]:
    """(value, missing, wrong type) of a text field cast to ``kind``."""
    text = F.trim(F.col(field))
    missing = F.col(field).isNull() | (text == "")
    value = _number(field, kind)
    return value, missing, ~missing & value.isNull()


def _in_range(ts: Column, options: Options) -> Column:
    low, high = options.time_range
    return (ts >= low) & (ts <= high)


def _bad_count(value: Column) -> Column:
    return (value < 0) | F.isnan(value) | (F.abs(value) == float("inf"))


def _raw(df: DataFrame, fields: list[str]) -> Column:
    return F.coalesce(F.col("_corrupt_record"), F.to_json(F.struct(*[F.col(f) for f in fields])))


# --------------------------------------------------------------------------- Storm
#: One row of what the Storm readers give (``part``): ``traffic`` (timestamp, a = src task, b = dst
#: task, value = tuples), ``load`` (timestamp, a = task, operator, value = busy cores), ``task`` (a,
#: operator), ``rejected`` (source, raw, reason), ``count`` (source, reason = read | accepted |
#: system, rows; reason ``rejected_lines``: raw = JSON of the file's rejected lines; reason
#: ``note``: raw = why a topology gave no traffic) and ``error`` (raw = the InputError message).
STORM_ROWS = pa.schema([
    ("part", pa.string()), ("topology", pa.string()), ("source", pa.string()), ("timestamp", pa.float64()),
    ("a", pa.int64()), ("b", pa.int64()), ("value", pa.float64()), ("operator", pa.string()),
    ("raw", pa.string()), ("reason", pa.string()), ("rows", pa.int64()),
])


def storm_topology_rows(topology: str, files: list[tuple[str, str]], options: Options) -> pa.RecordBatch:
    """Every Storm file of one topology -> :data:`STORM_ROWS` (plain Python and pyarrow, run in a
    Spark task): :func:`streamsched.engines.storm.metrics_traffic.read_topology`, whose InputError
    (an unreadable file, ambiguous cut names) becomes one ``error`` row."""
    rows: dict[str, list] = {f.name: [] for f in STORM_ROWS}

    def add(**values) -> None:
        for name, column in rows.items():
            column.append(values.get(name))

    try:
        top, estimate, counts = read_topology(files, topology, options.time_range, options.storm_interval_s)
    except InputError as exc:
        add(part="error", topology=topology, source=files[0][0], raw=str(exc))
        return pa.RecordBatch.from_pydict(rows, schema=STORM_ROWS)
    for ts, src, dst, tuples in estimate.traffic:
        add(part="traffic", topology=topology, timestamp=ts, a=src, b=dst, value=tuples)
    for ts, task, component, load in estimate.load:
        add(part="load", topology=topology, timestamp=ts, a=task, operator=component, value=load)
    for task, component in sorted(estimate.tasks.items()):
        add(part="task", topology=topology, a=task, operator=component)
    for r in top.records:
        if r.reason is not None:
            add(part="rejected", topology=topology, source=r.source, raw=r.raw, reason=r.reason)
    for path, c in counts.items():
        for reason, n in (("read", c.read), ("accepted", c.accepted), ("system", c.system)):
            add(part="count", topology=topology, source=path, reason=reason, rows=n)
        if c.rejected:
            line, reason, detail = c.rejected[0]
            add(part="count", topology=topology, source=path, reason="rejected_lines", rows=len(c.rejected),
                raw=json.dumps({"lines": line_ranges([k for k, _, _ in c.rejected]),
                                "first": f"line {line}: {reason}: {detail}"}))
    for note in estimate.notes:
        add(part="count", topology=topology, source=files[0][0], reason="note", raw=f"{topology}: {note}")
    return pa.RecordBatch.from_pydict(rows, schema=STORM_ROWS)


def read_storm(spark: SparkSession, files: dict[str, list[Path]], options: Options) -> DataFrame:
    """Storm metrics files (``storm-log``: ``LoggingMetricsConsumer``; ``storm-csv``: the CSV
    metrics reporter) -> :data:`STORM_ROWS`, one Spark task per topology (files are grouped by
    the topology their path or name gives, or ``options.topology``): a topology's counters are
    differenced and its cut names resolved over all its files together. Storm rolls a metrics
    file at 2 MB and keeps 9, so a topology is a few tens of MB at most. The rows are
    checkpointed: the ingest reads them several times."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for fmt, paths in sorted(files.items()):
        for path in paths:
            groups.setdefault(topology_of(path, fmt, options.topology), []).append((str(path), fmt))

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            columns = (batch.column(c).to_pylist() for c in ("topology", "paths", "formats"))
            for topology, paths, formats in zip(*columns):
                yield storm_topology_rows(topology, list(zip(paths, formats)), options)

    work = [(topology, [p for p, _ in fs], [f for _, f in fs]) for topology, fs in sorted(groups.items())]
    df = spark.sparkContext.parallelize(work, max(1, len(work))).toDF(
        "topology string, paths array<string>, formats array<string>")
    return df.mapInArrow(read, from_arrow_schema(STORM_ROWS)).localCheckpoint()


# --------------------------------------------------------------------------- sendgraph
_SENDGRAPH = T.StructType([
    T.StructField("topology", T.StringType()),
    T.StructField("timestamp", T.StringType()),
    T.StructField("nodes", T.ArrayType(T.StructType([T.StructField("name", T.StringType())]))),
    T.StructField("links", T.ArrayType(T.StructType([
        T.StructField("source", T.StringType()), T.StructField("target", T.StringType()),
        T.StructField("value", T.StringType())]))),
    T.StructField("_corrupt_record", T.StringType()),
])


def read_sendgraph(spark: SparkSession, files: list[Path], options: Options) -> Records:
    """Fischer's cumulative sendgraph snapshots: one JSON document per file.

    The snapshot time is the document's ``timestamp`` or else the last run of digits in the file
    name (``sendgraph-1700000060.json``). Counts are cumulative since the task started, so each
    pair's tuples in a snapshot are ``value - previous value``; a value lower than the previous one
    means the counter restarted, and the delta is the value itself. A pair's first snapshot is
    its baseline (accepted, no traffic). A broken document is one malformed record.
    """
    docs = spark.read.schema(_SENDGRAPH).option("multiLine", True).option("mode", "PERMISSIVE").option(
        "columnNameOfCorruptRecord", "_corrupt_record").json([str(f) for f in files])
    docs = docs.withColumn("source", F.input_file_name()).cache()
    name_digits = F.regexp_extract(F.col("source"), r"(\d+)\.json$", 1)
    ts = F.coalesce(F.expr("try_cast(timestamp as double)"), F.when(name_digits != "", name_digits.cast("double")))
    topology = F.lit(options.topology or "topology")
    docs = docs.select("*", ts.alias("ts"), F.coalesce(F.col("topology"), topology).alias("topo"))
    broken = docs.filter(F.col("_corrupt_record").isNotNull() | F.col("links").isNull() | F.col("ts").isNull()).select(
        "source", F.lit("sendgraph").alias("kind"),
        F.coalesce(F.col("_corrupt_record"), F.to_json(F.struct("timestamp", "topology"))).alias("raw"),
        F.when(F.col("_corrupt_record").isNotNull() | F.col("links").isNull(), F.lit(MALFORMED))
        .otherwise(F.lit(MISSING)).alias("reason"))
    ok = docs.filter(F.col("_corrupt_record").isNull() & F.col("links").isNotNull() & F.col("ts").isNotNull())
    links = ok.select("source", "topo", "ts", F.explode("links").alias("l")).select(
        "source", F.col("topo").alias("topology"), F.col("ts").alias("timestamp"),
        F.to_json(F.col("l")).alias("raw"),
        F.expr("try_cast(l.source as bigint)").alias("src_task"),
        F.expr("try_cast(l.target as bigint)").alias("dst_task"),
        F.expr("try_cast(l.value as double)").alias("count"),
        F.col("l.source").isNull() | F.col("l.target").isNull() | F.col("l.value").isNull())
    links = links.withColumnRenamed(links.columns[-1], "is_missing")
    reason = _first_reason(
        (F.col("is_missing"), MISSING),
        (F.col("src_task").isNull() | F.col("dst_task").isNull() | F.col("count").isNull(), WRONG_TYPE),
        (_bad_count(F.col("count")), NEGATIVE),
        (~_in_range(F.col("timestamp"), options), OUT_OF_RANGE),
    )
    links = links.withColumn("reason", reason)
    dup = Window.partitionBy("topology", "timestamp", "src_task", "dst_task").orderBy("source", "raw")
    links = links.withColumn("reason", F.when(
        F.col("reason").isNull() & (F.row_number().over(dup) > 1), F.lit(DUPLICATE)).otherwise(F.col("reason")))
    records = broken.unionByName(links.select("source", F.lit("sendgraph").alias("kind"), "raw", "reason"))
    good = links.filter(F.col("reason").isNull())
    pair = Window.partitionBy("topology", "src_task", "dst_task").orderBy("timestamp")
    previous = F.lag("count").over(pair)
    traffic = good.select(
        "timestamp", "topology", "src_task", "dst_task",
        F.when(previous.isNull(), F.lit(None)).when(F.col("count") >= previous, F.col("count") - previous)
        .otherwise(F.col("count")).alias("tuples"),
        F.lit(0.0).alias("bytes"),
    ).filter(F.col("tuples").isNotNull())
    nodes = ok.select("topo", F.explode_outer("nodes").alias("n")).select(
        F.col("topo").alias("topology"), F.expr("try_cast(n.name as bigint)").alias("task"))
    ends = good.select("topology", F.col("src_task").alias("task")).unionByName(
        good.select("topology", F.col("dst_task").alias("task")))
    tasks = nodes.filter(F.col("task").isNotNull()).unionByName(ends).distinct().withColumn("operator", F.lit("task"))
    return Records(records=records, traffic=traffic, tasks=tasks)


# --------------------------------------------------------------------------- Aniello
_ANIELLO_TRAFFIC = T.StructType([T.StructField(n, T.StringType()) for n in (
    "topology_id", "source_task", "destination_task", "traffic", "timestamp")])
_ANIELLO_LOAD = T.StructType([T.StructField(n, T.StringType()) for n in (
    "topology_id", "begin_task", "end_task", "load", "node", "timestamp")])


def read_aniello(spark: SparkSession, files: list[Path], kind: str, options: Options) -> Records:
    """Aniello et al.'s exported tables (CSV with header).

    ``traffic(topology_id, source_task, destination_task, traffic)`` holds tuples/s over the
    last period: it becomes ``tuples = traffic * rate_interval_s``. ``load(topology_id,
    begin_task, end_task, load, node)`` is per executor: its load is split evenly over the tasks
    ``begin..end``. A row's time is its ``timestamp`` column, else the file's modification time.
    """
    schema = _ANIELLO_TRAFFIC if kind == "aniello-traffic" else _ANIELLO_LOAD
    frames = []
    for f in files:  # each file with its own header: the timestamp column is optional
        with open(f) as handle:
            header = [c.strip() for c in handle.readline().split(",")]
        missing = [c for c in schema.fieldNames()[:-1] if c not in header]
        if missing:
            raise InputError(f"{f}: line 1: missing column {missing[0]!r} (have {', '.join(header)})")
        text = T.StructType([T.StructField(c, T.StringType()) for c in header]
                            + [T.StructField("_corrupt_record", T.StringType())])
        df = spark.read.schema(text).option("header", True).option("mode", "PERMISSIVE").option(
            "columnNameOfCorruptRecord", "_corrupt_record").csv(str(f))
        if "timestamp" not in header:
            df = df.withColumn("timestamp", F.lit(str(f.stat().st_mtime)))
        frames.append(df.select(*schema.fieldNames(), "_corrupt_record").withColumn("source", F.input_file_name()))
    df = reduce(DataFrame.unionByName, frames)
    ts = _number("timestamp")
    corrupt = F.col("_corrupt_record").isNotNull()
    a, b, value = ("source_task", "destination_task", "traffic") if kind == "aniello-traffic" else (
        "begin_task", "end_task", "load")
    first, first_missing, first_wrong = _typed(a, "bigint")
    second, second_missing, second_wrong = _typed(b, "bigint")
    amount, amount_missing, amount_wrong = _typed(value, "double")
    topo_missing = F.col("topology_id").isNull() | (F.trim(F.col("topology_id")) == "")
    reason = _first_reason(
        (corrupt, MALFORMED),
        (topo_missing | first_missing | second_missing | amount_missing, MISSING),
        (first_wrong | second_wrong | amount_wrong, WRONG_TYPE),
        (_bad_count(amount) | ((kind == "aniello-load") & (second < first)), NEGATIVE),
        (~_in_range(ts, options), OUT_OF_RANGE),
    )
    fields = [f.name for f in schema.fields]
    out = df.select("source", F.lit(kind).alias("kind"), _raw(df, fields).alias("raw"), reason.alias("reason"),
                    ts.alias("timestamp"), F.trim(F.col("topology_id")).alias("topology"),
                    first.alias("first"), second.alias("second"), amount.alias("amount"))
    if kind == "aniello-traffic":
        out = out.select("source", "kind", "raw", "reason", "timestamp", "topology",
                         F.col("first").alias("src_task"), F.col("second").alias("dst_task"),
                         (F.col("amount") * options.rate_interval_s).alias("tuples"), F.lit(0.0).alias("bytes"))
        return Records(records=out, traffic=None)
    # Load rows are expanded to tasks after validation (see ingest); keep the executor range.
    return Records(records=out.select(
        "source", "kind", "raw", "reason", "timestamp", "topology", "first", "second", "amount"))


def expand_executor_load(df: DataFrame) -> DataFrame:
    """Aniello load rows (accepted) -> one load sample per task of the executor's range."""
    return df.select(
        "timestamp", "topology", F.explode(F.sequence("first", "second")).alias("task"),
        F.lit("task").alias("operator"),
        (F.col("amount") / (F.col("second") - F.col("first") + 1)).alias("load"))


def group_files(paths: list[str | Path], fmt: str | None = None) -> dict[str, list[Path]]:
    """Group the input files by format (``fmt`` forces one format for every file)."""
    if fmt is not None and fmt not in FORMATS:
        raise InputError(f"--format {fmt!r}: not one of {', '.join(FORMATS)}")
    groups: dict[str, list[Path]] = {}
    for f in expand(paths):
        groups.setdefault(fmt or detect_format(f), []).append(f)
    return groups
