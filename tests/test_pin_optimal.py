"""``optimal``'s parameter passing pinned (issue 34 item 4; ``make mutate
MODULE=schedulers/optimal.py``): what reaches the solver (the work limit by default and no wall
clock, warm starts by default with their window, a wall-clock limit split with the warm starts
when set, the slot, memory and contention settings) and what the placement reports. The
solvers are replaced by recorders; what they do is tested in test_optimal_solver.py and
test_contention.py."""

from __future__ import annotations

import math
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
        calls.setdefault("warm_on", []).append((graph, cluster))
        return [np.array([0, 1])], {"even": "cost 5"}

    monkeypatch.setattr(optimal, "solve_placement", solve)
    monkeypatch.setattr(optimal, "heuristic_placements", warm)
    return calls


def test_by_default_the_work_limit_stops_the_search_and_warm_starts_are_used(recorded):
    graph, cluster = small()
    placement = get_scheduler("optimal").schedule(graph, cluster, seed=7)
    (kwargs,) = recorded["solve"]
    assert kwargs["time_limit"] is None and kwargs["work_limit"] == 10.0
    assert recorded["warm"] == [(7, optimal.WARM_START_CAP_S)] and recorded["warm_on"] == [(graph, cluster)]
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
    get_scheduler("optimal", objective="throughput", time_limit=4.0, tasks_per_slot=2,
                  respect_memory=True).schedule(graph, cluster)
    assert got[0]["time_limit"] is None and got[0]["work_limit"] == 10.0 and got[0]["seed"] == 2
    assert got[0]["max_items"] is None and got[0]["memory"] is None and got[0]["current"] is None
    assert got[1]["time_limit"] == 4.0 and got[1]["work_limit"] is None
    assert got[1]["max_items"].tolist() == [6, 4] and got[1]["node_memory"].tolist() == [1000.0, 500.0]
    assert got[1]["memory"].tolist() == [100.0, 200.0] and got[0]["node_memory"] is None


def test_the_solvers_answer_becomes_the_placements_metadata(recorded, monkeypatch):
    """Every field of the solver's result reaches the metadata; a node without worker slots
    gets no worker; the memory-model limit and the backend reach the solver."""
    graph, _ = small()
    cluster = Cluster("two", (Node("a", 4.0, slots=1), Node("b", 4.0, slots=0)))

    def solve(load, src, dst, rate, capacity, **kwargs):
        recorded["solve"].append(kwargs)
        return SimpleNamespace(status="feasible", assignment=np.array([0, 1]), bound=2.5, gap=0.5, backend="highs",
                               formulation="cut", wall_time_s=0.25, bound_source="cut model", start_objective=5.0,
                               note="a note", moved=1, objective=6.0)

    monkeypatch.setattr(optimal, "solve_placement", solve)
    placement = get_scheduler("optimal", backend="highs", memory_limit_mb=64.0).schedule(graph, cluster, seed=2)
    (kwargs,) = recorded["solve"]
    assert kwargs["backend"] == "highs" and kwargs["memory_limit_mb"] == 64.0
    assert placement.node_of.tolist() == [0, 1] and placement.worker_of.tolist() == [0, optimal.NO_WORKER]
    meta = placement.metadata
    assert {k: meta[k] for k in ("status", "bound", "gap", "backend", "formulation", "solver_time_s", "bound_source",
                                 "start_cost", "note", "warm_starts")} == {
        "status": "feasible", "bound": 2.5, "gap": 0.5, "backend": "highs", "formulation": "cut",
        "solver_time_s": 0.25, "bound_source": "cut model", "start_cost": 5.0, "note": "a note",
        "warm_starts": {"even": "cost 5"}}
    assert "moved" not in meta and "migration_cost" not in meta and meta["cost"] == 5.0  # A | B: 5 records/s cut
    assert meta["scheduler"] == "optimal" and meta["seed"] == 2


def test_no_note_and_no_warm_starts_leave_no_keys(recorded):
    graph, cluster = small()
    meta = get_scheduler("optimal", warm_starts=False).schedule(graph, cluster).metadata
    assert "note" not in meta and "warm_starts" not in meta and "moved" not in meta


