"""caps pinned by hand and by brute force on small profiles (issue 34 item 4; ``make mutate
MODULE=schedulers/caps.py``): which plan of its front it returns, how auto-tuning moves its
alphas, how it spreads tasks over a node's worker slots and beside FORWARD partners, its
thresholds and their rounding, and the node limits."""

from __future__ import annotations


import numpy as np
import pytest

from streamsched.contention_metrics import costs_from_counts
from streamsched.errors import InfeasibleError
from streamsched.model import Cluster, Node, TaskGraph
from streamsched.model.contention import graph_from_profile, read_caps_profile
from streamsched.model.placement import NO_WORKER
from streamsched.schedulers import get_scheduler
from streamsched.schedulers.base import PackingFailed
from test_contention import brute_force
from streamsched.schedulers.caps import node_limits, placement_from_counts, thresholds

DIMS = ("compute", "state", "network")


def op(key, name, p, compute, state, network, kind, down, up):
    return {"id": key, "name": name, "parallelism": p, "compute": compute, "state": state, "network": network,
            "outboundtype": kind, "downNode": down, "upNode": up}


def tiny():
    """sink (2) <-FORWARD- window (3) <-HASH- map (2) <-REBALANCE- source (2), on 3 nodes of 4 slots."""
    data = [op("a", "sink", 2, 3.0, 7.0, 0.0, "", [], ["b"]),
            op("b", "window", 3, 11.0, 40.0, 2.5, "FORWARD", ["a"], ["c"]),
            op("c", "map", 2, 5.0, 0.0, 9.0, "HASH", ["b"], ["d"]),
            op("d", "source", 2, 2.0, 0.0, 6.0, "REBALANCE", ["c"], [])]
    graph = graph_from_profile(read_caps_profile(data, "tiny"), "tiny")
    return graph, Cluster.from_types("three", (3, {"capacity": 4.0, "slots": 4}))


def every_plan(profile, n_nodes: int, slots: int):
    """(bottleneck cost vector, counts) of every plan with at most ``slots`` tasks per node."""
    return brute_force(graph_from_profile(profile, "every-plan"), n_nodes, slots)


def bases(profile, n_nodes: int, slots: int):
    """(low, high) from the tasks one by one: low the mean over nodes of all tasks' cost (network
    0), high the ``slots`` costliest tasks' cost on one node."""
    tasks = np.repeat(profile.cost, profile.parallelism, axis=0)
    low = np.append(tasks[:, :2].sum(axis=0) / n_nodes, 0.0)
    high = np.array([np.sort(tasks[:, k])[::-1][:slots].sum() for k in range(3)])
    return low, high


def front(plans):
    costs = [tuple(np.round(c, 9)) for c, _ in plans]
    return sorted({c for c in costs if not any(all(o[k] <= c[k] for k in range(3)) and o != c for o in costs)})


def within(plans, low, high, alpha):
    limit = np.round(low + alpha * (high - low), 5)
    return [(c, n) for c, n in plans if np.all(c <= limit + 1e-9)]


def test_caps_returns_the_front_plan_of_least_summed_cost_over_span():
    """Every alpha at 1: the front is the brute-force one, and the plan returned is the one
    whose sum of cost / (high - low) over the three dimensions is least."""
    graph, cluster = tiny()
    profile = graph.contention
    plans = every_plan(profile, 3, 4)
    low, high = bases(profile, 3, 4)
    span = np.where(high - low > 0, high - low, 1.0)
    best = min(front(plans), key=lambda c: (sum(x / w for x, w in zip(c, span)), c))
    placement = get_scheduler("caps", autotune=False, alpha_compute=1.0, alpha_state=1.0, alpha_network=1.0,
                              work_limit=10**7).schedule(graph, cluster)
    got = tuple(placement.metadata["contention"][d] for d in DIMS)
    assert np.allclose(got, best, rtol=0, atol=1e-9)
    assert np.allclose([[p[d] for d in DIMS] for p in placement.metadata["pareto_front"]], front(plans))
    assert np.allclose(costs_from_counts(profile, np.array([np.bincount(placement.node_of[graph.task_operator == o],
                                                                                 minlength=3)
                                                                     for o in range(4)])).max(axis=0), best)


def relaxed_chain():
    """A chain whose per-dimension minima give no plan together: phase two relaxes them 4 times
    (brute force); on nodes taking 3 and 4 tasks."""
    profile = chain((2, 1, 3, 1), [(17.9, 45.6, 2.1), (17.7, 47.8, 5.4), (1.4, 24.5, 0.8), (2.1, 26.8, 0.0)],
                    ("REBALANCE", "FORWARD", "FORWARD", ""))
    return graph_from_profile(profile, "chain"), Cluster.from_types("unequal", (1, {"capacity": 3.0, "slots": 3}),
                                                                    (1, {"capacity": 4.0, "slots": 4}))


@pytest.mark.parametrize("case, limits", [(tiny, (4, 4, 4)), (relaxed_chain, (3, 4))])
def test_auto_tuning_moves_the_alphas_as_caps_does(case, limits):
    """CAPS's Auto_tuning with brute force in place of each search (tuned_alpha): from the
    ceilings (0.02, 0.02, 0.1), relax all by 1.2 until a plan exists; per dimension,
    binary-search to 0.01 the least alpha with a plan (others at the relaxed ceiling); from
    those, relax all by 1.2 until a plan exists. The alphas, the front caps reports and the
    searches of each phase (CAPS's ct_compute, ct_state, ct_network, ct_relax) are those."""
    graph, cluster = case()
    profile = graph.contention
    plans = brute_force(graph, len(limits), np.array(limits))
    low, high = bases(profile, len(limits), max(limits))
    alpha, calls = tuned_alpha(plans, low, high, (0.02, 0.02, 0.1))
    placement = get_scheduler("caps", work_limit=10**7, probe_work=10**7).schedule(graph, cluster)
    assert placement.metadata["alpha"] == pytest.approx(alpha.tolist(), rel=1e-12)
    assert placement.metadata["autotune_searches"] == calls
    expected = front(within(plans, low, high, alpha))
    assert np.allclose([[p[d] for d in DIMS] for p in placement.metadata["pareto_front"]], expected)
    assert np.all(alpha > 0) and np.any(alpha != (0.02, 0.02, 0.1))  # the tuning moved them
    assert calls["relax_ceiling"] > 0 and (calls["phase_two"] > 1) == (case is relaxed_chain)


def chain3():
    """A (3) -FORWARD-> B (3) -FORWARD-> C (3)."""
    data = [op("a", "A", 3, 1.0, 0.0, 1.0, "FORWARD", ["b"], []),
            op("b", "B", 3, 1.0, 0.0, 1.0, "FORWARD", ["c"], ["a"]),
            op("c", "C", 3, 1.0, 0.0, 0.0, "", [], ["b"])]
    return graph_from_profile(read_caps_profile(data, "chain3"), "chain3")


