"""The exact solver: brute force agrees with every back-end and formulation on tiny graphs;
the papers' optimal costs (i-scheduler.txt section 5, Figs. 4-6) are found and proven;
infeasibility, bad input and the CPLEX Community Edition limits are reported clearly."""

from __future__ import annotations

import itertools
import importlib.util

import numpy as np
import pytest

from streamsched.errors import InputError
from streamsched.solvers import SolveResult, SolverLimitError, solve_placement
from streamsched.solvers.formulations import canonical_assignment, find_symmetry
from streamsched.solvers.problem import build_problem
from streamsched.workloads import cluster, workload

HAS_CPLEX = importlib.util.find_spec("cplex") is not None
BACKENDS = ["cp-sat", "highs", pytest.param("cplex", marks=pytest.mark.skipif(not HAS_CPLEX, reason="no cplex"))]
FORMULATIONS = ["configurations", "cut", "assignment"]


def random_instance(seed: int, n: int = 7, m: int = 3):
    """Random loads 1-3, capacities that fit with some slack, ~45 % of pairs with rates 1-9.
    Every third instance makes two items twins (same neighbours) to exercise aggregation."""
    rng = np.random.default_rng(seed)
    loads = rng.integers(1, 4, n).astype(float)
    capacity = np.full(m, np.ceil(loads.sum() * 1.3 / m))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.45]
    if seed % 3 == 0:
        loads[1] = loads[0]
        pairs = [p for p in pairs if 1 not in p] + [(1, j) for i, j in pairs if i == 0 and j != 1]
    src, dst = (np.array(x) for x in zip(*pairs)) if pairs else (np.zeros(0, int), np.zeros(0, int))
    rate = rng.integers(1, 10, src.size).astype(float)
    return loads, src, dst, rate, capacity


def brute_force(loads, src, dst, rate, capacity, **constraints) -> float:
    """Cheapest feasible assignment by enumerating all m^n of them (inf if none)."""
    problem = build_problem(loads, src, dst, rate, capacity, **constraints)
    every = np.array(list(itertools.product(range(problem.n_nodes), repeat=problem.n_items)))
    best = np.inf
    for assignment in every:
        if not problem.violations(assignment):
            best = min(best, problem.cost(assignment))
    return best


def check(result: SolveResult, loads, src, dst, rate, capacity, **constraints) -> None:
    problem = build_problem(loads, src, dst, rate, capacity, **constraints)
    assert problem.violations(result.assignment) == []
    assert result.objective == pytest.approx(problem.cost(result.assignment))
    assert result.bound <= result.objective + 1e-9


@pytest.mark.slow
@pytest.mark.parametrize("formulation", FORMULATIONS)
@pytest.mark.parametrize("seed", range(6))
def test_cp_sat_matches_brute_force(seed, formulation):
    instance = random_instance(seed)
    result = solve_placement(*instance, formulation=formulation, time_limit=20)
    check(result, *instance)
    assert result.status == "optimal"
    assert result.objective == pytest.approx(brute_force(*instance))


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS[1:])
@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_other_backends_match_brute_force(backend, formulation):
    for seed in (10, 12):
        instance = random_instance(seed, n=6)
        result = solve_placement(*instance, backend=backend, formulation=formulation, time_limit=20, workers=1)
        check(result, *instance)
        assert (result.status, result.backend) == ("optimal", backend)
        assert result.objective == pytest.approx(brute_force(*instance))


CONSTRAINED = {
    "pinned": dict(pinned={0: 2, 3: 2}),
    "excluded": dict(excluded=[(1, 0), (1, 1), (4, 2)]),
    "max_items": dict(max_items=[3, 2, 3]),
    "memory": dict(memory=[5, 1, 1, 4, 2, 2, 3], node_memory=[6, 6, 8]),
    "migration": dict(current=[0, 0, 1, 1, 2, 2, -1], migration_cost=2.5),
}


@pytest.mark.slow
@pytest.mark.parametrize("formulation", FORMULATIONS)
@pytest.mark.parametrize("kind", sorted(CONSTRAINED))
def test_constraints_match_brute_force(kind, formulation):
    instance = random_instance(4)
    extra = CONSTRAINED[kind]
    result = solve_placement(*instance, formulation=formulation, time_limit=20, **extra)
    check(result, *instance, **extra)
    assert result.status == "optimal"
    assert result.objective == pytest.approx(brute_force(*instance, **extra))


