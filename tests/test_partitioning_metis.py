"""Fischer's METIS scheduler (fischer-metis-scheduler.txt III and IV)."""

from __future__ import annotations

import numpy as np
import pytest

from streamsched.metrics import inter_node_traffic
from streamsched.model.cluster import Cluster
from streamsched.model.taskgraph import TaskGraph
from streamsched.schedulers import get_scheduler
from streamsched.schedulers.metis import _heaviest_to_largest, traffic_weights
from streamsched.workloads import cluster, workload


@pytest.mark.parametrize("name", ["parallel", "payload"])
@pytest.mark.parametrize("nodes, capacity", [(10, 8.0), (5, 16.0), (10, 12.0)])
def test_chains_that_fit_a_node_cost_nothing(name, nodes, capacity):
    """IV-C, Fig. 3: P = 10 chains of D + 1 = 8 tasks; a node that holds a chain holds it whole."""
    graph = workload(name)
    c = Cluster.from_types("c", (nodes, {"capacity": capacity}))
    placement = get_scheduler("metis").schedule(graph, c, seed=0)
    assert placement.violations(graph, c) == []
    assert inter_node_traffic(graph, placement) == 0.0


def test_vertex_weight_is_tuples_emitted_plus_received():
    graph = TaskGraph.build("g", ["op"], np.zeros(3), np.ones(3), [0, 1, 0], [1, 2, 2], [5.0, 2.0, 1.0])
    np.testing.assert_array_equal(traffic_weights(graph), [6.0, 7.0, 3.0])


def test_heaviest_part_goes_to_the_largest_node():
    parts = np.array([0, 0, 0, 1, 2, 2])
    relabelled = _heaviest_to_largest(parts, np.ones(6), np.array([2.0, 5.0, 3.0]))
    # part 0 (load 3) -> node 1 (cap 5), part 2 (load 2) -> node 2 (cap 3), part 1 -> node 0
    np.testing.assert_array_equal(relabelled, [1, 1, 1, 0, 2, 2])


@pytest.mark.parametrize("part_sizes", ["equal", "capacity"])
def test_heterogeneous_cluster_gets_a_valid_placement(part_sizes):
    graph, nodes = workload("taxi-routes"), cluster("high-low-2-3")
    placement = get_scheduler("metis", part_sizes=part_sizes).schedule(graph, nodes)
    assert placement.violations(graph, nodes) == []


def test_one_part_per_worker_slot():
    graph, nodes = workload("diamond-20"), Cluster.from_types("c", (2, {"capacity": 12.0, "slots": 3}))
    placement = get_scheduler("metis", parts="workers").schedule(graph, nodes)
    assert placement.violations(graph, nodes) == []
    assert placement.metadata["parts"] == 6
    # each worker holds at most capacity / slots = 4 tasks
    key = placement.node_of * 10 + placement.worker_of
    assert np.bincount(key).max() <= 4


def test_objective_and_backend_choices_run():
    graph, nodes = workload("wordcount"), cluster("homogeneous-10")
    for params in ({"objective": "cut"}, {"method": "auto"}, {"backend": "kahip", "objective": "cut"}):
        if params.get("backend") == "kahip":
            pytest.importorskip("kahip")
        placement = get_scheduler("metis", **params).schedule(graph, nodes, seed=1)
        assert placement.violations(graph, nodes) == []


def test_recursive_bisection_needs_the_cut_objective():
    from streamsched.errors import ParameterError

    with pytest.raises(ParameterError, match="metis.params.method"):
        get_scheduler("metis", method="recursive").schedule(workload("linear-10"), cluster("homogeneous-10"))
