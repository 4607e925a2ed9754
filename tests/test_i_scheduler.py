"""I-Scheduler (i-scheduler.txt Algorithm 1, eqs. 6-9, the worked example of Fig. 2)."""

from __future__ import annotations

import numpy as np
import pytest

from streamsched.metrics import inter_node_traffic
from streamsched.model.cluster import Cluster
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.schedulers import get_scheduler
from streamsched.schedulers.i_scheduler import (
    UNFUSED,
    Reduction,
    calibration,
    direct_mapping,
    find_threshold,
    first_level,
)
from streamsched.workloads import cluster, workload


def fig2_cluster() -> Cluster:
    """Fig. 2b: one node of capacity 4, two of capacity 3, one of capacity 2."""
    return Cluster.from_types("fig2", (1, {"capacity": 4.0}), (2, {"capacity": 3.0}), (1, {"capacity": 2.0}))


def steps_of(reduction):
    return [(s.capacity, s.k, s.part_sizes, s.fused, s.unfused_after, s.fused_total) for s in reduction.steps]


@pytest.mark.parametrize("name", ["linear-12", "star-12"])
def test_fig2_worked_example_takes_the_papers_steps(name):
    """Section 4.5, Fig. 2c-f: 12 tasks, phi = 8.

    Iteration 1: k = ceil(12/4) = 3 parts of 4 (eq. 6); beta = 2 (eq. 8) but alpha =
    min(2, q = 1) = 1 part fused (eq. 9): t = 8, f = 1, 9 items > 8. Iteration 2: k =
    ceil(8/3) = 3 parts of about 3; one fusion reaches the threshold: t = 5, f = 2, 7 items.
    """
    reduction = first_level(workload(name), fig2_cluster(), phi=8, use_solver=True)
    assert steps_of(reduction) == [
        (4.0, 3, (4, 4, 4), 1, 8, 1),
        (3.0, 3, (3, 3, 2), 1, 5, 2),
    ]
    assert reduction.use_solver
    sizes = np.bincount(reduction.group_of[reduction.group_of != UNFUSED])
    assert sizes.tolist() == [4, 3]
    assert int(reduction.item_of().max()) + 1 == 7
    # Fig. 2g: the solver places the 7 items
    placement = get_scheduler("i-scheduler", phi=8, theta=10.0).schedule(workload(name), fig2_cluster())
    meta = placement.metadata
    assert meta["mode"] == "solver" and meta["items"] == 7 and meta["solver_status"] == "optimal"
    assert placement.violations(workload(name), fig2_cluster()) == []
    assert meta["cost"] == pytest.approx(meta["solver_objective"])
    # the fused parts stay together
    node_of = placement.node_of
    for group in range(reduction.n_groups):
        assert len(set(node_of[reduction.group_of == group].tolist())) == 1


def test_fig2_fallback_fuses_everything_and_maps_directly():
    """theta = 0 (lines 5-7, 40, 51): alpha = min(k_i, q_i) fused per class until no task is left."""
    graph = workload("linear-12")
    reduction = first_level(graph, fig2_cluster(), phi=0, use_solver=False)
    assert steps_of(reduction) == [
        (4.0, 3, (4, 4, 4), 1, 8, 1),
        (3.0, 3, (3, 3, 2), 2, 2, 3),
        (2.0, 1, (2,), 1, 0, 4),  # k = 1: the rest fused into one task (lines 28-30)
    ]
    node_of = direct_mapping(graph, fig2_cluster(), reduction)
    # each fused part on its own node of its class: group 0 -> node 0 (cap 4), groups 1-2 ->
    # nodes 1-2 (cap 3), group 3 -> node 3 (cap 2)
    for group, node in enumerate([0, 1, 2, 3]):
        assert set(node_of[reduction.group_of == group].tolist()) == {node}


def test_k_above_phi_switches_to_the_fallback():
    """Lines 32-35: 20 tasks on nodes of 4 need k = 5 parts > phi = 2."""
    placement = get_scheduler("i-scheduler", phi=2).schedule(workload("linear-20"), cluster("homogeneous-10"))
    meta = placement.metadata
    assert meta["mode"] == "fallback"
    assert [s["fallback"] for s in meta["steps"]] == [True]
    # 5 parts of 4 consecutive tasks = 2 operators each: 4 boundaries x 4 pair edges
    assert meta["cost"] == 16.0


