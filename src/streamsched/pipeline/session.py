"""The Spark session the pipeline runs on: local by default, any master Spark accepts.

On a cluster master (``spark://``, ``yarn``, ``k8s://``) the job ships streamsched itself: a zip
of the installed package, built once per content and cached, goes to the executors with
``addPyFile``; the executors' Python then needs only :data:`EXECUTOR_MODULES`, which the first
job checks (one line naming what is missing on which host). Paths are made absolute on the
driver (:func:`resolve_path`): an executor's working directory is not the user's.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import warnings
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from py4j.java_gateway import JavaGateway
from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

import streamsched
from streamsched.errors import InputError

log = logging.getLogger(__name__)

# pandas is installed for ortools; the pipeline's Arrow functions do not use it, and PySpark
# warns about pandas >= 3 on every mapInArrow / applyInArrow.
warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)

#: Spark's log4j2 configuration unless ``--verbose``: errors only (the start-up lines come
#: before ``setLogLevel`` could silence them).
QUIET_LOG4J2 = Path(streamsched.__file__).parent / "data" / "log4j2-quiet.properties"


def verbose() -> bool:
    """``--verbose`` given (the ``streamsched`` logger logs DEBUG)."""
    return logging.getLogger("streamsched").isEnabledFor(logging.DEBUG)

#: What the executors' Python must provide besides pyspark (shipped by Spark) and streamsched
#: (shipped by :func:`ship_package`): the modules the pipeline's tasks import.
EXECUTOR_MODULES = ("numpy", "pyarrow", "scipy", "yaml")


def spark_session(master: str = "local[2]", memory: str = "2g") -> SparkSession:
    """The active session if there is one, else a new one; ``master`` is ``local[N]``,
    ``spark://host:7077``, ``yarn``...

    Settings verified for PySpark 4 (../shared/reference/formats.md): UI off, UTC, few shuffle
    partitions and no adaptive execution on one machine, ANSI mode left on (casts go through
    ``try_cast``).
    """
    active = SparkSession.getActiveSession()
    if active is not None:  # e.g. the test suite's session, or a notebook's: leave its settings
        return active
    conf = (
        SparkConf().setMaster(master)
        .setAppName("streamsched-pipeline")
        .set("spark.ui.enabled", "false")
        .set("spark.sql.session.timeZone", "UTC")
        .set("spark.driver.memory", memory)
        .set("spark.ui.showConsoleProgress", "false")
    )
    if is_local(master):
        # Few shuffle partitions on one machine, chosen here (and by the ingest's explicit
        # repartitions), so adaptive execution has nothing to coalesce; it would only re-plan
        # between the stages of every job (about half a second an ingest, measured).
        conf.set("spark.sql.shuffle.partitions", "4").set("spark.sql.adaptive.enabled", "false")
    loud = verbose()
    if not loud and QUIET_LOG4J2.is_file():
        conf.set("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={QUIET_LOG4J2.as_uri()}")
    own_workers = is_local(master) and not os.environ.get("PYSPARK_PYTHON")
    home = compiled_workers_home() if own_workers and "SPARK_HOME" not in os.environ else None
    if home is not None:
        os.environ["SPARK_HOME"] = str(home)  # read once, when PySpark launches the JVM
    try:
        if SparkContext._gateway is None:  # this process's first JVM: launched here, its stderr read
            SparkContext(conf=conf, gateway=_gateway(conf, loud))
        else:
            SparkContext.getOrCreate(conf)
        session = SparkSession.builder.getOrCreate()  # the SQL settings come with the context's conf
    finally:
        if home is not None:
            del os.environ["SPARK_HOME"]
    session.sparkContext.setLogLevel("INFO" if loud else "ERROR")
    if own_workers:
        session.sparkContext.pythonExec = sys.executable  # our session: its workers run our interpreter
    if not is_local(master):
        ship_package(session)
        check_executors(session)
    return session


#: What Spark's launcher makes the JVM print on stderr at every start (its default options
#: add ``--add-modules=jdk.incubator.vector``); no JVM option silences it.
JVM_START_WARNING = b"WARNING: Using incubator modules:"


def _gateway(conf: SparkConf, loud: bool) -> JavaGateway:
    """PySpark's JVM launched with its stderr read by a daemon thread, which passes every line
    on to ours except, unless ``loud``, the launcher's :data:`JVM_START_WARNING`: a command that
    fails on bad input prints its one error line, not that line too."""
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    if gateway.proc is None:  # under spark-submit: its JVM was there already
        return gateway

    def forward(stream: IO[bytes]) -> None:
        for line in stream:
            if loud or not line.startswith(JVM_START_WARNING):
                os.write(2, line)

    threading.Thread(target=forward, args=(gateway.proc.stderr,), name="spark-jvm-stderr", daemon=True).start()
    return gateway


def compiled_workers_home() -> Path | None:
    """A Spark home for a local session whose Python workers run our interpreter: links to the
    installed PySpark's ``bin``, ``jars`` and ``sbin``, without its ``python/lib/pyspark.zip``.

    Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on the workers' ``PYTHONPATH``; a
    zip of sources has no compiled bytecode, so the daemon and every worker compile PySpark's
    modules again at each start (0.65 s of CPU, measured with ``-X importtime``). Without the
    zip the workers import the same PySpark, as installed and compiled, from our interpreter's
    site-packages. Built once per PySpark installation under the user's cache; None (Spark's
    own home is used) when it cannot be built."""
    import pyspark

    installed = Path(pyspark.__file__).parent
    digest = hashlib.sha256(str(installed).encode()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "streamsched"
    home = cache / f"spark-home-{pyspark.__version__}-{digest}"
    if (home / "bin" / "spark-submit").is_file() and (home / "jars").is_dir():
        return home
    shutil.rmtree(home, ignore_errors=True)  # links left dangling by an installation since removed
    building = None
    try:
        cache.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(dir=cache, prefix=".spark-home-"))
        for name in ("bin", "jars", "sbin"):
            if (installed / name).exists():
                (building / name).symlink_to(installed / name)
        os.replace(building, home)  # atomic; a concurrent builder made the same links
    except OSError as exc:
        if building is not None:
            shutil.rmtree(building, ignore_errors=True)
        log.debug("no Spark home without pyspark.zip (%s): the workers import PySpark's zip", exc)
    return home if (home / "bin" / "spark-submit").is_file() else None


def is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def resolve_path(path: str | Path, master: str) -> Path:
    """``path`` made absolute on the driver (an executor's working directory is not the user's),
    with a warning on a cluster master: every executor must see the file at that path (a
    shared file system)."""
    resolved = Path(path).resolve()
    if not is_local(master):
        log.warning("%s is a local path: every executor of %s must see it at the same place", resolved, master)
    return resolved


def package_zip() -> Path:
    """A zip of the streamsched package as installed, cached under its content hash."""
    root = Path(streamsched.__file__).parent
    files = sorted(f for f in root.rglob("*") if f.is_file() and "__pycache__" not in f.parts)
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "streamsched"
    target = cache / f"streamsched-{streamsched.__version__}-{digest.hexdigest()[:16]}.zip"
    if not target.exists():
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=cache, suffix=".zip.tmp", delete=False) as tmp:
            with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
                for f in files:
                    archive.write(f, Path("streamsched") / f.relative_to(root))
        os.replace(tmp.name, target)  # atomic: a concurrent builder writes the same bytes
    return target


def ship_package(spark: SparkSession) -> Path:
    """Add :func:`package_zip` to the session's jobs (executors import streamsched from it)."""
    archive = package_zip()
    spark.sparkContext.addPyFile(str(archive))
    return archive


