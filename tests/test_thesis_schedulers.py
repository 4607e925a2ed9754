"""TOP-Storm, A3-Storm and BAN-Storm against the worked examples of thesis-top-a3-ban-gr-storm.txt."""

from __future__ import annotations

import numpy as np
import pytest

from streamsched import workloads
from streamsched.errors import InfeasibleError
from streamsched.metrics import nodes_used
from streamsched.model import Cluster, Node, TaskGraph
from streamsched.schedulers import get_scheduler
from streamsched.schedulers._executor_grouping import (
    computation_power,
    group_executors,
    node_power,
    rank_nodes,
)
from streamsched.schedulers.ban_storm import power_weights

#: Table 3.1: name, GHz, RAM GB, flops/cycle, cores.
TABLE_3_1 = [("Node-D", 3.4, 12, 16, 4), ("Node-E", 3.2, 16, 8, 8), ("Node-C", 3.2, 10, 16, 2),
             ("Node-B", 2.8, 8, 4, 4), ("Node-A", 2.4, 4, 4, 4), ("Node-F", 2.8, 12, 4, 2)]
#: Table 3.7: name, cores, GHz, flops/cycle, RAM GB, Mbps.
TABLE_3_7 = [("Node A", 4, 2.8, 2, 12, 100), ("Node B", 4, 2.4, 2, 12, 100), ("Node C", 2, 2.2, 2, 16, 100),
             ("Node D", 2, 2.0, 1, 20, 100), ("Node E", 2, 1.8, 1, 24, 100)]


def table_3_1_nodes() -> list[Node]:
    rows = sorted(TABLE_3_1, key=lambda r: r[0])  # cluster order A..F, not the table's
    return [Node(name, 1.0, ghz=ghz, ram_mb=ram * 1024, flops_per_cycle=fpc, cores=cores)
            for name, ghz, ram, fpc, cores in rows]


def table_3_7_nodes() -> list[Node]:
    return [Node(name, 1.0, cores=cores, ghz=ghz, flops_per_cycle=fpc, ram_mb=ram * 1024, bandwidth_mbps=mbps)
            for name, cores, ghz, fpc, ram, mbps in TABLE_3_7]


@pytest.mark.parametrize("alpha, expected", [
    (0.8, ["Node-D", "Node-E", "Node-C", "Node-B", "Node-A", "Node-F"]),  # Table 3.1
    (0.2, ["Node-E", "Node-D", "Node-C", "Node-B", "Node-F", "Node-A"]),  # Table 3.2
])
def test_tables_3_1_and_3_2_node_index(alpha, expected):
    nodes = table_3_1_nodes()
    assert [nodes[k].name for k in rank_nodes([computation_power(n, alpha) for n in nodes])] == expected


def test_eq_3_2_by_hand():
    node_d = table_3_1_nodes()[3]
    assert computation_power(node_d, 0.8) == pytest.approx(0.8 * 4 * 3.4 * 16 + 0.2 * 12)


@pytest.mark.parametrize("topology_type, expected, printed", [
    ("cpu", ["Node A", "Node B", "Node C", "Node E", "Node D"], [39, 38, 33, 33, 32]),     # Table 3.8
    ("memory", ["Node E", "Node A", "Node B", "Node D", "Node C"], [38, 37, 36, 36, 35]),  # Table 3.9
    ("network", ["Node A", "Node B", "Node E", "Node C", "Node D"], [59, 58, 57, 56, 56]),  # Table 3.10
])
def test_tables_3_8_to_3_10_node_index(topology_type, expected, printed):
    nodes = table_3_7_nodes()
    powers = [node_power(n, *power_weights(topology_type)) for n in nodes]
    order = rank_nodes(powers)
    assert [nodes[k].name for k in order] == expected
    assert [int(np.floor(powers[k] + 0.5)) for k in order] == printed


def test_algorithm_9_weights():
    assert power_weights("cpu") == (0.5, 0.25, 0.25)
    assert power_weights("memory") == (0.25, 0.5, 0.25)
    assert power_weights("network") == (0.25, 0.25, 0.5)
    assert power_weights("io") == (0.25, 0.25, 0.25)


def named_graph(edges: list[tuple[str, str, float]], names: list[str]) -> TaskGraph:
    index = {name: k for k, name in enumerate(names)}
    src, dst, rate = zip(*[(index[a], index[b], r) for a, b, r in edges])
    return TaskGraph.build("example", tuple(names), range(len(names)), np.ones(len(names)), src, dst, rate,
                           merge_duplicates=False)


def figure_3_4() -> TaskGraph:
    """Figure 3.4 / Table 3.5: executors A-F with inter-executor traffic."""
    edges = [("A", "B", 6), ("A", "D", 1), ("B", "C", 7), ("B", "E", 9), ("C", "F", 2), ("D", "E", 8), ("E", "F", 7)]
    return named_graph(edges, list("ABCDEF"))


