"""Metrics computed by hand on small cases, and the shuffle closed form of prior-art.md."""

import numpy as np
import pytest

from streamsched import metrics
from streamsched.model import Cluster, Node, Operator, Placement, Stream, TaskGraph, Topology
from streamsched.schedulers import get_scheduler


@pytest.fixture
def five_tasks():
    graph = TaskGraph.build("hand", ("t",), [0] * 5, [1] * 5,
                            src=[0, 0, 1, 2, 3], dst=[1, 2, 3, 3, 4], rate=[3, 2, 4, 1, 5],
                            bytes_rate=[30, 20, 40, 10, 50])
    cluster = Cluster("c", (Node("a", 3, rack="r1"), Node("b", 3, rack="r1"), Node("c", 3, rack="r2"),
                            Node("d", 3, rack="r2")))
    placement = Placement.build([0, 0, 1, 1, 2], [0, 1, 0, 0, 0])
    return graph, cluster, placement


def test_inter_node_traffic_by_hand(five_tasks):
    graph, _, placement = five_tasks
    # cut edges: 0->2 (2), 1->3 (4), 3->4 (5)
    assert metrics.inter_node_traffic(graph, placement) == 11.0
    assert metrics.inter_node_traffic(graph, placement, "bytes") == 110.0


def test_inter_worker_traffic_adds_edges_between_workers_of_a_node(five_tasks):
    graph, _, placement = five_tasks
    assert metrics.inter_worker_traffic(graph, placement) == 14.0  # + 0->1 (3); 2->3 share worker 0


def test_loads_and_imbalance_by_hand(five_tasks):
    graph, cluster, placement = five_tasks
    assert metrics.node_loads(graph, placement, cluster).tolist() == [2, 2, 1, 0]
    assert metrics.nodes_used(placement) == 3
    assert metrics.workers_used(placement) == 4
    # fischer-metis-scheduler.txt loadImba: max pw_k / apw = 2 / (5 / 4)
    assert metrics.load_imbalance(graph, placement, cluster) == pytest.approx(1.6)
    assert metrics.utilisation(graph, placement, cluster).tolist() == pytest.approx([2 / 3, 2 / 3, 1 / 3, 0])


def test_network_distance_by_hand(five_tasks):
    graph, cluster, placement = five_tasks
    # 0->1 other worker (1 x 3), 0->2 other node (2 x 2), 1->3 other node (2 x 4),
    # 2->3 same worker (0), 3->4 other rack (3 x 5)
    assert metrics.edge_distances(graph, placement, cluster).tolist() == [1, 2, 2, 0, 3]
    assert metrics.network_distance(graph, placement, cluster) == 30.0


def test_evaluate_reports_validity(five_tasks):
    graph, cluster, placement = five_tasks
    report = metrics.evaluate(graph, placement, cluster)
    assert report["valid"] and report["inter_node_traffic"] == 11.0 and report["total_traffic"] == 15.0


@pytest.mark.parametrize("n_nodes", [2, 3, 4, 6])
def test_shuffle_spread_evenly_closed_form(n_nodes):
    """prior-art.md: a shuffle edge between two operators of p tasks (rate r per source task),
    spread evenly over N equal nodes, has inter-node traffic r * p * (1 - 1/N)."""
    p, r = 12, 5.0
    topo = Topology("shuffle", (Operator("up", p, "source", source_rate=r * p, task_load=1.0),
                                Operator("down", p, "sink", task_load=1.0)), (Stream("up", "down"),))
    graph = TaskGraph.from_topology(topo)
    cluster = Cluster.from_types("even", (n_nodes, {"capacity": 2.0 * p, "slots": 1}))
    placement = get_scheduler("even").schedule(graph, cluster)  # task k and p + k on node k % N
    assert metrics.node_loads(graph, placement, cluster).tolist() == [2 * p / n_nodes] * n_nodes
    assert metrics.inter_node_traffic(graph, placement) == pytest.approx(r * p * (1 - 1 / n_nodes))


def test_one_traffic_objective_for_metrics_solvers_and_partitioners():
    """cut_traffic by hand (a -5-> b cut, b -3-> c kept: 5), and inter-node traffic, the solver's
    cost and the partitioner's cut (each undirected pair once) give the same value on a graph
    with both directions of a pair."""
    from streamsched.metrics import cut_traffic
    from streamsched.partitioning.backends import CSRGraph, cut_weight
    from streamsched.solvers.problem import build_problem

    assert cut_traffic(np.array([0, 1]), np.array([1, 2]), np.array([5.0, 3.0]), np.array([0, 1, 1])) == 5.0
    graph = TaskGraph.build("g", list("abcd"), [0, 1, 2, 3], [1.0] * 4, [0, 1, 1, 2, 3], [1, 0, 2, 3, 0],
                            [2.0, 3.0, 4.0, 7.0, 1.5])
    placement = Placement.build([0, 1, 1, 0])
    expected = 2.0 + 3.0 + 7.0  # a<->b both ways, c->d; b->c and d->a stay
    assert metrics.inter_node_traffic(graph, placement) == expected
    problem = build_problem(graph.load, graph.src, graph.dst, graph.rate, [4.0, 4.0])
    assert problem.cost(placement.node_of) == expected
    undirected = graph.undirected
    assert CSRGraph.from_matrix(undirected).cut(placement.node_of) == expected
    assert cut_weight(undirected, placement.node_of) == expected
