"""``solve_contention`` (solvers/contention.py) pinned (issue 34 item 4; ``make mutate
MODULE=solvers/contention.py``): called directly on tiny profiles, every outcome is checked
against a brute force over every count matrix (tasks of each operator per node) written here
from the module docstring's cost rules, independently of the solver and of
``contention_metrics``; the limits and seed are checked where they reach CP-SAT."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from ortools.sat.python import cp_model

from streamsched.model.contention import ContentionProfile
from streamsched.solvers import contention as solver
from streamsched.solvers.contention import CEILING_RTOL, solve_contention, within_ceiling

DIMS = ("compute", "state", "network")


def profile(par, cost, outbound, downstream) -> ContentionProfile:
    return ContentionProfile(tuple(f"op{o}" for o in range(len(par))), tuple(par), np.array(cost, dtype=float),
                             tuple(outbound), tuple(tuple(d) for d in downstream))


def every_plan(prof: ContentionProfile, limits, capacity=None, max_load=None):
    """Every count matrix ``n[o, k]`` that places each operator's tasks, keeps each node within
    its task limit (and ``sum_o max_load_o n[o, k] <= capacity_k``): matrices ``(M, ops, nodes)``
    and their node costs ``(M, nodes, 3)``."""
    nodes = len(limits)
    per_op = [[c for c in itertools.product(range(p + 1), repeat=nodes) if sum(c) == p] for p in prof.parallelism]
    n = np.array(list(itertools.product(*per_op)), dtype=float)  # (M, ops, nodes)
    keep = np.all(n.sum(axis=1) <= np.asarray(limits), axis=1)
    if capacity is not None:
        keep &= np.all(np.einsum("o,mok->mk", np.asarray(max_load, float), n) <= np.asarray(capacity) + 1e-9, axis=1)
    n = n[keep]
    cost = np.zeros((len(n), nodes, 3))
    for o in range(prof.n_operators):
        for dim in (0, 1):
            cost[:, :, dim] += prof.cost[o, dim] * n[:, o, :]
        for d in prof.downstream[o]:
            net = prof.cost[o, 2]
            if prof.outbound[o] == "FORWARD":  # task i sends to downstream task i: unmatched ones are remote
                cost[:, :, 2] += net * np.maximum(n[:, o, :] - n[:, d, :], 0)
            else:  # each task sends net / p_d to every downstream task: the remote ones cost
                cost[:, :, 2] += net * n[:, o, :] * (prof.parallelism[d] - n[:, d, :]) / prof.parallelism[d]
    return n.astype(int), cost


def lexicographic_best(tops: np.ndarray, order) -> list[float]:
    """Least value of each dimension in ``order`` among the plans that keep the ones before at
    their least (ties up to 1e-9, relative)."""
    keep, out = np.ones(len(tops), dtype=bool), []
    for dim in order:
        x = DIMS.index(dim)
        best = tops[keep, x].min()
        out.append(float(best))
        keep &= tops[:, x] <= best * (1 + 1e-9) + 1e-12
    return out


def chain_profile(rng):
    """3-4 operators, each but the last sending to one or two later ones (a link type per
    operator), random costs (some zero), parallelism 1-3."""
    n_ops = int(rng.integers(3, 5))
    par = rng.integers(1, 4, size=n_ops).tolist()
    cost = np.round(rng.uniform(0, 20, size=(n_ops, 3)), 3)
    cost[rng.uniform(size=(n_ops, 3)) < 0.15] = 0.0
    cost[-1, 2] = 0.0
    downstream = [sorted({o + 1} | ({int(rng.integers(o + 1, n_ops))} if rng.uniform() < 0.4 else set()))
                  for o in range(n_ops - 1)] + [[]]
    outbound = [str(rng.choice(["FORWARD", "HASH", "REBALANCE"])) for _ in range(n_ops - 1)] + [""]
    return profile(par, cost, outbound, downstream)


def random_case(seed):
    rng = np.random.default_rng(seed)
    prof = chain_profile(rng)
    nodes = int(rng.integers(2, 4))
    limits = rng.integers(1, 5, size=nodes)
    limits[0] += max(0, prof.n_tasks - int(limits.sum()))
    if rng.uniform() < 0.5:  # identical nodes
        limits[:] = max(int(limits.max()), -(-prof.n_tasks // nodes))
    return prof, limits


def solve(prof, limits, capacity=None, max_load=None, **kwargs):
    limits = np.asarray(limits)
    capacity = np.asarray(limits, float) if capacity is None else capacity
    max_load = np.ones(prof.n_operators) if max_load is None else max_load
    return solve_contention(prof, limits, capacity, max_load, **kwargs)


def check_plan(out, prof, limits, capacity=None, max_load=None):
    """The plan places every task within the limits; its reported costs are its true ones."""
    counts = out.counts
    assert counts.shape == (prof.n_operators, len(limits))
    assert counts.sum(axis=1).tolist() == list(prof.parallelism)
    assert np.all(counts.sum(axis=0) <= limits)
    if capacity is not None:
        assert np.all(np.asarray(max_load) @ counts <= np.asarray(capacity) + 1e-9)
    plans, costs = every_plan(prof, limits, capacity, max_load)
    (index,) = [i for i, n in enumerate(plans) if np.array_equal(n, counts)]
    assert [out.cost[d] for d in DIMS] == pytest.approx(costs[index].max(axis=0).tolist(), rel=1e-12, abs=1e-12)
    assert out.network_total == pytest.approx(costs[index][:, 2].sum(), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("seed", range(10))
def test_each_objective_is_the_brute_force_optimum_of_random_profiles(seed):
    """Lexicographic in a random order, weighted over spans and total network cost, each proven:
    every stage's value is the plan's true cost, its bound at most the brute-force optimum."""
    prof, limits = random_case(seed)
    plans, costs = every_plan(prof, limits)
    tops, totals = costs.max(axis=1), costs[:, :, 2].sum(axis=1)
    order = tuple(np.random.default_rng(seed).permutation(DIMS))
    out = solve(prof, limits, order=order, seed=seed)
    check_plan(out, prof, limits)
    best = lexicographic_best(tops, order)
    assert [out.cost[d] for d in order] == pytest.approx(best, rel=1e-9, abs=1e-12)
    assert out.status == "optimal" and [s["objective"] for s in out.stages] == list(order)
    for stage, least in zip(out.stages, best):
        assert stage["status"] == "optimal" and stage["value"] == out.cost[stage["objective"]]
        assert stage["bound"] <= least * (1 + 1e-12) + 1e-12 and stage["gap"] <= 1e-9
        assert out.bound[stage["objective"]] == stage["bound"]
    assert out.gap == out.stages[0]["gap"] and set(out.bound) == set(DIMS)
    assert 0 <= out.seconds_to_first <= out.seconds_to_best <= out.wall_time_s < 600

    traffic = solve(prof, limits, objective="traffic")
    check_plan(traffic, prof, limits)
    assert traffic.network_total == pytest.approx(totals.min(), rel=1e-9, abs=1e-12)
    assert traffic.status == "optimal" and [s["objective"] for s in traffic.stages] == ["traffic"]
    assert traffic.stages[0]["value"] == traffic.network_total and list(traffic.bound) == ["traffic"]
    assert traffic.bound["traffic"] <= totals.min() * (1 + 1e-12) + 1e-12 and traffic.gap <= 1e-9


def weighted_value(costs, weights, spans):
    return sum(w * costs[..., x] / s for x, (w, s) in enumerate(zip(weights, spans)))


@pytest.mark.parametrize("seed", range(8))
def test_the_weighted_sum_is_the_brute_force_minimum_up_to_its_rounding(seed):
    """``sum_x w_x T_x / span_x``: its coefficients are rounded down at a scale where the loss in
    the objective is at most ``sum(w) / 2^12`` per dimension (weighted_goal), so the plan is within
    that of the brute-force minimum, and it is the minimum where the next value lies further off.
    Spans below 1 count as spans."""
    prof, limits = random_case(100 + seed)
    rng = np.random.default_rng(seed)
    weights = tuple(float(w) for w in rng.choice([0.0, 0.5, 1.0, 3.0], size=3))
    if not any(weights):
        weights = (1.0, 0.0, 2.0)
    _, costs = every_plan(prof, limits)
    tops = costs.max(axis=1)
    spans = tuple(float(s) for s in np.maximum(tops.max(axis=0) - tops.min(axis=0), 0.25) * rng.uniform(0.3, 1.5, 3))
    if seed % 3 == 0:
        spans = (0.5, 0.25, 0.75)
    values = np.sort(weighted_value(tops, weights, spans))
    tolerance = 3 * sum(weights) / 2**12 + 1e-9
    out = solve(prof, limits, objective="weighted", weights=weights, spans=spans)
    check_plan(out, prof, limits)
    got = weighted_value(np.array([out.cost[d] for d in DIMS]), weights, spans)
    assert out.status == "optimal" and [s["objective"] for s in out.stages] == ["weighted"]
    assert out.stages[0]["value"] == pytest.approx(got, rel=1e-12)
    assert values[0] - 1e-9 <= got <= values[0] + tolerance
    further = values[values > values[0] + 2 * tolerance]
    if len(further):
        assert got < further[0]
    assert out.bound == {"weighted": out.stages[0]["bound"]} and out.stages[0]["bound"] <= values[0] + 1e-9


def test_a_span_of_zero_leaves_its_dimension_out_of_the_weighted_sum():
    """Spans (0, 1, 1): compute counts for nothing (its span says no plan differs in it), the
    objective is state + network, and the stage's value is that sum (it raised ZeroDivisionError)."""
    prof = profile([2, 2, 1], [[3, 1, 4], [5, 9, 2], [6, 5, 0]], ["FORWARD", "HASH", ""], [[1], [2], []])
    limits = np.array([3, 3])
    _, costs = every_plan(prof, limits)
    tops = costs.max(axis=1)
    out = solve(prof, limits, objective="weighted", weights=(1.0, 1.0, 1.0), spans=(0.0, 1.0, 1.0))
    assert out.status == "optimal"
    assert out.stages[0]["value"] == pytest.approx(out.cost["state"] + out.cost["network"], rel=1e-12)
    assert out.stages[0]["value"] == pytest.approx((tops[:, 1] + tops[:, 2]).min(), abs=2 / 2**12)