def test_a_tiny_time_limit_still_gives_the_solver_a_hundredth_of_a_second(recorded):
    """time_limit 0.01: what is left after the (instant) warm starts is below 0.01 s; the solver
    gets 0.01 s at least, and 70 % of the limit as work."""
    graph, cluster = small()
    get_scheduler("optimal", time_limit=0.01).schedule(graph, cluster)
    (kwargs,) = recorded["solve"]
    assert kwargs["time_limit"] == 0.01 and kwargs["work_limit"] == pytest.approx(0.007)
    assert recorded["warm"] == [(0, pytest.approx(0.003))]


def test_schedule_with_passes_pins_and_exclusions_and_then_runs_no_warm_starts(recorded):
    """Pinned tasks or excluded pairs: the warm starts (which know neither) are not run; an empty
    pin map is no pin. The placement carries the scheduler's own metadata and its traffic."""
    graph, cluster = small()
    scheduler = get_scheduler("optimal")
    placement = scheduler.schedule_with(graph, cluster, seed=5, pinned={0: 1})
    assert recorded["warm"] == [] and recorded["solve"][-1]["pinned"] == {0: 1}
    meta = placement.metadata
    assert meta["scheduler"] == "optimal" and meta["seed"] == 5 and meta["params"] == scheduler.resolved_params()
    assert meta["cost"] == 0.0 and 0 <= meta["wall_time_s"] < 60 and meta["status"] == "optimal"  # both on node b
    scheduler.schedule_with(graph, cluster, excluded=[(0, 0)])
    assert recorded["warm"] == [] and recorded["solve"][-1]["excluded"] == [(0, 0)]
    scheduler.schedule_with(graph, cluster, seed=8, pinned={})
    assert recorded["warm"] == [(8, optimal.WARM_START_CAP_S)]


def test_replan_passes_the_current_nodes_and_the_price_and_reports_the_moves(recorded):
    graph, cluster = small()
    from streamsched.model import Placement

    current = Placement.build(np.array([0, -1]))
    placement = get_scheduler("optimal").replan(graph, cluster, current, seed=3, migration_cost=2.5)
    (kwargs,) = recorded["solve"]
    assert kwargs["current"].tolist() == [0, -1] and kwargs["migration_cost"] == 2.5 and kwargs["seed"] == 3
    assert recorded["warm"] == [] and kwargs["warm_start"] is None
    meta = placement.metadata
    assert (meta["moved"], meta["migration_cost"], meta["objective"]) == (0, 2.5, 0.0)
    with pytest.raises(optimal.InputError, match=r"^current placement has 3 tasks, graph 'pair' has 2$"):
        get_scheduler("optimal").replan(graph, cluster, Placement.build(np.array([0, 0, 1])))


def test_a_co_location_rule_becomes_per_operator_caps(recorded):
    """Nodes of 2 and 1 Flink task slots (one slot sharing group): at most 2 and 1 tasks of each
    operator per node."""
    graph, _ = small()
    cluster = Cluster("two", (Node("a", 4.0, slots=1, task_slots=2), Node("b", 4.0, slots=1, task_slots=1)))
    get_scheduler("optimal").schedule(graph, cluster)
    (kwargs,) = recorded["solve"]
    groups, caps_ = kwargs["operator_caps"]
    assert groups.tolist() == [0, 1] and caps_.tolist() == [[2, 1], [2, 1]]


def test_the_messages_name_the_graph_the_cluster_and_the_limit(recorded):
    graph, cluster = small()
    recorded["status"] = "infeasible"
    with pytest.raises(InfeasibleError) as error:
        get_scheduler("optimal").schedule(graph, cluster)
    assert str(error.value) == ("optimal: graph 'pair' cannot be placed on cluster 'two' under its capacity (and "
                                "other) constraints")
    recorded["status"] = "unknown"
    with pytest.raises(InfeasibleError) as error:
        get_scheduler("optimal", work_limit=2.5).schedule(graph, cluster)
    assert str(error.value) == "optimal: no placement of 'pair' found within work_limit=2.5 (none may exist)"


def test_contention_weights_message_names_the_parameter_and_its_value(contention):
    graph, cluster = small()
    with pytest.raises(ParameterError) as error:
        get_scheduler("optimal", objective="contention", contention_weights="1,x,1").schedule(graph, cluster)
    assert str(error.value) == ("optimal.params.contention_weights: '1,x,1' is not three numbers >= 0 separated "
                                "by commas")
    get_scheduler("optimal", objective="contention", contention_weights="0,0,0", state_ceiling=2.0,
                  traffic_ceiling=7.0).schedule(graph, cluster)
    assert contention[-1]["weights"] == (0.0, 0.0, 0.0) and contention[-1]["ceilings"] == {"state": 2.0}
    assert contention[-1]["network_ceiling"] == 7.0


