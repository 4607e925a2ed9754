"""Gr-Storm (thesis-top-a3-ban-gr-storm.txt section 3.5, Algorithms 10-11, eq. 3.1)."""

from __future__ import annotations

import numpy as np

from streamsched.metrics import inter_node_traffic
from streamsched.model.cluster import Cluster
from streamsched.model.taskgraph import TaskGraph
from streamsched.schedulers import get_scheduler
from streamsched.schedulers.gr_storm import gflops_order, min_cut_split, partition_by_min_cut
from streamsched.workloads import cluster, workload


def dag(n, edges, load=None) -> TaskGraph:
    src, dst, rate = zip(*edges)
    return TaskGraph.build("dag", ["op"], np.zeros(n), np.ones(n) if load is None else load, src, dst, rate)


def as_sets(parts):
    return sorted(sorted(p.tolist()) for p in parts)


def test_min_cut_of_a_chain_is_its_weakest_link():
    graph = dag(4, [(0, 1, 5.0), (1, 2, 1.0), (2, 3, 5.0)])
    upper, lower = min_cut_split(graph, np.arange(4))
    assert (sorted(upper.tolist()), sorted(lower.tolist())) == ([0, 1], [2, 3])


def test_min_cut_separates_a_weakly_fed_sink():
    """Section 3.5.2's example in spirit: the cut of least flow isolates the sink bolt.

    Two spouts (0, 1) feed bolts 2 and 3 (rates 9, 8, 7, 6), which feed each other (12) and
    the sink 4 (rates 2 and 3): every other cut carries more than the 5 into the sink.
    """
    graph = dag(5, [(0, 2, 9.0), (1, 2, 8.0), (0, 3, 7.0), (1, 3, 6.0), (2, 3, 12.0), (2, 4, 2.0), (3, 4, 3.0)])
    upper, lower = min_cut_split(graph, np.arange(5))
    assert sorted(lower.tolist()) == [4]
    assert sorted(upper.tolist()) == [0, 1, 2, 3]


def test_recursive_cuts_until_every_part_fits():
    graph = dag(6, [(0, 1, 5.0), (1, 2, 1.0), (2, 3, 5.0), (3, 4, 2.0), (4, 5, 5.0)])
    parts = partition_by_min_cut(graph, np.arange(6), max_load=2.0)
    assert as_sets(parts) == [[0, 1], [2, 3], [4, 5]]


def test_isolated_tasks_join_the_lighter_side():
    graph = dag(5, [(0, 1, 5.0), (1, 2, 1.0)])  # 3 and 4 have no edges
    upper, lower = min_cut_split(graph, np.arange(5))
    assert sorted(np.concatenate([upper, lower]).tolist()) == [0, 1, 2, 3, 4]
    assert abs(upper.size - lower.size) <= 1


def test_nodes_ranked_by_gflops_eq_3_1():
    """Table 4.1: node-a..c (8 x 3.40 GHz) before node-d..f (4 x 3.20) before node-g..i (4 x 2.53)."""
    nodes = cluster("thesis-9")
    names = [nodes.nodes[k].name for k in gflops_order(nodes)]
    assert names[:3] == ["node-a", "node-b", "node-c"] and names[-3:] == ["node-g", "node-h", "node-i"]


def test_a_graph_that_fits_one_node_uses_the_most_powerful_node_only():
    graph, nodes = workload("linear-20"), cluster("thesis-9")  # node-a has capacity 32
    placement = get_scheduler("gr-storm").schedule(graph, nodes)
    assert set(placement.node_of.tolist()) == {0}
    assert inter_node_traffic(graph, placement) == 0.0


def test_heaviest_partition_on_the_most_powerful_node():
    # two chains: 0->1->2 heavy (rates 10), 3->4->5 light (rates 1), one weak link 2->3;
    # nodes: a slow node of capacity 3 listed first, a fast one of capacity 3
    graph = dag(6, [(0, 1, 10.0), (1, 2, 10.0), (2, 3, 0.5), (3, 4, 1.0), (4, 5, 1.0)])
    nodes = Cluster.from_types("c", (1, {"capacity": 3.0, "cores": 2}), (1, {"capacity": 3.0, "cores": 8}))
    placement = get_scheduler("gr-storm").schedule(graph, nodes)
    assert placement.node_of.tolist() == [1, 1, 1, 0, 0, 0]
    assert inter_node_traffic(graph, placement) == 0.5


def test_parts_fill_one_worker_slot_each_node_by_node():
    """Algorithm 11 lines 10-16: a part per worker slot, a node's slots before the next node."""
    graph = dag(6, [(0, 1, 5.0), (1, 2, 1.0), (2, 3, 5.0), (3, 4, 1.0), (4, 5, 5.0)])
    nodes = Cluster.from_types("c", (2, {"capacity": 4.0, "slots": 2}))
    # parts must fit 4: the cut of 1 leaves {0, 1} (traffic 5) and {2, 3, 4, 5} (traffic 11)
    placement = get_scheduler("gr-storm").schedule(graph, nodes)
    assert placement.node_of.tolist() == [1, 1, 0, 0, 0, 0]
    assert placement.worker_of.tolist() == [0, 0, 0, 0, 0, 0]
    # capacity 3: {2, 3, 4, 5} is cut again; three parts fill three worker slots
    graph = dag(6, [(0, 1, 5.0), (1, 2, 1.0), (2, 3, 5.0), (3, 4, 5.0), (4, 5, 5.0)])
    small = Cluster.from_types("c", (1, {"capacity": 3.0, "slots": 2}), (1, {"capacity": 3.0, "slots": 2}))
    placement = get_scheduler("gr-storm").schedule(graph, small)
    assert placement.violations(graph, small) == []
    assert len(set(zip(placement.node_of.tolist(), placement.worker_of.tolist()))) == 3