def test_tasks_go_beside_their_forward_partner_and_round_robin_over_a_nodes_slots():
    """Counts A (2, 1), B (1, 2), C (2, 1) on nodes n0 (2 slots), n1 (3 slots). A in rank order:
    A0 A1 on n0, A2 on n1. B beside its partner's task of the same index where the counts allow:
    B0 (A0: n0), B1 (A1: n0, full) left over, B2 (A2: n1); B1 to n1. C: C0 (B0: n0), C1 (B1: n1),
    C2 (B2: n1, full) left over to n0. Workers, per node in task order, round robin: n0 hosts
    A0 A1 B0 C0 C2 (workers 0 1 0 1 0), n1 A2 B1 B2 C1 (0 1 2 0)."""
    graph = chain3()
    cluster = Cluster("two", (Node("n0", 5.0, slots=2), Node("n1", 5.0, slots=3)))
    counts = [[2, 1], [1, 2], [2, 1]]
    node_of, worker_of = placement_from_counts(graph, cluster, graph.contention, counts)
    assert node_of.tolist() == [0, 0, 1, 0, 1, 1, 0, 1, 0]
    assert worker_of.tolist() == [0, 1, 0, 0, 1, 2, 1, 0, 0]
    slotless = Cluster("two", (Node("n0", 5.0, slots=0), Node("n1", 5.0, slots=1)))
    node_of, worker_of = placement_from_counts(graph, slotless, graph.contention, counts)
    assert worker_of.tolist() == [NO_WORKER, NO_WORKER, 0, NO_WORKER, 0, 0, NO_WORKER, 0, NO_WORKER]


def test_tasks_of_an_operator_numbered_apart_follow_the_counts_in_task_order():
    """Operator tasks not consecutive (A: tasks 0, 2; B: 1, 3), B HASH from A: counts A (1, 1),
    B (0, 2): A's tasks in their order to n0 then n1, both of B's to n1."""
    graph = TaskGraph.build("mixed", ("A", "B"), [0, 1, 0, 1], [1.0] * 4, [0, 2], [1, 3], [1.0, 1.0])
    from streamsched.model.contention import ContentionProfile

    profile = ContentionProfile(("A", "B"), (2, 2), np.ones((2, 3)), ("HASH", ""), ((1,), ()))
    cluster = Cluster("two", (Node("n0", 4.0, slots=1), Node("n1", 4.0, slots=1)))
    node_of, worker_of = placement_from_counts(graph, cluster, profile, [[1, 1], [0, 2]])
    assert node_of.tolist() == [0, 1, 1, 1] and worker_of.tolist() == [0, 0, 0, 0]


def test_thresholds_round_to_five_decimals_half_away_from_zero():
    """low + alpha (high - low): 0 + 0.5 x 3e-5 = 1.5e-5 rounds to 2e-5; -1.5e-5 to -2e-5; an
    infinite alpha stays infinite."""
    assert thresholds([0.0, 0.0, 0.0], [3e-5, -3e-5, 1.0], [0.5, 0.5, float("inf")]) == [2e-5, -2e-5, float("inf")]
    assert thresholds([1.0, 2.0, 0.0], [3.0, 6.0, 10.0], [0.25, 1.0, 0.123456]) == [1.5, 6.0, 1.23456]


def test_node_limits_are_capacity_over_the_least_positive_load():
    """Capacities 5, 2.9 and 100 over the least positive load 1 (a zero load does not count):
    5, 2 and 100, but never more than the graph's 4 tasks. All loads 0: every node can take every task.
    A capacity of 3 over loads of 0.1 (30 x 0.1 is 3.0000000000000004) still takes 30 up to
    rounding, 4 here."""
    graph = TaskGraph.build("g", ("A",), [0] * 4, [0.0, 1.0, 2.0, 1.5], [], [], [])
    cluster = Cluster("c", (Node("a", 5.0), Node("b", 2.9), Node("c", 100.0)))
    assert node_limits(graph, cluster).tolist() == [4, 2, 4]
    idle = TaskGraph.build("g", ("A",), [0] * 3, [0.0] * 3, [], [], [])
    assert node_limits(idle, cluster).tolist() == [3, 3, 3]
    tenth = TaskGraph.build("g", ("A",), [0] * 40, [0.1] * 40, [], [], [])
    assert node_limits(tenth, Cluster("c", (Node("a", 3.0), Node("b", 0.25)))).tolist() == [30, 2]


def test_more_tasks_than_the_nodes_take_is_refused_before_any_search():
    """Three tasks of load 1 on two nodes of capacity 1.5: the load fits the cluster, but each
    node takes one task: one line naming the counts."""
    graph = TaskGraph.build("g", ("A",), [0, 0, 0], [1.0, 1.0, 1.0], [], [], [])
    with pytest.raises(InfeasibleError, match="has 3 tasks but the nodes of 'c' take at most 2"):
        get_scheduler("caps", work_limit=1000, probe_work=1000).schedule(graph, Cluster("c", (Node("a", 1.5),
                                                                                             Node("b", 1.5))))


def test_pick_random_takes_a_seeded_plan_of_the_front():
    """pick=random (CAPS's own pick): each seed's plan is on the brute-force front, the same seed
    the same plan, and over ten seeds more than one of the front's 3 plans comes up."""
    graph, cluster = tiny()
    expected = front(every_plan(graph.contention, 3, 4))
    scheduler = get_scheduler("caps", autotune=False, alpha_compute=1.0, alpha_state=1.0, alpha_network=1.0,
                              work_limit=10**7, pick="random")
    picked = set()
    for seed in range(10):
        cost = tuple(scheduler.schedule(graph, cluster, seed=seed).metadata["contention"][d] for d in DIMS)
        again = tuple(scheduler.schedule(graph, cluster, seed=seed).metadata["contention"][d] for d in DIMS)
        assert cost == again and any(np.allclose(cost, f) for f in expected)
        picked.add(tuple(np.round(cost, 9)))
    assert len(expected) == 3 and len(picked) > 1


def test_metadata_names_the_measured_dimensions_and_the_tuning_searches():
    graph, cluster = tiny()
    tuned = get_scheduler("caps", work_limit=10**6, probe_work=10**6).schedule(graph, cluster).metadata
    assert tuned["measured"] == list(DIMS)
    assert set(tuned["autotune_searches"]) == {"relax_ceiling", "compute", "state", "network", "phase_two"}
    assert tuned["autotune_searches"]["phase_two"] >= 1
    fixed = get_scheduler("caps", autotune=False, alpha_compute=1.0, alpha_state=1.0, alpha_network=1.0).schedule(
        graph, cluster).metadata
    assert "autotune_searches" not in fixed


def test_a_plan_over_a_nodes_capacity_by_unequal_loads_is_refused_and_one_on_it_is_kept():
    """A (2 tasks, loads 1 and 3) on two nodes: the plan puts one task on each (compute 2 on
    both, against 4 for both on one). Capacity 3: the task of load 3 fits exactly. Loads 1, 2, 2
    on two nodes of 2.5 (each task fits, and the total): every plan puts two tasks, 3 or 4, on one
    node, and caps says so (strict)."""
    graph = TaskGraph.build("u", ("A",), [0, 0], [1.0, 3.0], [], [], [])
    on = Cluster("c", (Node("a", 3.0), Node("b", 3.0)))
    placement = get_scheduler("caps", strict=True, work_limit=1000, probe_work=1000).schedule(graph, on)
    assert sorted(placement.node_of.tolist()) == [0, 1]
    three = TaskGraph.build("u3", ("A",), [0, 0, 0], [1.0, 2.0, 2.0], [], [], [])
    over = Cluster("c", (Node("a", 2.5), Node("b", 2.5)))
    with pytest.raises(InfeasibleError, match="exceeds a node's capacity"):
        get_scheduler("caps", strict=True, work_limit=1000, probe_work=1000).schedule(three, over)


