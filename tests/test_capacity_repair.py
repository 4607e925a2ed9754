"""Every cluster heuristic places every feasible graph: where the paper's packing step fails on
measured-style inputs (fractional loads, near-full heterogeneous clusters, many tasks for few
worker slots), ``Scheduler.schedule`` finishes with the one capacity repair
(``streamsched.schedulers.replanning.repair``) and says so in the metadata; ``strict=true``
keeps the paper's refusal. Every placement is checked by :mod:`placement_checker`, which
shares no code with the model's validator."""

from __future__ import annotations

import numpy as np
import pytest

from streamsched import workloads
from streamsched.errors import InfeasibleError
from streamsched.metrics import inter_node_traffic
from streamsched.model import Cluster, Placement, TaskGraph
from streamsched.schedulers import family, get_scheduler, scheduler_class
from streamsched.schedulers.base import STRICT, PackingFailed, Scheduler
from streamsched.schedulers.replanning import repair

import placement_checker

HEURISTICS = ["a3-storm", "ban-storm", "even", "gr-storm", "i-scheduler", "isolation", "metis", "ols",
              "r-storm", "storm-ras", "t3", "top-storm"]


def measured(name: str, seed: int, utilisation: float, cluster: Cluster, spread: float) -> TaskGraph:
    """Workload ``name`` as a monitoring pipeline measures it: every load ``1 +- spread`` (times
    the workload's own), scaled to ``utilisation`` of ``cluster``; rates +- 10 %."""
    base = workloads.workload(name)
    rng = np.random.default_rng(seed)
    load = base.load * (1 + rng.uniform(-spread, spread, base.n_tasks))
    load *= utilisation * cluster.total_capacity / load.sum()
    rate = base.rate * rng.uniform(0.9, 1.1, base.rate.size)
    return TaskGraph.build(f"{name}-measured", base.operator_names, base.task_operator, load, base.src, base.dst,
                           rate, task_ids=base.task_ids)


def test_every_heuristic_declares_strict():
    declaring = sorted(n for n in family("cluster") if STRICT in scheduler_class(n).params)
    assert declaring == sorted(HEURISTICS + ["caps"])  # caps (contention) has tests of its own


def test_measured_linear_30_at_79_percent_is_placed_by_every_heuristic():
    """linear-30 with loads 1 +- 0.01 summing to 30.1 on heterogeneous-10 (capacity 38: 79 %):
    fixed executor groups and round robin refuse it, the repair places it."""
    cluster = workloads.cluster("heterogeneous-10")
    graph = measured("linear-30", 0, 30.1 / 38, cluster, 0.01)
    refused = []
    for name in HEURISTICS:
        try:
            paper = get_scheduler(name, strict=True).schedule(graph, cluster, seed=0)
        except InfeasibleError:
            refused.append(name)
            paper = None
        placement = get_scheduler(name).schedule(graph, cluster, seed=0)
        assert placement_checker.problems(graph, cluster, placement) == []
        assert bool(placement.metadata.get("repaired")) == (paper is None), name
        if paper is not None:  # the paper's placement, untouched
            assert placement.node_of.tolist() == paper.node_of.tolist()
    assert {"a3-storm", "ban-storm", "even", "top-storm"} <= set(refused)


def test_six_tasks_even_refuses_are_placed():
    """Two chains of three tasks on two nodes of capacity 3: chain 0-1-2 weighs 2.97 and chain 3-4-5
    2.79, so one chain per node costs 0. Round robin puts 0.93, 0.92, 0.85 on node 0 and 1.12,
    0.98 on node 1, leaving 0.3 and 0.9 for task 5 (0.96)."""
    graph = TaskGraph.build("six", ["a", "b", "c"], [0, 1, 2, 0, 1, 2], [0.93, 1.12, 0.92, 0.98, 0.85, 0.96],
                            [0, 1, 3, 4], [1, 2, 4, 5], [1.0] * 4)
    cluster = Cluster.from_types("two", (2, {"capacity": 3.0, "slots": 1}))
    with pytest.raises(InfeasibleError, match="task 5 .load 0.96. fits on none"):
        get_scheduler("even", strict=True).schedule(graph, cluster)
    placement = get_scheduler("even").schedule(graph, cluster)
    assert placement_checker.problems(graph, cluster, placement) == []
    assert placement.metadata["repaired"] is True and "task 5" in placement.metadata["repair_reason"]
    assert set(placement.metadata["repair_moved"]) <= set(range(6)) and 5 in placement.metadata["repair_moved"]


def test_random_dag_of_211_tasks_on_64_worker_slots():
    """random-46-s2 (211 tasks, loads +- 30 %) at 75 % of high-low-8-16 (64 slots): TOP-Storm
    finds no grouping into at most 64 slots; every heuristic places it after repair."""
    cluster = workloads.cluster("high-low-8-16")
    graph = measured("random-46-s2", 3, 0.75, cluster, 0.3)
    assert graph.n_tasks == 211 and int(cluster.slots.sum()) == 64
    with pytest.raises(InfeasibleError, match="no grouping into at most 64 worker slots"):
        get_scheduler("top-storm", strict=True).schedule(graph, cluster)
    for name in HEURISTICS:
        placement = get_scheduler(name).schedule(graph, cluster, seed=0)
        assert placement_checker.problems(graph, cluster, placement) == []
    assert get_scheduler("top-storm").schedule(graph, cluster).metadata["repaired"] is True