def test_a_weight_of_one_on_one_dimension_gives_its_exact_minimum():
    """Integer costs (distinct values at least 1 apart, far beyond the rounding): weights
    (0, 0, 1) minimise the network bottleneck exactly, (1, 0, 0) the compute one."""
    prof = profile([2, 2, 1], [[3, 1, 4], [5, 9, 2], [6, 5, 0]], ["FORWARD", "HASH", ""], [[1], [2], []])
    limits = np.array([3, 3])
    _, costs = every_plan(prof, limits)
    tops = costs.max(axis=1)
    for x in range(3):
        weights = tuple(1.0 if i == x else 0.0 for i in range(3))
        out = solve(prof, limits, objective="weighted", weights=weights, spans=(10.0, 10.0, 10.0))
        assert out.cost[DIMS[x]] == pytest.approx(tops[:, x].min())


@pytest.mark.parametrize("seed", range(8))
def test_ceilings_on_each_bottleneck_and_on_the_total_sitting_on_plans_costs(seed):
    """Ceilings equal to some plan's exact costs (one dimension each, or the total network
    cost): the optimum is the brute force's among the plans that meet them as written."""
    prof, limits = random_case(200 + seed)
    _, costs = every_plan(prof, limits)
    tops, totals = costs.max(axis=1), costs[:, :, 2].sum(axis=1)
    rng = np.random.default_rng(seed)
    pick = int(rng.integers(len(tops)))
    dim = DIMS[seed % 3]
    ceiling = float(tops[pick, seed % 3])
    order = ("network", "compute", "state") if dim != "network" else ("compute", "state", "network")
    out = solve(prof, limits, order=order, ceilings={dim: ceiling})
    check_plan(out, prof, limits)
    meets = tops[:, seed % 3] <= ceiling
    assert out.cost[order[0]] == pytest.approx(tops[meets, DIMS.index(order[0])].min(), rel=1e-9, abs=1e-12)
    assert out.cost[dim] <= ceiling * (1 + CEILING_RTOL)
    total = float(totals[int(rng.integers(len(totals)))])
    capped = solve(prof, limits, network_ceiling=total)
    check_plan(capped, prof, limits)
    assert capped.cost["compute"] == pytest.approx(tops[totals <= total, 0].min(), rel=1e-9, abs=1e-12)
    assert capped.network_total <= total * (1 + CEILING_RTOL)