@pytest.fixture
def throughput_calls(monkeypatch):
    from streamsched.solvers import throughput

    calls = {"got": [], "result": dict(node_of=np.array([0, 1]), status="optimal", bound=0.5, gap=0.0, peak=0.5,
                                       remote_bytes=3.0, stages=[{"s": 1}], wall_time_s=0.1, moved=1)}

    def solve(graph, cluster, **kwargs):
        calls["got"].append(dict(kwargs, on=(graph, cluster)))
        return SimpleNamespace(**calls["result"])

    monkeypatch.setattr(throughput, "solve_throughput", solve)
    return calls


def test_throughput_metadata_is_the_solvers_answer_and_the_models_prediction(throughput_calls):
    """Pair A -> B (5 records/s) split over two nodes: the metadata carries the solver's peak,
    bound and gap and the throughput model's prediction for the placement it returned; a bound
    of 0 proves no finite throughput bound (None, as JSON has no inf)."""
    from streamsched.model.throughput import predict_throughput
    from streamsched.solvers.throughput import TIE_TOLERANCE

    graph, cluster = small()
    placement = get_scheduler("optimal", objective="throughput", net_cpu_per_record=0.01).schedule(graph, cluster)
    (kwargs,) = throughput_calls["got"]
    assert kwargs["net_cpu_per_record"] == 0.01 and kwargs["workers"] == 1 and kwargs["on"] == (graph, cluster)
    predicted = predict_throughput(graph, cluster, np.array([0, 1]), 0.01)
    meta = placement.metadata
    assert {k: meta[k] for k in ("status", "objective", "bound", "gap", "peak_utilisation", "remote_bytes",
                                 "tie_tolerance", "stages", "solver_time_s", "predicted_bottleneck")} == {
        "status": "optimal", "objective": "throughput", "bound": 0.5, "gap": 0.0, "peak_utilisation": 0.5,
        "remote_bytes": 3.0, "tie_tolerance": TIE_TOLERANCE, "stages": [{"s": 1}], "solver_time_s": 0.1,
        "predicted_bottleneck": predicted.bottleneck}
    assert meta["predicted_throughput"] == predicted.throughput and math.isfinite(predicted.throughput)
    assert meta["throughput_bound"] == pytest.approx(predicted.source_rate / 0.5)
    assert "moved" not in meta and meta["bound_source"] == "cp-sat (peak utilisation U; throughput = source rate / U)"
    assert placement.node_of.tolist() == [0, 1] and placement.worker_of.tolist() == [0, 0]
    one_slot = Cluster("two", (Node("a", 4.0, slots=1), Node("b", 4.0, slots=0)))
    assert get_scheduler("optimal", objective="throughput").schedule(graph, one_slot).worker_of.tolist() == [
        0, optimal.NO_WORKER]
    throughput_calls["result"]["bound"] = 0.0
    assert get_scheduler("optimal", objective="throughput").schedule(graph, cluster).metadata["throughput_bound"] is None


def test_throughput_replan_passes_the_current_nodes_and_reports_moves(throughput_calls):
    from streamsched.model import Placement

    graph, cluster = small()
    placement = get_scheduler("optimal", objective="throughput").replan(graph, cluster, Placement.build(np.array([1, 1])),
                                                                         seed=3)
    (kwargs,) = throughput_calls["got"]
    assert kwargs["current"].tolist() == [1, 1] and placement.metadata["moved"] == 1 and kwargs["seed"] == 3
    with pytest.raises(ParameterError, match=r"^optimal: objective=throughput takes no excluded, pinned$"):
        get_scheduler("optimal", objective="throughput").schedule_with(graph, cluster, pinned={0: 1},
                                                                       excluded=[(1, 0)])


def test_throughput_without_a_plan_says_whether_a_limit_stopped_it(throughput_calls):
    graph, cluster = small()
    throughput_calls["result"].update(node_of=None, status="infeasible")
    with pytest.raises(InfeasibleError) as error:
        get_scheduler("optimal", objective="throughput").schedule(graph, cluster)
    assert str(error.value) == "optimal: no placement of 'pair' on 'two' keeps the slot rule"
    throughput_calls["result"].update(status="unknown")
    with pytest.raises(InfeasibleError) as error:
        get_scheduler("optimal", objective="throughput").schedule(graph, cluster)
    assert str(error.value) == "optimal: no placement of 'pair' on 'two' keeps the slot rule found within work_limit=10"
    with pytest.raises(InfeasibleError) as error:
        get_scheduler("optimal", objective="throughput", time_limit=3.0).schedule(graph, cluster)
    assert str(error.value).endswith(" found within time_limit=3 s")


