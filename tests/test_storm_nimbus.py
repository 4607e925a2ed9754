"""Storm's stored topologies (Nimbus' ``<id>-stormcode.ser`` / ``-stormconf.ser``) on the real
files of Storm's TestLargeCluster (``../shared/peers/storm-clusterconf``), checked against a
decoding of the Thrift binary protocol written here from the protocol's spec (no code shared
with the reader, which uses thriftpy2); the TestLargeCluster layouts; Storm's network metric;
R-Storm's per-worker heap limit; scheduling a whole set and Storm's remove-and-reschedule phase."""

from __future__ import annotations

import gzip
import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from streamsched import workloads
from streamsched.engines.storm import nimbus
from streamsched.errors import InputError
from streamsched.metrics import traffic_by_distance
from streamsched.model import Cluster, Node, Placement, TaskGraph
from streamsched.schedulers import get_scheduler
from streamsched.schedulers.base import reschedule_each, schedule_many

PEERS = Path(__file__).resolve().parents[3] / "shared" / "peers" / "storm-clusterconf"
if not PEERS.is_dir():
    PEERS = Path("/work/shared/peers/storm-clusterconf")
SETS = {"largeCluster01": (40, 24_403), "largeCluster02": (46, 36_150), "largeCluster03": (50, 1_414)}
needs_peers = pytest.mark.skipif(not PEERS.is_dir(), reason="Storm's clusterconf files are not beside the project")


# ----------------------------------------------------------- Thrift binary protocol, from its spec
# A struct is a sequence of fields (type: 1 byte, id: i16 big-endian, value) ended by a STOP byte 0.
# bool 2 (1 byte), byte 3, double 4 (8), i16 6, i32 8, i64 10, string/binary 11 (i32 length + bytes),
# struct 12, map 13 (key type, value type, i32 count), set 14 and list 15 (element type, i32 count).
class Reader:
    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def take(self, n: int) -> bytes:
        if self.at + n > len(self.data):
            raise EOFError("truncated")
        chunk = self.data[self.at:self.at + n]
        self.at += n
        return chunk

    def value(self, kind: int):
        fixed = {2: ">?", 3: ">b", 4: ">d", 6: ">h", 8: ">i", 10: ">q"}
        if kind in fixed:
            fmt = fixed[kind]
            return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]
        if kind == 11:
            return self.take(struct.unpack(">i", self.take(4))[0])
        if kind == 12:
            fields = {}
            while (field_type := self.take(1)[0]) != 0:
                field_id = struct.unpack(">h", self.take(2))[0]
                fields[field_id] = self.value(field_type)
            return fields
        if kind == 13:
            key_type, value_type, count = struct.unpack(">bbi", self.take(6))
            return [(self.value(key_type), self.value(value_type)) for _ in range(count)]
        if kind in (14, 15):
            element_type, count = struct.unpack(">bi", self.take(5))
            return [self.value(element_type) for _ in range(count)]
        raise ValueError(f"type {kind}")


#: storm.thrift's Grouping union: field id -> our grouping name (fields with no fields: global).
GROUPING_IDS = {2: "shuffle", 3: "all", 4: "none", 5: "direct", 6: "custom", 7: "custom", 8: "local-or-shuffle"}


def independent(code: Path, conf: Path) -> dict[str, tuple]:
    """component -> (executors, inputs, CPU %, on-heap MB, off-heap MB) from the bytes."""
    topology = Reader(gzip.decompress(code.read_bytes())).value(12)
    settings = json.loads(gzip.decompress(conf.read_bytes()))
    out = {}
    for field in (1, 2):  # StormTopology.spouts, .bolts: map<string, SpoutSpec/Bolt>
        for name, spec in topology.get(field, []):
            common = spec[2]  # SpoutSpec.common / Bolt.common
            inputs = []
            for stream_id, grouping in common.get(1, []):  # map<GlobalStreamId, Grouping>
                (gid, value), = grouping.items()
                kind = ("fields" if value else "global") if gid == 1 else GROUPING_IDS[gid]
                inputs.append((stream_id[1].decode(), stream_id[2].decode(), kind))
            own = json.loads(common[4]) if 4 in common else {}
            override = own.get("topology.component.resources.map") or {}

            def resource(key: str, default: float) -> float:
                for source in (override, own, settings):
                    if source.get(key) is not None:
                        return float(source[key])
                return default

            out[name.decode()] = (common.get(3, 1), tuple(sorted(inputs)),
                                  resource("topology.component.cpu.pcore.percent", 10.0),
                                  resource("topology.component.resources.onheap.memory.mb", 128.0),
                                  resource("topology.component.resources.offheap.memory.mb", 0.0))
    return out


