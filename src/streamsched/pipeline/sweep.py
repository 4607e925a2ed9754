"""Experiment sweeps on Spark: each (scheduler x workload x cluster x seed) cell is one Spark task.

:func:`streamsched.evaluation.experiments.run_cells` calls this for ``--engine spark``; the cell
runner itself is plain Python (``run_cell``), shipped to the executors by pickling, so a large
sweep spreads over whatever cluster the session's master names. Executors need streamsched
installed in the interpreter ``spark.pyspark.python`` / ``PYSPARK_PYTHON`` names; on a local
master with neither set, the workers use the driver's own interpreter.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

from streamsched.evaluation.experiments import Cell, run_cell
from streamsched.pipeline.session import python_workers, spark_session


def run_cells_on_spark(cells: list[Cell], spark: SparkSession | None = None) -> list[dict[str, Any]]:
    """Rows of ``cells`` in their order, one partition per cell (cells differ widely in cost)."""
    if not cells:
        return []
    if spark is None:
        spark = spark_session()
    with python_workers(spark):
        indexed = list(enumerate(cells))
        rdd = spark.sparkContext.parallelize(indexed, numSlices=len(indexed))
        results = rdd.map(lambda item: (item[0], run_cell(item[1]))).collect()
    return [row for _, row in sorted(results, key=lambda pair: pair[0])]
