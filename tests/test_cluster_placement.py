"""Clusters from YAML, placements: validation and JSON round trip."""

import numpy as np
import pytest

from streamsched import workloads
from streamsched.errors import InputError
from streamsched.model import Cluster, Placement


def test_node_types_with_counts(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: het\nnode_types:\n  - {count: 3, capacity: 6, slots: 2}\n  - {count: 2, capacity: 4, kind: edge}\n")
    c = Cluster.load(path)
    assert c.n_nodes == 5 and c.capacity.tolist() == [6, 6, 6, 4, 4]
    assert [n.name for n in c.nodes] == ["n1", "n2", "n3", "n4", "n5"]
    assert c.nodes[4].kind == "edge" and c.slots.tolist() == [2, 2, 2, 4, 4]
    assert c.capacity_classes() == [(6.0, 3), (4.0, 2)]


def test_builtin_clusters_match_the_papers():
    het = workloads.cluster("heterogeneous-10")  # i-scheduler.txt Table 3
    assert sorted(het.capacity.tolist()) == [2] * 4 + [4] * 3 + [6] * 3
    assert workloads.cluster("homogeneous-10").capacity.tolist() == [4.0] * 10
    thesis = workloads.cluster("thesis-9-s4")  # thesis Table 4.1 / 4.2 scenario 4
    assert thesis.n_nodes == 9 and set(thesis.slots.tolist()) == {4}
    assert thesis.nodes[0].gflops == pytest.approx(185395.2)  # eq. 3.1: 8 x 3.4 x 6816


@pytest.mark.parametrize("text, message", [
    ("nodes:\n  - {name: a, capacity: -1}\n", r"nodes\[0\]\.capacity: must be >= 0"),
    ("nodes:\n  - {name: a}\n", r"nodes\[0\]\.capacity: missing"),
    ("nodes:\n  - {name: a, capacity: 1}\n  - {name: a, capacity: 1}\n", "defined twice"),
    ("node_types:\n  - {count: 2, capacity: 1, kind: fog}\n", "kind: 'fog' is not one of"),
    ("name: x\n", "no nodes"),
])
def test_bad_cluster_files(tmp_path, text, message):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as info:
        Cluster.load(path)
    assert str(path) in str(info.value)


def test_validator_finds_every_kind_of_violation():
    graph = workloads.workload("linear-10")  # 10 tasks of load 1
    cluster = Cluster.from_types("c", (2, {"capacity": 5.0, "slots": 2}))
    ok = Placement.build([0] * 5 + [1] * 5, [0, 1, 0, 1, 0] * 2)
    assert ok.violations(graph, cluster) == []
    over = Placement.build([0] * 6 + [1] * 4)
    assert over.violations(graph, cluster) == ["node 'n1' holds load 6 > capacity 5"]
    bad_slot = Placement.build([0] * 5 + [1] * 5, [0] * 9 + [2])
    assert "has 2 slots" in bad_slot.violations(graph, cluster)[0]
    unknown = Placement.build([0] * 9 + [7])
    assert "unknown node" in unknown.violations(graph, cluster)[0]
    short = Placement.build([0] * 9)
    assert "has 9 tasks" in short.violations(graph, cluster)[0]


def test_json_round_trip(tmp_path):
    graph = workloads.workload("star-12")
    cluster = workloads.cluster("homogeneous-10")
    p = Placement.build(np.arange(12) % 4, np.arange(12) % 2, {"scheduler": "hand", "bound": 3.0})
    path = tmp_path / "p.json"
    p.write(path, graph, cluster)
    q = Placement.read(path, graph, cluster)
    np.testing.assert_array_equal(q.node_of, p.node_of)
    np.testing.assert_array_equal(q.worker_of, p.worker_of)
    assert dict(q.metadata) == {"scheduler": "hand", "bound": 3.0}


def test_placement_file_naming_unknown_node(tmp_path):
    graph = workloads.workload("star-12")
    cluster = workloads.cluster("homogeneous-10")
    path = tmp_path / "p.json"
    Placement.build(np.zeros(12)).write(path, graph, cluster)
    other = Cluster.from_types("other", (2, {"capacity": 9.0}))
    text = path.read_text().replace('"n1"', '"nx"')
    path.write_text(text)
    with pytest.raises(InputError, match="unknown node 'nx'"):
        Placement.read(path, graph, other)