# ------------------------------------------------------------------ warm starts (real schedulers, tiny graph)
def chain4():
    """A -> B -> C -> D, 5 records/s each link, loads 1, on two nodes of capacity 2: the least
    cut is 5 (A, B | C, D)."""
    graph = TaskGraph.build("chain4", ("A", "B", "C", "D"), [0, 1, 2, 3], [1.0] * 4, [0, 1, 2], [1, 2, 3], [5.0] * 3)
    return graph, Cluster.from_types("two", (2, {"capacity": 2.0, "slots": 1}))


def test_warm_starts_are_the_other_heuristic_cluster_schedulers_tried_first_in_order():
    from streamsched.schedulers import scheduler_class

    graph, cluster = chain4()
    found, report = optimal.heuristic_placements(graph, cluster, 0, 120.0)
    names = list(report)
    assert names[:4] == list(optimal.FIRST_WARM_STARTS) and len(set(names)) == len(names) > 4
    assert "optimal" not in names and "caps" not in names
    for name in names:
        kind = scheduler_class(name)
        assert kind.family == "cluster" and not kind.exact and kind.objective != "contention"
        assert not kind.needs_edge_nodes
    costs = [v for v in report.values() if not isinstance(v, str)]
    assert len(found) == len(costs) >= 4 and all(not str(v).startswith("not run") for v in report.values())
    for node_of, cost in zip(found, costs):  # each cost is that placement's cut traffic
        cut = sum(5.0 for a, b in ((0, 1), (1, 2), (2, 3)) if node_of[a] != node_of[b])
        assert cost == cut and cost >= 5.0