def test_a_ceiling_of_zero_admits_exactly_the_plans_of_zero_cost():
    """A (compute 3) -FORWARD-> B (compute 1), two tasks each, on three nodes of two tasks: the
    least compute bottleneck is 3 (8 in all over 3 nodes; e.g. A, A, BB), with A's tasks apart
    from B's (network 5 on two nodes); network 0 needs no more A than B on any node: A B, A B
    and an empty node (compute 4), whether the ceiling is on the bottleneck or on the total.
    State 0 cannot be met when a task has state."""
    prof = profile([2, 2], [[3, 0, 5], [1, 0, 0]], ["FORWARD", ""], [[1], []])
    free = solve(prof, [2, 2, 2])
    assert free.cost["compute"] == 3.0 and free.cost["network"] == 5.0
    for ceilings, total in (({"network": 0.0}, None), ({}, 0.0)):
        zero = solve(prof, [2, 2, 2], ceilings=ceilings, network_ceiling=total)
        assert zero.cost == {"compute": 4.0, "state": 0.0, "network": 0.0} and zero.network_total == 0.0
        assert sorted(map(tuple, zero.counts.T.tolist())) == [(0, 0), (1, 1), (1, 1)]
    stateful = profile([2, 2], [[3, 0.5, 5], [1, 0, 0]], ["FORWARD", ""], [[1], []])
    none = solve(stateful, [2, 2, 2], ceilings={"state": 0.0})
    assert none.status == "infeasible" and none.counts is None
    assert none.stages == [{"objective": "compute", "status": "infeasible"}]  # the later stages are not run


