"""The Flink reader against a real Flink: one JobManager and two TaskManagers (2 slots each) from
the ``apache-flink-libraries`` wheel (the Flink runtime jars; a test dependency), on free
localhost ports, running one job with every ship strategy:

- SQL: datagen ``gen`` (parallelism 2) -REBALANCE-> Calc (3) -HASH-> GroupAggregate -> blackhole;
- DataStream (the Java API driven through py4j): datagen ``gen2`` (2) -RESCALE-> sink (3),
  -BROADCAST-> sink (3), -FORWARD-> sink (2); datagen ``gen3`` (3) -RESCALE-> sink (2).

The cluster is the test session's one local Flink (tests/conftest.py, with streamsched's placement
plugin, which without a plan for the job assigns as Flink does). The job is submitted from a client JVM (Flink's Table and DataStream API, ``execution.target:
remote``) that Python drives with py4j (installed with pyspark): a pure-JVM job, no PyFlink.
The test reads the job with :mod:`streamsched.engines.flink`, checks the graph against the
submitted job, the placement against the TaskManagers' own slot accounting, the rates against
the job's own counters, and the remote traffic streamsched computes for the current placement
against Flink's ``numBytesInRemote``. ``STREAMSCHED_UPDATE_FLINK_FIXTURES=1`` copies the
capture to ``tests/fixtures/flink/live-job`` (tests/fixtures/flink/README.md).

Skipped only when Java is missing. 45-75 s here (the client builds the job while the cluster
starts; then the job must flow and the two snapshots are 10 s apart); the job is cancelled as soon
as it is read.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from streamsched import metrics
from streamsched.engines import flink
from streamsched.engines.flink import local

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("java") is None, reason="Java is missing: the live Flink test needs a JVM"),
]

FIXTURE_DIR = Path(__file__).parent / "fixtures" / "flink" / "live-job"
WINDOW_S = 10.0
#: The submitted job: vertex name pattern -> parallelism, and the (upstream, downstream,
#: ship strategy) edges between them.
VERTICES = {
    r"Source: gen\[\d+\]": 2,
    r"Calc\[\d+\]": 3,
    r"GroupAggregate\[\d+\] -> sink\[\d+\]: Writer": 3,
    r"Source: gen2\[\d+\] -> TableToDataStream": 2,
    r"Source: gen3\[\d+\] -> TableToDataStream": 3,
    r"rescaled: Writer": 3,
    r"broadcast: Writer": 3,
    r"forwarded: Writer": 2,
    r"fanin: Writer": 2,
}
EDGES = {
    (r"Source: gen\[\d+\]", r"Calc\[\d+\]", "REBALANCE"),
    (r"Calc\[\d+\]", r"GroupAggregate\[\d+\] -> sink\[\d+\]: Writer", "HASH"),
    (r"Source: gen2\[\d+\] -> TableToDataStream", r"rescaled: Writer", "RESCALE"),
    (r"Source: gen2\[\d+\] -> TableToDataStream", r"broadcast: Writer", "BROADCAST"),
    (r"Source: gen2\[\d+\] -> TableToDataStream", r"forwarded: Writer", "FORWARD"),
    (r"Source: gen3\[\d+\] -> TableToDataStream", r"fanin: Writer", "RESCALE"),
}
#: rows per second of each datagen table (the whole source, over its subtasks)
ROWS_PER_SECOND = {r"Source: gen\[\d+\]": 2000, r"Source: gen2\[\d+\] -> TableToDataStream": 1000,
                   r"Source: gen3\[\d+\] -> TableToDataStream": 1500}
SQL = [
    """CREATE TABLE gen (k INT, v BIGINT, pad STRING) WITH ('connector' = 'datagen',
       'rows-per-second' = '2000', 'fields.k.min' = '0', 'fields.k.max' = '99',
       'fields.pad.length' = '40', 'scan.parallelism' = '2')""",
    "CREATE TABLE sink (k INT, c BIGINT, s BIGINT) WITH ('connector' = 'blackhole')",
    """CREATE TABLE gen2 (k INT, pad STRING) WITH ('connector' = 'datagen', 'rows-per-second' = '1000',
       'fields.pad.length' = '20', 'scan.parallelism' = '2')""",
    """CREATE TABLE gen3 (k INT) WITH ('connector' = 'datagen', 'rows-per-second' = '1500',
       'scan.parallelism' = '3')""",
]
INSERT = "INSERT INTO sink SELECT k, COUNT(*), SUM(v) FROM (SELECT k * 2 AS k, v FROM gen WHERE v > 0) GROUP BY k"

JVM_OPTIONS, LOG4J = local.JVM_OPTIONS, local.LOG4J


# ---------------------------------------------------------------------------- cluster
# The cluster is the session's one local Flink (tests/conftest.py: ``flink_cluster``,
# ``flink_ports``), shared with tests/test_flink_apply_live.py.


def _get(url: str, timeout: float = 5.0):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.load(response)


# --------------------------------------------------------------------------------- job
class JobClient:
    """A client JVM (Flink's Table and DataStream API, py4j) that builds the job in a thread
    while the cluster starts; :meth:`submit` sends it."""

    def __init__(self, rest_port: int, logs: Path) -> None:
        self.rest_port, self.logs = rest_port, logs
        self.gateway = self.proc = self.env = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._prepare, daemon=True)
        self.thread.start()

    def _prepare(self) -> None:
        try:
            from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway

            from streamsched.engines.flink.plugin import flink_home

            home = flink_home()
            log4j = self.logs / "log4j.properties"
            log4j.write_text(LOG4J)
            port, self.proc = launch_gateway(
                classpath=os.pathsep.join(sorted(glob.glob(str(home / "lib" / "*.jar")))), die_on_exit=True,
                return_proc=True, javaopts=[*JVM_OPTIONS, "-Xmx512m", f"-Dlog4j.configurationFile=file:{log4j}",
                                            f"-Dlog.file={self.logs / 'client.log'}"])
            self.gateway = JavaGateway(gateway_parameters=GatewayParameters(port=port, auto_convert=True))
            self.env = self._build(self.gateway.jvm)
        except BaseException as exc:  # reported by submit()
            self.error = exc

    def _build(self, jvm):
        conf = jvm.org.apache.flink.configuration.Configuration()
        for key, value in {"execution.target": "remote", "rest.address": "127.0.0.1",
                           "rest.port": str(self.rest_port), "pipeline.name": "streamsched-live",
                           "parallelism.default": "3"}.items():
            conf.setString(key, value)
        env = jvm.org.apache.flink.streaming.api.environment.StreamExecutionEnvironment(conf)
        # flush after every record: a datagen subtask emits its rows of each second in one burst,
        # which would otherwise sit up to 100 ms in network buffers, between the sender's and
        # the receiver's counters, when a metric fetch comes
        env.setBufferTimeout(0)
        tenv = jvm.org.apache.flink.table.api.bridge.java.StreamTableEnvironment.create(env)
        for statement in SQL:
            tenv.executeSql(statement)
        statements = tenv.createStatementSet()
        statements.addInsertSql(INSERT)
        statements.attachAsDataStream()
        discard = jvm.org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink
        table_from = getattr(tenv, "from")  # `from` is a Python keyword
        gen2 = tenv.toDataStream(table_from("gen2"))
        gen2.getTransformation().setParallelism(2)
        gen2.rescale().sinkTo(discard()).name("rescaled").setParallelism(3)
        gen2.broadcast().sinkTo(discard()).name("broadcast").setParallelism(3)
        gen2.forward().sinkTo(discard()).name("forwarded").setParallelism(2).disableChaining()
        gen3 = tenv.toDataStream(table_from("gen3"))
        gen3.getTransformation().setParallelism(3)
        gen3.rescale().sinkTo(discard()).name("fanin").setParallelism(2)
        return env

    def submit(self) -> str:
        self.thread.join(timeout=180)
        if self.error is not None or self.env is None:
            raise RuntimeError(f"building the Flink job failed: {self.error!r}")
        return self.env.executeAsync("streamsched-live").getJobID().toString()

    def close(self) -> None:
        self.thread.join(timeout=180)
        gateway, proc, self.gateway, self.proc = self.gateway, self.proc, None, None
        try:
            if gateway is not None:
                gateway.shutdown()
        finally:
            if proc is not None:
                if proc.poll() is None:
                    proc.kill()
                proc.wait(timeout=30)


@pytest.fixture(scope="session")
def flink_client(flink_ports, tmp_path_factory):
    client = JobClient(flink_ports["rest"], tmp_path_factory.mktemp("flink-client"))
    try:
        yield client
    finally:
        client.close()


def _wait_until_flowing(cluster: FlinkCluster, job_id: str, timeout: float = 60.0) -> None:
    """Until every subtask runs and every vertex has counted records (in, or out for sources)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        job = _get(f"{cluster.url}/jobs/{job_id}")
        if job.get("state") == "FAILED":
            pytest.fail(f"the job failed:\n{cluster.log_tail()}")
        running = all(v.get("status") == "RUNNING" for v in job.get("vertices", []))
        flowing = all(max(v["metrics"].get("read-records", 0), v["metrics"].get("write-records", 0)) > 0
                      for v in job.get("vertices", []))
        if running and flowing and job.get("vertices"):
            return
        time.sleep(0.5)
    pytest.fail(f"the job's records did not flow within {timeout:g} s:\n{cluster.log_tail()}")


@pytest.fixture(scope="session")
def live_reading(flink_client, flink_cluster, tmp_path_factory):
    """The job submitted, flowing, captured twice ``WINDOW_S`` apart, and read."""
    started = time.time()
    job_id = flink_client.submit()
    flink_client.close()  # the client JVM is not needed any more
    _wait_until_flowing(flink_cluster, job_id)
    save = tmp_path_factory.mktemp("capture") / "live-job"
    capture = flink.capture_live(flink_cluster.url, job_id, window_s=WINDOW_S, save_dir=save)
    reading = flink.read_capture(capture)
    if os.environ.get("STREAMSCHED_UPDATE_FLINK_FIXTURES") == "1":
        shutil.rmtree(FIXTURE_DIR, ignore_errors=True)
        shutil.copytree(save, FIXTURE_DIR)
    taskmanagers = {tm["id"]: _get(f"{flink_cluster.url}/taskmanagers/{tm['id']}")
                    for tm in _get(f"{flink_cluster.url}/taskmanagers")["taskmanagers"]}
    try:
        urllib.request.urlopen(urllib.request.Request(f"{flink_cluster.url}/jobs/{job_id}?mode=cancel",
                                                      method="PATCH"), timeout=10).close()
    except OSError:
        pass
    print(f"flink live job: submitted, flowing and read in {time.time() - started:.1f} s", file=sys.stderr)
    return job_id, capture, reading, taskmanagers


def _vertex(reading, pattern: str) -> dict:
    found = [v for v in reading.report["vertices"] if re.fullmatch(pattern, v["name"])]
    assert len(found) == 1, (pattern, [v["name"] for v in reading.report["vertices"]])
    return found[0]


def _tasks(reading, pattern: str) -> np.ndarray:
    v = _vertex(reading, pattern)
    return np.arange(v["first_task"], v["first_task"] + v["parallelism"])


def _pair_matrix(reading, up: str, down: str) -> np.ndarray:
    g = reading.graph
    src, dst = _tasks(reading, up), _tasks(reading, down)
    out = np.zeros((src.size, dst.size))
    for s, d, r in zip(g.src, g.dst, g.rate):
        if s in src and d in dst:
            out[s - src[0], d - dst[0]] = r
    return out


def _counter_rate(capture, pattern: str, metric: str, reading=None) -> np.ndarray:
    """A vertex's per-subtask counter, differenced over the two snapshots (straight from the
    JSON), over the snapshots' interval, or, given the ``reading``, over the window the reader
    states for the subtask's TaskManager (each TaskManager's counters over its own window)."""
    first, last = capture.snapshots[0], capture.snapshots[-1]
    job = last.documents[f"jobs/{capture.job_id}"]
    (vertex,) = [v for v in job["vertices"] if re.fullmatch(pattern, v["name"])]
    hosts = {s["subtask"]: s.get("taskmanager-id") for s in
             last.documents[f"jobs/{capture.job_id}/vertices/{vertex['id']}"]["subtasks"]}
    values = []
    for i in range(vertex["parallelism"]):
        key = f"jobs/{capture.job_id}/vertices/{vertex['id']}/subtasks/{i}/metrics"
        get = lambda snap: {m["id"]: float(m["value"]) for m in snap.documents[key]}[metric]
        seconds = last.time - first.time if reading is None else reading.report["windows"][hosts[i]]["seconds"]
        values.append((get(last) - get(first)) / seconds)
    return np.array(values)


# ------------------------------------------------------------------------------- tests
def test_graph_matches_the_submitted_job(live_reading):
    _job_id, _capture, reading, _tms = live_reading
    report = reading.report
    assert report["rates_from"] == "counters" and report["snapshots"] == 2
    assert abs(report["window_s"] - WINDOW_S) < 3.0, report["window_s"]
    names = [v["name"] for v in report["vertices"]]
    assert len(names) == len(VERTICES)
    for pattern, parallelism in VERTICES.items():
        assert _vertex(reading, pattern)["parallelism"] == parallelism
    edges = {(e["from"], e["to"], e["ship_strategy"]) for e in report["edges"]}
    assert len(edges) == len(EDGES)
    for up, down, strategy in EDGES:
        assert any(re.fullmatch(up, a) and re.fullmatch(down, b) and s == strategy for a, b, s in edges), (up, down, strategy)
    g = reading.graph
    assert g.n_tasks == sum(VERTICES.values()) == 23
    assert g.load_unit == "cores" and reading.cluster.capacity_unit == "cores"
    # pairs per strategy: REBALANCE 2x3, HASH 3x3, RESCALE 2->3 and 3->2 three each, BROADCAST 2x3, FORWARD 2
    assert g.n_edges == 6 + 9 + 3 + 6 + 2 + 3
    assert np.all(np.isfinite(g.load)) and np.all(g.load >= 0) and np.all(g.load <= 1)
    sources = {t for p in ROWS_PER_SECOND for t in _tasks(reading, p)}
    assert set(report["load_fallback_tasks"]) <= sources  # Flink gives no busy time for sources only


def test_pair_structure_per_ship_strategy(live_reading):
    _job_id, _capture, reading, _tms = live_reading
    gen2 = r"Source: gen2\[\d+\] -> TableToDataStream"
    forward = _pair_matrix(reading, gen2, r"forwarded: Writer")
    assert np.count_nonzero(forward) == 2 and np.all(np.diag(forward) > 0)
    # RESCALE 2 -> 3: sender 0 feeds receivers 0 and 1, sender 1 feeds receiver 2 (Flink's pointwise pairs)
    rescale = _pair_matrix(reading, gen2, r"rescaled: Writer")
    assert (rescale > 0).tolist() == [[True, True, False], [False, False, True]]
    # RESCALE 3 -> 2: receiver 0 is fed by sender 0, receiver 1 by senders 1 and 2
    fanin = _pair_matrix(reading, r"Source: gen3\[\d+\] -> TableToDataStream", r"fanin: Writer")
    assert (fanin > 0).tolist() == [[True, False], [False, True], [False, True]]
    # ... and the receivers' own counters agree with those pairs (exact strategies)
    received = _counter_rate(_capture, r"rescaled: Writer", "numRecordsIn")
    sent = _counter_rate(_capture, gen2, "numRecordsOut")
    np.testing.assert_allclose(received, [sent[0] / 2, sent[0] / 2, sent[1]], rtol=0.05)
    np.testing.assert_allclose(rescale.sum(axis=0), received, rtol=0.05)
    # BROADCAST: every receiver gets everything every sender sends
    broadcast = _pair_matrix(reading, gen2, r"broadcast: Writer")
    assert broadcast.shape == (2, 3) and np.all(broadcast > 0)
    np.testing.assert_allclose(broadcast / broadcast[:, :1], 1.0, rtol=1e-9)
    # REBALANCE: even; HASH: each sender's split follows the receivers' shares
    rebalance = _pair_matrix(reading, r"Source: gen\[\d+\]", r"Calc\[\d+\]")
    np.testing.assert_allclose(rebalance / rebalance[:, :1], 1.0, rtol=1e-9)
    hashed = _pair_matrix(reading, r"Calc\[\d+\]", r"GroupAggregate\[\d+\] -> sink\[\d+\]: Writer")
    shares = hashed / hashed.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(shares, np.broadcast_to(shares[0], shares.shape), rtol=1e-9)


def test_rates_against_the_jobs_own_counters(live_reading):
    """Edge totals against the senders' numRecordsOut (the receivers' numRecordsIn set them).

    Tolerance 5 %: the two counters are sampled in the same JobManager fetch, but records
    between sender and receiver (network buffers are flushed every 100 ms) and a datagen burst
    caught half-processed at either end of the window make them differ by at most a few
    hundred records in a 10 s window of thousands per second."""
    _job_id, capture, reading, _tms = live_reading
    by_edge = {(e["from"], e["to"]): e for e in reading.report["edges"]}
    for up, down, strategy in EDGES:
        (edge,) = [e for (a, b), e in by_edge.items() if re.fullmatch(up, a) and re.fullmatch(down, b)]
        assert edge["total_from"] == "receivers"
        received = _counter_rate(capture, down, "numRecordsIn", reading).sum()
        assert edge["records_per_s"] == pytest.approx(received, rel=1e-9)
        sent = _counter_rate(capture, up, "numRecordsOut").sum()
        copies = _vertex(reading, down)["parallelism"] if strategy == "BROADCAST" else 1
        assert edge["records_per_s"] == pytest.approx(sent * copies, rel=0.05), (up, down)
    # the sources run at the configured rows per second: datagen emits in one burst a second per
    # subtask, so a window of W seconds counts W +- 1 bursts; tolerance 1.5 / W
    for pattern, rows in ROWS_PER_SECOND.items():
        assert _vertex(reading, pattern)["records_out_per_s"] == pytest.approx(rows, rel=1.5 / WINDOW_S)
    # the graph's total rate is every edge's records, i.e. what all receivers read
    measured_in = reading.report["measured_per_s"]["records_in"]
    assert reading.graph.total_rate == pytest.approx(measured_in, rel=1e-9)


def test_placement_is_where_flink_runs_the_subtasks(live_reading):
    _job_id, capture, reading, taskmanagers = live_reading
    cluster, placement = reading.cluster, reading.placement
    assert sorted(n.name for n in cluster.nodes) == sorted(taskmanagers)
    for node in cluster.nodes:  # capacity: taskmanager.cpu.cores (default: the 2 slots), at most the JVM's processors
        hardware = taskmanagers[node.name]["hardware"]["cpuCores"]
        assert node.slots == 1 and node.capacity == min(2.0, hardware) and node.cores == max(1, hardware)
    assert placement.violations(reading.graph, cluster) == []
    # each TaskManager's own slot accounting (/taskmanagers/:id allocatedSlots) counts the
    # subtasks streamsched places on it
    for k, node in enumerate(cluster.nodes):
        assigned = sum(slot["assignedTasks"] for slot in taskmanagers[node.name]["allocatedSlots"])
        assert int(np.sum(placement.node_of == k)) == assigned, node.name
    # and every subtask's node is the TaskManager its vertex page names
    last = capture.snapshots[-1].documents
    for v in reading.report["vertices"]:
        details = last[f"jobs/{capture.job_id}/vertices/{v['id']}"]
        for sub in details["subtasks"]:
            task = v["first_task"] + sub["subtask"]
            assert cluster.nodes[placement.node_of[task]].name == sub["taskmanager-id"]


def test_remote_traffic_matches_flinks_numBytesInRemote(live_reading):
    """streamsched's inter-node bytes of the current placement (nodes = TaskManagers) against
    the sum of Flink's numBytesInRemote, both per second over the same window.

    Tolerance 5 %: the pairs of REBALANCE, RESCALE, BROADCAST and FORWARD are exact up to
    records in flight at the window's ends; a HASH pair's share assumes every Calc subtask sees
    the same key distribution (random keys: true up to sampling noise), and bytes per record
    are each receiver's average over its input (one input here, so exact). Measured here: well
    under 1 %."""
    _job_id, capture, reading, _tms = live_reading
    measured = reading.report["measured_per_s"]
    remote = measured["bytes_in_remote"]
    assert remote is not None and remote > 10_000  # both TaskManagers hold senders and receivers
    assert measured["bytes_in_local"] + remote == pytest.approx(measured["bytes_in"], rel=0.01)
    computed = metrics.inter_node_traffic(reading.graph, reading.placement, weight="bytes")
    assert computed == pytest.approx(remote, rel=0.05)
    assert reading.graph.bytes_rate.sum() == pytest.approx(measured["bytes_in"], rel=0.01)
    # with one node per host both TaskManagers are one node (127.0.0.1): nothing crosses nodes,
    # and the same bytes cross worker processes (a worker is a TaskManager)
    by_host = flink.read_capture(capture, node_by="host")
    assert [n.name for n in by_host.cluster.nodes] == ["127.0.0.1"]
    assert by_host.cluster.nodes[0].slots == 2
    assert metrics.inter_node_traffic(by_host.graph, by_host.placement, weight="bytes") == 0.0
    assert metrics.inter_worker_traffic(by_host.graph, by_host.placement, weight="bytes") == pytest.approx(computed)


def test_saved_capture_reads_back_alike(live_reading, tmp_path):
    _job_id, capture, reading, _tms = live_reading
    flink.save_capture(capture, tmp_path / "again")
    again = flink.read_capture(flink.load_capture(tmp_path / "again"))
    np.testing.assert_array_equal(again.graph.rate, reading.graph.rate)
    np.testing.assert_array_equal(again.placement.node_of, reading.placement.node_of)