def test_migration_cost_trades_traffic_against_moves():
    """Two pairs a-b (rate 10) and c-d (rate 1) split across two nodes of capacity 2."""
    loads, src, dst, rate, capacity = np.ones(4), [0, 2], [1, 3], [10.0, 1.0], [2.0, 2.0]
    current = [0, 1, 1, 0]  # both pairs split: traffic 11
    free = solve_placement(loads, src, dst, rate, capacity, current=current)
    assert free.objective == 0.0 and free.moved >= 2  # moves are free, yet counted
    cheap = solve_placement(loads, src, dst, rate, capacity, current=current, migration_cost=1.0)
    assert (cheap.objective, cheap.moved) == (2.0, 2)  # swap b and d (or a and c): traffic 0 + 2 moves
    dear = solve_placement(loads, src, dst, rate, capacity, current=current, migration_cost=6.0)
    assert (dear.objective, dear.moved) == (11.0, 0)  # 2 moves cost 12 > 11: stay


@pytest.mark.parametrize("workload_name, cluster_name, expected", [
    ("diamond-30", "heterogeneous-10", 146),  # i-scheduler.txt section 5, Fig. 5
    ("star-30", "heterogeneous-10", 86),  # i-scheduler.txt section 5, Fig. 6
    ("linear-32", "heterogeneous-10", 24),  # t3-scheduler.txt section 5 (CPLEX: 1,114,257 s)
])
def test_papers_optimal_costs_are_proven(workload_name, cluster_name, expected):
    g, c = workload(workload_name), cluster(cluster_name)
    result = solve_placement(g.load, g.src, g.dst, g.rate, c.capacity, time_limit=30)
    assert (result.status, result.objective, result.bound) == ("optimal", expected, expected)


@pytest.mark.slow
def test_configuration_and_assignment_models_agree_on_a_micro_benchmark():
    g, c = workload("star-12"), cluster("heterogeneous-10")
    args = (g.load, g.src, g.dst, g.rate, c.capacity)
    by_config = solve_placement(*args, formulation="configurations")
    by_assignment = solve_placement(*args, formulation="assignment", time_limit=30)
    assert by_config.status == by_assignment.status == "optimal"
    assert by_config.objective == by_assignment.objective == 16


def test_twin_classes_and_node_types_of_a_diamond():
    """diamond-12: source (4) -> 2 middle operators (2 each) -> sink (4): every middle task
    talks to every source and sink task (rate 1), so the 4 middle tasks are one class, and
    the 8 source and sink tasks, each talking to the 4 middle tasks, are another."""
    g, c = workload("diamond-12"), cluster("heterogeneous-10")
    sym = find_symmetry(build_problem(g.load, g.src, g.dst, g.rate, c.capacity))
    assert sorted(items.size for items in sym.class_items) == [4, 8]
    assert [nodes.tolist() for nodes in sym.type_nodes] == [[0, 1, 2], [3, 4, 5], [6, 7, 8, 9]]
    assert sym.class_weight.tolist() == [[0, 1], [1, 0]]  # 1 per (outer, middle) pair


def test_canonical_assignment_is_a_symmetric_image():
    g, c = workload("linear-10"), cluster("homogeneous-10")
    problem = build_problem(g.load, g.src, g.dst, g.rate, c.capacity)
    sym = find_symmetry(problem)
    messy = np.array([9, 3, 3, 9, 5, 5, 1, 7, 7, 1])
    canonical = canonical_assignment(messy, sym)
    assert problem.cost(canonical) == problem.cost(messy)
    assert canonical[0] == 0 and np.all(np.diff(canonical[::2]) >= 0)


@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_packing_infeasibility_is_a_status(formulation):
    """Three items of load 2 on two nodes of capacity 3: the total fits, no packing does."""
    result = solve_placement([2, 2, 2], [0, 1], [1, 2], [1, 1], [3, 3], formulation=formulation)
    assert result.status == "infeasible" and np.all(result.assignment == -1)