def tuned_alpha(plans, low, high, ceiling, granularity=0.01, rate=0.2):
    """CAPS's Auto_tuning (autotune.go) with brute force in place of each search: from the
    ceilings, relax all by (1 + rate) until a plan exists; per dimension, binary-search to
    ``granularity`` the least alpha with a plan (others at the relaxed ceiling); from those,
    relax all by (1 + rate) until a plan exists. The alphas and the searches of each phase
    (relaxations, probes per dimension, phase two's searches)."""
    works = lambda alpha: bool(within(plans, low, high, np.asarray(alpha)))
    ceiling = np.asarray(ceiling, dtype=float)
    calls = {"relax_ceiling": 0}
    while not works(ceiling):
        ceiling = np.minimum(ceiling * (1 + rate), 1.0)
        calls["relax_ceiling"] += 1
    alpha = ceiling.copy()
    for k, dim in enumerate(DIMS):
        lo, hi, calls[dim] = 0.0, ceiling[k], 0
        while hi - lo >= granularity:
            mid = lo + (hi - lo) / 2
            trial = ceiling.copy()
            trial[k] = mid
            lo, hi = (lo, mid) if works(trial) else (mid, hi)
            calls[dim] += 1
        alpha[k] = hi
    calls["phase_two"] = 1
    while not works(alpha):
        alpha = np.minimum(alpha * (1 + rate), 1.0)
        calls["phase_two"] += 1
    return alpha, calls


def fan_out():
    """A (1 task, network 1, HASH) -> B and C (1 task each), on three nodes of one slot: A's node
    sends to both, network 2 in every plan, but CAPS's ``high`` (one slot of the costliest
    task) is 1: no plan within any alphas <= 1."""
    data = [op("a", "A", 1, 3.0, 1.0, 1.0, "HASH", ["b", "c"], []),
            op("b", "B", 1, 2.0, 0.0, 0.0, "", [], ["a"]),
            op("c", "C", 1, 1.0, 0.0, 0.0, "", [], ["a"])]
    graph = graph_from_profile(read_caps_profile(data, "fan"), "fan")
    return graph, Cluster.from_types("ones", (3, {"capacity": 1.0, "slots": 1}))


def test_auto_tuning_without_any_plan_under_alphas_of_one_takes_a_plan_without_thresholds():
    """fan_out: ceilings (0.02, 0.02, 0.1) relaxed by 1.2 reach 1 everywhere after 22 rounds
    (0.02 x 1.2^21 = 0.92 < 1 <= 0.02 x 1.2^22); then the first plan of a search without
    thresholds: every task on its own node, compute 3, state 1, network 2 (A's node), alphas
    reported as inf. With a probe of one node trial even that search finds nothing: one line."""
    graph, cluster = fan_out()
    placement = get_scheduler("caps", work_limit=1000, probe_work=1000).schedule(graph, cluster)
    meta = placement.metadata
    assert meta["autotune_searches"] == {"relax_ceiling": 22, "unbounded": True}
    assert meta["alpha"] == [float("inf")] * 3
    assert meta["contention"] == {"compute": 3.0, "state": 1.0, "network": 2.0}
    assert sorted(placement.node_of.tolist()) == [0, 1, 2] and placement.violations(graph, cluster) == []
    with pytest.raises(InfeasibleError, match="^caps: no plan within probe_work even without thresholds$"):
        get_scheduler("caps", work_limit=1000, probe_work=1).schedule(graph, cluster)


def test_auto_tuning_whose_full_search_finds_nothing_within_work_limit_says_so():
    """The probes (probe_work) find plans, the full searches of phase two (work_limit 1: one node
    trial, never a whole plan) none, up to every alpha at 1: one line, no endless relaxing."""
    graph, cluster = tiny()
    with pytest.raises(InfeasibleError, match="^caps: auto-tuning found no plan within work_limit even with every "
                                              "alpha at 1$"):
        get_scheduler("caps", work_limit=1, probe_work=10**6).schedule(graph, cluster)


def test_no_plan_within_fixed_alphas_says_whether_the_search_was_whole_or_stopped():
    """Alphas 0 on tiny (compute at most the mean 16.67 with 11-unit tasks: no plan, as the
    brute force shows) searched to the end, and alphas 1 stopped after 5 node trials (a plan
    needs at least one trial per operator and node it fills: more than 5)."""
    graph, cluster = tiny()
    plans = every_plan(graph.contention, 3, 4)
    low, high = bases(graph.contention, 3, 4)
    assert not within(plans, low, high, np.zeros(3))
    zero = get_scheduler("caps", autotune=False, alpha_compute=0.0, alpha_state=0.0, alpha_network=0.0)
    with pytest.raises(InfeasibleError) as error:
        zero.schedule(graph, cluster)
    assert str(error.value) == ("caps: no plan of 'tiny' within alpha=(0, 0, 0) (searched every plan); raise the "
                                "alphas or use autotune=true")
    stopped = get_scheduler("caps", autotune=False, alpha_compute=1.0, alpha_state=1.0, alpha_network=1.0,
                            work_limit=5)
    with pytest.raises(InfeasibleError) as error:
        stopped.schedule(graph, cluster)
    assert str(error.value) == ("caps: no plan of 'tiny' within alpha=(1, 1, 1) (stopped at work_limit=5); raise "
                                "the alphas or use autotune=true")


def test_optimal_weighted_contention_is_the_brute_force_least_weighted_sum_over_spans():
    """objective weighted: min of sum_k w_k cost_k / (high_k - low_k) over every plan (CAPS's
    spans from the tasks one by one), weights 1, 2, 0.5."""
    graph, cluster = tiny()
    plans = every_plan(graph.contention, 3, 4)
    low, high = bases(graph.contention, 3, 4)
    span = np.where(high - low > 0, high - low, 1.0)
    weights = np.array([1.0, 2.0, 0.5])
    best = min(float(np.sum(weights * c / span)) for c, _ in plans)
    placement = get_scheduler("optimal", objective="contention", contention="weighted",
                              contention_weights="1,2,0.5").schedule(graph, cluster)
    cost = np.array([placement.metadata["contention"][d] for d in DIMS])
    assert placement.metadata["status"] == "optimal" and placement.metadata["objective"] == "weighted"
    assert float(np.sum(weights * cost / span)) == pytest.approx(best, rel=1e-9)


def test_optimal_contention_metadata_bound_totals_timings_and_its_warm_start():
    """Lexicographic network first on tiny: the first stage's bound is the brute-force least
    network (proved), the network total is the plan's own sum over nodes, the timings are
    ordered, and the warm start is the cost of the plan caps picks (least summed cost / span)
    from the front auto-tuned from (0.07, 0.07, 0.5) by brute force; without warm starts none."""
    from streamsched.contention_metrics import contention

    graph, cluster = tiny()
    plans = every_plan(graph.contention, 3, 4)
    low, high = bases(graph.contention, 3, 4)
    span = np.where(high - low > 0, high - low, 1.0)
    placement = get_scheduler("optimal", objective="contention", contention="network,compute,state").schedule(
        graph, cluster)
    meta = placement.metadata
    assert meta["objective"] == "network,compute,state" and meta["measured"] == list(DIMS)
    assert meta["bound"] == pytest.approx(min(c[2] for c, _ in plans), rel=1e-9, abs=1e-9)
    assert meta["network_total"] == pytest.approx(contention(graph, placement, 3)["network_total"], rel=1e-12)
    assert 0 <= meta["seconds_to_first"] <= meta["seconds_to_best"] <= meta["solver_time_s"]
    alpha, _ = tuned_alpha(plans, low, high, (0.07, 0.07, 0.5))
    warm = min(front(within(plans, low, high, alpha)), key=lambda c: (sum(x / w for x, w in zip(c, span)), c))
    assert np.allclose([meta["warm_start"][d] for d in DIMS], warm, rtol=0, atol=1e-9)
    cold = get_scheduler("optimal", objective="contention", warm_starts=False).schedule(graph, cluster)
    assert cold.metadata["warm_start"] is None and cold.metadata["status"] == "optimal"


