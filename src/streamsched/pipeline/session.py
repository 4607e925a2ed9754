"""The Spark session the pipeline runs on: local by default, any master Spark accepts."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Iterator

from pyspark.sql import SparkSession


def spark_session(master: str = "local[2]", memory: str = "2g") -> SparkSession:
    """The active session if there is one, else a new one; ``master`` is ``local[N]``,
    ``spark://host:7077``, ``yarn``...

    Settings verified for PySpark 4 (../shared/reference/formats.md): UI off, UTC, few shuffle
    partitions on one machine, ANSI mode left on (casts go through ``try_cast``).
    """
    active = SparkSession.getActiveSession()
    if active is not None:  # e.g. the test suite's session, or a notebook's: leave its settings
        return active
    builder = (
        SparkSession.builder.master(master)
        .appName("streamsched-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", memory)
        .config("spark.ui.showConsoleProgress", "false")
    )
    if master.startswith("local"):
        builder = builder.config("spark.sql.shuffle.partitions", "4")
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


@contextmanager
def python_workers(spark: SparkSession) -> Iterator[None]:
    """Python functions shipped to Spark inside this block run in the driver's interpreter when
    the master is local and neither ``spark.pyspark.python`` nor ``PYSPARK_PYTHON`` names one
    (executors of a cluster need streamsched installed in the interpreter those name)."""
    sc = spark.sparkContext
    configured = sc.getConf().get("spark.pyspark.python", None) or os.environ.get("PYSPARK_PYTHON")
    previous = sc.pythonExec
    if sc.master.startswith("local") and not configured:
        sc.pythonExec = sys.executable
    try:
        yield
    finally:
        sc.pythonExec = previous
