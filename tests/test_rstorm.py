"""R-Storm: executor order, CPU/memory fit, backtracking, failure messages, and Storm's
heterogeneous-cluster case (prior-art.md: strong node 800 CPU / 4096 MB, weak 200 / 1024)."""

from __future__ import annotations

import numpy as np
import pytest

from streamsched import workloads
from streamsched.errors import InfeasibleError
from streamsched.model import Cluster, Node, TaskGraph
from streamsched.schedulers import get_scheduler
from streamsched.schedulers.base import residual_cluster, schedule_many
from streamsched.schedulers.r_storm import executor_order, node_cpu, node_order, task_demands

#: load = CPU / 10 with R-Storm's default cpu_per_load of 10; capacity mirrors CPU the same way.
STRONG = Node("strong", capacity=80.0, cores=8, ram_mb=4096.0, slots=4)
WEAK = Node("weak", capacity=20.0, cores=2, ram_mb=1024.0, slots=4)
HETEROGENEOUS = Cluster("storm-heterogeneous", (STRONG, WEAK))


def topo(name: str, executors: int, cpu: float, memory_mb: float) -> TaskGraph:
    """``executors`` copies of one spout, unconnected (the Storm test's resources only matter)."""
    n = executors
    return TaskGraph.build(name, ("spout",), np.zeros(n, int), np.full(n, cpu / 10), [], [], [],
                           memory_mb=np.full(n, memory_mb))


TOPO = {
    1: topo("topo1", 1, 300, 2048),
    2: topo("topo2", 4, 100, 512),
    3: topo("topo3", 4, 20, 256),
    4: topo("topo4", 12, 30, 100),
    5: topo("topo5", 40, 25, 128),
}


def used(graph: TaskGraph, placement, node: int) -> tuple[float, float]:
    on = placement.node_of == node
    return float(graph.load[on].sum() * 10), float(graph.memory_mb[on].sum())


def test_topologies_1_to_3_exhaust_a_resource_on_each_node():
    graphs = [TOPO[1], TOPO[2], TOPO[3]]
    placements = schedule_many(get_scheduler("r-storm"), graphs, HETEROGENEOUS)
    cpu = [sum(used(g, p, k)[0] for g, p in zip(graphs, placements)) for k in (0, 1)]
    mem = [sum(used(g, p, k)[1] for g, p in zip(graphs, placements)) for k in (0, 1)]
    assert mem == [4096.0, 1024.0]  # memory of both nodes exactly used up
    assert cpu[0] <= 800 and cpu[1] <= 200
    assert placements[0].node_of.tolist() == [0]  # topo1 on the strong node


def test_topologies_1_2_4_exactly_two_of_three_fit():
    placements = schedule_many(get_scheduler("r-storm"), [TOPO[1], TOPO[2], TOPO[4]], HETEROGENEOUS,
                               skip_infeasible=True)
    assert [p is not None for p in placements] == [True, True, False]


def test_topology_5_alone_exhausts_both_resources():
    graph = TOPO[5]
    placement = get_scheduler("r-storm").schedule(graph, HETEROGENEOUS)
    assert [used(graph, placement, k) for k in (0, 1)] == [(800.0, 4096.0), (200.0, 1024.0)]


def test_too_large_for_the_cluster_is_refused_early():
    with pytest.raises(InfeasibleError, match="needs load 36 but cluster 'storm-heterogeneous' has capacity 30"):
        schedule_many(get_scheduler("r-storm"), [TOPO[1], TOPO[2], TOPO[4]], HETEROGENEOUS)


def test_failure_lists_available_and_required_resources():
    """R-Storm's own refusals (``strict``: CPU and memory are its hard limits)."""
    roomy = Cluster("roomy", tuple(Node(n.name, 1000.0, cores=n.cores, ram_mb=n.ram_mb) for n in (STRONG, WEAK)))
    with pytest.raises(InfeasibleError, match="'topo4' needs 360 CPU in total; .* have 300 CPU available"):
        schedule_many(get_scheduler("r-storm", strict=True), [TOPO[1], TOPO[2], TOPO[4]], roomy)
    with pytest.raises(InfeasibleError) as info:  # 900 of 1000 CPU, but no node has 300 left
        get_scheduler("r-storm", strict=True).schedule(topo("three", 3, 300, 100), roomy)
    message = str(info.value)
    assert "executor spout[2] of 'three' needs 300 CPU, 100 MB" in message
    assert "available: strong 200 CPU/3896 MB/load 940, weak 200 CPU/1024 MB/load 1000" in message