@needs_peers
@pytest.mark.parametrize("name", sorted(SETS))
def test_reader_matches_an_independent_decoding_of_every_topology(name):
    topologies = nimbus.read_dir(PEERS / name, executors="hint")
    assert len(topologies) == SETS[name][0]
    assert sum(t.graph.n_tasks for t in topologies) == SETS[name][1]  # the executor counts
    for topology in topologies:
        code = PEERS / name / f"{topology.topology_id}-stormcode.ser"
        expected = independent(code, code.with_name(f"{topology.topology_id}-stormconf.ser"))
        got = {c.name: (c.executors, tuple(i for i in c.inputs if not i[0].startswith("__")), c.cpu_pct,
                        c.onheap_mb, c.offheap_mb)
               for c in topology.components if not c.name.startswith("__")}  # Nimbus adds __acker
        assert got == expected, topology.topology_id
        graph = topology.graph
        counts = np.bincount(graph.task_operator, minlength=len(graph.operator_names))
        assert dict(zip(graph.operator_names, counts.tolist())) == {k: v[0] for k, v in expected.items()}
        cpu = {k: v[2] / 100 for k, v in expected.items()}
        assert np.allclose(graph.load, [cpu[graph.operator_names[op]] for op in graph.task_operator])


@needs_peers
def test_nimbus_executors_follow_topology_tasks_and_ackers_are_added():
    """Two bolts of largeCluster03/TopologyName00001 hint 10 executors but have topology.tasks 1:
    Nimbus (partitionFixed) runs one executor each, TestLargeCluster counts 10."""
    directory = PEERS / "largeCluster03"
    hint = nimbus.read_topology(directory / "TopologyName00001-stormcode.ser", executors="hint")
    real = nimbus.read_topology(directory / "TopologyName00001-stormcode.ser", ackers=True)
    assert hint.executors - real.executors == 18
    settings = json.loads(gzip.decompress((directory / "TopologyName00001-stormconf.ser").read_bytes()))
    acker = real.graph.operator_names.index("__acker")
    assert np.count_nonzero(real.graph.task_operator == acker) == settings["topology.acker.executors"]
    assert real.worker_heap_mb == settings["topology.worker.max.heap.size.mb"]
    assert np.unique(real.graph.task_ids).size == real.graph.n_tasks  # Storm's first task ids, distinct


@needs_peers
def test_structural_connections_of_one_topology_by_hand():
    """Every executor pair joined by a stream once; global grouping to the receiver's first executor."""
    topology = nimbus.read_topology(PEERS / "largeCluster03" / "TopologyName00045-stormcode.ser", executors="hint")
    parallel = {c.name: c.executors for c in topology.components}
    expected = 0
    pairs: dict[tuple[str, str], set[str]] = {}
    for c in topology.components:
        for source, _, kind in c.inputs:
            if "__acker" not in (source, c.name):  # a graph task only with ackers=True
                pairs.setdefault((source, c.name), set()).add(kind)
    assert any(kinds == {"global"} for kinds in pairs.values())
    for (source, dest), kinds in pairs.items():
        if kinds == {"global"}:
            expected += parallel[source] - (source == dest)
        else:
            expected += parallel[source] * parallel[dest] - (parallel[source] if source == dest else 0)
    assert topology.graph.n_edges == expected and np.all(topology.graph.rate == 1.0)


def test_storm_large_clusters_match_testlargecluster():
    one, two, three = (workloads.cluster(f"storm-large-0{k}") for k in (1, 2, 3))
    assert (one.n_nodes, len({n.rack for n in one.nodes})) == (16 * 82, 16)
    # 12 racks of 41 x 36 + 41 x 35 cores, 2 of 41 x 24 + 41 x 23, 2 of 41 x 12 + 41 x 11
    assert one.total_capacity == 12 * 41 * 71 + 2 * 41 * 47 + 2 * 41 * 23
    assert sum(n.ram_mb for n in one.nodes) == 41 * 2 * (12 * 178_000 + 2 * 118_100 + 2 * 42_480)
    assert set(one.slots.tolist()) == {50}
    assert (two.n_nodes, len({n.rack for n in two.nodes})) == (1922, 21)
    assert len({(n.cores, n.ram_mb, n.slots) for n in two.nodes}) == 10
    assert (three.n_nodes, len({n.rack for n in three.nodes})) == (80, 2)
    assert {(n.capacity, n.ram_mb, n.slots) for n in three.nodes} == {(11.0, 58829.0, 12)}
    assert three.capacity_unit == "cores"