def test_optimal_contention_refuses_more_tasks_than_the_nodes_take():
    """Three tasks of load 1 on two nodes of 1.5 (the load fits, but each node takes one task):
    one line naming the counts, before any solver."""
    graph = TaskGraph.build("g", ("A",), [0, 0, 0], [1.0, 1.0, 1.0], [], [], [])
    with pytest.raises(InfeasibleError, match="^optimal: graph 'g' has 3 tasks but the nodes of 'c' take at most 2$"):
        get_scheduler("optimal", objective="contention").schedule(graph, Cluster("c", (Node("a", 1.5),
                                                                                     Node("b", 1.5))))


def test_balanced_pick_least_summed_cost_over_span_ties_to_the_lesser_cost_vector():
    """(2, 0, 0) over spans (4, 1, 1) sums 0.5, (0, 3, 0) sums 3: the first. (1, 2, 0) and
    (2, 1, 0) both sum 3 over unit spans: the lesser vector, (1, 2, 0), whatever the order."""
    from streamsched.schedulers.caps import balanced

    assert balanced([((0.0, 3.0, 0.0), "b"), ((2.0, 0.0, 0.0), "a")], [4.0, 1.0, 1.0])[1] == "a"
    assert balanced([((2.0, 0.0, 0.0), "a"), ((0.0, 3.0, 0.0), "b")], [1.0, 1.0, 1.0])[1] == "a"
    for plans in ([((2.0, 1.0, 0.0), "y"), ((1.0, 2.0, 0.0), "x")], [((1.0, 2.0, 0.0), "x"), ((2.0, 1.0, 0.0), "y")]):
        assert balanced(plans, [1.0, 1.0, 1.0])[1] == "x"


def test_spans_are_high_minus_low_or_one_where_not_positive():
    from streamsched.schedulers.caps import spans

    assert spans([1.0, 2.0, 0.0], [3.5, 2.0, -1.0]) == [2.5, 1.0, 1.0]


def test_threshold_bases_equal_the_tasks_one_by_one():
    """low = mean over nodes of all tasks' cost (network 0), high = the ``slots`` costliest
    tasks on one node, for slots below, at and above the task count (random profiles)."""
    from streamsched.schedulers.caps import threshold_bases

    rng = np.random.default_rng(7)
    for _ in range(20):
        n_ops = int(rng.integers(1, 5))
        par = tuple(int(p) for p in rng.integers(1, 4, size=n_ops))
        cost = np.round(rng.uniform(0, 10, size=(n_ops, 3)), 2)
        from streamsched.model.contention import ContentionProfile

        profile = ContentionProfile(tuple(f"o{o}" for o in range(n_ops)), par, cost, ("",) * n_ops, ((),) * n_ops)
        for n_nodes, slots in ((2, 1), (3, 2), (1, sum(par)), (2, sum(par) + 3)):
            low, high = threshold_bases(profile, n_nodes, slots)
            want_low, want_high = bases(profile, n_nodes, slots)
            assert np.allclose(low, want_low, rtol=1e-12) and np.allclose(high, want_high, rtol=1e-12)


def test_most_is_the_largest_count_within_the_limit_by_brute_force():
    """_most(have, per, limit, at_most): the largest n <= at_most with have + per n <= limit in
    floats (CAPS's test), -1 if have is already over; tenths and thirds where rounding bites."""
    from streamsched.schedulers.caps import _most

    for have in (0.0, 0.1, 0.2, 1.0 / 3, 2.5):
        for per in (0.1, 1.0 / 3, 0.7, 2.0):
            for limit in (0.0, 0.3, 0.6, 1.0, 2.1, 3.0, float("inf")):
                for at_most in (0, 1, 3, 7):
                    fits = [n for n in range(at_most + 1) if have + per * n <= limit]
                    want = -1 if have > limit else max(fits, default=-1)
                    assert _most(have, per, limit, at_most) == want, (have, per, limit, at_most)


def test_outward_tries_the_start_then_above_and_below_it_alternately():
    from streamsched.schedulers.caps import _outward

    assert list(_outward(2, 0, 4)) == [2, 3, 1, 4, 0]
    assert list(_outward(1, 0, 4)) == [1, 2, 0, 3, 4]
    assert list(_outward(3, 1, 3)) == [3, 2, 1]
    assert list(_outward(0, 0, 0)) == [0]


def test_added_network_per_link_type_by_hand():
    """Net 2, 3 tasks placed on node 0: FORWARD towards 1 partner there: 2 x (3 - 1) = 4; none
    short (partners 5): 0; HASH towards 4 tasks of 8 there: 2 x 3 x (1 - 4/8) = 3; both links: 7."""
    from streamsched.schedulers.caps import _added

    assert _added(2.0, True, 0, 3, [([1, 0], 2)]) == 4.0
    assert _added(2.0, True, 0, 3, [([5, 0], 5)]) == 0.0
    assert _added(2.0, False, 0, 3, [([4, 4], 8)]) == 3.0
    assert _added(2.0, False, 0, 3, [([4, 4], 8), ([0, 2], 2)]) == 9.0
    assert _added(2.0, False, 1, 3, [([4, 4], 8), ([0, 2], 2)]) == 3.0


def test_an_operator_with_two_forward_partners_goes_beside_the_first():
    """A (tasks 0, 1) and B (2, 3) both FORWARD to C (4, 5), parallelism 2 each; counts A (2, 0),
    B (0, 2), C (1, 1). Beside A (the first partner): C0 with A0 on n0, C1 (A1's n0 is full for
    C) on n1. Beside B it would be n1, n0."""
    from streamsched.model.contention import ContentionProfile

    graph = TaskGraph.build("two", ("A", "B", "C"), [0, 0, 1, 1, 2, 2], [1.0] * 6, [0, 1, 2, 3], [4, 5, 4, 5],
                            [1.0] * 4)
    profile = ContentionProfile(("A", "B", "C"), (2, 2, 2), np.ones((3, 3)), ("FORWARD", "FORWARD", ""),
                                ((2,), (2,), ()))
    cluster = Cluster("two", (Node("n0", 4.0, slots=4), Node("n1", 4.0, slots=4)))
    node_of, _ = placement_from_counts(graph, cluster, profile, [[2, 0], [0, 2], [1, 1]])
    assert node_of.tolist() == [0, 0, 1, 1, 0, 1]


def chain(par, cost, kinds):
    """op0 -> op1 -> ... with these parallelisms, (compute, state, network) per task and link types."""
    n = len(par)
    return read_caps_profile([op(str(o), f"op{o}", par[o], *cost[o], kinds[o], [str(o + 1)] if o < n - 1 else [],
                                 [str(o - 1)] if o else []) for o in range(n)], "chain")


@pytest.mark.parametrize("par, cost, kinds, limits", [
    ((1, 4, 2, 2), [(9.6, 6.7, 4.0), (6.0, 37.5, 2.8), (19.6, 48.1, 7.2), (6.3, 8.0, 0.0)],
     ("FORWARD", "FORWARD", "HASH", ""), (2, 4, 3)),
    ((3, 1, 3), [(12.5, 43.1, 7.3), (6.5, 39.1, 2.5), (19.3, 27.0, 0.0)], ("REBALANCE", "HASH", ""), (3, 4)),
    ((3, 1, 2), [(11.9, 3.5, 8.5), (10.7, 46.8, 3.6), (18.9, 14.9, 0.0)], ("FORWARD", "REBALANCE", ""), (3, 4)),
])
def test_optimal_warm_start_is_caps_tuned_from_its_own_ceilings(par, cost, kinds, limits):
    """optimal's warm start is caps's balanced plan auto-tuned from ceilings (0.07, 0.07, 0.5),
    granularity 0.01, rate 0.2, here by brute force (tuned_alpha). These profiles (found among
    random chains) give another plan for a compute or state ceiling of 1, a granularity over 1
    or a rate over 1, so each constant counts."""
    profile = chain(par, cost, kinds)
    graph = graph_from_profile(profile, "chain")
    cluster = Cluster.from_types("unequal", *[(1, {"capacity": float(c), "slots": int(c)}) for c in limits])
    plans = brute_force(graph, len(limits), np.array(limits))
    low, high = bases(profile, len(limits), max(limits))
    span = np.where(high - low > 0, high - low, 1.0)
    alpha, _ = tuned_alpha(plans, low, high, (0.07, 0.07, 0.5))
    warm = min(front(within(plans, low, high, alpha)), key=lambda c: (sum(x / w for x, w in zip(c, span)), c))
    meta = get_scheduler("optimal", objective="contention").schedule(graph, cluster).metadata
    assert np.allclose([meta["warm_start"][d] for d in DIMS], warm, rtol=0, atol=1e-9)


