"""Re-planning on the scheduler interface (``Scheduler.replan``, Heron's ``repack``): repair,
Aniello et al.'s traffic-improvement rule, the optimal scheduler's migration-cost form and the
adaptive loop's decisions (``streamsched.schedulers.replanning``)."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import slow_params
from streamsched import workloads
from streamsched.cli import main
from streamsched.errors import InfeasibleError, ParameterError
from streamsched.metrics import inter_node_traffic
from streamsched.model.cluster import Cluster
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.schedulers import family, get_scheduler
from streamsched.schedulers.replanning import Replanner, carry_over, repair


def _pairs() -> TaskGraph:
    """Tasks 0-1 and 2-3 exchange 10 tuples/s each, 0-2 exchange 1; every load 1."""
    return TaskGraph.build("app", ["x"], [0] * 4, np.ones(4), [0, 2, 0], [1, 3, 2], [10.0, 10.0, 1.0])


def _two_nodes() -> Cluster:
    return Cluster.from_types("c", (2, {"capacity": 2, "slots": 1}))


# ---------------------------------------------------------------- every scheduler, unchanged input
@pytest.mark.parametrize("name", slow_params(family("cluster"), {"caps"}))
def test_replan_of_an_unchanged_input_moves_nothing(name):
    """Same graph, same cluster, and the scheduler's own placement as ``current``: the default
    (repair + fresh schedule by the threshold rule) and the exact form (traffic + a price per
    move) both keep every task where it is."""
    graph, cluster = workloads.workload("diamond-12"), workloads.cluster("heterogeneous-10")
    scheduler = get_scheduler(name)
    current = scheduler.schedule(graph, cluster, seed=3)
    again = scheduler.replan(graph, cluster, current, seed=3)
    assert again.metadata["moved"] == 0, f"{name}: moved {again.metadata['moved']} tasks"
    assert np.array_equal(again.node_of, current.node_of), name
    assert again.is_valid(graph, cluster), name


# ---------------------------------------------------------------- the default: threshold rule
def test_default_replan_adopts_a_fresh_plan_only_above_the_threshold():
    """Running: {0, 2} and {1, 3}, cutting 10 + 10 = 20 tuples/s. OLS's fresh plan {0, 1},
    {2, 3} cuts 1: a 95 % improvement, adopted at a 95 % threshold (1 <= 20 x 0.05), not at 96 %
    (1 > 0.8)."""
    graph, cluster = _pairs(), _two_nodes()
    running = Placement.build([0, 1, 0, 1], [0, 0, 0, 0])
    assert inter_node_traffic(graph, running) == 20.0
    ols = get_scheduler("ols")
    adopted = ols.replan(graph, cluster, running, threshold_pct=95.0)
    assert adopted.metadata["replan"] == "rescheduled"
    assert inter_node_traffic(graph, adopted) == 1.0
    assert adopted.metadata["moved"] == 2  # two of the four tasks change node
    assert (adopted.metadata["traffic_kept"], adopted.metadata["traffic_fresh"]) == (20.0, 1.0)
    kept = ols.replan(graph, cluster, running, threshold_pct=96.0)
    assert kept.metadata["replan"] == "kept" and kept.metadata["moved"] == 0
    assert np.array_equal(kept.node_of, running.node_of)


def test_replan_options_are_declared_per_scheduler():
    graph, cluster = _pairs(), _two_nodes()
    running = Placement.build([0, 1, 0, 1], [0, 0, 0, 0])
    with pytest.raises(ParameterError, match=r"ols\.replan\.migration_cost: unknown option \(known: threshold_pct\)"):
        get_scheduler("ols").replan(graph, cluster, running, migration_cost=1.0)
    with pytest.raises(ParameterError, match=r"optimal\.replan\.threshold_pct: unknown option \(known: migration_cost\)"):
        get_scheduler("optimal").replan(graph, cluster, running, threshold_pct=1.0)
    with pytest.raises(ParameterError, match="threshold_pct"):
        get_scheduler("ols").replan(graph, cluster, running, threshold_pct=120.0)


def test_optimal_replan_prices_each_move():
    """The exact form: staying costs 20; moving two tasks to {0, 1}, {2, 3} costs 1 + 2c. It
    moves when 1 + 2c < 20 (c = 9) and stays when 1 + 2c > 20 (c = 10)."""
    graph, cluster = _pairs(), _two_nodes()
    running = Placement.build([0, 1, 0, 1], [0, 0, 0, 0])
    optimal = get_scheduler("optimal", warm_starts=False)
    moved = optimal.replan(graph, cluster, running, migration_cost=9.0)
    assert inter_node_traffic(graph, moved) == 1.0 and moved.metadata["moved"] == 2
    stayed = optimal.replan(graph, cluster, running, migration_cost=10.0)
    assert np.array_equal(stayed.node_of, running.node_of) and stayed.metadata["moved"] == 0


# ---------------------------------------------------------------- repair
def _names_of(graph, placement, cluster) -> dict[int, str]:
    return {int(t): cluster.nodes[k].name for t, k in zip(graph.task_ids, placement.node_of)}


def test_repair_moves_only_the_tasks_of_a_node_that_left():
    graph = workloads.workload("diamond-12")
    cluster = workloads.cluster("homogeneous-10")
    placement = get_scheduler("even").schedule(graph, cluster)
    names = _names_of(graph, placement, cluster)
    left = cluster.nodes[int(placement.node_of[0])].name
    smaller = Cluster("nine", tuple(n for n in cluster.nodes if n.name != left))
    repaired = repair(graph, smaller, carry_over(graph, smaller, graph, placement, cluster))
    assert repaired.is_valid(graph, smaller)
    assert repaired.metadata["moved"] == sum(1 for v in names.values() if v == left)
    for t, k in zip(graph.task_ids, repaired.node_of):
        if names[int(t)] != left:
            assert smaller.nodes[k].name == names[int(t)]
    # A node joining moves nothing.
    bigger = Cluster("eleven", cluster.nodes + (cluster.nodes[0].__class__(name="new", capacity=4),))
    assert repair(graph, bigger, carry_over(graph, bigger, graph, placement, cluster)).metadata["moved"] == 0


def test_repair_prefers_the_node_of_the_displaced_tasks_partner():
    # Tasks 0-1 exchange 10, 2-3 exchange 1; task 1 is unplaced (its node is gone).
    graph = TaskGraph.build("g", ["x"], [0, 0, 0, 0], np.ones(4), [0, 2], [1, 3], [10.0, 1.0])
    cluster = Cluster.from_types("c", (3, {"capacity": 2}))
    current = Placement.build([0, -1, 1, 2])
    placement = repair(graph, cluster, current)
    assert placement.metadata["moved"] == 1 and placement.node_of[1] == 0
    with pytest.raises(InfeasibleError):
        repair(graph, Cluster.from_types("c", (1, {"capacity": 3})), Placement.build([0, -1, 0, 0]))


def test_repair_empties_an_overfull_node_by_least_affinity():
    """Node 0 (capacity 2) holds tasks 0, 1, 2: task 2 talks to no node-mate (0-1 exchange 10),
    so it is the one to leave, and it goes to its partner 3's node."""
    graph = TaskGraph.build("g", ["x"], [0] * 4, np.ones(4), [0, 2], [1, 3], [10.0, 1.0])
    cluster = Cluster.from_types("c", (2, {"capacity": 2, "slots": 2}))
    repaired = repair(graph, cluster, Placement.build([0, 0, 0, 1], [1, 1, 0, 0]))
    assert repaired.node_of.tolist() == [0, 0, 1, 1]
    assert repaired.metadata["moved"] == 1
    assert repaired.worker_of.tolist()[:2] == [1, 1]  # tasks that stay keep their worker slot


