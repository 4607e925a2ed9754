"""Sound lower bounds (issue 28 item 4): a bound is never above a feasible assignment's cost
(never clipped to it: :class:`UnsoundBoundError` instead), every result names its bound's
source, and the bounds are checked against brute-force optima on small graphs, at cases where
they are tight (so that a doubled bound fails), and against the known optimum 146 of
diamond-30 on heterogeneous-10 (i-scheduler.txt section 5, Fig. 5)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import streamsched.solvers.placement as placement_module
from streamsched.solvers import UnsoundBoundError, solve_placement
from streamsched.solvers.bounds import neighbourhood_bound
from streamsched.solvers.local_search import adjacency_matrix
from streamsched.solvers.problem import build_problem
from streamsched.workloads import cluster, workload


def brute_force(loads, src, dst, rate, capacity) -> float:
    problem = build_problem(loads, src, dst, rate, capacity)
    costs = [problem.cost(np.array(a)) for a in itertools.product(range(problem.n_nodes), repeat=problem.n_items)
             if not problem.violations(np.array(a))]
    return min(costs)


def knapsack_bound(loads, src, dst, rate, capacity) -> float:
    problem = build_problem(loads, src, dst, rate, capacity)
    return neighbourhood_bound(problem, adjacency_matrix(problem))


# Hand-computed: one item per node (capacity 1, load 1), so no neighbour fits beside an item and
# every edge is cut. Each cut edge is counted from both ends: bound = 1/2 sum_a W_a = the optimum.
TIGHT = [
    # two items, one edge of 5: W = (5, 5) -> 5
    (([1.0, 1.0], [0], [1], [5.0], [1.0, 1.0]), 5.0),
    # chain 0 -2- 1 -3- 2 on three nodes: W = (2, 5, 3) -> 5
    (([1.0, 1.0, 1.0], [0, 1], [1, 2], [2.0, 3.0], [1.0, 1.0, 1.0]), 5.0),
    # triangle with rates 1, 2, 4 and a pendant edge of 8 on four nodes: W = (5, 3, 14, 8) -> 15
    (([1.0] * 4, [0, 1, 0, 2], [1, 2, 2, 3], [1.0, 2.0, 4.0, 8.0], [1.0] * 4), 15.0),
]


@pytest.mark.parametrize("instance, optimum", TIGHT)
def test_knapsack_bound_is_tight_where_no_neighbour_fits(instance, optimum):
    """Kills the mutant that drops the ``0.5 *`` of bounds.neighbourhood_bound (it doubles to
    10, 10, 30: above the optimum)."""
    assert brute_force(*instance) == optimum
    assert knapsack_bound(*instance) == pytest.approx(optimum, rel=1e-6)  # capacity slack 1e-9
    result = solve_placement(*instance, time_limit=10, workers=1)
    assert (result.status, result.objective) == ("optimal", optimum)
    assert result.bound == pytest.approx(optimum, rel=1e-6) and result.bound <= optimum * (1 + 1e-6)
    assert result.bound_source


def test_knapsack_bound_by_hand_with_room_for_one_neighbour():
    """Star 0 -> 1, 2, 3 (rates 6, 4, 1), loads 1, two nodes of capacity 2 and two of 1: the
    hub keeps at most its heaviest edge (6) beside it: W - T = 11 - 6 = 5; each leaf may keep its
    one edge: 0. Bound 5/2 = 2.5; the optimum (hub with leaf 1, the others elsewhere) is 5."""
    instance = ([1.0] * 4, [0, 0, 0], [1, 2, 3], [6.0, 4.0, 1.0], [2.0, 2.0, 1.0, 1.0])
    assert knapsack_bound(*instance) == pytest.approx(2.5, rel=1e-6)
    assert brute_force(*instance) == 5.0


@pytest.mark.parametrize("seed", range(12))
def test_bounds_stay_below_brute_force_on_tight_random_graphs(seed):
    """Small random graphs on nodes that hold one to three items: every bound (the knapsack
    bound alone, and the solver's bound whatever its source) at most the brute-force optimum,
    and the solver proves that optimum."""
    rng = np.random.default_rng(seed)
    n, m = 6, 3
    loads = rng.choice([1.0, 1.5, 2.0], n)
    capacity = np.full(m, max(loads.max(), np.ceil(loads.sum() / m * 1.1)))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.5]
    src, dst = (list(x) for x in zip(*pairs))
    rate = rng.integers(1, 20, len(src)).astype(float) + rng.random(len(src)).round(3)
    instance = (loads, src, dst, rate, capacity)
    best = brute_force(*instance)
    assert knapsack_bound(*instance) <= best + 1e-9
    result = solve_placement(*instance, time_limit=10, workers=1)
    assert result.status == "optimal" and result.objective == pytest.approx(best, rel=1e-9)
    assert result.bound <= best * (1 + 1e-6) and result.bound_source


def test_diamond_30_bound_is_the_known_optimum_146_not_above():
    """i-scheduler.txt section 5, Fig. 5: the optimum of diamond-30 on heterogeneous-10 is 146.
    The knapsack bound stays below it (the doubled one of the mutant is 202) and the solver's
    bound, unclipped, is exactly 146 with its source named."""
    g, c = workload("diamond-30"), cluster("heterogeneous-10")
    assert knapsack_bound(g.load, g.src, g.dst, g.rate, c.capacity) <= 146
    result = solve_placement(g.load, g.src, g.dst, g.rate, c.capacity, time_limit=30, workers=1)
    assert (result.status, result.objective, result.bound) == ("optimal", 146, 146)
    assert result.bound_source


def test_a_bound_above_the_incumbent_fails_loudly(monkeypatch):
    """A wrong bound argument (here the knapsack bound doubled) raises instead of being clipped
    to the incumbent, and the error names where the bound came from."""
    instance = TIGHT[1][0]
    real = placement_module.neighbourhood_bound
    monkeypatch.setattr(placement_module, "neighbourhood_bound", lambda *args: 2 * real(*args))
    with pytest.raises(UnsoundBoundError, match="per-item knapsack"):
        solve_placement(*instance, time_limit=5, workers=1, formulation="assignment")


@pytest.mark.parametrize("instance, status", [
    (([], [], [], [], [1.0]), "optimal"),
    (([2.0, 2.0], [0], [1], [1.0], [1.0, 1.0]), "infeasible"),
    (([1.0, 1.0], [0], [1], [3.0], [2.0, 1.0]), "optimal"),
])
def test_every_result_names_its_bound_source(instance, status):
    result = solve_placement(*instance, time_limit=5, workers=1)
    assert result.status == status and result.bound_source