def test_total_load_above_capacity_is_infeasible():
    result = solve_placement([3, 3], [0], [1], [1], [2, 2])
    assert result.status == "infeasible" and result.bound == np.inf


@pytest.mark.parametrize("kwargs, message", [
    (dict(backend="gurobi"), "backend: 'gurobi' is not one of cp-sat, highs, cplex"),
    (dict(formulation="magic"), "formulation: 'magic'"),
    (dict(colour="red"), "unknown constraint 'colour'"),
    (dict(pinned={0: 7}), r"pinned\[0\] node: 7 is not an index"),
    (dict(warm_start=[0, 0]), "warm_start: not a feasible assignment"),
    (dict(migration_cost=1.0), "migration_cost: needs the current placement"),
    (dict(time_limit=0), "time_limit: must be > 0"),
])
def test_bad_input_names_the_field(kwargs, message):
    with pytest.raises(InputError, match=message):
        solve_placement([1, 1], [0], [1], [1], [1, 1], **kwargs)


def test_bad_arrays_name_the_field():
    with pytest.raises(InputError, match=r"loads\[1\]: -1.0"):
        solve_placement([1, -1], [0], [1], [1], [2])
    with pytest.raises(InputError, match="edge 0: names item 0 -> 5"):
        solve_placement([1, 1], [0], [5], [1], [2])


@pytest.mark.skipif(not HAS_CPLEX, reason="no cplex")
def test_cplex_community_edition_limit_is_reported():
    g, c = workload("linear-32"), cluster("heterogeneous-10")
    with pytest.raises(SolverLimitError, match="Community Edition is limited to 1000 variables"):
        solve_placement(g.load, g.src, g.dst, g.rate, c.capacity, backend="cplex", formulation="assignment")


@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_fractional_loads_fill_a_node_exactly(formulation):
    """Three items of load 1/3 (no finite decimal form) fit a node of capacity 1, as the
    placement validator accepts: the CP-SAT row scaling must not round them out."""
    result = solve_placement([1 / 3] * 3, [0, 1], [1, 2], [5.0, 5.0], [1.0, 1.0], formulation=formulation)
    assert (result.status, result.objective) == ("optimal", 0.0)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_decimal_loads_match_brute_force(seed):
    loads, src, dst, rate, capacity = random_instance(seed)
    loads = loads * 0.37
    capacity = capacity * 0.37
    result = solve_placement(loads, src, dst, rate, capacity, formulation="assignment")
    check(result, loads, src, dst, rate, capacity)
    assert result.objective == pytest.approx(brute_force(loads, src, dst, rate, capacity))


def test_packing_infeasibility_without_a_greedy_start():
    """Loads 2, 2, 2, 3 on nodes of capacity 3, 3, 3: the total (9) fits, but every node takes
    one item and there are four; the greedy start fails, the configuration LP proves it."""
    result = solve_placement([2, 2, 2, 3], [0, 1], [1, 2], [1, 1], [3, 3, 3], formulation="configurations")
    assert result.status == "infeasible"


def test_assignment_model_cuts_keep_an_optimal_placement():
    """linear-10 on homogeneous-10 (capacity 4): a middle task has 4 neighbours of rate 1 but at
    most 3 fit beside it, so each (middle task, node) gets a neighbourhood cut with T = 3. An optimal
    placement (operators (0,1), (2,3), (4) on three nodes; cost 8) must satisfy every row."""
    from streamsched.solvers.formulations import assignment_model

    g, c = workload("linear-10"), cluster("homogeneous-10")
    problem = build_problem(g.load, g.src, g.dst, g.rate, c.capacity)
    milp = assignment_model(problem, find_symmetry(problem))
    optimal = g.task_operator // 2
    assert problem.cost(optimal) == 8
    x = milp.encode(optimal)
    activity = milp.rows @ x
    assert np.all(activity >= milp.row_lower - 1e-9) and np.all(activity <= milp.row_upper + 1e-9)
    assert milp.cost @ x + milp.offset == 8
    dense = milp.rows.toarray()
    is_cut = [sorted(row[row != 0].tolist()) == [-3.0, 1.0, 1.0, 1.0, 1.0] for row in dense]
    assert sum(is_cut) == 6 * 10  # the 6 middle tasks (4 neighbours) on each node; end tasks have 2
