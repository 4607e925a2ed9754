"""Shared fixtures. One local Spark session for the whole run (starting one takes ~20 s)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    """The single session-scoped local Spark session; tests using it are marked ``spark``."""
    pyspark_sql = pytest.importorskip("pyspark.sql")
    session = (
        pyspark_sql.SparkSession.builder.master("local[2]")
        .appName("streamsched-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    yield session
    session.stop()
