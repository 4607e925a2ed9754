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


@pytest.fixture(scope="session")
def flink_ports():
    """The local Flink's REST port, picked free on 127.0.0.1 before the cluster starts (a test's
    client may prepare its job meanwhile)."""
    from streamsched.engines.flink.local import free_port

    return {"rest": free_port()}


@pytest.fixture(scope="session")
def flink_cluster(tmp_path_factory, flink_ports):
    """The one local Flink 2.3 of the test session (tests marked ``slow``): a JobManager with the
    adaptive scheduler and streamsched's placement plugin (plans in ``<dir>/plans``) and two
    TaskManagers ``tm-1``, ``tm-2`` with 2 slots each (:mod:`streamsched.engines.flink.local`);
    stopped at the end of the session, also on failure."""
    import shutil

    if shutil.which("java") is None or shutil.which("javac") is None:
        pytest.skip("Java (JDK 17) is missing: the live Flink tests need java and javac")
    from streamsched.engines.flink import local, plugin

    plugin.build()
    base = tmp_path_factory.mktemp("flink")
    cluster = local.start(base, taskmanagers=2, slots=2, rest_port=flink_ports["rest"])
    try:
        yield cluster
    finally:
        local.stop(base)