# ---------------------------------------------------------------- the adaptive loop
def test_replanner_threshold_rule():
    cluster = _two_nodes()
    planner = Replanner(get_scheduler("ols"), cluster, {"threshold_pct": 50.0})
    first = planner.on_graph(_pairs())
    assert first.emitted and first.why == "initial"
    same = planner.on_graph(_pairs())
    assert not same.emitted and same.why == "below-threshold" and same.moved == 0
    swapped = TaskGraph.build("app", ["x"], [0] * 4, np.ones(4), [0, 1, 0], [2, 3, 1], [10.0, 10.0, 1.0])
    decision = planner.on_graph(swapped)
    current = planner.current["app"][1]
    assert decision.emitted and decision.why == "improvement"
    assert inter_node_traffic(swapped, current) == decision.traffic_proposed == 1.0
    assert decision.traffic_current == 20.0 and decision.improvement_pct == pytest.approx(95.0)


def test_replanner_places_new_tasks_and_follows_the_cluster():
    cluster = Cluster.from_types("c", (3, {"capacity": 3, "slots": 1}))
    planner = Replanner(get_scheduler("ols"), cluster, {"threshold_pct": 100.0})
    planner.on_graph(_pairs())
    grown = TaskGraph.build("app", ["x"], [0] * 5, np.ones(5), [0, 2, 0, 3], [1, 3, 2, 4], [10.0, 10.0, 1.0, 5.0])
    decision = planner.on_graph(grown)
    placed = planner.current["app"][1]
    assert decision.emitted and decision.why == "new-tasks" and placed.is_valid(grown, cluster)
    assert decision.moved >= 1  # the new task counts as moved
    gone = placed.node_of[4]
    smaller = Cluster("c2", tuple(n for k, n in enumerate(cluster.nodes) if k != gone))
    [change] = planner.on_cluster(smaller)
    assert change.why == "cluster-change" and change.emitted
    repaired = planner.current["app"][1]
    assert repaired.is_valid(grown, smaller)
    # Only the tasks of the node that left move; the others keep their node (renumbered).
    stay = placed.node_of != gone
    renumber = np.array([k - (k > gone) for k in range(cluster.n_nodes)])
    assert change.moved == int(np.sum(~stay)) >= 1
    assert repaired.node_of[stay].tolist() == renumber[placed.node_of[stay]].tolist()


def test_watch_refuses_an_option_the_scheduler_does_not_replan_with(tmp_path, capsys):
    code = main(["watch", str(tmp_path), "--store", str(tmp_path / "s"), "-s", "ols", "--migration-cost", "2"])
    assert code == 2
    assert "--migration-cost: scheduler 'ols' does not re-plan with it (it takes: threshold_pct)" in capsys.readouterr().err