@pytest.mark.skipif("MUTANT_UNDER_TEST" in __import__("os").environ,
                    reason="mutmut's trampolines make each call three frames, past the limit the search sets")
def test_a_search_deeper_than_pythons_default_recursion_limit_finds_its_plan_and_restores_the_limit():
    """One operator of 1100 tasks (compute 2) on 1100 nodes of one slot: the search goes one
    node deeper per task (past Python's default limit of 1000 frames); its one plan puts a
    task on each node (compute 2, state 0, network 0), and the interpreter's limit is put back."""
    import sys

    graph = graph_from_profile(read_caps_profile([op("a", "A", 1100, 2.0, 0.0, 0.0, "", [], [])], "wide"), "wide")
    cluster = Cluster.from_types("ones", (1100, {"capacity": 1.0, "slots": 1}))
    before = sys.getrecursionlimit()
    placement = get_scheduler("caps", autotune=False, alpha_compute=1.0, alpha_state=1.0, alpha_network=1.0,
                              work_limit=10**6).schedule(graph, cluster)
    assert sys.getrecursionlimit() == before
    assert placement.metadata["contention"] == {"compute": 2.0, "state": 0.0, "network": 0.0}
    assert placement.metadata["exhausted"] and placement.metadata["plans_found"] == 1
    assert sorted(placement.node_of.tolist()) == list(range(1100))


def test_optimal_hands_the_solver_the_warm_start_plan_the_limits_and_caps_spans(monkeypatch):
    """What the contention path passes the solver (tiny, 3 nodes of 4): the warm start's counts
    (whose cost is the reported warm start, every task placed) unless warm_starts=false, node
    limits 4, capacities 4, each operator's largest task load (1), CAPS's spans from the tasks
    one by one, and the order and weights asked for."""
    import streamsched.solvers.contention as solver

    seen = []
    real = solver.solve_contention
    monkeypatch.setattr(solver, "solve_contention", lambda *a, **k: seen.append((a, k)) or real(*a, **k))
    graph, cluster = tiny()
    low, high = bases(graph.contention, 3, 4)
    warm = get_scheduler("optimal", objective="contention", contention="state,network,compute",
                         contention_weights="1,2,3").schedule(graph, cluster)
    cold = get_scheduler("optimal", objective="contention", warm_starts=False).schedule(graph, cluster)
    (args, kwargs), (_, cold_kwargs) = seen
    hint = np.asarray(kwargs["hint"])
    assert hint.sum(axis=1).tolist() == list(graph.contention.parallelism) and np.all(hint.sum(axis=0) <= 4)
    assert np.allclose(costs_from_counts(graph.contention, hint).max(axis=0),
                       [warm.metadata["warm_start"][d] for d in DIMS], rtol=0, atol=1e-12)
    assert cold_kwargs["hint"] is None and cold.metadata["warm_start"] is None
    assert np.asarray(args[1]).tolist() == [4, 4, 4] and np.asarray(args[2]).tolist() == [4.0] * 3
    assert np.asarray(args[3]).tolist() == [1.0] * 4
    assert np.allclose(kwargs["spans"], np.where(high - low > 0, high - low, 1.0), rtol=1e-12)
    assert kwargs["objective"] == "lexicographic" and kwargs["order"] == ("state", "network", "compute")
    assert kwargs["weights"] == (1.0, 2.0, 3.0)


@pytest.mark.parametrize("name, params", [("caps", {}), ("optimal", {"objective": "contention"})])
def test_caps_and_optimal_give_each_nodes_tasks_its_worker_slots_round_robin(name, params):
    """tiny on three nodes of 4 slots: on each node, its tasks in task order take slots 0, 1, 2,
    3, 0, ... The search times of caps lie within the call's own wall time."""
    import time

    graph, cluster = tiny()
    started = time.perf_counter()
    placement = get_scheduler(name, **params).schedule(graph, cluster)
    wall = time.perf_counter() - started
    for k in range(3):
        tasks = np.flatnonzero(placement.node_of == k)
        assert placement.worker_of[tasks].tolist() == [i % 4 for i in range(tasks.size)]
    if name == "caps":
        assert 0 < placement.metadata["seconds_to_first"] <= placement.metadata["search_seconds"] <= wall


def test_capacity_check_below_one_unit_and_the_repair_of_a_plan_over_it():
    """The capacity check's tolerance is relative below a capacity of 1: loads 0.1 and 0.3 on
    two nodes of 0.3 (one task each) sit exactly on a capacity and are kept; loads 0.1, 0.2, 0.2
    on two nodes of 0.25 break one by 0.05 (at most 0.3 against 0.25) and are refused (strict).
    Loads 1, 1, 2, 2 of one operator on two nodes of 3: caps's plan (2, 2) in rank order puts
    2 + 2 on the second node; without strict the repair (two slots per node: a swap of a light
    and a heavy task, two moves) gives loads 3 and 3 and keeps caps's metadata."""
    graph = TaskGraph.build("u", ("A",), [0, 0], [0.1, 0.3], [], [], [])
    on = Cluster("c", (Node("a", 0.3), Node("b", 0.3)))
    placement = get_scheduler("caps", strict=True, work_limit=1000, probe_work=1000).schedule(graph, on)
    assert sorted(placement.node_of.tolist()) == [0, 1]
    three = TaskGraph.build("u3", ("A",), [0, 0, 0], [0.1, 0.2, 0.2], [], [], [])
    with pytest.raises(InfeasibleError, match="exceeds a node's capacity"):
        get_scheduler("caps", strict=True, work_limit=1000, probe_work=1000).schedule(
            three, Cluster("c", (Node("a", 0.25), Node("b", 0.25))))
    four = TaskGraph.build("u4", ("A",), [0, 0, 0, 0], [1.0, 1.0, 2.0, 2.0], [], [], [])
    cluster = Cluster("c", (Node("a", 3.0, slots=2), Node("b", 3.0, slots=2)))
    repaired = get_scheduler("caps", strict=False, work_limit=1000, probe_work=1000).schedule(four, cluster)
    moved = sorted(repaired.metadata["repair_moved"])
    assert repaired.metadata["repaired"] is True and len(moved) == 2 and moved[0] in (0, 1) and moved[1] in (2, 3)
    assert "exceeds a node's capacity" in repaired.metadata["repair_reason"]
    assert repaired.metadata["plans_found"] >= 1 and repaired.violations(four, cluster) == []
    assert np.bincount(repaired.node_of, weights=four.load, minlength=2).tolist() == [3.0, 3.0]
    # strict: caps's plan as the failure carries it, worker slots included (by hand: rank order,
    # slots in turn); the repair keeps the worker slot of every task it does not move
    with pytest.raises(PackingFailed) as failed:
        get_scheduler("caps", strict=True, work_limit=1000, probe_work=1000).schedule(four, cluster)
    assert failed.value.node_of.tolist() == [0, 0, 1, 1] and failed.value.worker_of.tolist() == [0, 1, 0, 1]
    kept = [t for t in range(4) if t not in moved]
    assert repaired.worker_of[kept].tolist() == failed.value.worker_of[kept].tolist()
    assert all(0 <= w < 2 for w in repaired.worker_of.tolist())  # a slot of its node for every task