@pytest.mark.parametrize("name", HEURISTICS)
def test_placed_instances_keep_the_papers_placement(name):
    """Where the paper's packing succeeds (the unit-weight micro-benchmark), strict or not
    gives the same placement and cost, with no repair recorded."""
    graph, cluster = workloads.workload("diamond-30"), workloads.cluster("heterogeneous-10")
    paper = get_scheduler(name, strict=True).schedule(graph, cluster, seed=1)
    default = get_scheduler(name).schedule(graph, cluster, seed=1)
    assert default.node_of.tolist() == paper.node_of.tolist()
    assert default.metadata["cost"] == paper.metadata["cost"] and "repaired" not in default.metadata


class Partial(Scheduler):
    """A stand-in for a paper's packing step that stops with a given partial assignment."""

    name = "partial"
    summary = "raises PackingFailed with a fixed partial assignment"
    params = (STRICT,)
    partial: list[int] = []

    def place(self, graph, cluster, params, seed):
        raise PackingFailed("partial: stopped early", self.partial, metadata={"phase": 1})


def test_repair_of_a_partial_assignment_by_hand():
    """Tasks 10-11 exchange 10, 12-13 exchange 1; nodes of capacity 2. The step left 10, 11, 12 on
    node 0 (over capacity) and 13 unplaced. Task 12 talks to no node-mate, so it leaves node 0;
    largest first (ties in task order) it goes to the roomiest node, 1, and task 13 follows its
    partner there. Moved: 12 and 13 (ids)."""
    graph = TaskGraph.build("g", ["x"], [0] * 4, np.ones(4), [0, 2], [1, 3], [10.0, 1.0], task_ids=[10, 11, 12, 13])
    cluster = Cluster.from_types("c", (2, {"capacity": 2.0, "slots": 1}))
    Partial.partial = [0, 0, 0, -1]
    placement = Partial().schedule(graph, cluster)
    assert placement.node_of.tolist() == [0, 0, 1, 1]
    assert placement.metadata["repair_moved"] == [12, 13]
    assert placement.metadata["repaired"] is True and placement.metadata["phase"] == 1
    assert placement.metadata["cost"] == 0.0
    with pytest.raises(InfeasibleError, match="partial: stopped early"):
        Partial(strict=True).schedule(graph, cluster)


def test_repair_packs_first_fit_when_traffic_and_best_fit_fail():
    """Loads 1.5, 1.5, 1, 1 on nodes of capacity 3 and 2.2 (no edges). By traffic (ties: most
    room) the 1.5s split over both nodes; best fit puts the first 1.5 on the 2.2 node; either way
    a 1 is left with 0.5 and 0.7 of room. First fit by decreasing capacity puts both 1.5s on the
    3 node and both 1s on the other."""
    graph = TaskGraph.build("g", ["x"], [0] * 4, [1.5, 1.5, 1.0, 1.0], [], [], [])
    cluster = Cluster.from_types("c", (1, {"capacity": 3.0}), (1, {"capacity": 2.2}))
    placement = repair(graph, cluster, Placement.build([-1] * 4))
    assert placement.node_of.tolist() == [0, 0, 1, 1] and placement.metadata["moved"] == 4


def test_moves_after_packing_win_back_traffic():
    """Loads 1.5, 1.5, 1, 1, 0.1 on nodes of capacity 3.2 and 2.2; the 0.1 task talks (rate 5) to
    the first 1. Only first fit packs them: the 1.5s on node 0, the 1s on node 1, and the 0.1 on
    node 0 (first with room), away from its partner; one move (room 0.2 on node 1) brings the
    cost from 5 to 0."""
    graph = TaskGraph.build("g", ["x"], [0] * 5, [1.5, 1.5, 1.0, 1.0, 0.1], [4], [2], [5.0])
    cluster = Cluster.from_types("c", (1, {"capacity": 3.2}), (1, {"capacity": 2.2}))
    placement = repair(graph, cluster, Placement.build([-1] * 5))
    assert placement_checker.problems(graph, cluster, placement) == []
    assert placement.node_of.tolist() == [0, 0, 1, 1, 1] and inter_node_traffic(graph, placement) == 0.0


def test_no_placement_exists_or_none_was_found_says_which():
    cluster = Cluster.from_types("two", (2, {"capacity": 3.0, "slots": 2}))
    too_much = TaskGraph.build("big", ["a"], [0, 0, 0, 0], [2.0] * 4, [], [], [])
    with pytest.raises(InfeasibleError, match="needs load 8 but cluster 'two' has capacity 6"):
        get_scheduler("even").schedule(too_much, cluster)
    no_packing = TaskGraph.build("heavy", ["a"], [0, 0, 0], [2.0, 2.0, 2.0], [0, 1], [1, 2], [1.0, 1.0])
    with pytest.raises(InfeasibleError) as info:
        get_scheduler("even").schedule(no_packing, cluster)
    message = str(info.value)
    assert message.startswith("even: task 2 (load 2) fits on none")
    assert "the capacity repair found no placement either" in message and "exists (proven" in message


def test_repair_falls_back_to_an_exact_packing_where_fit_decreasing_fails():
    """Six tasks on two nodes of 11 (a perfect partition, 3 + 5 + 3 = 5 + 2 + 4): traffic-first
    insertion and best/first fit decreasing all strand a task; the exact bin-packing model
    (repair step 4) finds the partition. Found by a search over random ring graphs."""
    loads = [3.0, 5.0, 5.0, 3.0, 2.0, 4.0]
    graph = TaskGraph.build("ring", ("a",), [0] * 6, loads, range(6), [1, 2, 3, 4, 5, 0], [7.2, 6.7, 8.3, 7.9, 8.3, 1.2])
    cluster = Cluster.from_types("two", (2, {"capacity": 11.0, "slots": 1}))
    placement = repair(graph, cluster, Placement.build(np.full(6, -1)))
    assert placement_checker.problems(graph, cluster, placement) == []
    held = np.bincount(placement.node_of, weights=loads, minlength=2)
    assert held.tolist() == [11.0, 11.0]