def test_theta_zero_is_the_fallback_heuristic():
    graph, nodes = workload("diamond-20"), cluster("heterogeneous-10")
    placement = get_scheduler("i-scheduler", theta=0.0).schedule(graph, nodes)
    assert placement.metadata["mode"] == "fallback" and placement.metadata["phi"] == 0
    assert placement.violations(graph, nodes) == []


def test_small_graph_goes_to_the_solver_whole():
    """t + f <= phi from the start: no fusion, the solver gets every task (Fig. 1 sized)."""
    graph, nodes = workload("linear-10"), cluster("homogeneous-10")
    placement = get_scheduler("i-scheduler", phi=10, theta=10.0).schedule(graph, nodes)
    assert placement.metadata["steps"] == [] and placement.metadata["items"] == 10
    assert placement.metadata["cost"] == 8.0  # 5 operators of 2: pairs of operators per node, 2 cuts x 4


def test_direct_mapping_puts_leftover_tasks_where_their_traffic_is():
    # tasks 0-1 fused for node 0 (capacity 3), tasks 2-3 unfused: 2 talks to 0 and 1, 3 to nothing
    from streamsched.model.taskgraph import TaskGraph

    graph = TaskGraph.build("g", ["op"], np.zeros(4), np.ones(4), [0, 1, 2], [1, 2, 3], [5.0, 4.0, 1.0])
    nodes = Cluster.from_types("c", (1, {"capacity": 3.0}), (1, {"capacity": 2.0}))
    reduction = Reduction(np.array([0, 0, UNFUSED, UNFUSED]), (0,), (), False, 0)
    node_of = direct_mapping(graph, nodes, reduction)
    assert node_of.tolist() == [0, 0, 0, 1]  # 2 joins 0-1 (rate 4); node 0 is then full
    assert inter_node_traffic(graph, Placement.build(node_of)) == 1.0


def test_find_threshold_reads_the_largest_size_solved_within_theta():
    table = {"sizes": [4, 6, 8, 10, 12], "seconds": [0.01, 0.1, 0.5, 2.0, 0.9]}
    assert find_threshold(1.0, table) == 8  # 10 took 2 s; 12 is beyond a slower size
    assert find_threshold(0.05, table) == 4
    assert find_threshold(0.001, table) == 0
    assert find_threshold(5.0, table) == 12


def test_stored_calibration_says_how_it_was_measured():
    table = calibration()
    assert "benchmarks/partitioning_calibrate.py" in table["command"]
    assert table["sizes"] == sorted(table["sizes"]) and len(table["sizes"]) == len(table["seconds"])
    assert all(s >= 0 for s in table["seconds"])
    assert find_threshold(1.0) >= 4


def test_second_level_places_workers():
    graph, nodes = workload("star-24"), cluster("high-low-1-2")
    placement = get_scheduler("i-scheduler", theta=0.0, max_tasks_per_worker=3).schedule(graph, nodes)
    assert placement.violations(graph, nodes) == []
    for k in range(nodes.n_nodes):
        counts = np.bincount(placement.worker_of[placement.node_of == k])
        if counts.size:
            assert counts.size <= nodes.slots[k]
            assert counts.max() <= max(3, -(-counts.sum() // nodes.slots[k]))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_measured_loads_near_capacity_still_pack(seed):
    """Regression: monitored loads are real-valued (about 1, not exactly 1), so eq. 6's
    ceil(load / c) parts may not pack; the partitioning then takes one part more."""
    base = workload("diamond-30")
    rng = np.random.default_rng(seed)
    graph = TaskGraph.build("measured", base.operator_names, base.task_operator, rng.uniform(0.97, 1.03, base.n_tasks),
                            base.src, base.dst, base.rate * rng.uniform(80, 120, base.n_edges))
    nodes = cluster("heterogeneous-10")
    for theta in (0.0, 1.0):
        placement = get_scheduler("i-scheduler", theta=theta).schedule(graph, nodes, seed=seed)
        assert placement.violations(graph, nodes) == []