def test_a_ceiling_far_below_the_largest_cost_is_met_and_loses_no_plan_with_room():
    """A ceiling some 1e9 below the largest possible cost (scale capped below 2^50 / that cost,
    where 1e-9 x the ceiling would need coefficients past 2^63; the limit is then tightened by
    its rounding loss): the plans within it (network 1 or less: the heavy FORWARD link kept
    local) are all still found when none sits within the loss of the ceiling."""
    prof = profile([2, 2, 2], [[1, 0, 1e9], [2, 0, 0.4], [3, 0, 0]], ["FORWARD", "HASH", ""], [[1], [2], []])
    limits = np.array([4, 4, 4])
    _, costs = every_plan(prof, limits)
    tops = costs.max(axis=1)
    ceiling = 0.7
    meets = tops[:, 2] <= ceiling
    assert meets.any() and not np.any(np.abs(tops[:, 2] - ceiling) < 1e-6)
    out = solve(prof, limits, ceilings={"network": ceiling})
    assert out.cost["network"] <= ceiling and out.cost["compute"] == pytest.approx(tops[meets, 0].min())
    total = solve(prof, limits, objective="traffic", network_ceiling=0.5, order=DIMS)
    totals = costs[:, :, 2].sum(axis=1)
    assert total.network_total == pytest.approx(totals.min()) and total.network_total <= 0.5


