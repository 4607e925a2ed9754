"""Shared fixtures and the test tiers.

One local Spark session for the whole run (starting one takes ~20 s).

Tiers (``make test-fast`` runs ``-m "not spark and not slow"``, ``make test`` everything):

- a test is marked ``spark`` automatically when it uses a JVM fixture (:data:`JVM_FIXTURES`,
  directly or through another fixture) or runs a Spark command of the CLI
  (:data:`streamsched.cli.spark_start.SPARK_COMMANDS`) as a console script or through ``main``;
- ``slow`` is set by hand on the Spark-cluster and live-engine tests and on long searches;
- ``nojvm`` is added to the ``slow`` tests of :data:`NOJVM_MODULES` (solver searches, fuzzing,
  the demo report, deadlines waited out) that are not ``spark``: ``make test`` runs them with
  the fast tier, two at a time (``make test-fast`` leaves them out); not to those marked
  ``measures`` (a rate measured beside busy workers reads low), which run in the serial step;
- with ``STREAMSCHED_TEST_TIER=fast`` (what ``make test-fast`` and ``make test``'s first step
  set) a test not marked ``spark``, nor ``slow`` without ``nojvm``, that starts a JVM anyway
  fails, naming the way it tried, so that a missing mark cannot hide in the parallel step.
"""

from __future__ import annotations

import inspect
import os
import re
import subprocess

import pytest

from streamsched.cli.spark_start import SPARK_COMMANDS

#: Fixtures that start (or hold) a JVM; a test using one, even through another fixture, is ``spark``.
JVM_FIXTURES = {"spark", "spark_small", "flink_cluster", "flink_lab"}
#: A Spark command as the first argument of the CLI: ``main(["ingest", ...])``, ``run(capsys, "watch", ...)``,
#: ``[script, "ingest", ...]`` or ``[*CLI, "watch", ...]``.
_SPARK_ARGV = re.compile(r"""(?:main\(\[|\brun\(\w+,\s*|\[\s*[\w.()*]+,\s*)["'](%s)["']""" % "|".join(SPARK_COMMANDS))
FAST_TIER = os.environ.get("STREAMSCHED_TEST_TIER") == "fast"


def _runs_spark_command(item: pytest.Item) -> bool:
    function = getattr(item, "function", None)
    if function is None:
        return False
    try:
        return bool(_SPARK_ARGV.search(inspect.getsource(function)))
    except (OSError, TypeError):
        return False


#: Modules whose ``slow`` tests start no JVM and no engine (searches, fuzzing, the demo report, waits).
NOJVM_MODULES = {"test_optimal_solver", "test_optimal_measured", "test_optimal_scheduler", "test_fuzz_cli",
                 "test_compare_failures", "test_evaluation_experiments", "test_report", "test_live_loop",
                 "test_reliability", "test_report_pictures", "test_scheduler_battery",
                 "test_multi_topology", "test_replanning", "test_properties"}


def slow_params(names, slow: set[str]) -> list:
    """``names`` as parameters, those in ``slow`` (seconds each, measured) marked ``slow``."""
    return [pytest.param(n, marks=pytest.mark.slow) if n in slow else n for n in names]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if JVM_FIXTURES & set(getattr(item, "fixturenames", ())) or _runs_spark_command(item):
            item.add_marker(pytest.mark.spark)
        elif (item.get_closest_marker("slow") and item.module.__name__ in NOJVM_MODULES
              and not item.get_closest_marker("measures")):
            item.add_marker(pytest.mark.nojvm)


@pytest.fixture(autouse=True)
def _no_jvm_in_the_fast_tier(request, monkeypatch):
    """Fast tier only: starting Spark in-process, or a JVM or a Spark command as a subprocess, fails."""
    marked = request.node.get_closest_marker
    if not FAST_TIER or marked("spark") or marked("slow") and not marked("nojvm"):
        yield
        return
    name = request.node.nodeid

    def refuse(what: str):
        pytest.fail(f"{name} starts a JVM ({what}) but is not marked spark or slow", pytrace=False)

    import streamsched.pipeline.session as session

    monkeypatch.setattr(session, "spark_session", lambda *a, **k: refuse("spark_session"))
    popen_init = subprocess.Popen.__init__

    def guarded(self, args, *rest, **kwargs):
        argv = [str(a) for a in (args if isinstance(args, (list, tuple)) else [args])]
        if argv and (os.path.basename(argv[0]) in ("java", "spark-submit")
                     or any(a in SPARK_COMMANDS for a in argv[1:3]) and "streamsched" in " ".join(argv[:2])):
            refuse(" ".join(argv[:3]))
        popen_init(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", guarded)
    yield


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


def lab_missing() -> str | None:
    """Why the network lab cannot run here (not root, no iproute2, ...), or ``None``."""
    from streamsched.engines.flink import netlab

    try:
        netlab.check_machine(cpu=False)
    except netlab.LabError as exc:
        return str(exc)
    return None


@pytest.fixture(scope="session")
def flink_lab(tmp_path_factory):
    """The one local Flink 2.3 in a network lab of the test session (tests marked ``slow``):
    ``tm-1`` and ``tm-2`` (2 slots each) in network namespaces of their own behind 20 Mbit/s
    links each direction, the plugin on the JobManager (:mod:`streamsched.engines.flink.netlab`);
    stopped at the end of the session, also on failure."""
    import shutil

    if shutil.which("java") is None or shutil.which("javac") is None:
        pytest.skip("Java (JDK 17) is missing: the live Flink tests need java and javac")
    if lab_missing():
        pytest.skip(lab_missing())
    from streamsched.engines.flink import local, netlab, plugin

    plugin.build()
    base = tmp_path_factory.mktemp("flink-lab")
    cluster = local.start(base, taskmanagers=2, slots=2, rest_port=local.free_port(),
                          network=netlab.LabOptions(link_mbit=20))
    try:
        yield cluster
    finally:
        local.stop(base)