def test_optimal_passes_its_seed_and_workers_and_names_a_time_limit_it_ran_out_of(monkeypatch):
    """The solver gets the call's seed and workers; a time limit of 5 ms (no stage can start
    with under 10 ms left) ends with no plan and one line naming it."""
    import streamsched.solvers.contention as solver

    seen = []
    real = solver.solve_contention
    monkeypatch.setattr(solver, "solve_contention", lambda *a, **k: seen.append(k) or real(*a, **k))
    graph, cluster = tiny()
    get_scheduler("optimal", objective="contention", workers=2).schedule(graph, cluster, seed=17)
    assert seen[0]["seed"] == 17 and seen[0]["workers"] == 2
    with pytest.raises(InfeasibleError, match=r"^optimal: no placement of 'tiny' found within time_limit=0\.005 s$"):
        get_scheduler("optimal", objective="contention", time_limit=0.005).schedule(graph, cluster)


def test_optimal_names_the_work_limit_it_ran_out_of(monkeypatch):
    """Without a time limit the solver stops by its work limit: where it ends without a plan
    (a solver that finds none stands in for a search too short), the one line names that
    limit, not a time limit of 0."""
    import streamsched.solvers.contention as solver

    monkeypatch.setattr(solver, "solve_contention", lambda *a, **k: solver.ContentionSolution(None, "unknown"))
    graph, cluster = tiny()
    with pytest.raises(InfeasibleError, match=r"^optimal: no placement of 'tiny' found within work_limit=0\.5$"):
        get_scheduler("optimal", objective="contention", work_limit=0.5, warm_starts=False).schedule(graph, cluster)


# ------------------------------------------------------------------ the search against brute force
def profile_of(par, cost, kinds, downs):
    """A profile straight from its operators (any DAG: joins and fan-outs too)."""
    from streamsched.model.contention import ContentionProfile

    return ContentionProfile(tuple(f"o{o}" for o in range(len(par))), tuple(par), np.array(cost, dtype=float),
                             tuple(kinds), tuple(tuple(d) for d in downs))


def small_dag(rng, integral: bool):
    """2-3 operators of 1-3 tasks linked at random (later operators downstream), costs in [0, 3)
    (whole numbers when ``integral``: ties between nodes), on 2-3 nodes taking 1-3 tasks."""
    n_ops = int(rng.integers(2, 4))
    par = [int(p) for p in rng.integers(1, 4, size=n_ops)]
    cost = rng.integers(0, 4, size=(n_ops, 3)).astype(float) if integral else rng.uniform(0, 3, size=(n_ops, 3)).round(3)
    downs = [[d for d in range(o + 1, n_ops) if rng.random() < 0.7] for o in range(n_ops)]
    kinds = [str(rng.choice(["FORWARD", "HASH", "REBALANCE"])) if d else "" for d in downs]
    cost[[not d for d in downs], 2] = 0.0
    limits = rng.integers(1, 4, size=int(rng.integers(2, 4)))
    limits[0] += max(0, sum(par) - int(limits.sum()))
    return profile_of(par, cost, kinds, downs), limits


def up_to_symmetric_nodes(counts, limits):
    """A plan's counts as the multiset of its nodes' (limit, tasks per operator): nodes that take
    as many tasks are interchangeable, so plans that only swap them are one plan."""
    return tuple(sorted((int(limits[k]), tuple(counts[:, k].tolist())) for k in range(counts.shape[1])))


def check_search_against_brute_force(profile, limits, alpha):
    """CAPS's rule: the plans kept are exactly those whose every node is within the thresholds.
    The exhaustive search meets each once up to interchangeable nodes (``found``), its front is
    the brute-force front of those plans, and each plan's counts place every task within the
    nodes' limits at the cost recorded with it."""
    from streamsched.schedulers import caps

    plans = brute_force(graph_from_profile(profile, "dag"), len(limits), limits)
    low, high = bases(profile, len(limits), int(limits.max()))
    with np.errstate(invalid="ignore"):  # an infinite alpha: no threshold
        limit = np.where(np.isinf(alpha), np.inf, np.round(low + np.asarray(alpha) * (high - low), 5))
    kept = [(costs_from_counts(profile, counts).max(axis=0), counts) for _, counts in plans
            if np.all(costs_from_counts(profile, counts) <= limit + 1e-9)]
    result = caps.search(profile, limits, alpha, 10**6)
    assert result.exhausted
    assert result.found == len({up_to_symmetric_nodes(counts, limits) for _, counts in kept})
    assert [tuple(np.round(c, 9)) for c in sorted(c for c, _ in result.plans)] == front(kept)
    for cost, counts in result.plans:
        counts = np.array(counts)
        assert counts.sum(axis=1).tolist() == list(profile.parallelism) and np.all(counts.sum(axis=0) <= limits)
        per_node = costs_from_counts(profile, counts)
        assert np.allclose(per_node.max(axis=0), cost, rtol=0, atol=1e-9) and np.all(per_node <= limit + 1e-9)


@pytest.mark.parametrize("integral", [False, True])
def test_caps_search_keeps_every_plan_within_the_thresholds_once_on_random_small_dags(integral):
    """Random small DAGs (joins, fan-outs, every link type) under random alphas in (0, 1):
    check_search_against_brute_force. Whole-number costs make nodes of different contents cost
    the same, where only their contents tell them apart."""
    rng = np.random.default_rng(41 if integral else 40)
    for _ in range(150):
        profile, limits = small_dag(rng, integral)
        check_search_against_brute_force(profile, limits, rng.uniform(0.0, 1.0, size=3))


@pytest.mark.parametrize("par, cost, kinds, downs, limits, alpha", [
    # the state threshold binds on tasks of state below 1
    ((1, 3), [(1.404, 1.354, 0), (0.65, 0.303, 0)], ("", ""), [[], []], (2, 3, 3), (0.7701, 0.6653, 0.4125)),
    # a node's count bounded by its network (REBALANCE and HASH links)
    ((2, 2, 2), [(0.453, 0.818, 0.872), (2.917, 2.724, 1.115), (1.024, 0.163, 0)], ("REBALANCE", "HASH", ""),
     [[1, 2], [2], []], (3, 2, 3), (0.4237, 0.8207, 0.383)),
    # nodes of equal compute but different contents (a join of one-task operators)
    ((1, 1, 2), [(0.963, 1.216, 2.989), (2.819, 1.607, 1.752), (2.986, 0.274, 0)], ("REBALANCE", "FORWARD", ""),
     [[2], [2], []], (3, 3, 2), (0.3872, 0.2616, 0.712)),
])
def test_caps_search_keeps_every_plan_within_the_thresholds_once_on_picked_dags(par, cost, kinds, downs, limits, alpha):
    """check_search_against_brute_force on three small DAGs drawn as in the random test (other
    seeds), where a state bound, a network bound or node contents decide."""
    check_search_against_brute_force(profile_of(par, cost, kinds, downs), np.array(limits), alpha)