def test_tables_3_5_and_3_6_a3_grouping():
    """Table 3.6: B-E (9) opens the first slot, D (8 with E) joins it; C-F opens the second, A is left over."""
    graph = figure_3_4()
    slots = group_executors(graph, 2, by_traffic=True)
    labels = [[graph.operator_names[t] for t in slot] for slot in slots]
    assert labels == [["B", "E", "D"], ["C", "F", "A"]]


def test_figure_3_3_top_storm_grouping():
    """Table 3.4: Spout A-Bolt A first; Bolt B is the only executor connected to both."""
    names = ["Spout A", "Spout B", "Bolt A", "Bolt B", "Bolt C", "Bolt D"]
    edges = [("Spout A", "Bolt A", 1), ("Spout A", "Bolt B", 1), ("Spout A", "Bolt C", 1), ("Spout B", "Bolt C", 1),
             ("Bolt A", "Bolt B", 1), ("Bolt A", "Bolt D", 1), ("Bolt B", "Bolt C", 1), ("Bolt B", "Bolt D", 1),
             ("Bolt C", "Bolt D", 1)]
    graph = named_graph(edges, names)
    slots = group_executors(graph, 2, by_traffic=False)
    assert [graph.operator_names[t] for t in slots[0]] == ["Spout A", "Bolt A", "Bolt B"]
    assert sorted(graph.operator_names[t] for t in slots[1]) == ["Bolt C", "Bolt D", "Spout B"]


def test_algorithm_5_special_cases():
    graph = figure_3_4()
    assert group_executors(graph, 1, by_traffic=True) == [list(range(6))]
    assert group_executors(graph, 6, by_traffic=True) == [[t] for t in range(6)]


def test_leftovers_go_round_robin_from_slot_1():
    # 5 isolated-ish executors: one pair, then three without interaction, omega = 3
    graph = named_graph([("a", "b", 5.0)], list("abcde"))
    slots = group_executors(graph, 3, by_traffic=True)
    labels = [[graph.operator_names[t] for t in slot] for slot in slots]
    assert labels == [["a", "b", "e"], ["c"], ["d"]]


@pytest.mark.parametrize("name", ["top-storm", "a3-storm", "ban-storm"])
def test_busiest_slot_on_most_powerful_node_and_fewest_nodes(name):
    """Algorithms 3/6/8: slots fill the most powerful node's free slots before the next node."""
    nodes = [Node("slow", 100.0, slots=2, cores=2, ghz=2.0), Node("fast", 100.0, slots=2, cores=8, ghz=3.4),
             Node("mid", 100.0, slots=2, cores=4, ghz=3.0)]
    cluster = Cluster("three", tuple(nodes))
    graph = figure_3_4()
    placement = get_scheduler(name, workers=3).schedule(graph, cluster)
    assert nodes_used(placement) == 2
    assert set(placement.node_of.tolist()) == {1, 2}
    assert placement.metadata["workers"] == 3


def test_a3_slot_with_most_traffic_goes_first():
    graph = figure_3_4()
    cluster = Cluster("one-slot-each", (Node("weak", 10.0, slots=1, cores=1), Node("strong", 10.0, slots=1, cores=16)))
    placement = get_scheduler("a3-storm", workers=2).schedule(graph, cluster)
    # slot {B, E, D} touches 9 + 8 + 6 + 7 + 7 + 1 = 38 > slot {C, F, A}: it takes the strong node
    assert placement.node_of[[1, 4, 3]].tolist() == [1, 1, 1]


@pytest.mark.parametrize("name", ["top-storm", "a3-storm", "ban-storm"])
def test_capacity_respected_and_given_workers_that_cannot_fit_is_infeasible(name):
    graph, cluster = workloads.workload("diamond-20"), workloads.cluster("heterogeneous-10")
    placement = get_scheduler(name).schedule(graph, cluster)
    assert placement.violations(graph, cluster) == []
    with pytest.raises(InfeasibleError, match="worker slots"):
        get_scheduler(name, workers=2, strict=True).schedule(graph, cluster)  # slots of 10 tasks fit no node
    repaired = get_scheduler(name, workers=2).schedule(graph, cluster)  # without strict: the capacity repair
    assert repaired.metadata["repaired"] is True and repaired.violations(graph, cluster) == []


def test_wordcount_on_thesis_cluster_uses_one_node():
    graph, cluster = workloads.workload("wordcount"), workloads.cluster("thesis-9")
    for name in ("top-storm", "a3-storm", "ban-storm"):
        placement = get_scheduler(name).schedule(graph, cluster)
        assert nodes_used(placement) == 1 and placement.metadata["cost"] == 0.0