@pytest.mark.parametrize("capacity, max_load", [
    ((2.0, 3.0, 4.0), (0.5, 1.0, 2.0, 1.0)),
    ((1.0, 4.0, 4.0), (1.0, 1.0, 1.0, 1.0)),
    ((0.3, 0.6, 3.0), (0.1, 0.2, 0.1, 0.3)),  # sums that hit the capacity up to float rounding
    ((3.0, 3.0, 3.0), (0.0, 0.0, 0.0, 0.0)),
])
def test_node_capacity_by_each_operators_largest_task_load(capacity, max_load):
    """``sum_o maxload_o n[o, k] <= capacity_k`` beside the task limits (4 per node): the
    lexicographic optimum is the brute force's among the plans within capacity, a load
    exactly on a capacity (0.1 x 3 = 0.3) included."""
    prof = profile([2, 2, 2, 1], [[4, 1, 3], [2, 6, 1], [7, 0, 2], [1, 3, 0]], ["HASH", "FORWARD", "REBALANCE", ""],
                   [[1], [2], [3], []])
    limits = np.array([4, 4, 4])
    _, costs = every_plan(prof, limits, capacity, max_load)
    out = solve(prof, limits, np.array(capacity), np.array(max_load))
    check_plan(out, prof, limits, capacity, max_load)
    assert [out.cost[d] for d in DIMS] == pytest.approx(lexicographic_best(costs.max(axis=1), DIMS), rel=1e-9)


def test_identical_task_limits_with_other_capacities_are_not_treated_as_twins():
    """Two nodes of 3 tasks, of capacity 1 and 3 (loads 1): the full node must be the second;
    ordering them as identical nodes (by their contents) would lose every plan."""
    prof = profile([3, 1], [[1, 0, 0], [5, 0, 0]], ["", ""], [[], []])
    out = solve(prof, [3, 3], np.array([1.0, 3.0]), np.ones(2))
    assert out.status == "optimal" and out.counts.tolist() == [[0, 3], [1, 0]] and out.cost["compute"] == 5.0


class _Recording(cp_model.CpSolver):
    """CP-SAT as it is, recording its parameters at each solve (and reporting ``status`` instead
    of its own, and ``bound`` x its objective as its bound, for the solves given)."""

    seen: list = []
    status: dict = {}
    bound: dict = {}

    @property
    def best_objective_bound(self):
        share = _Recording.bound.get(len(_Recording.seen))
        return super().best_objective_bound if share is None else share * self.objective_value

    def solve(self, model, callback=None):
        real = super().solve(model, callback)
        p = self.parameters
        _Recording.seen.append({"time": p.max_time_in_seconds, "work": p.max_deterministic_time,
                                "workers": p.num_workers, "seed": p.random_seed,
                                "spent": float(self.response_proto.deterministic_time)})
        return _Recording.status.get(len(_Recording.seen), real)


@pytest.fixture
def recording(monkeypatch):
    _Recording.seen, _Recording.status, _Recording.bound = [], {}, {}
    monkeypatch.setattr(solver.cp_model, "CpSolver", _Recording)
    return _Recording


def small():
    return profile([2, 2, 1], [[3, 1, 4], [5, 9, 2], [6, 5, 0]], ["FORWARD", "HASH", ""], [[1], [2], []]), [3, 3]


def test_the_work_limit_is_shared_by_the_stages_and_the_seed_and_workers_reach_cp_sat(recording):
    prof, limits = small()
    out = solve(prof, limits, work_limit=5.0, seed=11, workers=1)
    assert out.status == "optimal" and len(recording.seen) == 3
    spent = 0.0
    for call in recording.seen:
        assert call["work"] == pytest.approx(5.0 - spent, rel=1e-12) and call["time"] == math.inf
        assert (call["workers"], call["seed"]) == (1, 11)
        spent += call["spent"]
    assert spent > 0


def test_a_time_limit_is_the_wall_clock_left_to_each_stage(recording):
    prof, limits = small()
    out = solve(prof, limits, time_limit=30.0, seed=2)
    assert out.status == "optimal" and len(recording.seen) == 3
    times = [call["time"] for call in recording.seen]
    assert 29.0 < times[0] <= 30.0 and times[0] >= times[1] >= times[2] > 29.0 - out.wall_time_s
    assert all(call["work"] == math.inf and call["seed"] == 2 for call in recording.seen)


