"""A local Flink 2.3 session cluster from the ``apache-flink-libraries`` wheel's jars, with the
placement plugin (:mod:`streamsched.engines.flink.plugin`) on the JobManager's class path and
the adaptive scheduler, and an example job with heavy exchange (``streamsched flink-local``).

The processes are started as Flink's own scripts would start them (JVM options from Flink's
``BashJavaUtils``), each in its own process group, bound to 127.0.0.1; ``<dir>/cluster.json``
records their ids (each as it starts) so that :func:`stop` ends exactly them. TaskManagers get the
resource ids ``tm-1``, ``tm-2``, ... (``taskmanager.resource-id``) so plans can name them.

With a network lab (:mod:`streamsched.engines.flink.netlab`, ``network=``) the JobManager binds
RPC and blob on the lab's bridge (REST stays on 127.0.0.1), each TaskManager runs in its own
network namespace behind its shaped link (and its cgroup, under a CPU quota), and
``<dir>/cluster.yaml`` describes the TaskManagers as a streamsched cluster (CPU, link in/out).

The example job is built by Flink's Table API in a client JVM that Python drives with py4j
(installed with pyspark) and submitted to the cluster (``execution.target: remote``).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import yaml

from streamsched.engines.flink import netlab
from streamsched.engines.flink.plugin import PLAN_PROPERTY, flink_home, installed_jar
from streamsched.errors import InputError, StreamschedError

STATE_FILE = "cluster.json"
CLUSTER_FILE = "cluster.yaml"
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
    #: start returned (a record without it is a start that crashed: the next start cleans it)
    ready: bool = False
    #: the streamsched cluster file of a network lab (None without a lab)
    cluster_file: str | None = None

    @property
    def logs(self) -> Path:
        return self.base / "log"

    def log_tail(self, lines: int = 30) -> str:
        out = []
        for path in sorted(self.logs.glob("*.log")) + sorted(self.logs.glob("*.out")):
            text = path.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(out)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
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
                extra: Mapping[str, str] = (), jm_address: str = "127.0.0.1", blob_port: int = 0) -> str:
    """The cluster's config.yaml: REST on 127.0.0.1, the JobManager's RPC and blob on
    ``jm_address`` (a lab's bridge), other ports picked by the OS, the adaptive scheduler,
    checkpoints every 2 s (a rescale restores from the last one)."""
    settings = {
        "jobmanager.rpc.address": jm_address, "jobmanager.rpc.port": rpc_port, "jobmanager.bind-host": jm_address,
        "jobmanager.memory.process.size": jm_memory, "taskmanager.memory.process.size": tm_memory,
        "taskmanager.numberOfTaskSlots": slots, "taskmanager.bind-host": "127.0.0.1", "taskmanager.host": "127.0.0.1",
        "taskmanager.rpc.port": 0, "taskmanager.data.port": 0, "blob.server.port": blob_port,
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
          tm_memory: str = "1280m", plugin: bool = True, extra: Mapping[str, str] = (), wait_s: float = 120.0,
          network: netlab.LabOptions | None = None) -> LocalFlink:
    """Start a JobManager and ``taskmanagers`` TaskManagers (``slots`` slots each) in ``base``;
    return once the REST API shows them all. ``plugin``: the placement plugin first on the
    JobManager's class path, plans read from ``<base>/plans``. ``rest_port`` 0: a free port.
    ``network``: in a network lab (:mod:`~streamsched.engines.flink.netlab`), its cluster file
    written to ``<base>/cluster.yaml``. What a crashed start left in ``base`` is removed first."""
    base = Path(base).resolve()
    if taskmanagers < 1 or slots < 1:
        raise InputError("--taskmanagers and --slots must be at least 1")
    base.mkdir(parents=True, exist_ok=True)
    with _start_lock(base):
        return _start(base, taskmanagers, slots, rest_port, jm_memory, tm_memory, plugin, extra, wait_s, network)


class _start_lock:
    """An exclusive lock on ``<base>/.start.lock`` while a start runs (released by the kernel if
    that process dies): a second start in the same directory is refused, not interleaved."""

    def __init__(self, base: Path) -> None:
        self.path = base / ".start.lock"

    def __enter__(self) -> None:
        self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            raise InputError(f"{self.path.parent}: another `flink-local start` runs there now") from None

    def __exit__(self, *exc) -> None:
        os.close(self.fd)


def _megabytes(size: str) -> float:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([mg])b?\s*", size.lower())
    if not match:
        raise InputError(f"--tm-memory {size!r}: expected megabytes or gigabytes, e.g. 1280m or 2g")
    return float(match[1]) * (1024 if match[2] == "g" else 1)


def _start(base: Path, taskmanagers: int, slots: int, rest_port: int, jm_memory: str, tm_memory: str, plugin: bool,
           extra: Mapping[str, str], wait_s: float, network: netlab.LabOptions | None) -> LocalFlink:
    if (base / STATE_FILE).exists():
        previous = load(base)
        if previous.ready and _alive(previous):
            raise InputError(f"{base}: a local Flink runs there already ({previous.url}); `streamsched flink-local stop`")
        stop(base)  # a crashed start's or a dead cluster's leftovers
    if network is not None:
        network.check(taskmanagers)
        netlab.check_machine(cpu=bool(network.cpu_quota))
        ram_mb = _megabytes(tm_memory)
    home = flink_home()
    jar = installed_jar() if plugin else None
    rest_port = rest_port or free_port()
    conf, logs, plans = base / "conf", base / "log", base / "plans"
    for d in (conf, logs, plans):
        d.mkdir(parents=True, exist_ok=True)
    cluster = LocalFlink(f"http://127.0.0.1:{rest_port}", base, plans if plugin else None, {}, taskmanagers, slots)
    _save(cluster)
    try:
        lab = netlab.create(base, taskmanagers, network) if network is not None else None
        if lab is None:
            text = config_text(rest_port, free_port(), base, slots, jm_memory, tm_memory, extra)
        else:
            text = config_text(rest_port, free_port(lab.bridge_address), base, slots, jm_memory, tm_memory, extra,
                               jm_address=lab.bridge_address, blob_port=free_port(lab.bridge_address))
        (conf / "config.yaml").write_text(text)
        (conf / "log4j.properties").write_text(LOG4J)
        classpath = os.pathsep.join(_classpath(home))
        jm_jvm, jm_dynamic = _resource_params(home, conf, classpath, "JM")
        tm_jvm, tm_dynamic = _resource_params(home, conf, classpath, "TM")
        roles = [("jobmanager", jm_jvm, jm_dynamic, "org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint")]
        for k in range(1, taskmanagers + 1):
            dynamic = [*tm_dynamic, "-D", f"taskmanager.resource-id=tm-{k}"]
            if lab is not None:
                address = lab.tm(f"tm-{k}").address
                dynamic += ["-D", f"taskmanager.host={address}", "-D", f"taskmanager.bind-host={address}"]
            roles.append((f"tm-{k}", tm_jvm, dynamic, "org.apache.flink.runtime.taskexecutor.TaskManagerRunner"))
        for name, jvm, dynamic, main in roles:
            cp, options = classpath, []
            if name == "jobmanager" and jar is not None:  # before flink-dist: our DefaultSlotAssigner is loaded
                cp, options = str(jar) + os.pathsep + classpath, [f"-D{PLAN_PROPERTY}={plans}"]
            command = ["java", *JVM_OPTIONS, *jvm, *options, f"-Dlog.file={logs / (name + '.log')}",
                       f"-Dlog4j.configurationFile=file:{conf / 'log4j.properties'}",
                       "-cp", cp, main, "--configDir", str(conf), *dynamic]
            if lab is not None and name != "jobmanager":  # its cgroup, then its namespace; the pid stays the JVM's
                command = [*netlab.launch_prefix(lab, name), *command]
            with open(logs / f"{name}.out", "w") as out:  # plugins (metric reporters) as Flink's scripts find them
                proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True, env={**os.environ, "FLINK_PLUGINS_DIR": str(home / "plugins")})
            cluster.pids[name] = proc.pid
            _save(cluster)
        if lab is not None:
            cluster.cluster_file = str(base / CLUSTER_FILE)
            machines = netlab.cluster_of(lab, slots, ram_mb)
            Path(cluster.cluster_file).write_text(yaml.safe_dump(machines.to_dict(), sort_keys=False))
        deadline = time.time() + wait_s
        while True:
            dead = [name for name, pid in cluster.pids.items() if not _pid_alive(pid)]
            if dead:
                raise StreamschedError(f"Flink {', '.join(dead)} exited:\n{cluster.log_tail()}")
            try:
                overview = _get(f"{cluster.url}/overview")
                if overview.get("taskmanagers") == taskmanagers and overview.get("slots-total") == taskmanagers * slots:
                    cluster.ready = True
                    _save(cluster)
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
                          {str(k): int(v) for k, v in data["pids"].items()}, int(data["taskmanagers"]), int(data["slots"]),
                          bool(data.get("ready", True)), data.get("cluster_file"))
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
    ``timeout_s``) and remove its network lab (:func:`~streamsched.engines.flink.netlab.teardown`:
    every process, namespace, link and cgroup of the lab, also where no record names them); the
    names of the processes that were running and of what the lab removed. A Prometheus started
    beside it (``flink-local start --prometheus``, :mod:`.prometheus`) is stopped too."""
    from streamsched.engines.flink import prometheus

    prometheus_stopped = ["prometheus"] if prometheus.stop(base) else []
    if not (Path(base).resolve() / STATE_FILE).exists():
        removed = netlab.teardown(base)
        if removed or prometheus_stopped:
            return removed + prometheus_stopped
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
    stopped += netlab.teardown(cluster.base)
    (cluster.base / STATE_FILE).unlink(missing_ok=True)
    return stopped + prometheus_stopped


def taskmanager_cpu_seconds(pids: Mapping[str, int]) -> dict[str, float]:
    """Per TaskManager of a local cluster (``tm-k`` of :attr:`LocalFlink.pids`): its JVM's CPU
    time so far, user + system over all threads, read now from /proc/PID/stat. (Flink's
    ``Status.JVM.CPU.Time`` through REST comes from the JobManager's metric cache, refreshed once
    per fetch interval: two readings a window apart span one refresh or two, which once gave
    0.84 cores to a TaskManager under a 0.2-core quota.)"""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for name, pid in pids.items():
        if name.startswith("tm-"):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            out[name] = (int(fields[11]) + int(fields[12])) / tick  # utime and stime, fields 14 and 15
    return out


# ---------------------------------------------------------------------------- example job
EXAMPLE_NAME = "streamsched-example"


#: The example job's kinds: ``example`` (the default), ``cpu`` (a CPU-heavy Calc: the record's
#: string hashed ``HEAVY_ROUNDS`` times, for machines of unequal power), ``skewed`` (a share
#: ``SKEW`` of the records carries key 0: one aggregate subtask receives most of the exchange),
#: ``shifting`` (like ``skewed``, but the hot key changes at given wall-clock times:
#: :data:`SHIFT_KEYS`, :func:`shift_sql`), ``bounded`` (ids 1..``rows`` once each, written to files
#: in ``sink_dir``: what a sink holds after rescales can be counted, :func:`count_bounded`).
EXAMPLE_KINDS = ("example", "cpu", "skewed", "shifting", "bounded")
HEAVY_ROUNDS = 12
SKEW = 0.7
#: ``shifting``'s hot key before and after a shift. At parallelism 3 they land on different
#: GroupAggregate subtasks, 2 and 0 (Flink's ``KeyGroupRangeAssignment`` on the key's
#: ``BinaryRowData``, 128 key groups or 32768 alike: computed with Flink 2.3's own classes, and
#: measured on the job's per-subtask bytes, tests/test_live_loop_live.py).
SHIFT_KEYS = (0, 4)


def shift_sql(times: Sequence[int]) -> str:
    """The hot key as SQL: ``SHIFT_KEYS[0]`` before the first of ``times`` (Unix seconds,
    increasing), then ``SHIFT_KEYS[1]``, ``SHIFT_KEYS[0]``, ... alternately from each time on.
    ``UNIX_TIMESTAMP()`` without an argument is evaluated per record in a streaming job (it is not
    deterministic, so never folded into a constant)."""
    cases = " ".join(f"WHEN UNIX_TIMESTAMP() < {t} THEN {SHIFT_KEYS[i % 2]}" for i, t in enumerate(times))
    return f"CASE {cases} ELSE {SHIFT_KEYS[len(times) % 2]} END"


def example_sql(rate: int, record_bytes: int, source_parallelism: int, keys: int, kind: str = "example",
                rows: int = 0, sink_dir: str | Path | None = None, shift_at: Sequence[int] = ()) -> list[str]:
    """The example job: datagen ``events`` (``source_parallelism``) -REBALANCE-> Calc -HASH->
    GroupAggregate -> blackhole (``parallelism.default``). Each record carries a random string of
    ``record_bytes`` characters over both exchanges (the aggregate keeps its largest value);
    ``kind`` (:data:`EXAMPLE_KINDS`) changes what Calc computes.

    ``bounded``: datagen's ``sequence`` ids 1..``rows`` (each once; the legacy datagen source keeps
    the ids it has yet to send in its checkpointed state and emits under the checkpoint lock, so a
    restore neither repeats nor skips any; datagen's ``number-of-rows`` would not do: its count of
    rows sent is not checkpointed) -REBALANCE-> Calc -> a ``filesystem`` sink of CSV files in
    ``sink_dir`` (files committed when a checkpoint completes: with exactly-once checkpoints each
    id lands once).

    ``shifting``: the hot key changes at each of ``shift_at`` (Unix seconds, :func:`shift_sql`)."""
    if kind not in EXAMPLE_KINDS:
        raise InputError(f"example job: kind {kind!r} is not one of {', '.join(EXAMPLE_KINDS)}")
    shift_at = [int(t) for t in shift_at]
    if kind == "shifting" and (not shift_at or min(shift_at) < 0 or shift_at != sorted(set(shift_at))):
        raise InputError(f"example job: kind shifting needs --shift-at, increasing Unix seconds >= 0 (got {shift_at})")
    if kind != "shifting" and shift_at:
        raise InputError("example job: --shift-at is for kind shifting only")
    if kind == "bounded":
        if rows < 1 or sink_dir is None:
            raise InputError("example job: kind bounded needs a number of rows >= 1 and a sink directory")
        return [
            f"""CREATE TABLE events (id BIGINT, pad STRING) WITH ('connector' = 'datagen',
                'rows-per-second' = '{rate}', 'fields.id.kind' = 'sequence', 'fields.id.start' = '1',
                'fields.id.end' = '{rows}', 'fields.pad.length' = '{record_bytes}',
                'scan.parallelism' = '{source_parallelism}')""",
            f"""CREATE TABLE sink (id BIGINT, m STRING) WITH ('connector' = 'filesystem',
                'path' = '{Path(sink_dir).resolve().as_uri()}', 'format' = 'csv')""",
            "INSERT INTO sink SELECT id, SUBSTRING(UPPER(pad), 1, 8) FROM events",
        ]
    key, pad = "k", "UPPER(pad)"
    if kind == "cpu":
        for _ in range(HEAVY_ROUNDS):
            pad = f"SHA512({pad})"
        pad = f"CONCAT({pad}, SUBSTRING(pad, 129))"  # the record keeps its size
    elif kind == "skewed":
        key = f"CASE WHEN MOD(ABS(v), 1000) < {int(SKEW * 1000)} THEN 0 ELSE k END"
    elif kind == "shifting":
        key = f"CASE WHEN MOD(ABS(v), 1000) < {int(SKEW * 1000)} THEN {shift_sql(shift_at)} ELSE k END"
    return [
        f"""CREATE TABLE events (k INT, v BIGINT, pad STRING) WITH ('connector' = 'datagen',
            'rows-per-second' = '{rate}', 'fields.k.min' = '0', 'fields.k.max' = '{keys - 1}',
            'fields.pad.length' = '{record_bytes}', 'scan.parallelism' = '{source_parallelism}')""",
        "CREATE TABLE sink (k INT, c BIGINT, s BIGINT, m STRING) WITH ('connector' = 'blackhole')",
        "INSERT INTO sink SELECT k, COUNT(*), SUM(v), MAX(pad) FROM "
        f"(SELECT {key} AS k, v, {pad} AS pad FROM events WHERE v <> 0) GROUP BY k",
    ]


class ExampleClient:
    """A client JVM (Flink's Table API through py4j) that builds the example job; may be made
    while the cluster starts (the JVM's start is most of a submission's time)."""

    def __init__(self, rest_port: int, logs: Path, rate: int = 2000, record_bytes: int = 500,
                 parallelism: int = 3, source_parallelism: int = 2, keys: int = 1000, name: str = EXAMPLE_NAME,
                 extra: Mapping[str, str] = (), host: str = "127.0.0.1", kind: str = "example", rows: int = 0,
                 sink_dir: str | Path | None = None, shift_at: Sequence[int] = ()) -> None:
        if not (100 <= record_bytes <= 1_000_000) or rate < 1 or parallelism < 1 or source_parallelism < 1 or keys < 1:
            raise InputError("example job: --record-bytes 100..1000000, --rate, --parallelism, --keys >= 1")
        statements = example_sql(rate, record_bytes, source_parallelism, keys, kind, rows, sink_dir, shift_at)
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
            for key, value in {"execution.target": "remote", "rest.address": host, "rest.port": str(rest_port),
                               "pipeline.name": name, "parallelism.default": str(parallelism),
                               # checkpoints: a rescale restores the job's state from the last one
                               "execution.checkpointing.interval": "2 s", **dict(extra)}.items():
                conf.setString(key, value)
            env = jvm.org.apache.flink.streaming.api.environment.StreamExecutionEnvironment(conf)
            tenv = jvm.org.apache.flink.table.api.bridge.java.StreamTableEnvironment.create(env)
            *ddl, insert = statements
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


def count_bounded(sink_dir: str | Path) -> list[int]:
    """The ids the ``bounded`` example job's sink committed: the first CSV field of every line
    of its finished files (Flink's in-progress and pending files start with a dot: not counted)."""
    ids = []
    for path in sorted(Path(sink_dir).rglob("*")):
        if path.is_file() and not path.name.startswith((".", "_")):
            ids += [int(line.split(",", 1)[0]) for line in path.read_text().splitlines() if line.strip()]
    return ids


def submit_example(url: str, logs: Path, **options) -> str:
    """Build and submit the example job to the Flink 2.3 cluster whose REST API is at ``url``
    (e.g. ``http://127.0.0.1:8081``); its JobID."""
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 8081)
    except ValueError:
        raise InputError(f"--url {url!r}: not a REST URL with a valid port") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"--url {url!r}: expected http://HOST:PORT")
    client = ExampleClient(port, logs, host=parts.hostname, **options)
    try:
        return client.submit()
    finally:
        client.close()