@pytest.mark.parametrize("alpha", [(0.0, 0.0, 1.0), (1.0, 1.0, 0.0), (0.5, 0.3, 0.0)])
@pytest.mark.parametrize("case", ["downstream first", "upstream first"])
def test_caps_search_keeps_plans_exactly_on_a_threshold(case, alpha):
    """Plans whose costs sit exactly on a threshold are within it (CAPS: cost > threshold
    cuts). A (2 tasks, compute 2, state 2) -FORWARD-> B (2 tasks, compute 1 or 3,
    state 1), on nodes of 3 and 4 slots: alphas 0 make compute and state at most the mean (one
    A and one B per node: exactly the mean) or network 0 (each A beside a B). B's compute 3
    puts it first (its link is charged as A is placed), else A (charged when B is complete)."""
    from streamsched.schedulers import caps

    b = 3.0 if case == "downstream first" else 1.0
    profile = profile_of((2, 2), [(2, 2, 1), (b, 1, 0)], ("FORWARD", ""), [[1], []])
    check_search_against_brute_force(profile, np.array([3, 4]), alpha)
    assert caps.search(profile, np.array([3, 4]), alpha, 10**6).plans  # there is such a plan


# ------------------------------------------------------------------ the first plan: shares of compute room
def contents(graph, placement):
    """The nodes' contents (tasks per operator) as a sorted list: the plan up to which node is which."""
    n_ops = len(graph.operator_names)
    return sorted(tuple(np.bincount(graph.task_operator[placement.node_of == k], minlength=n_ops).tolist())
                  for k in np.unique(placement.node_of).tolist())


def first_plan(profile, cluster, alpha):
    graph = graph_from_profile(profile, "first")
    placement = get_scheduler("caps", autotune=False, first_plan=True, alpha_compute=alpha[0], alpha_state=alpha[1],
                              alpha_network=alpha[2], work_limit=10**5).schedule(graph, cluster)
    return graph, placement


def test_the_first_plan_gives_each_node_its_share_of_the_operator_by_compute_room():
    """CAPS's first plan (first_plan=true) with our order: each node, most loaded first, gets
    the floor of its share of the operator's tasks in proportion to its compute room under the
    threshold. A (1 task, compute 0.375), B (1, 0.25), C (6, 0.0625) on 3 nodes of 6 slots,
    compute threshold 0.5 (low 1/3, high 0.875). A and B go to two nodes (one each: they do not
    fit together); C: rooms 0.125 (A's node), 0.25 (B's), 0.5 (empty): A's node floor(6 x
    0.125 / 0.875) = 0, B's floor(6 x 0.25 / 0.75) = 2, the empty node the other 4. All
    numbers are binary fractions (exact)."""
    profile = profile_of((1, 1, 6), [(0.375, 0, 0), (0.25, 0, 0), (0.0625, 0, 0)], ("", "", ""), [[], [], []])
    cluster = Cluster.from_types("three", (3, {"capacity": 6.0, "slots": 6}))
    low, high = 1.0 / 3, 0.875
    assert thresholds([low], [high], [(0.5 - low) / (high - low)]) == [0.5]
    graph, placement = first_plan(profile, cluster, ((0.5 - low) / (high - low), 1.0, 1.0))
    assert contents(graph, placement) == [(0, 0, 4), (0, 1, 2), (1, 0, 0)]
    assert placement.metadata["contention"]["compute"] == 0.375


def test_the_first_plan_splits_evenly_where_no_node_has_compute_room():
    """A (3 tasks, compute 1) with a compute threshold of the mean 1 (alpha 0) fills every
    node's compute room: B (5 tasks, compute 0, state 1) is split evenly over the 3 nodes in
    order, floor(5 / 3) = 1, then floor(4 / 2) = 2, then 2 (A's nodes are interchangeable,
    so their counts do not decrease)."""
    profile = profile_of((3, 5), [(1, 0, 0), (0, 1, 0)], ("", ""), [[], []])
    graph, placement = first_plan(profile, Cluster.from_types("three", (3, {"capacity": 4.0, "slots": 4})),
                                  (0.0, 1.0, 1.0))
    assert contents(graph, placement) == [(1, 1), (1, 2), (1, 2)]
    assert placement.metadata["contention"] == {"compute": 1.0, "state": 2.0, "network": 0.0}


def test_the_first_plan_gives_a_node_without_compute_room_no_share():
    """A (1 task, compute 2) and B (1, compute 1) on two nodes of 4 slots, compute threshold 2
    (low 1.5, high 3, alpha 1/3): A's node has no room left, B's node room 1, so C (2 tasks,
    compute 0, state 1) gets share 0 on A's node and both go beside B."""
    profile = profile_of((1, 1, 2), [(2, 0, 0), (1, 0, 0), (0, 1, 0)], ("", "", ""), [[], [], []])
    assert thresholds([1.5], [3.0], [1.0 / 3]) == [2.0]
    graph, placement = first_plan(profile, Cluster.from_types("two", (2, {"capacity": 4.0, "slots": 4})),
                                  (1.0 / 3, 1.0, 1.0))
    assert contents(graph, placement) == [(0, 1, 2), (1, 0, 0)]


def test_a_single_node_takes_everything_in_one_node_trial_per_operator():
    """tiny (4 operators, 9 tasks) on one node of 9 slots: the one plan, every task there
    (compute 2x3 + 3x11 + 2x5 + 2x2 = 53, state 2x7 + 3x40 = 134, network only window's one
    FORWARD task without a sink beside it, 2.5), reached with one node trial per operator, so
    work_limit=4 suffices; a search stopped by its limit reports exhausted as false."""
    graph, _ = tiny()
    one = Cluster.from_types("one", (1, {"capacity": 9.0, "slots": 9}))
    loose = dict(autotune=False, alpha_compute=1.0, alpha_state=1.0, alpha_network=1.0)
    placement = get_scheduler("caps", **loose, work_limit=4).schedule(graph, one)
    assert placement.node_of.tolist() == [0] * 9
    meta = placement.metadata
    assert meta["contention"] == {"compute": 53.0, "state": 134.0, "network": 2.5}
    assert meta["work"] == 4 and meta["exhausted"] is True and meta["plans_found"] == 1
    stopped = get_scheduler("caps", **loose, work_limit=50).schedule(graph, Cluster.from_types(
        "three", (3, {"capacity": 4.0, "slots": 4}))).metadata
    assert stopped["exhausted"] is False


def test_a_first_plan_search_over_more_nodes_than_the_recursion_limit_restores_the_limit():
    """As many one-slot nodes as Python's recursion limit (the search raises the limit with the
    nodes): A's 2 tasks on two of them (nodes are interchangeable: the last two), the limit put
    back after."""
    import sys

    before = sys.getrecursionlimit()
    profile = profile_of((2,), [(1, 0, 0)], ("",), [[]])
    graph, placement = first_plan(profile, Cluster.from_types("wide", (before, {"capacity": 1.0, "slots": 1})),
                                  (1.0, 1.0, 1.0))
    assert sys.getrecursionlimit() == before
    assert sorted(placement.node_of.tolist()) == [before - 2, before - 1]


# ------------------------------------------------------------------ small functions, edge cases
def test_node_limits_of_empty_or_zero_capacity_nodes_and_graphs_are_zero():
    """A node of capacity 0 (or far below a task) takes no task; a graph without tasks: none
    anywhere. caps's refusal names the count as a whole number."""
    two = TaskGraph.build("g", ("A",), [0, 0], [1.0, 1.0], [], [], [])
    assert node_limits(two, Cluster("c", (Node("a", 2.0), Node("z", 0.0), Node("t", 1e-12)))).tolist() == [2, 0, 0]
    empty = TaskGraph.build("e", ("A",), [], [], [], [], [])
    assert node_limits(empty, Cluster("c", (Node("a", 2.0), Node("b", 1.0)))).tolist() == [0, 0]
    three = TaskGraph.build("g", ("A",), [0, 0, 0], [1.0, 1.0, 1.0], [], [], [])
    with pytest.raises(InfeasibleError, match="^caps: graph 'g' has 3 tasks but the nodes of 'c' take at most 2$"):
        get_scheduler("caps").schedule(three, Cluster("c", (Node("a", 1.5), Node("b", 1.5))))


