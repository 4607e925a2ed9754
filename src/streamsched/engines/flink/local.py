"""A local Flink 2.3 session cluster from the ``apache-flink-libraries`` wheel's jars, with the
placement plugin (:mod:`streamsched.engines.flink.plugin`) on the JobManager's class path and
the adaptive scheduler, and an example job with heavy exchange (``streamsched flink-local``).

The processes are started as Flink's own scripts would start them (JVM options from Flink's
``BashJavaUtils``), each in its own process group, bound to 127.0.0.1; ``<dir>/cluster.json``
records their ids so that :func:`stop` ends exactly them. TaskManagers get the resource ids
``tm-1``, ``tm-2``, ... (``taskmanager.resource-id``) so plans can name them.

The example job is built by Flink's Table API in a client JVM that Python drives with py4j
(installed with pyspark) and submitted to the cluster (``execution.target: remote``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Mapping

from streamsched.engines.flink.plugin import PLAN_PROPERTY, flink_home, installed_jar
from streamsched.errors import InputError, StreamschedError

STATE_FILE = "cluster.json"
#: JVM options of every Flink process here: short-lived JVMs on a small machine start faster
#: with the C1 compiler only and one GC thread.
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
LOG4J = """rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FileAppender
appender.file.name = FileAppender
appender.file.type = FILE
appender.file.fileName = ${sys:log.file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{HH:mm:ss,SSS} %-5p %c{1} - %m%n
"""
#: Re-planning a running job at the same parallelism takes two rescales at least the cooldown
#: apart (Flink's default 30 s); the local cluster waits 5 s.
COOLDOWN = "5 s"


@dataclass
class LocalFlink:
    """A started cluster: REST URL, its directory (conf/, log/, plans/) and process ids."""

    url: str
    base: Path
    plans: Path | None
    pids: dict[str, int] = field(default_factory=dict)
    taskmanagers: int = 2
    slots: int = 2

    @property
    def logs(self) -> Path:
        return self.base / "log"

    def log_tail(self, lines: int = 30) -> str:
        out = []
        for path in sorted(self.logs.glob("*.log")) + sorted(self.logs.glob("*.out")):
            text = path.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(out)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _classpath(home: Path) -> list[str]:
    return [str(p) for p in sorted((home / "lib").glob("*.jar"))]


def _resource_params(home: Path, conf: Path, classpath: str, kind: str) -> tuple[list[str], list[str]]:
    """JVM options and dynamic properties of a JobManager (JM) or TaskManager (TM), computed by
    Flink's own BashJavaUtils from the configured process sizes, as its start scripts do."""
    run = subprocess.run(
        ["java", "-cp", str(home / "bin" / "bash-java-utils.jar") + os.pathsep + classpath,
         "org.apache.flink.runtime.util.bash.BashJavaUtils", f"GET_{kind}_RESOURCE_PARAMS", "--configDir", str(conf)],
        capture_output=True, text=True, timeout=120)
    results = [line.split(":", 1)[1] for line in run.stdout.splitlines() if line.startswith("BASH_JAVA_UTILS_EXEC_RESULT:")]
    if run.returncode != 0 or len(results) < 2:
        raise StreamschedError(f"Flink's BashJavaUtils ({kind}) failed: {(run.stdout + run.stderr)[-1000:]}")
    return results[0].split(), results[1].split()


def _get(url: str, timeout: float = 2.0):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.load(response)


def config_text(rest_port: int, rpc_port: int, base: Path, slots: int, jm_memory: str, tm_memory: str,
                extra: Mapping[str, str] = ()) -> str:
    """The cluster's config.yaml: everything on 127.0.0.1, other ports picked by the OS, the
    adaptive scheduler, checkpoints every 2 s (a rescale restores from the last one)."""
    settings = {
        "jobmanager.rpc.address": "127.0.0.1", "jobmanager.rpc.port": rpc_port, "jobmanager.bind-host": "127.0.0.1",
        "jobmanager.memory.process.size": jm_memory, "taskmanager.memory.process.size": tm_memory,
        "taskmanager.numberOfTaskSlots": slots, "taskmanager.bind-host": "127.0.0.1", "taskmanager.host": "127.0.0.1",
        "taskmanager.rpc.port": 0, "taskmanager.data.port": 0, "blob.server.port": 0,
        "metrics.internal.query-service.port": 0, "rest.address": "127.0.0.1", "rest.bind-address": "127.0.0.1",
        "rest.port": rest_port, "metrics.fetcher.update-interval": 2000, "web.refresh-interval": 500,
        "jobmanager.scheduler": "adaptive",
        "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling": COOLDOWN,
        "execution.checkpointing.interval": "2 s",
        "execution.checkpointing.dir": (base / "checkpoints").as_uri(),
        "execution.checkpointing.savepoint-dir": (base / "savepoints").as_uri(),
        "io.tmp.dirs": str(base / "tmp"), "web.tmpdir": str(base / "web"),
        **dict(extra),
    }
    return "".join(f"{key}: {json.dumps(value) if isinstance(value, str) else value}\n" for key, value in settings.items())


def start(base: str | Path, taskmanagers: int = 2, slots: int = 2, rest_port: int = 8081, jm_memory: str = "1024m",
          tm_memory: str = "1280m", plugin: bool = True, extra: Mapping[str, str] = (), wait_s: float = 120.0) -> LocalFlink:
    """Start a JobManager and ``taskmanagers`` TaskManagers (``slots`` slots each) in ``base``;
    return once the REST API shows them all. ``plugin``: the placement plugin first on the
    JobManager's class path, plans read from ``<base>/plans``. ``rest_port`` 0: a free port."""
    base = Path(base).resolve()
    if (base / STATE_FILE).exists() and _alive(load(base)):
        raise InputError(f"{base}: a local Flink runs there already ({load(base).url}); `streamsched flink-local stop`")
    if taskmanagers < 1 or slots < 1:
        raise InputError("--taskmanagers and --slots must be at least 1")
    home = flink_home()
    jar = installed_jar() if plugin else None
    rest_port = rest_port or free_port()
    conf, logs, plans = base / "conf", base / "log", base / "plans"
    for d in (conf, logs, plans):
        d.mkdir(parents=True, exist_ok=True)
    (conf / "config.yaml").write_text(config_text(rest_port, free_port(), base, slots, jm_memory, tm_memory, extra))
    (conf / "log4j.properties").write_text(LOG4J)
    classpath = os.pathsep.join(_classpath(home))
    jm_jvm, jm_dynamic = _resource_params(home, conf, classpath, "JM")
    tm_jvm, tm_dynamic = _resource_params(home, conf, classpath, "TM")
    cluster = LocalFlink(f"http://127.0.0.1:{rest_port}", base, plans if plugin else None, {}, taskmanagers, slots)
    roles = [("jobmanager", jm_jvm, jm_dynamic, "org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint")]
    roles += [(f"tm-{k}", tm_jvm, [*tm_dynamic, "-D", f"taskmanager.resource-id=tm-{k}"],
               "org.apache.flink.runtime.taskexecutor.TaskManagerRunner") for k in range(1, taskmanagers + 1)]
    try:
        for name, jvm, dynamic, main in roles:
            cp, options = classpath, []
            if name == "jobmanager" and jar is not None:  # before flink-dist: our DefaultSlotAssigner is loaded
                cp, options = str(jar) + os.pathsep + classpath, [f"-D{PLAN_PROPERTY}={plans}"]
            command = ["java", *JVM_OPTIONS, *jvm, *options, f"-Dlog.file={logs / (name + '.log')}",
                       f"-Dlog4j.configurationFile=file:{conf / 'log4j.properties'}",
                       "-cp", cp, main, "--configDir", str(conf), *dynamic]
            with open(logs / f"{name}.out", "w") as out:
                proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
            cluster.pids[name] = proc.pid
        _save(cluster)
        deadline = time.time() + wait_s
        while True:
            dead = [name for name, pid in cluster.pids.items() if not _pid_alive(pid)]
            if dead:
                raise StreamschedError(f"Flink {', '.join(dead)} exited:\n{cluster.log_tail()}")
            try:
                overview = _get(f"{cluster.url}/overview")
                if overview.get("taskmanagers") == taskmanagers and overview.get("slots-total") == taskmanagers * slots:
                    return cluster
            except (OSError, ValueError):
                pass
            if time.time() > deadline:
                raise StreamschedError(f"Flink REST API not ready after {wait_s:g} s:\n{cluster.log_tail()}")
            time.sleep(0.5)
    except BaseException:
        stop(base)
        raise


def _save(cluster: LocalFlink) -> None:
    data = {**asdict(cluster), "base": str(cluster.base), "plans": str(cluster.plans) if cluster.plans else None}
    (cluster.base / STATE_FILE).write_text(json.dumps(data, indent=1))


def load(base: str | Path) -> LocalFlink:
    """The cluster recorded in ``base`` by :func:`start`."""
    path = Path(base).resolve() / STATE_FILE
    try:
        data = json.loads(path.read_text())
        return LocalFlink(data["url"], Path(data["base"]), Path(data["plans"]) if data["plans"] else None,
                          {str(k): int(v) for k, v in data["pids"].items()}, int(data["taskmanagers"]), int(data["slots"]))
    except FileNotFoundError:
        raise InputError(f"{path}: no local Flink was started there (`streamsched flink-local start --dir ...`)") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: not a local Flink record ({exc})") from None


def _pid_alive(pid: int) -> bool:
    try:
        waited, _status = os.waitpid(pid, os.WNOHANG)  # reaps our own child that exited
        if waited == pid:
            return False
    except ChildProcessError:
        pass  # not our child (started by another command): ask the kernel
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _ours(cluster: LocalFlink, pid: int) -> bool:
    """``pid`` runs and is one of this cluster's JVMs (its command line names the cluster's
    directory): a recorded id that the system gave to another process since is left alone."""
    if not _pid_alive(pid):
        return False
    try:
        return str(cluster.base).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc: trust the record


def _alive(cluster: LocalFlink) -> bool:
    return any(_ours(cluster, pid) for pid in cluster.pids.values())


def stop(base: str | Path, timeout_s: float = 20.0) -> list[str]:
    """End the process groups :func:`start` recorded in ``base`` (SIGTERM, then SIGKILL after
    ``timeout_s``); the names of those that were running."""
    cluster = load(base)
    stopped = []
    for name, pid in cluster.pids.items():
        if _ours(cluster, pid):
            stopped.append(name)
            try:
                os.killpg(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.time() + timeout_s
    for name, pid in cluster.pids.items():
        if name not in stopped:
            continue
        while _pid_alive(pid) and time.time() < deadline:
            time.sleep(0.1)
        if _pid_alive(pid):
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    (cluster.base / STATE_FILE).unlink(missing_ok=True)
    return stopped


# ---------------------------------------------------------------------------- example job
EXAMPLE_NAME = "streamsched-example"


def example_sql(rate: int, record_bytes: int, source_parallelism: int, keys: int) -> list[str]:
    """The example job: datagen ``events`` (``source_parallelism``) -REBALANCE-> Calc -HASH->
    GroupAggregate -> blackhole (``parallelism.default``). Each record carries a random string of
    ``record_bytes`` characters over both exchanges (the aggregate keeps its largest value)."""
    return [
        f"""CREATE TABLE events (k INT, v BIGINT, pad STRING) WITH ('connector' = 'datagen',
            'rows-per-second' = '{rate}', 'fields.k.min' = '0', 'fields.k.max' = '{keys - 1}',
            'fields.pad.length' = '{record_bytes}', 'scan.parallelism' = '{source_parallelism}')""",
        "CREATE TABLE sink (k INT, c BIGINT, s BIGINT, m STRING) WITH ('connector' = 'blackhole')",
        "INSERT INTO sink SELECT k, COUNT(*), SUM(v), MAX(pad) FROM "
        "(SELECT k, v, UPPER(pad) AS pad FROM events WHERE v <> 0) GROUP BY k",
    ]


class ExampleClient:
    """A client JVM (Flink's Table API through py4j) that builds the example job; may be made
    while the cluster starts (the JVM's start is most of a submission's time)."""

    def __init__(self, rest_port: int, logs: Path, rate: int = 2000, record_bytes: int = 500,
                 parallelism: int = 3, source_parallelism: int = 2, keys: int = 1000, name: str = EXAMPLE_NAME,
                 extra: Mapping[str, str] = ()) -> None:
        if not (100 <= record_bytes <= 1_000_000) or rate < 1 or parallelism < 1 or source_parallelism < 1 or keys < 1:
            raise InputError("example job: --record-bytes 100..1000000, --rate, --parallelism, --keys >= 1")
        from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway

        home = flink_home()
        logs.mkdir(parents=True, exist_ok=True)
        log4j = logs / "client-log4j.properties"
        log4j.write_text(LOG4J)
        port, self.proc = launch_gateway(
            classpath=os.pathsep.join(_classpath(home)), die_on_exit=True, return_proc=True,
            javaopts=[*JVM_OPTIONS, "-Xmx512m", f"-Dlog4j.configurationFile=file:{log4j}",
                      f"-Dlog.file={logs / 'client.log'}"])
        self.gateway = JavaGateway(gateway_parameters=GatewayParameters(port=port, auto_convert=True))
        try:
            jvm = self.gateway.jvm
            conf = jvm.org.apache.flink.configuration.Configuration()
            for key, value in {"execution.target": "remote", "rest.address": "127.0.0.1", "rest.port": str(rest_port),
                               "pipeline.name": name, "parallelism.default": str(parallelism),
                               # checkpoints: a rescale restores the job's state from the last one
                               "execution.checkpointing.interval": "2 s", **dict(extra)}.items():
                conf.setString(key, value)
            env = jvm.org.apache.flink.streaming.api.environment.StreamExecutionEnvironment(conf)
            tenv = jvm.org.apache.flink.table.api.bridge.java.StreamTableEnvironment.create(env)
            *ddl, insert = example_sql(rate, record_bytes, source_parallelism, keys)
            for statement in ddl:
                tenv.executeSql(statement)
            self.statements = tenv.createStatementSet()
            self.statements.addInsertSql(insert)
        except BaseException:
            self.close()
            raise

    def submit(self) -> str:
        """Submit the job; its JobID."""
        result = self.statements.execute()
        return result.getJobClient().get().getJobID().toString()

    def close(self) -> None:
        gateway, proc, self.gateway, self.proc = self.gateway, self.proc, None, None
        try:
            if gateway is not None:
                gateway.shutdown()
        finally:
            if proc is not None:
                if proc.poll() is None:
                    proc.kill()
                proc.wait(timeout=30)


def wait_flowing(url: str, job_id: str, timeout_s: float = 90.0) -> None:
    """Return once every vertex of the job runs and every one but the first has read records."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = _get(f"{url}/jobs/{job_id}")
        if job["state"] == "RUNNING" and all(v["status"] == "RUNNING" for v in job["vertices"]) \
                and all(v["metrics"].get("read-records", 0) > 0 for v in job["vertices"][1:]):
            return
        time.sleep(0.5)
    raise StreamschedError(f"job {job_id} at {url} did not run with records flowing within {timeout_s:g} s")


def submit_example(url: str, logs: Path, **options) -> str:
    """Build and submit the example job to the cluster at ``url`` (127.0.0.1); its JobID."""
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    client = ExampleClient(port, logs, **options)
    try:
        return client.submit()
    finally:
        client.close()
