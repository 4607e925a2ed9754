"""Sweeps on Spark: one Spark task per item, for work that is plain Python.

:func:`streamsched.evaluation.experiments.runner.run_cells` calls this for ``--engine spark``
with its cell runner: the function is shipped to the executors by pickling (so it must be a
top-level function), and a large sweep spreads over whatever cluster the session's master
names. Executors need streamsched installed in the interpreter ``spark.pyspark.python`` /
``PYSPARK_PYTHON`` names; on a local master with neither set, the workers use the driver's own
interpreter.
"""

from __future__ import annotations

from typing import Callable, TypeVar

from pyspark.sql import SparkSession

from streamsched.pipeline.session import python_workers, spark_session

Item = TypeVar("Item")
Result = TypeVar("Result")


def map_on_spark(function: Callable[[Item], Result], items: list[Item],
                 spark: SparkSession | None = None) -> list[Result]:
    """``function`` of each item, in their order, one partition per item (items such as
    experiment cells differ widely in cost)."""
    if not items:
        return []
    if spark is None:
        spark = spark_session()
    with python_workers(spark):
        indexed = list(enumerate(items))
        rdd = spark.sparkContext.parallelize(indexed, numSlices=len(indexed))
        results = rdd.map(lambda item: (item[0], function(item[1]))).collect()
    return [row for _, row in sorted(results, key=lambda pair: pair[0])]
