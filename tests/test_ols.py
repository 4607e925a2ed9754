"""OLS (Aniello et al.'s online scheduler): hand-computed plans, knob semantics, cumulative
node load, and the traffic.improvement rescheduling rule."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from streamsched import workloads
from streamsched.metrics import nodes_used
from streamsched.model import Cluster, Placement, TaskGraph
from streamsched.schedulers import get_scheduler
from streamsched.schedulers.ols import ols_plan
from streamsched.schedulers.replanning import should_reschedule


def four_tasks() -> TaskGraph:
    # a-b 10, c-d 8, b-c 1
    return TaskGraph.build("four", ("t",), [0, 0, 0, 0], np.ones(4), [0, 2, 1], [1, 3, 2], [10.0, 8.0, 1.0])


def test_hand_computed_plan():
    """Phase 1: (a, b) into slot 0, (c, d) into slot 1; phase 2: the slots cannot share a node of
    capacity 2, so each takes the least loaded node: cost is the b-c rate, 1."""
    graph = four_tasks()
    cluster = Cluster.from_types("two", (2, {"capacity": 2.0}))
    node_of, worker_of = ols_plan(graph, cluster, alfa=0.0, beta=1.0, gamma=1.1, delta=0.0)
    assert node_of.tolist() == [0, 0, 1, 1]
    assert worker_of.tolist() == [0, 0, 0, 0]
    assert get_scheduler("ols", beta=1.0).schedule(graph, cluster).metadata["cost"] == 1.0


def test_beta_sets_the_number_of_nodes():
    graph, cluster = workloads.workload("linear-16"), workloads.cluster("homogeneous-10")
    fewest = get_scheduler("ols", beta=0.0).schedule(graph, cluster)
    every = get_scheduler("ols", beta=1.0, gamma=2.0).schedule(graph, cluster)
    assert nodes_used(fewest) == 4  # 16 tasks, capacity 4 each
    assert nodes_used(every) == 10


def test_delta_sets_slots_per_node():
    graph, cluster = workloads.workload("linear-16"), workloads.cluster("homogeneous-10")
    one = get_scheduler("ols", beta=0.0, delta=0.0).schedule(graph, cluster)
    four = get_scheduler("ols", beta=0.0, delta=1.0, gamma=4.0).schedule(graph, cluster)
    assert set(one.worker_of.tolist()) == {0}
    assert set(four.worker_of.tolist()) > {0}


def test_alfa_bounds_executors_per_slot():
    graph = workloads.workload("linear-16")
    cluster = Cluster.from_types("big", (2, {"capacity": 16.0, "slots": 4}))
    placement = get_scheduler("ols", beta=1.0, delta=1.0, gamma=10.0, alfa=0.0).schedule(graph, cluster)
    slots = placement.node_of.astype(np.int64) * 4 + placement.worker_of
    assert np.bincount(slots).max() <= 2  # ceil(16 / 8)


def test_node_load_accumulates_under_every_knob_setting():
    """The public code never adds a slot's load to its node; here no node is ever over capacity."""
    cluster = workloads.cluster("heterogeneous-10")
    for shape, n, alfa, beta, gamma, delta in itertools.product(
            ("linear", "diamond", "star"), (18, 32), (0.0, 1.0), (0.0, 1.0), (1.0, 2.0), (0.0, 1.0)):
        graph = workloads.workload(f"{shape}-{n}")
        placement = get_scheduler("ols", alfa=alfa, beta=beta, gamma=gamma, delta=delta).schedule(graph, cluster)
        assert placement.violations(graph, cluster) == [], (shape, n, alfa, beta, gamma, delta)


def test_should_reschedule_exactly_at_the_threshold():
    """At the boundary in floating point: 75 % of 20 leaves 20 x 0.25 = 5.0 exactly (0.25 and
    the traffic sums are exact binary fractions), and a proposal of traffic 5 cuts exactly 75 %:
    it is adopted (``<=``, Aniello et al.'s "at least"); a threshold a hair above is not met."""
    graph = TaskGraph.build("exact", list("abcd"), [0, 1, 2, 3], [1.0] * 4, [0, 1, 2], [1, 2, 3], [5.0, 5.0, 10.0])
    current = Placement.build([0, 1, 0, 1])  # cuts a-b, b-c, c-d: 20
    proposed = Placement.build([0, 0, 1, 1])  # cuts b-c: 5
    assert 20 * (1 - 75.0 / 100) == 5.0
    assert should_reschedule(graph, current, proposed, 75.0)
    assert not should_reschedule(graph, current, proposed, 75.0001)


def test_should_reschedule_by_traffic_improvement():
    graph = four_tasks()
    current = Placement.build([0, 1, 0, 1])  # cuts a-b, c-d, b-c: 19
    better = Placement.build([0, 0, 1, 1])  # cuts b-c: 1
    assert should_reschedule(graph, current, better, 1.0)
    assert should_reschedule(graph, current, better, 94.7)  # (19 - 1) / 19 = 94.74 %
    assert not should_reschedule(graph, current, better, 95.0)
    assert not should_reschedule(graph, better, better, 0.0)  # no cut at all
    assert not should_reschedule(graph, better, current, 0.0)
    with pytest.raises(ValueError, match="traffic_improvement"):
        should_reschedule(graph, current, better, 120.0)