def _missing_modules(_: Iterator) -> Iterator[tuple[str, str, list[str]]]:
    import importlib.util

    missing = [m for m in EXECUTOR_MODULES if importlib.util.find_spec(m) is None]
    yield socket.gethostname(), sys.executable, missing


def check_executors(spark: SparkSession) -> None:
    """One small job over the cluster: ``InputError`` naming each host whose executor Python
    lacks one of :data:`EXECUTOR_MODULES`."""
    sc = spark.sparkContext
    slots = max(sc.defaultParallelism, 1)
    found = sc.parallelize(range(slots), slots).mapPartitions(_missing_modules).collect()
    lacking = sorted({(host, python, ", ".join(missing)) for host, python, missing in found if missing})
    if lacking:
        where = "; ".join(f"{host} ({python}) lacks {names}" for host, python, names in lacking)
        raise InputError(f"executors cannot run the pipeline: {where} (install them in the executors' Python, "
                         f"or name one that has them with spark.pyspark.python)")


#: Job group of :func:`warm_python_workers`' job.
WARM_UP_GROUP = "streamsched-warm-up"


#: What the ingest's tasks import (numpy and pyarrow among them).
TASK_MODULES = ("streamsched.pipeline.blocks", "streamsched.pipeline.merge")


def _import_task_modules(batches: Iterator) -> Iterator:
    for name in TASK_MODULES:
        importlib.import_module(name)
    yield from batches


def warm_python_workers(spark: SparkSession) -> None:
    """Start the session's Python workers (one per core) and import the pipeline's task modules
    in them. A fresh session's first Python job waits seconds for that (the JVM's Arrow
    runner, the daemon and its workers importing PySpark, pandas and pyarrow); run in the
    background, it overlaps the command's own planning, and the workers are reused by the
    command's jobs (``spark.python.worker.reuse``). A failure is only logged: the command's
    own first job meets the same cause and reports it."""
    sc = spark.sparkContext
    try:
        with python_workers(spark):
            sc.setJobGroup(WARM_UP_GROUP, "start the Python workers")
            frame = spark.range(sc.defaultParallelism, numPartitions=sc.defaultParallelism)
            frame.mapInArrow(_import_task_modules, frame.schema).collect()
    except Exception as exc:  # noqa: BLE001  (Py4J, Spark's and the workers' errors alike)
        log.debug("warming the Python workers failed: %s", exc)


@contextmanager
def python_workers(spark: SparkSession) -> Iterator[None]:
    """Python functions shipped to Spark inside this block run in the driver's interpreter when
    the master is local and neither ``spark.pyspark.python`` nor ``PYSPARK_PYTHON`` names one
    (executors of a cluster need streamsched installed in the interpreter those name)."""
    sc = spark.sparkContext
    configured = sc.getConf().get("spark.pyspark.python", None) or os.environ.get("PYSPARK_PYTHON")
    previous = sc.pythonExec
    if is_local(sc.master) and not configured:
        sc.pythonExec = sys.executable
    try:
        yield
    finally:
        sc.pythonExec = previous
