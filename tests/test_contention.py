"""The contention model of CAPSys: the profile reader, the metrics (hand-computed and against CAPS's
own cost of its plans), the ``caps`` scheduler and ``optimal``'s contention objective against
brute force, and one-line errors for bad profiles.

CAPS's plans in tests/fixtures/caps/ were recorded from the real CAPS (Go) with the command stored
in each file (``benchmarks/caps_compare.py record``); CAPS's own cost check passed on them."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from streamsched import workloads
from streamsched.cli import main
from streamsched.contention_metrics import (bottleneck, caps_rounded, contention, costs_from_counts,
                                            dominates, node_contention)
from streamsched.errors import InfeasibleError, InputError
from streamsched.model import Cluster, Placement
from streamsched.model.contention import (PROFILES, builtin_profile, graph_from_profile, profile_from_graph,
                                          read_caps_profile)
from streamsched.model.graph_files import read_graph
from streamsched.schedulers import caps, get_scheduler

FIXTURES = Path(__file__).parent / "fixtures" / "caps"


def op(key, name, p, compute, state, network, kind, down, up):
    return {"id": key, "name": name, "parallelism": p, "compute": compute, "state": state, "network": network,
            "outboundtype": kind, "downNode": down, "upNode": up}


#: A (2 tasks) -FORWARD-> B (2) -HASH-> C (2).
SMALL = [op("c", "C", 2, 5.0, 50.0, 0.0, "", [], ["b"]),
         op("b", "B", 2, 20.0, 100.0, 6.0, "HASH", ["c"], ["a"]),
         op("a", "A", 2, 10.0, 0.0, 4.0, "FORWARD", ["b"], [])]


def small_graph():
    return graph_from_profile(read_caps_profile(SMALL, "small"), "small")


def place(graph, rows: list[list[str]]) -> Placement:
    """Tasks by operator name per node, taken in rank order."""
    node_of = np.full(graph.n_tasks, -1)
    taken = {name: 0 for name in graph.operator_names}
    for k, names in enumerate(rows):
        for name in names:
            node_of[graph.operator_tasks(name)[taken[name]]] = k
            taken[name] += 1
    assert np.all(node_of >= 0)
    return Placement.build(node_of)


@pytest.mark.parametrize("rows, expected_nodes", [
    # co-located: each node A, B, C; FORWARD all local; HASH 6 x 1 x (1 - 1/2) = 3
    ([["A", "B", "C"], ["A", "B", "C"]], [(35, 150, 3), (35, 150, 3)]),
    # not co-located: both A on node 0 with no B: FORWARD 4 x 2 = 8; both B on node 1, no C: 6 x 2 x 1 = 12
    ([["A", "A", "C", "C"], ["B", "B"]], [(30, 100, 8), (40, 200, 12)]),
    # mixed: node 0 has A A B C: FORWARD 4 x (2 - 1) = 4, HASH 6 x 1 x 1/2 = 3; node 1 has B C: 3
    ([["A", "A", "B", "C"], ["B", "C"]], [(45, 150, 7), (25, 150, 3)]),
])
def test_contention_metrics_equal_hand_computed_values(rows, expected_nodes):
    graph = small_graph()
    per_node = node_contention(graph, place(graph, rows), 2)
    np.testing.assert_allclose(per_node, np.array(expected_nodes, dtype=float))
    top = np.array(expected_nodes, dtype=float).max(axis=0)
    assert bottleneck(per_node) == dict(zip(("compute", "state", "network"), top))
    assert contention(graph, place(graph, rows), 2)["network_total"] == pytest.approx(sum(r[2] for r in expected_nodes))


def test_hash_links_make_the_graphs_inter_node_traffic_the_total_network_cost():
    graph = small_graph()
    placement = place(graph, [["A", "A", "C", "C"], ["B", "B"]])
    cut = graph.rate[placement.node_of[graph.src] != placement.node_of[graph.dst]]
    # A -> B is FORWARD (2 tasks, one pair each): 8; B -> C HASH: 12
    assert cut.sum() == pytest.approx(20.0)


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("*.json")), ids=lambda p: p.stem)
def test_metrics_equal_caps_own_cost_of_its_plans(fixture):
    recorded = json.loads(fixture.read_text())
    assert recorded["cost_check_passed"] and recorded["plans"]
    graph = workloads.workload(f"caps-{recorded['profile']}")
    for plan in recorded["plans"]:
        placement = place(graph, plan["nodes"])
        ours = bottleneck(node_contention(graph, placement, recorded["workers"]))
        assert caps_rounded(ours) == plan["cost"], plan["nodes"]


def test_every_builtin_profile_reads_and_matches_its_file():
    for name in PROFILES:
        profile = builtin_profile(name)
        assert profile.n_tasks == sum(p for p in profile.parallelism)
    q1 = workloads.workload("caps-Q1")
    assert q1.n_tasks == 26 and q1.operator_names == ("Q1_Sink", "Q1_SlidingWindow", "Q1_Transform", "Q1_Source")
    assert q1.contention.outbound == ("", "REBALANCE", "HASH", "REBALANCE")
    assert q1.contention.cost[1].tolist() == [740.9745904302773, 17067.08440212565, 0.36103890340529077]


def test_q2_join_scales_as_caps_figure_10():
    # eval_only_caps: floor(share x total) for all but the last operator (at least 1), the last the rest
    assert builtin_profile("Q2-join").scaled(16).parallelism == (1, 6, 1, 1, 4, 3)
    assert builtin_profile("Q2-join").scaled(256).parallelism == (12, 97, 12, 12, 73, 50)
    assert workloads.workload("caps-Q2-join-64").n_tasks == 64


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize("mutate, message", [
    (lambda d: d[2].update(upNode=["c"]) or d[0].update(downNode=["a"], outboundtype="HASH"), "cycle"),
    (lambda d: d[1].update(downNode=["z"]), "unknown operator id 'z'"),
    (lambda d: d[1].update(state=-3.0), "state: cost -3 is negative"),
    (lambda d: d[1].pop("network"), "missing field 'network'"),
    (lambda d: d[1].update(outboundtype="BROADCAST"), "'BROADCAST' is not one of"),
    (lambda d: d[1].update(upNode=[]), "upNode: lacks 'a'"),
])
def test_bad_profiles_give_one_line_errors(mutate, message):
    data = json.loads(json.dumps(SMALL))
    mutate(data)
    with pytest.raises(InputError, match=message) as error:
        read_caps_profile(data, "bad.json")
    assert "\n" not in str(error.value) and "bad.json" in str(error.value)


def test_more_tasks_than_slots_is_one_line_and_infeasible():
    graph = workloads.workload("caps-q8")  # 64 tasks
    for name in ("caps", "optimal"):
        params = {"objective": "contention"} if name == "optimal" else {}
        with pytest.raises(InfeasibleError, match="needs load 64") as error:
            get_scheduler(name, **params).schedule(graph, workloads.cluster("caps-4x8"))
        assert "\n" not in str(error.value)


def test_cli_reads_a_profile_file_and_refuses_bad_ones_in_one_line(tmp_path, capsys):
    good = tmp_path / "small.json"
    good.write_text(json.dumps(SMALL))
    assert read_graph(good).contention is not None
    bad = tmp_path / "cycle.json"
    data = json.loads(json.dumps(SMALL))
    data[0].update(downNode=["a"], outboundtype="HASH")
    data[2].update(upNode=["c"])
    bad.write_text(json.dumps(data))
    assert main(["schedule", "-s", "caps", "-g", str(bad), "-c", "caps-2x4"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "cycle" in err and "cycle.json" in err
    assert main(["schedule", "-s", "caps", "-g", str(good), "-c", "caps-1x4"]) == 3  # 6 tasks, 4 slots
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "needs load 6" in err


# ------------------------------------------------------------------ schedulers
def brute_force(graph, n_nodes: int, slots: int):
    """Every count matrix (tasks of each operator per node, at most ``slots`` per node, a number
    or one per node): costs."""
    profile = graph.contention
    per_op = []
    for p in profile.parallelism:
        per_op.append([c for c in itertools.product(range(p + 1), repeat=n_nodes) if sum(c) == p])
    out = []
    for combo in itertools.product(*per_op):
        counts = np.array(combo)
        if np.all(counts.sum(axis=0) <= slots):
            out.append((costs_from_counts(profile, counts).max(axis=0), counts))
    return out


def tiny():
    data = [op("a", "sink", 2, 3.0, 7.0, 0.0, "", [], ["b"]),
            op("b", "window", 3, 11.0, 40.0, 2.5, "FORWARD", ["a"], ["c"]),
            op("c", "map", 2, 5.0, 0.0, 9.0, "HASH", ["b"], ["d"]),
            op("d", "source", 2, 2.0, 0.0, 6.0, "REBALANCE", ["c"], [])]
    return graph_from_profile(read_caps_profile(data, "tiny"), "tiny"), Cluster.from_types("three", (3, {"capacity": 4.0, "slots": 4}))


def test_caps_full_search_finds_exactly_the_brute_force_pareto_front():
    graph, cluster = tiny()
    everything = [c for c, _ in brute_force(graph, 3, 4)]
    front = {tuple(np.round(c, 9)) for c in everything if not any(dominates(o, c) for o in everything)}
    placement = get_scheduler("caps", autotune=False, alpha_compute=1.0, alpha_state=1.0, alpha_network=1.0,
                              work_limit=10**7).schedule(graph, cluster)
    found = {tuple(np.round([p[d] for d in ("compute", "state", "network")], 9)) for p in placement.metadata["pareto_front"]}
    assert placement.metadata["exhausted"] and found == front


def random_chain(rng):
    """A chain of 3-4 operators (random parallelism, costs and link types) on 2-4 nodes of
    random slots: the profile and the node limits."""
    n_ops = int(rng.integers(3, 5))
    kinds = ["FORWARD", "HASH", "REBALANCE"]
    data = [op(str(o), f"op{o}", int(rng.integers(1, 5)), float(rng.uniform(1, 20)), float(rng.uniform(0, 50)),
               float(rng.uniform(0, 10)) if o < n_ops - 1 else 0.0, kinds[int(rng.integers(3))] if o < n_ops - 1 else "",
               [str(o + 1)] if o < n_ops - 1 else [], [str(o - 1)] if o else []) for o in range(n_ops)]
    profile = read_caps_profile(data, "chain")
    limits = rng.integers(1, 6, size=int(rng.integers(2, 5)))
    limits[0] += max(0, profile.n_tasks - int(limits.sum()))  # room for every task
    return profile, limits


def test_a_first_plan_search_gets_the_same_plan_with_or_without_its_dive():
    """The dive (the search's first path alone, without look-aheads) must give exactly the plan
    the whole search finds first; where it reaches it, with the same node trials."""
    rng = np.random.default_rng(29)
    reached = missed = 0
    for _ in range(300):
        profile, limits = random_chain(rng)
        alpha = rng.uniform(0.0, 1.0, size=3)
        dived = caps.search(profile, limits, alpha, 10**6, first_only=True)
        whole = caps.search(profile, limits, alpha, 10**6, first_only=True, dive=False)
        assert dived.plans == whole.plans and dived.exhausted == whole.exhausted
        if whole.plans and dived.work_to_first == whole.work_to_first:
            reached += 1
        elif whole.plans:
            missed += 1  # the dive met a dead end; the whole search started over
            assert dived.work_to_first > whole.work_to_first
    assert reached >= 40 and missed >= 40  # both ways are exercised (56 and 57 of 300 with this seed)


def test_caps_stops_at_its_work_limit_with_the_plans_found_so_far():
    graph, cluster = tiny()
    loose = dict(autotune=False, alpha_compute=1.0, alpha_state=1.0, alpha_network=1.0)
    whole = get_scheduler("caps", **loose, work_limit=10**7).schedule(graph, cluster).metadata
    cut = get_scheduler("caps", **loose, work_limit=50).schedule(graph, cluster).metadata
    assert whole["exhausted"] and whole["work"] > 50
    assert not cut["exhausted"] and cut["work"] == 51 and 1 <= cut["plans_found"] < whole["plans_found"]


@pytest.mark.parametrize("capacities", [(3, 3, 2, 1), (1, 2, 3, 3), (4, 4, 1, 0.5)])
def test_caps_full_search_on_unequal_nodes_finds_exactly_the_brute_force_front(capacities):
    """Nodes of different room (a residual cluster's): empty nodes are interchangeable only
    when they take as many tasks (twins were once told apart by their contents alone, and a
    feasible graph got "no plan" after an exhaustive search)."""
    graph, _ = tiny()
    cluster = Cluster.from_types("unequal", *[(1, {"capacity": float(c), "slots": 4}) for c in capacities])
    limits = np.floor(np.array(capacities, dtype=float)).astype(int)
    everything = [c for c, _ in brute_force(graph, len(capacities), limits)]
    assert everything
    front = {tuple(np.round(c, 9)) for c in everything if not any(dominates(o, c) for o in everything)}
    placement = get_scheduler("caps", autotune=False, alpha_compute=1.0, alpha_state=1.0, alpha_network=1.0,
                              work_limit=10**7).schedule(graph, cluster)
    found = {tuple(np.round([p[d] for d in ("compute", "state", "network")], 9)) for p in placement.metadata["pareto_front"]}
    within = caps_threshold_rule(graph.contention, len(capacities), int(limits.max()), (1.0, 1.0, 1.0)) + 1e-6
    assert placement.metadata["exhausted"] and found == {c for c in front if np.all(np.array(c) <= within)}


def caps_threshold_rule(profile, workers: int, slots: int, alpha) -> np.ndarray:
    """CAPS's thresholds written out from its CalculateThreshold, independently of the scheduler:
    per dimension ``low + alpha (high - low)``, low = total / workers (network 0), high = the
    ``slots`` costliest tasks on one worker."""
    out = []
    for k in range(3):
        tasks = sorted((float(profile.cost[o, k]) for o, p in enumerate(profile.parallelism) for _ in range(p)),
                       reverse=True)
        low = sum(tasks) / workers if k < 2 else 0.0
        out.append(low + alpha[k] * (sum(tasks[:slots]) - low))
    return np.array(out)


@pytest.mark.parametrize("slots", [3, 4])  # 3: as many slots as tasks, every node must fill up
@pytest.mark.parametrize("alpha", [(0.1, 0.1, 0.3), (0.2, 0.5, 0.2), (0.4, 0.3, 0.6), (0.0, 0.0, 0.0)])
def test_caps_full_search_under_thresholds_finds_exactly_the_brute_force_front_within_them(alpha, slots):
    graph, _ = tiny()
    cluster = Cluster.from_types("three", (3, {"capacity": float(slots), "slots": slots}))
    limit = caps_threshold_rule(graph.contention, 3, slots, alpha) + 1e-6
    within = []
    for _, counts in brute_force(graph, 3, slots):
        per_node = costs_from_counts(graph.contention, counts)
        if np.all(per_node <= limit):
            within.append(per_node.max(axis=0))
    front = {tuple(np.round(c, 9)) for c in within if not any(dominates(o, c) for o in within)}
    scheduler = get_scheduler("caps", autotune=False, alpha_compute=alpha[0], alpha_state=alpha[1],
                              alpha_network=alpha[2], work_limit=10**7)
    if not front:
        with pytest.raises(InfeasibleError, match="searched every plan"):
            scheduler.schedule(graph, cluster)
        return
    placement = scheduler.schedule(graph, cluster)
    found = {tuple(np.round([p[d] for d in ("compute", "state", "network")], 9)) for p in placement.metadata["pareto_front"]}
    assert placement.metadata["exhausted"] and found == front
    assert np.all(node_contention(graph, placement, 3) <= limit)


@pytest.mark.parametrize("workers, slots", [(4, 16), (4, 48), (4, 64), (16, 64)])
@pytest.mark.parametrize("alpha", [(0.08, 0.15, 0.6), (0.15, 0.25, 0.8), (0.25, 0.3, 0.9)])
def test_caps_first_plans_of_figure_10_keep_the_threshold_rule_within_little_work(workers, slots, alpha):
    tasks = workers * slots
    graph = graph_from_profile(builtin_profile("Q2-join").scaled(tasks), f"q2-{tasks}")
    cluster = workloads.cluster(f"caps-{workers}x{slots}")
    placement = get_scheduler("caps", autotune=False, first_plan=True, alpha_compute=alpha[0], alpha_state=alpha[1],
                              alpha_network=alpha[2], work_limit=5_000).schedule(graph, cluster)
    per_node = node_contention(graph, placement, workers)
    assert np.all(per_node <= caps_threshold_rule(graph.contention, workers, slots, alpha) + 1e-6)
    assert placement.violations(graph, cluster) == []
    meta = placement.metadata  # the search ended at its first plan
    assert meta["plans_found"] == 1 and not meta["exhausted"] and meta["work"] == meta["work_to_first"]
    assert 0 < meta["seconds_to_first"] <= meta["search_seconds"]




def test_caps_is_deterministic_and_its_metadata_is_the_metric():
    graph, cluster = workloads.workload("caps-Q3"), workloads.cluster("caps-4x8")
    first = get_scheduler("caps").schedule(graph, cluster, seed=4)
    second = get_scheduler("caps").schedule(graph, cluster, seed=4)
    np.testing.assert_array_equal(first.node_of, second.node_of)
    assert first.metadata["contention"] == pytest.approx(contention(graph, first, 4)["bottleneck"])
    assert first.violations(graph, cluster) == []


@pytest.mark.parametrize("order", ["compute,state,network", "network,compute,state", "state,network,compute"])
def test_optimal_contention_equals_the_lexicographic_brute_force_minimum(order):
    graph, cluster = tiny()
    dims = order.split(",")
    index = [("compute", "state", "network").index(d) for d in dims]
    best = min(tuple(np.round(c[index], 9)) for c, _ in brute_force(graph, 3, 4))
    placement = get_scheduler("optimal", objective="contention", contention=order).schedule(graph, cluster)
    got = contention(graph, placement, 3)["bottleneck"]
    assert placement.metadata["status"] == "optimal"
    assert tuple(got[d] for d in dims) == pytest.approx(best)
    assert placement.metadata["contention_bound"][dims[0]] <= got[dims[0]] + 1e-9
    assert placement.metadata["gap"] < 1e-6


def test_optimal_contention_under_ceilings_and_a_traffic_ceiling():
    graph, cluster = tiny()
    plans = brute_force(graph, 3, 4)
    totals = [(costs_from_counts(graph.contention, counts)[:, 2].sum(), c) for c, counts in plans]
    ceiling = 60.0
    best = min(c[2] for c, _ in plans if c[0] <= ceiling)
    placement = get_scheduler("optimal", objective="contention", contention="network,compute,state",
                              compute_ceiling=ceiling).schedule(graph, cluster)
    got = contention(graph, placement, 3)
    assert got["bottleneck"]["compute"] <= ceiling and got["bottleneck"]["network"] == pytest.approx(best)
    traffic = min(t for t, _ in totals)
    least = get_scheduler("optimal", objective="contention", contention="network-total").schedule(graph, cluster)
    assert contention(graph, least, 3)["network_total"] == pytest.approx(traffic)
    limit = traffic * 1.5
    best_compute = min(c[0] for t, c in totals if t <= limit)
    capped = get_scheduler("optimal", objective="contention", traffic_ceiling=limit).schedule(graph, cluster)
    assert contention(graph, capped, 3)["network_total"] <= limit
    assert contention(graph, capped, 3)["bottleneck"]["compute"] == pytest.approx(best_compute)
    with pytest.raises(InfeasibleError, match="ceilings"):
        get_scheduler("optimal", objective="contention", traffic_ceiling=traffic * 0.5).schedule(graph, cluster)


@pytest.mark.parametrize("seed", range(6))
def test_optimal_contention_under_ceilings_that_sit_exactly_on_plans_costs(seed):
    """Ceilings equal to some plans' exact float costs (random costs: rounding matters): the
    optimum is the brute-force one among every plan that meets them as written, and the plan
    meets them within CEILING_RTOL (a ceiling tightened by its rounding loss lost such plans)."""
    from streamsched.solvers.contention import CEILING_RTOL

    rng = np.random.default_rng(seed)
    profile, limits = random_chain(rng)
    graph = graph_from_profile(profile, "chain")
    cluster = Cluster.from_types("unequal", *[(1, {"capacity": float(c), "slots": int(c)}) for c in limits])
    plans = brute_force(graph, len(limits), limits)
    totals = [costs_from_counts(profile, counts)[:, 2].sum() for _, counts in plans]
    pick = plans[int(rng.integers(len(plans)))][0]
    compute, total = float(pick[0]), float(totals[int(rng.integers(len(plans)))])
    best = min(c[2] for c, _ in plans if c[0] <= compute)
    got = get_scheduler("optimal", objective="contention", contention="network,compute,state",
                        compute_ceiling=compute).schedule(graph, cluster)
    cost = contention(graph, got, len(limits))["bottleneck"]
    assert got.metadata["status"] == "optimal"
    assert cost["network"] == pytest.approx(best, rel=1e-9) and cost["compute"] <= compute * (1 + CEILING_RTOL)
    best_compute = min(c[0] for (c, _), t in zip(plans, totals) if t <= total)
    capped = get_scheduler("optimal", objective="contention", traffic_ceiling=total).schedule(graph, cluster)
    assert contention(graph, capped, len(limits))["bottleneck"]["compute"] == pytest.approx(best_compute, rel=1e-9)
    assert contention(graph, capped, len(limits))["network_total"] <= total * (1 + CEILING_RTOL)


def test_optimal_contention_finds_caps_plan_on_its_exact_compute_ceiling():
    """CAPS's plan on Q3 (compute 5152.545795219942, state 0, network 84.12, its front in the
    caps row of docs/benchmarks.md) meets these ceilings as written: the least network under
    them is at most CAPS's (before the fix: 113.35, called optimal)."""
    graph, cluster = workloads.workload("caps-Q3"), workloads.cluster("caps-4x8")
    got = get_scheduler("optimal", objective="contention", contention="network,compute,state",
                        compute_ceiling=5152.545795219942, state_ceiling=0.0).schedule(graph, cluster)
    assert got.metadata["status"] == "optimal"
    assert got.metadata["contention"]["network"] <= 84.12371456811748 + 1e-9
    assert got.metadata["contention"]["state"] == 0.0


def test_optimal_contention_proves_the_documented_example_with_its_defaults(capsys):
    """docs/optimal.md's example as a user runs it (no limits given): work_limit alone stops it,
    and it ends with a proof (it once handed time_limit=0 to the solver as its work limit)."""
    assert main(["schedule", "-s", "optimal", "-w", "caps-Q3", "-c", "caps-4x8", "-p", "objective=contention",
                 "--json"]) == 0
    metadata = json.loads(capsys.readouterr().out)["metadata"]
    assert metadata["status"] == "optimal" and metadata["gap"] < 1e-6
    assert [s["status"] for s in metadata["stages"]] == ["optimal"] * 3


def test_optimal_contention_passes_work_limit_and_no_wall_clock_by_default(monkeypatch):
    """The contention path gets ``work_limit`` as CP-SAT's deterministic limit and no wall clock
    unless ``time_limit`` is set (then the wall clock alone)."""
    import streamsched.solvers.contention as solver

    seen = []
    real = solver.solve_contention
    monkeypatch.setattr(solver, "solve_contention",
                        lambda *a, **k: seen.append((k["time_limit"], k["work_limit"])) or real(*a, **k))
    graph, cluster = tiny()
    get_scheduler("optimal", objective="contention", work_limit=3.5).schedule(graph, cluster)
    get_scheduler("optimal", objective="contention", time_limit=7.0).schedule(graph, cluster)
    get_scheduler("optimal", objective="contention").schedule(graph, cluster)
    assert seen == [(None, 3.5), (7.0, None), (None, 10.0)]


def test_a_graph_without_a_profile_gets_one_from_its_weights():
    graph = workloads.workload("wordcount")
    profile = profile_from_graph(graph)
    assert profile.measured == ("compute", "network") and profile.outbound[0] == "HASH"
    placement = get_scheduler("caps").schedule(graph, workloads.cluster("high-low-1-2"))
    assert placement.violations(graph, workloads.cluster("high-low-1-2")) == []


# ------------------------------------------------------------------ profiles from Flink
def test_flink_capture_gives_compute_and_network_per_task_and_says_state_is_not_measured():
    """The real Flink 2.3 capture (tests/fixtures/flink/live-job): compute = mean busy cores of
    Calc's subtasks, network = mean numBytesOut per second, recomputed from the raw counters."""
    from streamsched.engines import flink
    from test_flink_reader import CALC, _raw_rates

    capture = flink.load_capture(Path(__file__).parent / "fixtures" / "flink" / "live-job")
    reading = flink.read_capture(capture)
    profile = reading.graph.contention
    assert profile.measured == ("compute", "network")
    assert "state" in reading.report["contention"]["not_measured"]

    def raw(metric):  # Calc's per-subtask counter rates, straight from the saved JSON
        return _raw_rates(capture, CALC, metric)

    k = [i for i, name in enumerate(reading.graph.operator_names) if name.startswith("Calc[")][0]
    assert profile.cost[k, 0] == pytest.approx(raw("accumulateBusyTimeMs").mean() / 1000, rel=1e-12)
    assert profile.cost[k, 2] == pytest.approx(raw("numBytesOut").mean(), rel=1e-12)  # one downstream vertex
    assert profile.outbound[k] == "HASH" and profile.cost[:, 1].tolist() == [0.0] * profile.n_operators
    kinds = {reading.graph.operator_names[o]: profile.outbound[o] for o in range(profile.n_operators)}
    assert kinds["Source: gen[1]"] == "REBALANCE"
    placement = get_scheduler("caps").schedule(reading.graph, reading.cluster)
    assert placement.violations(reading.graph, reading.cluster) == []


def test_a_graph_json_keeps_its_contention_profile(tmp_path):
    """write_graph -> read_graph keeps the profile (costs, link types, measured dimensions);
    without it the profile would be derived from the weights again, and Q5's state costs
    (not in the weights) would be lost."""
    from dataclasses import replace

    from streamsched.model.contention import with_profile
    from streamsched.model.graph_files import write_graph

    graph = workloads.workload("caps-Q5")
    assert graph.contention.cost[:, 1].max() > 0
    assert profile_from_graph(replace(graph, contention=None)).cost[:, 1].max() == 0  # derived: no state
    path = tmp_path / "q5.json"
    write_graph(graph, path)
    back = read_graph(path)

    def by_name(profile):  # the file lists operators in its own order: compare them by name
        names = profile.operator_names
        return {name: (profile.parallelism[o], tuple(profile.cost[o]), profile.outbound[o],
                       sorted(names[d] for d in profile.downstream[o])) for o, name in enumerate(names)}

    assert by_name(back.contention) == by_name(graph.contention) and len(by_name(graph.contention)) == 5
    assert back.contention.measured == graph.contention.measured
    assert profile_from_graph(back) is back.contention
    measured = with_profile(graph, replace(graph.contention, measured=("compute", "network")))
    write_graph(measured, path)
    assert read_graph(path).contention.measured == ("compute", "network")
    document = json.loads(path.read_text())
    document["contention"]["operators"][0]["parallelism"] += 1
    path.write_text(json.dumps(document))
    with pytest.raises(InputError, match=r"q5\.json: contention: the contention profile's parallelism differs"):
        read_graph(path)
    document["contention"]["operators"][0]["compute"] = -1.0
    path.write_text(json.dumps(document))
    with pytest.raises(InputError, match=r"q5\.json: contention\.operators: \[0\] \(id '0'\)\.compute: cost -1 is negative"):
        read_graph(path)