def test_warm_starts_without_time_run_none_and_without_fork_run_here(monkeypatch):
    graph, cluster = chain4()
    found, report = optimal.heuristic_placements(graph, cluster, 0, 0.0)
    assert found == [] and set(report.values()) == {"not run (time)"}
    forked = optimal.heuristic_placements(graph, cluster, 0, 120.0)
    monkeypatch.setattr(optimal.multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    here = optimal.heuristic_placements(graph, cluster, 0, 120.0)
    assert here[1] == forked[1] and [p.tolist() for p in here[0]] == [p.tolist() for p in forked[0]]
    assert len(here[0]) >= 4  # the schedulers ran (on this graph and cluster), not failed
    none = optimal.heuristic_placements(graph, cluster, 0, 0.0)
    assert none[0] == [] and set(none[1].values()) == {"not run (time)"}


def test_a_failing_warm_start_is_reported_by_its_first_line_or_its_type(monkeypatch):
    import streamsched.schedulers as registry

    graph, cluster = chain4()
    errors = iter([ValueError("bad input\nsecond line"), KeyError(), RuntimeError("x" * 300)])

    def broken(name, **_):
        raise next(errors)

    monkeypatch.setattr(registry, "get_scheduler", broken)
    assert optimal._run_one("even", graph, cluster, 0) == ("even", "failed: bad input")
    assert optimal._run_one("even", graph, cluster, 0) == ("even", "failed: KeyError")
    assert optimal._run_one("even", graph, cluster, 0) == ("even", "failed: " + "x" * 200)
    report, found = {}, []
    optimal._record(("even", "failed: boom"), graph, report, found)
    assert report == {"even": "failed: boom"} and found == []


def test_the_child_sends_each_schedulers_placement_then_an_end_marker():
    """_run_all (the forked child's body, run here): one (name, nodes) per scheduler, in order,
    each the scheduler's own placement with that seed, then None."""
    import multiprocessing

    graph, cluster = chain4()
    receiver, sender = multiprocessing.Pipe(duplex=False)
    optimal._run_all(["even", "metis"], graph, cluster, 3, sender)
    sent = [receiver.recv() for _ in range(3)]
    assert [s[0] for s in sent[:2]] == ["even", "metis"] and sent[2] is None
    for name, node_of in sent[:2]:
        assert node_of.tolist() == get_scheduler(name).schedule(graph, cluster, seed=3).node_of.tolist()


def test_schedule_with_repairs_a_plan_that_breaks_the_co_location_rule(recorded):
    """Both tasks of one operator on a node of one Flink task slot: ``schedule_with`` repairs
    (it is not strict) and says so."""
    graph = TaskGraph.build("dup", ("A",), [0, 0], [1.0, 1.0], [], [], [])
    cluster = Cluster("two", (Node("a", 4.0, slots=1, task_slots=2), Node("b", 4.0, slots=1, task_slots=1)))
    placement = get_scheduler("optimal").schedule_with(graph, cluster, excluded=[])
    assert placement.metadata["repaired"] is True and sorted(placement.node_of.tolist()) == [0, 1]


def _one_then_exit(names, graph, cluster, seed, sender):
    sender.send(("even", np.array([0, 0, 1, 1])))
    sender.close()  # the child ends without its end-of-list marker


def _one_then_hang(names, graph, cluster, seed, sender):
    sender.send(("even", np.array([0, 0, 1, 1])))
    import time

    time.sleep(60)


@pytest.mark.parametrize("child, seconds", [(_one_then_exit, 120.0), (_one_then_hang, 1.0)])
def test_warm_starts_end_when_the_child_ends_or_its_time_is_up(monkeypatch, child, seconds):
    """A child that ends without its marker (the pipe closes) or runs past the window (it is
    killed): what it sent is kept, and the call returns at once or at the window."""
    import time

    monkeypatch.setattr(optimal, "_run_all", child)
    graph, cluster = chain4()
    started = time.perf_counter()
    found, report = optimal.heuristic_placements(graph, cluster, 0, seconds)
    assert time.perf_counter() - started < 20
    assert [p.tolist() for p in found] == [[0, 0, 1, 1]] and report["even"] == 5.0
    assert report["i-scheduler"] == "not run (time)"


def test_schedule_with_refuses_what_cannot_fit_and_defaults_the_price_to_zero(recorded):
    """schedule_with checks the load first (2 tasks of 3 on nodes of 2: no solver call); a
    current placement without a price reports a migration cost of 0; replan's default price is 1."""
    from streamsched.model import Placement

    graph, _ = small()
    tight = Cluster("two", (Node("a", 1.0), Node("b", 1.0)))
    heavy = TaskGraph.build("heavy", ("A", "B"), [0, 1], [1.5, 1.5], [0], [1], [5.0])
    with pytest.raises(InfeasibleError, match="needs load 3 but cluster 'two' has capacity 2"):
        get_scheduler("optimal").schedule_with(heavy, tight)
    assert recorded["solve"] == []
    meta = get_scheduler("optimal").schedule_with(graph, tight, current=np.array([0, 1])).metadata
    assert meta["migration_cost"] == 0.0 and meta["moved"] == 0 and recorded["solve"][-1]["seed"] == 0
    get_scheduler("optimal").replan(graph, tight, Placement.build(np.array([0, 1])))
    assert recorded["solve"][-1]["migration_cost"] == 1.0 and recorded["solve"][-1]["seed"] == 0


def test_each_warm_start_is_its_schedulers_own_placement_with_the_seed_given():
    """A random 12-task graph on 3 nodes where ``t3`` places differently with seed 0 and seed 3:
    with seed 3 every warm start is exactly what its scheduler gives with seed 3."""
    rng = np.random.default_rng(0)
    ops = sorted(rng.integers(0, 3, 12).tolist())
    edges = [(s, d, float(rng.integers(1, 10))) for s in range(12) for d in range(12)
             if ops[d] == ops[s] + 1 and rng.random() < 0.6]
    src, dst, rate = zip(*edges)
    graph = TaskGraph.build("g", ("A", "B", "C"), ops, [1.0] * 12, list(src), list(dst), list(rate))
    cluster = Cluster.from_types("c", (3, {"capacity": 5.0, "slots": 5}))
    own = lambda name, seed: get_scheduler(name).schedule(graph, cluster, seed=seed).node_of.tolist()
    assert own("t3", 0) != own("t3", 3)
    found, report = optimal.heuristic_placements(graph, cluster, 3, 120.0)
    names = [name for name, value in report.items() if not isinstance(value, str)]
    assert "t3" in names and len(names) == len(found) >= 4
    assert {name: node_of.tolist() for name, node_of in zip(names, found)} == {name: own(name, 3) for name in names}
