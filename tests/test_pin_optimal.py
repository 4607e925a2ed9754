"""``optimal``'s parameter passing pinned (issue 34 item 4; ``make mutate
MODULE=schedulers/optimal.py``): what reaches the solver (the work limit by default and no wall
clock, warm starts by default with their window, a wall-clock limit split with the warm starts
when set, the slot, memory and contention settings) and what the placement reports. The
solvers are replaced by recorders; what they do is tested in test_optimal_solver.py and
test_contention.py."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from streamsched.errors import InfeasibleError, ParameterError
from streamsched.model import Cluster, Node, TaskGraph
from streamsched.schedulers import caps, get_scheduler, optimal


def small():
    graph = TaskGraph.build("pair", ("A", "B"), [0, 1], [1.0, 1.0], [0], [1], [5.0], memory_mb=[100.0, 200.0])
    cluster = Cluster("two", (Node("a", 4.0, slots=3, ram_mb=1000.0), Node("b", 4.0, slots=2, ram_mb=500.0)))
    return graph, cluster


@pytest.fixture
def recorded(monkeypatch):
    """Replaces the solver and the warm-start schedulers by recorders; returns what they got."""
    calls: dict = {"solve": [], "warm": []}

    def solve(load, src, dst, rate, capacity, **kwargs):
        calls["solve"].append(kwargs)
        return SimpleNamespace(status=calls.get("status", "optimal"), assignment=np.array([1, 1]), bound=0.0, gap=0.0,
                               backend=kwargs["backend"], formulation="x", wall_time_s=0.1, bound_source="s",
                               start_objective=None, note="", moved=0, objective=0.0)

    def warm(graph, cluster, seed, seconds):
        calls["warm"].append((seed, seconds))
        return [np.array([0, 1])], {"even": "cost 5"}

    monkeypatch.setattr(optimal, "solve_placement", solve)
    monkeypatch.setattr(optimal, "heuristic_placements", warm)
    return calls


def test_by_default_the_work_limit_stops_the_search_and_warm_starts_are_used(recorded):
    graph, cluster = small()
    placement = get_scheduler("optimal").schedule(graph, cluster, seed=7)
    (kwargs,) = recorded["solve"]
    assert kwargs["time_limit"] is None and kwargs["work_limit"] == 10.0
    assert recorded["warm"] == [(7, optimal.WARM_START_CAP_S)]
    assert [s.tolist() for s in kwargs["warm_start"]] == [[0, 1]]
    assert kwargs["seed"] == 7 and kwargs["workers"] == 1 and kwargs["backend"] == "cp-sat"
    assert kwargs["formulation"] == "auto" and kwargs["groups"].tolist() == [0, 1]
    assert not {"memory", "node_memory", "max_items", "operator_caps"} & set(kwargs)
    assert placement.node_of.tolist() == [1, 1] and placement.worker_of.tolist() == [0, 0]
    assert placement.metadata["warm_starts"] == {"even": "cost 5"} and placement.metadata["status"] == "optimal"


def test_a_time_limit_is_shared_with_the_warm_starts_and_replaces_the_work_limit(recorded):
    """time_limit 20: the warm starts get 30 % (6 s), the solver the rest of the call's 20 s on
    the wall clock and 14 s of work."""
    graph, cluster = small()
    get_scheduler("optimal", time_limit=20.0, work_limit=3.0).schedule(graph, cluster, seed=1)
    (kwargs,) = recorded["solve"]
    assert recorded["warm"] == [(1, pytest.approx(6.0))]
    assert 19.0 < kwargs["time_limit"] <= 20.0 and kwargs["work_limit"] == pytest.approx(14.0)


def test_without_warm_starts_none_run_and_the_settings_reach_the_solver(recorded):
    """tasks_per_slot 2: at most 6 and 4 tasks on nodes of 3 and 2 slots; respect_memory: each
    task's memory and each node's RAM."""
    graph, cluster = small()
    get_scheduler("optimal", warm_starts=False, tasks_per_slot=2, respect_memory=True, workers=2,
                  work_limit=2.5).schedule(graph, cluster, seed=3)
    (kwargs,) = recorded["solve"]
    assert recorded["warm"] == [] and kwargs["warm_start"] is None
    assert kwargs["max_items"].tolist() == [6, 4] and kwargs["workers"] == 2 and kwargs["work_limit"] == 2.5
    assert kwargs["memory"].tolist() == [100.0, 200.0] and list(kwargs["node_memory"]) == [1000.0, 500.0]


def test_an_unknown_status_names_the_limit_that_stopped_it(recorded):
    graph, cluster = small()
    recorded["status"] = "unknown"
    with pytest.raises(InfeasibleError, match=r"within work_limit=10 \(none may exist\)"):
        get_scheduler("optimal").schedule(graph, cluster)
    with pytest.raises(InfeasibleError, match=r"within time_limit=5 s"):
        get_scheduler("optimal", time_limit=5.0).schedule(graph, cluster)
    recorded["status"] = "infeasible"
    with pytest.raises(InfeasibleError, match="cannot be placed on cluster 'two'"):
        get_scheduler("optimal").schedule(graph, cluster)


@pytest.fixture
def contention(monkeypatch):
    got = []

    def exact(graph, cluster, **kwargs):
        got.append(kwargs)
        from streamsched.model import Placement
        return Placement.build(np.zeros(graph.n_tasks, dtype=np.int64), None, {"status": "optimal"})

    monkeypatch.setattr(caps, "exact_contention_placement", exact)
    return got


def test_contention_gets_the_work_limit_and_warm_starts_by_default(contention):
    graph, cluster = small()
    get_scheduler("optimal", objective="contention").schedule(graph, cluster, seed=4)
    (kwargs,) = contention
    assert kwargs == {"objective": "compute,state,network", "weights": (1.0, 1.0, 1.0), "ceilings": {},
                      "network_ceiling": None, "time_limit": None, "work_limit": 10.0, "seed": 4, "workers": 1,
                      "warm_start": True}


def test_contention_settings_reach_the_search(contention):
    """A ceiling of 0 is a ceiling (-1 is none); a time limit replaces the work limit."""
    graph, cluster = small()
    get_scheduler("optimal", objective="contention", contention="weighted", contention_weights="2,0,0.5",
                  compute_ceiling=0.0, network_ceiling=3.5, traffic_ceiling=0.0, time_limit=9.0,
                  warm_starts=False).schedule(graph, cluster)
    (kwargs,) = contention
    assert kwargs["objective"] == "weighted" and kwargs["weights"] == (2.0, 0.0, 0.5)
    assert kwargs["ceilings"] == {"compute": 0.0, "network": 3.5} and kwargs["network_ceiling"] == 0.0
    assert kwargs["time_limit"] == 9.0 and kwargs["work_limit"] is None and kwargs["warm_start"] is False


@pytest.mark.parametrize("weights", ["1,1", "1,x,1", "1,-1,1", "1,inf,1"])
def test_contention_weights_must_be_three_finite_numbers_at_least_zero(contention, weights):
    graph, cluster = small()
    with pytest.raises(ParameterError, match="contention_weights"):
        get_scheduler("optimal", objective="contention", contention_weights=weights).schedule(graph, cluster)
    assert contention == []


def test_throughput_gets_the_work_limit_by_default_and_the_slot_and_memory_rules(monkeypatch):
    from streamsched.solvers import throughput

    got = []

    def solve(graph, cluster, **kwargs):
        got.append(kwargs)
        return SimpleNamespace(node_of=np.array([0, 1]), status="optimal", bound=0.5, gap=0.0, peak=0.5,
                               remote_bytes=0.0, stages=[], wall_time_s=0.1, moved=0)

    monkeypatch.setattr(throughput, "solve_throughput", solve)
    graph, cluster = small()
    get_scheduler("optimal", objective="throughput").schedule(graph, cluster, seed=2)
    get_scheduler("optimal", objective="throughput", time_limit=4.0, tasks_per_slot=1,
                  respect_memory=True).schedule(graph, cluster)
    assert got[0]["time_limit"] is None and got[0]["work_limit"] == 10.0 and got[0]["seed"] == 2
    assert got[0]["max_items"] is None and got[0]["memory"] is None and got[0]["current"] is None
    assert got[1]["time_limit"] == 4.0 and got[1]["work_limit"] is None
    assert got[1]["max_items"].tolist() == [3, 2] and got[1]["node_memory"].tolist() == [1000.0, 500.0]