@pytest.mark.parametrize("limits", [{"work_limit": 0.0009}, {"time_limit": 0.009}])
def test_a_limit_spent_before_a_stage_runs_it_not(recording, limits):
    prof, nodes = small()
    out = solve(prof, nodes, **limits)
    assert recording.seen == [] and out.counts is None and out.status == "unknown"
    assert out.stages == [{"objective": d, "status": "not run (limit)"} for d in DIMS]


@pytest.mark.parametrize("limits", [{"work_limit": 0.5}, {"time_limit": 0.5}])
def test_small_limits_still_run_every_stage(limits):
    prof, nodes = small()
    out = solve(prof, nodes, **limits)
    assert [s["status"] for s in out.stages] == ["optimal"] * 3 and out.status == "optimal"


def test_a_stage_that_finds_nothing_ends_the_search_with_the_plan_before(recording):
    prof, limits = small()
    recording.status = {2: cp_model.UNKNOWN}
    out = solve(prof, limits)
    assert [s["status"] for s in out.stages] == ["optimal", "unknown"] and len(recording.seen) == 2
    assert out.status == "feasible" and out.counts is not None
    recording.seen, recording.status = [], {1: cp_model.MODEL_INVALID}
    out = solve(prof, limits)
    assert out.stages == [{"objective": "compute", "status": "unknown"}] and out.counts is None
    assert out.status == "unknown" and math.isinf(out.gap)


def test_a_stage_stopped_with_a_plan_makes_the_result_feasible(recording):
    """A stage's own FEASIBLE (a limit reached before the proof) keeps its plan and bound, and
    the result is then feasible, not optimal."""
    prof, limits = small()
    recording.status = {3: cp_model.FEASIBLE}
    out = solve(prof, limits)
    assert [s["status"] for s in out.stages] == ["optimal", "optimal", "feasible"] and out.status == "feasible"
    assert "bound" in out.stages[2] and out.counts is not None
    recording.seen, recording.status = [], {1: cp_model.FEASIBLE}
    out = solve(prof, limits, objective="traffic")
    assert out.status == "feasible" and out.bound == {"traffic": out.stages[0]["bound"]}


def test_a_stage_stopped_with_a_gap_reports_the_bound_it_proved(recording):
    """CP-SAT stopped at a bound of half its plan's (scaled) objective: the stage's bound is half
    the plan's true value (up to the scaling) and its gap one half, the result's gap the first
    stage's."""
    prof, limits = small()
    for share in (1.0, 0.01):  # costs of 5 and more, or below 1
        shrunk = profile(prof.parallelism, prof.cost * share, prof.outbound, prof.downstream)
        recording.seen, recording.status, recording.bound = [], {1: cp_model.FEASIBLE}, {1: 0.5}
        out = solve(shrunk, limits)
        first = out.stages[0]
        assert first["status"] == "feasible" and out.status == "feasible"
        assert first["bound"] == pytest.approx(out.cost["compute"] / 2, rel=1e-9) == out.bound["compute"]
        assert first["gap"] == pytest.approx(0.5, rel=1e-9) and out.gap == first["gap"]


@pytest.mark.parametrize("limit, names", [({"ceilings": {"state": 20.0}}, r"state [0-9.]+ > 20\.0$"),
                                          ({"network_ceiling": 50.0}, r"network total [0-9.]+ > 50\.0$"),
                                          ({"ceilings": {"compute": 60.0}, "network_ceiling": 50.0},
                                           r"compute [0-9.]+ > 60\.0; network total [0-9.]+ > 50\.0$")])
def test_a_plan_beyond_a_ceiling_is_refused_not_returned(monkeypatch, limit, names):
    """The final check against the ceilings as written: with every cost read as beyond its
    ceiling, the call fails naming each instead of returning the plan."""
    prof, limits = small()
    monkeypatch.setattr(solver, "within_ceiling", lambda cost, ceiling: False)
    with pytest.raises(AssertionError, match="breaks a ceiling beyond CEILING_RTOL: " + names):
        solve(prof, limits, **limit)


