"""The registered ``optimal`` scheduler: metadata (status, bound, gap), constraints, re-planning."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from streamsched import metrics
from streamsched.errors import InfeasibleError, ParameterError
from streamsched.model import Cluster, Placement, TaskGraph
from streamsched.schedulers import get_scheduler
from streamsched.workloads import cluster, workload


def test_star_30_heterogeneous_is_86_and_proven():
    """i-scheduler.txt section 5, Fig. 6: the optimal scheduler's cost for star, 30 tasks,
    heterogeneous cluster is 86 (I-Scheduler finds 90)."""
    g, c = workload("star-30"), cluster("heterogeneous-10")
    placement = get_scheduler("optimal").schedule(g, c, seed=0)
    meta = placement.metadata
    assert placement.violations(g, c) == []
    assert (meta["status"], meta["cost"], meta["bound"], meta["gap"]) == ("optimal", 86, 86, 0.0)
    assert meta["cost"] == metrics.inter_node_traffic(g, placement)
    assert meta["formulation"] == "configurations" and meta["backend"] == "cp-sat"
    assert set(placement.worker_of.tolist()) == {0}  # one worker per node: no inter-worker traffic
    assert metrics.inter_worker_traffic(g, placement) == meta["cost"]


def test_time_limit_returns_best_found_with_gap():
    """wordcount (fields grouping: no two count tasks alike) is too big for the configuration
    model; 0.2 s proves nothing, so the status is feasible with an honest gap (the cut or assignment
    model, or search alone when even building it would take too much of the 0.2 s)."""
    g, c = workload("wordcount"), cluster("high-low-1-2")
    meta = get_scheduler("optimal", time_limit=0.2).schedule(g, c).metadata
    assert meta["status"] == "feasible" and meta["formulation"] in ("cut", "assignment", "neighbourhoods")
    assert 0 <= meta["bound"] < meta["cost"]
    assert meta["gap"] == pytest.approx((meta["cost"] - meta["bound"]) / meta["cost"])


def test_tasks_per_slot_limits_tasks_per_node():
    """linear-10 (5 operators x 2 tasks, 4 x 4 = 16 unit pairs) on 5 nodes of capacity 4 with
    1 slot. Uncapped, nodes hold operators (0,1), (2,3), (4): 16 - 2 x 4 = 8. With 2 tasks per
    slot each node holds 2 tasks and keeps at most 1 pair: op0's tasks must pair with op1's,
    op2's with op3's, leaving op4 alone: 16 - 4 = 12."""
    g = workload("linear-10")
    c = Cluster.from_types("five", (5, {"capacity": 4.0, "slots": 1}))
    free = get_scheduler("optimal").schedule(g, c)
    capped = get_scheduler("optimal", tasks_per_slot=2).schedule(g, c)
    assert np.bincount(capped.node_of).max() <= 2
    assert (free.metadata["cost"], capped.metadata["cost"]) == (8.0, 12.0)


def test_respect_memory_keeps_ram():
    g = TaskGraph.build("mem", ("a",), [0, 0, 0, 0], np.ones(4), [0, 1, 2], [1, 2, 3], [5.0, 1.0, 5.0],
                        memory_mb=[600, 600, 600, 600])
    c = Cluster.from_types("four", (4, {"capacity": 4.0, "ram_mb": 1000.0}))
    placement = get_scheduler("optimal", respect_memory=True).schedule(g, c)
    assert placement.violations(g, c, check_memory=True) == []
    assert placement.metadata["cost"] == 11.0  # one 600 MB task per node: every pair is cut
    assert get_scheduler("optimal").schedule(g, c).metadata["cost"] == 0.0  # CPU alone: one node


def test_pinned_and_excluded_tasks():
    g, c = workload("linear-10"), cluster("homogeneous-10")
    placement = get_scheduler("optimal").schedule_with(g, c, pinned={0: 7}, excluded=[(1, 7)])
    assert placement.node_of[0] == 7 and placement.node_of[1] != 7
    assert placement.metadata["status"] == "optimal"


def test_replan_counts_and_prices_migrations():
    """From Storm's round robin (every pair split), a high price per move keeps the placement;
    a price of 0 reaches the optimum of a fresh schedule; moved counts the tasks that move."""
    g, c = workload("linear-10"), cluster("homogeneous-10")
    current = get_scheduler("even").schedule(g, c)
    scheduler = get_scheduler("optimal")
    stay = scheduler.replan(g, c, current, migration_cost=100.0)
    assert stay.metadata["moved"] == 0 and np.array_equal(stay.node_of, current.node_of)
    fresh = scheduler.schedule(g, c).metadata["cost"]
    free = scheduler.replan(g, c, current, migration_cost=0.0)
    assert free.metadata["cost"] == fresh
    assert free.metadata["moved"] == int(np.count_nonzero(free.node_of != current.node_of))
    cheap = scheduler.replan(g, c, current, migration_cost=1.0)
    paid = cheap.metadata["cost"] + cheap.metadata["moved"]
    assert fresh <= cheap.metadata["cost"] and paid <= current.metadata["cost"]


def test_infeasible_packing_raises():
    g = TaskGraph.build("heavy", ("a",), [0, 0, 0], [2.0, 2.0, 2.0], [0, 1], [1, 2], [1.0, 1.0])
    with pytest.raises(InfeasibleError, match="cannot be placed"):
        get_scheduler("optimal").schedule(g, Cluster.from_types("two", (2, {"capacity": 3.0})))


def test_bad_parameter_is_named():
    with pytest.raises(ParameterError, match="optimal.params.backend: 'gurobi' is not one of"):
        get_scheduler("optimal", backend="gurobi").schedule(workload("linear-10"), cluster("homogeneous-10"))


def test_placement_metadata_round_trips(tmp_path):
    g, c = workload("diamond-10"), cluster("heterogeneous-10")
    placement = get_scheduler("optimal").schedule(g, c)
    placement.write(tmp_path / "p.json", g, c)
    again = Placement.read(tmp_path / "p.json", g, c)
    assert again.metadata["status"] == "optimal" and again.metadata["bound"] == placement.metadata["bound"]


def test_replan_command(tmp_path, capsys):
    import json

    from streamsched.cli import main

    assert main(["schedule", "-w", "linear-12", "-c", "homogeneous-10", "-o", str(tmp_path / "even.json")]) == 0
    capsys.readouterr()
    code = main(["replan", str(tmp_path / "even.json"), "-w", "linear-12", "-c", "homogeneous-10",
                 "--migration-cost", "0.5", "-o", str(tmp_path / "new.json"), "--json"])
    assert code == 0
    meta = json.loads(capsys.readouterr().out)["metadata"]
    assert meta["objective"] == pytest.approx(meta["cost"] + 0.5 * meta["moved"]) and meta["status"] == "optimal"
    assert (tmp_path / "new.json").exists()
    assert main(["replan", str(tmp_path / "missing.json"), "-w", "linear-12"]) == 2


DEMO_SNAPSHOT = Path(__file__).parent / "fixtures" / "demo" / "fischer-payload-10-snapshot"


@pytest.mark.slow
def test_demo_graph_is_proven_within_the_default_work_limit():
    """The graph `make demo` measures (the pipeline's snapshot of fischer-payload-10: 80 tasks in
    10 keyed chains, loads and rates with measurement noise, so every task is its own class) on
    fischer-11: with its default limits `optimal` proves the optimum 4,962.18 (the plain cut
    model; the configuration model cannot be built on 80 distinct tasks), deterministically:
    no wall clock is involved, and a second run gives the same placement."""
    from streamsched.pipeline.store import load_snapshot

    graph, nodes = load_snapshot(DEMO_SNAPSHOT), cluster("fischer-11")
    scheduler = get_scheduler("optimal")
    assert scheduler.resolved_params()["time_limit"] == 0.0  # the demo's limit: work_limit alone
    first = scheduler.schedule(graph, nodes)
    meta = first.metadata
    assert (meta["status"], meta["formulation"], meta["bound_source"]) == ("optimal", "cut", "cut model (cpsat)")
    assert meta["cost"] == pytest.approx(4962.1818, abs=1e-3)
    assert meta["bound"] <= meta["cost"] and meta["cost"] - meta["bound"] <= 1e-6 * meta["cost"]
    assert np.array_equal(scheduler.schedule(graph, nodes).node_of, first.node_of)
