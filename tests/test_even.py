"""Storm's EvenScheduler: slot interleaving and round robin (fischer-metis-scheduler.txt IV-A)."""

import numpy as np
import pytest

from streamsched import workloads
from streamsched.errors import InfeasibleError, ParameterError
from streamsched.model import Cluster, Node
from streamsched.schedulers import get_scheduler
from streamsched.schedulers.even import interleaved_slots


def test_slots_interleave_nodes_with_most_free_slots_first():
    # prior-art.md: n3:6700, n2:6700, n1:6700, n3:6701, ... when n3 has the most free slots
    assert interleaved_slots(np.array([1, 2, 3])) == [(2, 0), (1, 0), (0, 0), (2, 1), (1, 1), (2, 2)]


def test_round_robin_over_workers():
    graph = workloads.workload("linear-10")
    cluster = Cluster.from_types("c", (3, {"capacity": 10.0, "slots": 2}))
    p = get_scheduler("even").schedule(graph, cluster)
    # six slots in order (0,0),(1,0),(2,0),(0,1),(1,1),(2,1); task k takes slot k % 6
    assert p.node_of.tolist() == [0, 1, 2, 0, 1, 2, 0, 1, 2, 0]
    assert p.worker_of.tolist() == [0, 0, 0, 1, 1, 1, 0, 0, 0, 1]


def test_workers_parameter_limits_slots():
    graph = workloads.workload("linear-10")
    cluster = Cluster.from_types("c", (3, {"capacity": 10.0, "slots": 2}))
    p = get_scheduler("even", workers=2).schedule(graph, cluster)
    assert p.node_of.tolist() == [0, 1] * 5 and p.metadata["workers"] == 2


def test_full_node_is_skipped_on_heterogeneous_cluster():
    graph = workloads.workload("diamond-30")
    cluster = workloads.cluster("heterogeneous-10")
    p = get_scheduler("even").schedule(graph, cluster)
    assert p.violations(graph, cluster) == []
    # tasks 0-19 fill every node twice; then the 2-capacity nodes 6-9 are full, so tasks 20-25
    # go to nodes 0-5 and tasks 26-29 wrap round to nodes 0-3
    assert np.bincount(p.node_of, minlength=10).tolist() == [4, 4, 4, 4, 3, 3, 2, 2, 2, 2]


def test_infeasible_packing_is_reported():
    graph = workloads.workload("linear-10")
    cluster = Cluster("c", (Node("a", 4.0, slots=1),))
    with pytest.raises(InfeasibleError, match="capacity 4"):
        get_scheduler("even").schedule(graph, cluster)


def test_bad_parameter_names_it():
    with pytest.raises(ParameterError, match=r"even\.params\.workers"):
        get_scheduler("even", workers=-1).schedule(workloads.workload("linear-10"), workloads.cluster("homogeneous-10"))