def test_within_ceiling_is_the_ceiling_up_to_its_relative_tolerance():
    assert within_ceiling(10.0, 10.0) and within_ceiling(10.0 * (1 + 0.9e-9), 10.0)
    assert not within_ceiling(10.0 * (1 + 2e-9), 10.0) and not within_ceiling(1.0, 0.0)
    assert within_ceiling(0.0, 0.0) and CEILING_RTOL == 1e-9


def test_a_hint_gives_the_same_optimum():
    prof, limits = small()
    _, costs = every_plan(prof, np.array(limits))
    worst = solve(prof, limits)
    hinted = solve(prof, limits, hint=np.array([[2, 0], [0, 2], [0, 1]]))
    assert [hinted.cost[d] for d in DIMS] == pytest.approx([worst.cost[d] for d in DIMS])
    assert [worst.cost[d] for d in DIMS] == pytest.approx(lexicographic_best(costs.max(axis=1), DIMS))


def test_loads_that_fill_a_capacity_exactly_are_admitted_and_no_more():
    """Three tasks of 0.1 and three of 0.3 on three nodes of 0.4: the one plan is one of each per
    node (0.1 + 0.3 == 0.4 in floats; coefficients rounded up at a scale of 2^20 / 0.3 once made
    it 0.4 + 2e-7 and the solver called it infeasible). Capacities 1e-8 below 0.4 (beyond the
    validator's 1e-9 band) admit nothing."""
    from streamsched.model import Cluster, TaskGraph
    from streamsched.schedulers import get_scheduler

    prof = profile([3, 3], [[1, 0, 0], [1, 0, 0]], ["", ""], [[], []])
    out = solve(prof, [4, 4, 4], np.full(3, 0.4), np.array([0.1, 0.3]))
    assert out.status == "optimal" and out.counts.tolist() == [[1, 1, 1], [1, 1, 1]]
    assert solve(prof, [4, 4, 4], np.full(3, 0.4 - 1e-8), np.array([0.1, 0.3])).status == "infeasible"
    graph = TaskGraph.build("tenths", ("a", "b"), [0, 0, 0, 1, 1, 1], [0.1] * 3 + [0.3] * 3, [0, 1, 2], [3, 4, 5],
                            [1.0] * 3)
    cluster = Cluster.from_types("three", (3, {"capacity": 0.4, "slots": 3}))
    placement = get_scheduler("optimal", objective="contention").schedule(graph, cluster)
    assert placement.violations(graph, cluster) == [] and sorted(placement.node_of[:3]) == [0, 1, 2]


def goal_value(prof, limits, counts, goal) -> float:
    """A goal's integer objective at the plan ``counts`` (the only one the model then admits),
    divided by the goal's scale: what the solver reports as that plan's bound."""
    model = solver._Model(prof, np.asarray(limits), np.asarray(limits, dtype=float), np.ones(prof.n_operators))
    for row, values in zip(model.n, counts.tolist()):
        for var, value in zip(row, values):
            model.model.add(var == value)
    expr, scale = goal(model)
    model.model.minimize(expr)
    cp = cp_model.CpSolver()
    assert cp.solve(model.model) == cp_model.OPTIMAL
    return cp.objective_value / scale


def test_every_goal_divided_by_its_scale_is_the_plans_true_value_rounded_down():
    """The exactness of the module docstring: for any plan, each objective divided back is at
    most the plan's true value (so the solver's bound bounds the optimum) and loses at most the
    rounding: 1e-9 relative for a bottleneck and the total, ``sum(w) / 2^12`` per dimension for
    the weighted sum (weights of 0 count nothing; spans below 1 count as spans)."""
    prof = profile([2, 2, 2], [[3.3, 1.7, 4.1], [5.2, 9.9, 2.6], [6.1, 0.4, 0.0]], ["FORWARD", "HASH", ""],
                   [[1], [2], []])
    limits = np.array([3, 4, 5])  # no twin nodes: every plan is admitted
    plans, costs = every_plan(prof, limits)
    rng = np.random.default_rng(5)
    for i in rng.choice(len(plans), size=4, replace=False):
        tops, total = costs[i].max(axis=0), costs[i][:, 2].sum()
        for x, dim in enumerate(DIMS):
            got = goal_value(prof, limits, plans[i], lambda m, dim=dim: m.bottleneck_goal(dim))
            assert tops[x] * (1 - 1e-9) - 1e-12 <= got <= tops[x] * (1 + 1e-15)
        got = goal_value(prof, limits, plans[i], lambda m: m.total_goal())
        assert total * (1 - 1e-9) - 1e-12 <= got <= total * (1 + 1e-15)
        for weights, spans in (((1.0, 0.0, 2.0), (0.5, 2.0, 0.75)), ((0.5, 3.0, 1.0), (20.0, 0.3, 4.0))):
            true = weighted_value(tops, weights, spans)
            got = goal_value(prof, limits, plans[i], lambda m: m.weighted_goal(weights, spans))
            assert true - 3 * sum(weights) / 2**12 <= got <= true * (1 + 1e-15)