def test_traffic_by_distance_by_hand():
    """Edges 0->1 same worker, 0->2 same node other worker, 1->3 other node same rack, 3->4 other rack."""
    graph = TaskGraph.build("g", ("a",), [0] * 5, [1.0] * 5, [0, 0, 1, 3], [1, 2, 3, 4], [1.0, 2.0, 3.0, 4.0])
    cluster = Cluster("c", (Node("n0", 10, rack="r0"), Node("n1", 10, rack="r0"), Node("n2", 10, rack="r1")))
    placement = Placement.build([0, 0, 0, 1, 2], [0, 0, 1, 0, 0])
    assert traffic_by_distance(graph, placement, cluster) == {
        "intra_worker": 1.0, "inter_worker": 2.0, "inter_node": 3.0, "inter_rack": 4.0}


def test_r_storm_keeps_each_worker_within_the_heap_limit():
    """Three executors of 300 MB heap, workers of at most 700 MB: two share a worker, the third
    opens the node's second slot; with one slot it goes to the next node."""
    def graph():
        return TaskGraph.build("heap", ("a",), [0, 0, 0], [0.1] * 3, [], [], [], memory_mb=[300.0] * 3,
                               onheap_mb=[300.0] * 3, worker_heap_mb=700.0, load_unit="cores")

    two = Cluster("c", (Node("a", 4.0, cores=4, slots=2, ram_mb=8000), Node("b", 2.0, cores=2, slots=2)), "cores")
    placement = get_scheduler("r-storm").schedule(graph(), two)
    assert placement.node_of.tolist() == [0, 0, 0] and placement.worker_of.tolist() == [0, 0, 1]
    one = Cluster("c", (Node("a", 4.0, cores=4, slots=1, ram_mb=8000), Node("b", 2.0, cores=2, slots=1)), "cores")
    placement = get_scheduler("r-storm").schedule(graph(), one)
    assert placement.node_of.tolist() == [0, 0, 1]


def _check_set(graphs, placements, cluster):
    """Independent checks of placements on one cluster: per node CPU, memory; no slot shared by
    two topologies; each worker's heap within its topology's limit."""
    cpu, memory, owner = np.zeros(cluster.n_nodes), np.zeros(cluster.n_nodes), {}
    for k, (graph, placement) in enumerate(zip(graphs, placements)):
        np.add.at(cpu, placement.node_of, graph.load)
        np.add.at(memory, placement.node_of, graph.memory_mb)
        assert np.all(placement.worker_of >= 0)
        for node, worker in set(zip(placement.node_of.tolist(), placement.worker_of.tolist())):
            assert owner.setdefault((node, worker), k) == k
            on = (placement.node_of == node) & (placement.worker_of == worker)
            assert graph.onheap_mb[on].sum() <= graph.worker_heap_mb + 1e-6
    assert np.all(cpu <= cluster.capacity + 1e-6)
    assert np.all(memory <= np.array([n.ram_mb for n in cluster.nodes]) + 1e-6)


@needs_peers
def test_r_storm_on_largecluster03_and_remove_and_reschedule_keep_every_limit():
    """R-Storm as Storm runs it (strict: no capacity repair) on the whole set, then Storm's
    second phase; every placement it makes keeps CPU, memory, slots and worker heaps."""
    topologies = nimbus.read_dir(PEERS / "largeCluster03", executors="hint")
    graphs = [t.graph for t in topologies]
    cluster = workloads.cluster("storm-large-03")
    scheduler = get_scheduler("r-storm", strict=True)
    placements = schedule_many(scheduler, graphs, cluster, skip_infeasible=True)
    placed = [k for k, p in enumerate(placements) if p is not None]
    assert len(placed) > len(graphs) // 2
    _check_set([graphs[k] for k in placed], [placements[k] for k in placed], cluster)
    again = reschedule_each(scheduler, graphs, cluster, placements)
    for placement, reason, _ in again:
        assert (placement is None) == (reason is not None)
        assert reason is None or reason.startswith("r-storm: ")
    # after the last step every topology holds its second-phase placement (or nothing): jointly valid
    kept = [k for k, (p, _, _) in enumerate(again) if p is not None]
    _check_set([graphs[k] for k in kept], [again[k][0] for k in kept], cluster)