def test_tasks_of_operators_numbered_apart_go_in_task_order():
    """A's tasks 0 and 3, B's 1 and 2 (B HASH from A, no partner): counts A (1, 1) put task 0 on
    n0 and task 3 on n1; B (2, 0) both on n0. A's tasks 0, 2 and B's 1, 3 with counts A (2, 0),
    B (0, 2): A on n0, B on n1."""
    from streamsched.model.contention import ContentionProfile

    profile = ContentionProfile(("A", "B"), (2, 2), np.ones((2, 3)), ("HASH", ""), ((1,), ()))
    cluster = Cluster("two", (Node("n0", 4.0, slots=4), Node("n1", 4.0, slots=4)))
    apart = TaskGraph.build("apart", ("A", "B"), [0, 1, 1, 0], [1.0] * 4, [0, 3], [1, 2], [1.0, 1.0])
    assert placement_from_counts(apart, cluster, profile, [[1, 1], [2, 0]])[0].tolist() == [0, 0, 0, 1]
    mixed = TaskGraph.build("mixed", ("A", "B"), [0, 1, 0, 1], [1.0] * 4, [0, 2], [1, 3], [1.0, 1.0])
    assert placement_from_counts(mixed, cluster, profile, np.array([[2, 0], [0, 2]]))[0].tolist() == [0, 1, 0, 1]


def test_balanced_ties_go_to_the_lesser_cost_vector_not_the_plan_and_spans_below_one_count():
    """Equal sums: (1, 2, 0) before (2, 1, 0) whatever the plans' own order ("b" after "a"). A
    span of 0.5 (high - low between 0 and 1) is kept."""
    from streamsched.schedulers.caps import balanced, spans

    assert balanced([((2.0, 1.0, 0.0), "a"), ((1.0, 2.0, 0.0), "b")], [1.0, 1.0, 1.0])[1] == "b"
    assert spans([0.0, 1.0, 0.0], [0.5, 3.0, 0.0]) == [0.5, 2.0, 1.0]


def test_added_network_of_a_forward_operator_towards_two_downstream_operators():
    """Net 2, 3 tasks on node 0, FORWARD to one operator with 1 task there and one with none:
    2 x (3 - 1) + 2 x 3 = 10."""
    from streamsched.schedulers.caps import _added

    assert _added(2.0, True, 0, 3, [([1, 0], 2), ([0, 0], 3)]) == 10.0


def test_most_where_the_float_quotient_is_off_by_one():
    """(limit - have) / per rounds below the count that fits (0.2 + 0.1 x 5 is exactly 0.7) or
    above it (0.3 + 0.1 x 6 > 0.9; 0.3 + 0.55 > 0.85): the float test decides, as in CAPS."""
    from streamsched.schedulers.caps import _most

    for have, per, limit, want in ((0.2, 0.1, 0.7, 5), (0.3, 0.1, 0.9, 5), (0.3, 0.55, 0.85, 0)):
        assert max(n for n in range(20) if have + per * n <= limit) == want
        assert _most(have, per, limit, 10) == want


def test_auto_tuning_phase_two_relaxes_no_alpha_past_one():
    """A (3 tasks, compute 1, state 10) and B (1 task, compute 10, state 4), no links, on nodes
    of 3 and 1 slots: phase two relaxes the minima 4 times (brute force, tuned_alpha), compute
    stopping at 1 (1.2 x its last value would be over 1)."""
    profile = profile_of((3, 1), [(1, 10, 0), (10, 4, 0)], ("", ""), [[], []])
    graph = graph_from_profile(profile, "two")
    cluster = Cluster.from_types("unequal", (1, {"capacity": 3.0, "slots": 3}), (1, {"capacity": 1.0, "slots": 1}))
    plans = brute_force(graph, 2, np.array([3, 1]))
    low, high = bases(profile, 2, 3)
    alpha, calls = tuned_alpha(plans, low, high, (0.02, 0.02, 0.1))
    assert alpha[0] == 1.0 and calls["phase_two"] == 4
    placement = get_scheduler("caps", work_limit=10**5, probe_work=10**5).schedule(graph, cluster)
    assert placement.metadata["alpha"] == pytest.approx(alpha.tolist(), rel=1e-12)
    assert placement.metadata["autotune_searches"] == calls


@pytest.mark.parametrize("cost", [
    [(388921.424, 13509.651, 0.0), (721488.34, 52535.432, 0.0)],
    [(0.188, 6609689.959, 0.0), (0.857, 9740615.371, 0.0)],
])
def test_a_plan_on_full_nodes_at_the_thresholds_survives_float_rounding(cost):
    """A (3 tasks) and B (1 task) on two nodes of 2 slots, alphas 1: every slot is taken, so
    the look-ahead's room for the tasks left equals what they cost, summed in another order;
    large costs (whose sums round differently) must not cut the plan (B and one A on a node,
    two A on the other), whichever dimension is large."""
    profile = profile_of((3, 1), cost, ("", ""), [[], []])
    check_search_against_brute_force(profile, np.array([2, 2]), (1.0, 1.0, 1.0))
    from streamsched.schedulers import caps

    assert caps.search(profile, np.array([2, 2]), (1.0, 1.0, 1.0), 10**6).found == 1


def test_a_search_without_thresholds_keeps_every_plan_of_whole_number_costs():
    """Every alpha infinite (no threshold): every plan is kept (check_search_against_brute_force)
    on full nodes whose look-ahead room equals what is left exactly: A (3 tasks, compute 1,
    state 1) and B (1 task, compute 6, state 2) on two nodes of 2 slots, and tiny on 3 nodes
    of 3 slots (whole numbers and halves: sums exact in any order)."""
    check_search_against_brute_force(profile_of((3, 1), [(1, 1, 0), (6, 2, 0)], ("", ""), [[], []]),
                                     np.array([2, 2]), (np.inf, np.inf, np.inf))
    check_search_against_brute_force(tiny()[0].contention, np.array([3, 3, 3]), (np.inf, np.inf, np.inf))


def test_a_search_without_thresholds_keeps_every_plan_of_random_small_dags():
    """150 random small DAGs (costs with three decimals) without thresholds: every plan kept
    (8 % of such DAGs lost plans to rounding when an infinite limit had no slack)."""
    rng = np.random.default_rng(43)
    for _ in range(150):
        profile, limits = small_dag(rng, False)
        check_search_against_brute_force(profile, limits, (np.inf, np.inf, np.inf))


def test_a_search_without_thresholds_keeps_every_plan():
    """A (3 tasks, compute 0.1) and B (1 task, compute 0.6) on two nodes of 2 slots, every alpha
    infinite (no threshold, as auto-tuning's last resort): the plans are B and one A on a node,
    two A on the other (compute 0.7). With nodes full, the look-ahead compares what the nodes
    can absorb (0.2 + 0.6 + 0.1 in one order) with what is left (0.6 + 3 x 0.1 in another); it
    found no plan when an infinite limit had no slack (now 1e-9 x the dimension's total cost)."""
    profile = profile_of((3, 1), [(0.1, 1, 0), (0.6, 2, 0)], ("", ""), [[], []])
    check_search_against_brute_force(profile, np.array([2, 2]), (np.inf, np.inf, np.inf))
