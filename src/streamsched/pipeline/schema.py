"""The normalised schemas every source is read into, and the quarantine reasons.

Traffic rows: ``timestamp`` (epoch seconds), ``topology``, ``src_task``, ``dst_task``,
``tuples`` and ``bytes`` counted since the previous sample of the same pair. Load samples:
``timestamp``, ``topology``, ``task``, ``operator``, ``load`` (load units, averaged over the window).
"""

from __future__ import annotations

from pyspark.sql import types as T

SCHEMA_VERSION = 1

TRAFFIC = T.StructType([
    T.StructField("timestamp", T.DoubleType()),
    T.StructField("topology", T.StringType()),
    T.StructField("src_task", T.LongType()),
    T.StructField("dst_task", T.LongType()),
    T.StructField("tuples", T.DoubleType()),
    T.StructField("bytes", T.DoubleType()),
])

LOAD = T.StructType([
    T.StructField("timestamp", T.DoubleType()),
    T.StructField("topology", T.StringType()),
    T.StructField("task", T.LongType()),
    T.StructField("operator", T.StringType()),
    T.StructField("load", T.DoubleType()),
])

#: What a raw file is read as before casting: every field a string, so nothing fails to parse.
def as_text(schema: T.StructType) -> T.StructType:
    return T.StructType([T.StructField(f.name, T.StringType()) for f in schema.fields])


QUARANTINE = T.StructType([
    T.StructField("source", T.StringType()),
    T.StructField("kind", T.StringType()),
    T.StructField("raw", T.StringType()),
    T.StructField("reason", T.StringType()),
])

# Quarantine reasons (the ``reason`` column and the keys of a run report).
MALFORMED = "malformed"            # wrong number of fields, broken JSON, unparsable map
WRONG_TYPE = "wrong_type"          # a field that does not cast to its declared type
MISSING = "missing_field"          # a required field is empty
NEGATIVE = "negative_count"        # tuples, bytes or load < 0 (or not finite)
UNKNOWN_TASK = "unknown_task"      # a traffic row naming a task the topology does not declare
OUT_OF_RANGE = "timestamp_out_of_range"
DUPLICATE = "duplicate"            # a second row for the same (topology, timestamp, pair/task)
REASONS = (MALFORMED, WRONG_TYPE, MISSING, NEGATIVE, UNKNOWN_TASK, OUT_OF_RANGE, DUPLICATE)