def test_by_default_one_worker_and_seed_0_and_no_limit(recording):
    prof, limits = small()
    solve(prof, limits)
    assert [(c["workers"], c["seed"], c["work"], c["time"]) for c in recording.seen] == [(1, 0, math.inf, math.inf)] * 3


def test_a_work_limit_spent_by_the_first_stage_leaves_the_others_not_run(recording):
    """CP-SAT's work is deterministic: the first stage's proof costs the same work again, so a
    limit above 0.001 and at least 0.0005 above it lets that stage finish and leaves at most
    0.001 for the next ones."""
    prof, limits = small()
    solve(prof, limits, work_limit=5.0)
    first = recording.seen[0]["spent"]
    assert first > 0
    recording.seen = []
    out = solve(prof, limits, work_limit=max(0.001 + first / 2, first + 0.0005))
    assert [s["status"] for s in out.stages] == ["optimal", "not run (limit)", "not run (limit)"]
    assert out.status == "feasible" and out.counts is not None and len(recording.seen) == 1
    assert out.gap == out.stages[0]["gap"] <= 1e-9 and set(out.bound) == {"compute"}


@pytest.mark.parametrize("limits, capacity", [
    ([2, 4], [9.0, 9.0]),  # equal capacities, unequal task limits
    ([3, 1, 3], [9.0, 9.0, 9.0]),
    ([3, 3, 1], [9.0, 9.0, 9.0]),
    ([3, 3, 3], [9.0, 9.0, 1.0]),  # equal limits, unequal capacities
    ([3, 3, 3], [1.0, 9.0, 9.0]),
])
def test_only_nodes_alike_in_limit_and_capacity_are_ordered_as_twins(limits, capacity):
    """A (3 tasks, compute 1), B (1, compute 5), C (2, compute 2) on nodes that differ in their
    task limit or their capacity (loads 1): the brute force's lexicographic optimum, which
    ordering such nodes by their contents (as if interchangeable) can lose."""
    prof = profile([3, 1, 2], [[1, 0, 0], [5, 0, 0], [2, 0, 0]], ["", "", ""], [[], [], []])
    limits, ones = np.array(limits), np.ones(3)
    _, costs = every_plan(prof, limits, capacity, ones)
    out = solve(prof, limits, np.array(capacity), ones)
    assert out.status == "optimal"
    check_plan(out, prof, limits, capacity, ones)
    assert out.cost["compute"] == lexicographic_best(costs.max(axis=1), DIMS)[0]


def test_many_operators_on_identical_nodes_are_ordered_by_compute():
    """62 operators of one task (count vectors past 2^62 as numbers: the nodes are ordered by
    their compute instead), compute 1 each, on two identical nodes of 40: 31 on each (a
    strict order, or one by another dimension, would lose that)."""
    n = 62
    prof = profile([1] * n, [[1, 0, 0]] * n, [""] * n, [[]] * n)
    out = solve(prof, [40, 40])
    assert out.status == "optimal" and out.cost["compute"] == 31.0 and out.counts.sum(axis=0).tolist() == [31, 31]
    three = solve(prof, [40, 40, 40])
    assert three.cost["compute"] == 21.0 and sorted(three.counts.sum(axis=0).tolist()) == [20, 21, 21]
