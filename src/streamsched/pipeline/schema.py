"""The normalised schemas every source is read into (the quarantine reasons are in :mod:`.row_checks`).

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