def _gzip(path: Path, data: bytes) -> Path:
    path.write_bytes(gzip.compress(data))
    return path


@needs_peers
def test_bad_input_is_one_line_naming_the_file(tmp_path):
    real = gzip.decompress((PEERS / "largeCluster03" / "TopologyName00045-stormcode.ser").read_bytes())
    conf = (PEERS / "largeCluster03" / "TopologyName00045-stormconf.ser").read_bytes()
    cases = {
        "plain": (real, "not a complete gzip file"),
        "cut": (gzip.compress(real[: len(real) // 2]), "Thrift-binary StormTopology"),
        # field 1 of StormTopology with type 0x7f, which the binary protocol does not have
        "oddtype": (gzip.compress(b"\x7f\x00\x01" + real), "Thrift-binary StormTopology"),
    }
    for name, (data, message) in cases.items():
        (tmp_path / f"{name}-stormcode.ser").write_bytes(data)
        (tmp_path / f"{name}-stormconf.ser").write_bytes(conf)
        with pytest.raises(InputError, match=message) as info:
            nimbus.read_topology(tmp_path / f"{name}-stormcode.ser")
        assert str(tmp_path / f"{name}-stormcode.ser") in str(info.value)
    (tmp_path / "noname-stormcode.ser").write_bytes(gzip.compress(real))
    _gzip(tmp_path / "noname-stormconf.ser", json.dumps({"topology.workers": 1}).encode())
    with pytest.raises(InputError, match="noname-stormconf.ser: the conf has no topology.name"):
        nimbus.read_topology(tmp_path / "noname-stormcode.ser")
    result = subprocess.run([sys.executable, "-m", "streamsched.cli", "read-engine", "storm-nimbus", str(tmp_path),
                             "--out", str(tmp_path / "out")], capture_output=True, text=True)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len((result.stdout + result.stderr).strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@needs_peers
@pytest.mark.parametrize("suffix", [".json", ".csv", ".parquet"])
def test_graph_files_keep_each_executors_heap_and_the_worker_limit(tmp_path, suffix):
    """TopologyName00048 of largeCluster03 (executors of 10,240 MB heap, workers of at most
    10,240 MB) written and read back: heap per executor and the limit as read from the files."""
    from streamsched.model.graph_files import read_graph, write_graph

    graph = nimbus.read_topology(PEERS / "largeCluster03" / "TopologyName00048-stormcode.ser", executors="hint").graph
    write_graph(graph, tmp_path / f"g{suffix}")
    back = read_graph(tmp_path / f"g{suffix}")
    assert back.worker_heap_mb == graph.worker_heap_mb == 10_240.0
    assert np.array_equal(back.onheap_mb, graph.onheap_mb) and np.array_equal(back.memory_mb, graph.memory_mb)
    assert float(graph.onheap_mb.max()) == 10_240.0


def test_a_worker_heap_limit_differing_between_rows_is_one_line(tmp_path):
    from streamsched.model.graph_files import read_graph

    (tmp_path / "g.json").write_text(json.dumps({"tasks": [
        {"id": 0, "load": 1, "memory_mb": 300, "onheap_mb": 200, "worker_heap_mb": 700},
        {"id": 1, "load": 1, "memory_mb": 300, "onheap_mb": 200, "worker_heap_mb": 800}],
        "edges": [{"src": 0, "dst": 1, "rate": 1}]}))
    with pytest.raises(InputError, match=r"g.json: row 1: worker_heap_mb 800.0 differs from the first row's 700.0"):
        read_graph(tmp_path / "g.json")
    (tmp_path / "h.json").write_text(json.dumps({"tasks": [{"id": 0, "load": 1, "memory_mb": 100, "onheap_mb": 200},
                                                           {"id": 1, "load": 1, "memory_mb": 100, "onheap_mb": 50}],
                                                 "edges": [{"src": 0, "dst": 1, "rate": 1}]}))
    with pytest.raises(InputError, match="onheap_mb must give one value per task, each at most its memory_mb"):
        read_graph(tmp_path / "h.json")