def test_memory_is_a_hard_limit():
    graph = topo("fat", 2, 10, 3000)
    cluster = Cluster("c", (Node("a", 100.0, ram_mb=4096.0), Node("b", 100.0, ram_mb=2048.0)))
    with pytest.raises(InfeasibleError, match="needs 10 CPU, 3000 MB"):
        get_scheduler("r-storm", strict=True).schedule(graph, cluster)


def test_backtracking_finds_what_first_fit_misses():
    """CPU 150, 150, 400 on nodes of 400 and 300 CPU: first fit puts both 150s on the first node;
    only moving them both to the second leaves room for the 400."""
    graph = TaskGraph.build("bt", ("spout",), [0, 0, 0], [150.0, 150.0, 400.0], [], [], [])
    cluster = Cluster("c", (Node("a", 1000.0, cores=4), Node("b", 1000.0, cores=3)))
    placement = get_scheduler("r-storm", cpu_per_load=1.0).schedule(graph, cluster)
    assert placement.node_of.tolist() == [1, 1, 0]
    with pytest.raises(InfeasibleError, match="after 2 placements"):
        get_scheduler("r-storm", cpu_per_load=1.0, max_state_search=2, strict=True).schedule(graph, cluster)


def test_executor_order_rstorm_diamond():
    """spout and output have 4 neighbours, each bolt 2: spout, its bolts, output; then round robin."""
    graph = workloads.workload("rstorm-diamond")
    labels = [graph.task_label(t) for t in executor_order(graph)]
    assert labels[:7] == ["spout[0]", "bolt1[0]", "bolt2[0]", "bolt3[0]", "bolt4[0]", "output[0]", "spout[1]"]
    assert sorted(executor_order(graph)) == list(range(graph.n_tasks))


def test_node_order_most_available_first():
    cpu = np.array([200.0, 800.0, 400.0])
    memory = np.array([1024.0, 4096.0, 4096.0])
    assert node_order(cpu, memory) == [1, 2, 0]


def test_consolidates_micro_benchmark_on_few_nodes():
    graph, cluster = workloads.workload("linear-16"), workloads.cluster("homogeneous-10")
    placement = get_scheduler("r-storm").schedule(graph, cluster)
    assert placement.violations(graph, cluster) == []
    assert len(set(placement.node_of.tolist())) == 4  # 16 tasks of load 1 on nodes of capacity 4
    assert set(placement.worker_of.tolist()) == {0}  # one worker per node for the topology


def test_more_memory_than_the_cluster_is_refused_at_once():
    graph = topo("huge", 40, 10, 200)
    with pytest.raises(InfeasibleError, match="needs 8000 MB in total; .* have 5120 MB available"):
        get_scheduler("r-storm", strict=True).schedule(graph, HETEROGENEOUS)


def test_storm_defaults_for_unit_load_tasks():
    """A micro-benchmark task (load 1, no memory given) costs Storm's component default, 10 CPU /
    128 MB; a default node offers Storm's supervisor default, 400 CPU / 4096 MB."""
    graph = TaskGraph.build("unit", ("spout",), [0, 0], [1.0, 1.0], [0], [1], [1.0])
    cpu, memory = task_demands(graph, 10.0, 128.0)
    assert cpu.tolist() == [10.0, 10.0] and memory.tolist() == [128.0, 128.0]
    assert node_cpu(Cluster("one", (Node("n", 4.0),)), 10.0).tolist() == [400.0]


def test_cpu_of_earlier_topologies_is_charged():
    cluster = Cluster("c", (Node("n1", 1000.0, cores=8), Node("n2", 1000.0, cores=4)))
    residual = residual_cluster(cluster, np.array([60.0, 0.0]), np.zeros(2), [{0}, set()], np.zeros(2, bool))
    assert node_cpu(residual, 10.0).tolist() == [800.0 - 600.0, 400.0]
    # so a 300-CPU executor now skips n1 (200 left) although n1 has more cores
    placed = schedule_many(get_scheduler("r-storm"), [topo("a", 2, 300, 10), topo("b", 1, 300, 10)], cluster)
    assert placed[0].node_of.tolist() == [0, 0] and placed[1].node_of.tolist() == [1]
