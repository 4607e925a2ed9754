"""The common battery every registered scheduler must pass (Heron's CommonPackingTests,
scikit-learn's parametrize_with_checks): valid placement, same seed -> same placement, a clear
InfeasibleError, parameters untouched, never better than the brute-force optimum; exact
schedulers (tag ``exact``) equal to it; every cluster scheduler's cost on the papers'
micro-benchmarks pinned (tests/test_scheduler_regression.py).

Validity is judged by :mod:`placement_checker`, written for the tests from the raw arrays, not
by the code's own ``Placement.violations``."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from conftest import slow_params
from streamsched import workloads
from streamsched.errors import InfeasibleError, InputError, ParameterError
from streamsched.model import Cluster, Placement, TaskGraph
from streamsched.schedulers import Scheduler, available, get_scheduler, register, scheduler_class

import placement_checker

#: Parameters that bound a scheduler's running time are set low so that the battery stays fast.
FAST = {"time_limit": 1.0, "theta": 1.0}
#: caps's budgets are node trials (ints): its exhaustive Pareto search of a 12-task graph on 10
#: unequal nodes takes about a million by default.
FAST_CAPS = {"work_limit": 50_000, "probe_work": 5_000}
#: optimal stopped by deterministic work, not its wall clock: "deterministic" must hold on a busy
#: machine too (a 1 s wall-clock limit gave another warm start under load, and another plan).
FAST_OPTIMAL = {"time_limit": 0.0, "work_limit": 1.0}

INSTANCES = [
    ("diamond-10", "homogeneous-10"),
    ("star-12", "heterogeneous-10"),
    ("linear-14", "heterogeneous-10"),
    ("wordcount", "high-low-1-2"),
]


def make(name: str, **extra) -> Scheduler:
    declared = {p.name: p for p in scheduler_class(name).params}
    params = {k: v for k, v in FAST.items() if k in declared}
    if name == "caps":
        params.update(FAST_CAPS)
    if name == "optimal":
        params.update(FAST_OPTIMAL)
    return get_scheduler(name, **{**params, **extra})


def tiny_graph(seed: int = 1) -> TaskGraph:
    """Seven tasks of load 1 with random rates: small enough to enumerate 3^7 placements."""
    rng = np.random.default_rng(seed)
    pairs = [(i, j) for i in range(7) for j in range(i + 1, 7) if rng.random() < 0.45]
    src, dst = zip(*pairs)
    ops = np.array([0, 0, 1, 1, 1, 2, 2])
    return TaskGraph.build("tiny", ("a", "b", "c"), ops, np.ones(7), src, dst, rng.integers(1, 10, len(pairs)))


def brute_force_optimum(graph: TaskGraph, cluster: Cluster) -> float:
    best = np.inf
    for assignment in itertools.product(range(cluster.n_nodes), repeat=graph.n_tasks):
        node = np.array(assignment)
        if np.any(np.bincount(node, weights=graph.load, minlength=cluster.n_nodes) > cluster.capacity):
            continue
        best = min(best, float(graph.rate[node[graph.src] != node[graph.dst]].sum()))
    return best


def test_registry_has_the_core_scheduler():
    assert "even" in available()


def test_unknown_scheduler_lists_known_ones():
    with pytest.raises(InputError, match="unknown scheduler 'nope' \\(known: .*even"):
        get_scheduler("nope")


def test_registry_refuses_duplicates():
    class Impostor(Scheduler):
        name = "even"
        summary = "a second 'even'"

        def place(self, graph, cluster, params, seed):
            raise AssertionError

    with pytest.raises(ValueError, match="registered twice"):
        register(Impostor)


@pytest.mark.parametrize("name", available())
def test_unknown_parameter_is_refused(name):
    with pytest.raises(ParameterError, match=f"{name}.params.no_such_knob: unknown parameter"):
        get_scheduler(name, no_such_knob=1)


@pytest.mark.parametrize("name", available())
@pytest.mark.parametrize("workload, cluster", INSTANCES)
def test_valid_and_deterministic(name, workload, cluster):
    graph, nodes = workloads.workload(workload), workloads.cluster(cluster)
    scheduler = make(name)
    before = scheduler.get_params()
    first = scheduler.schedule(graph, nodes, seed=3)
    assert placement_checker.problems(graph, nodes, first) == [], f"{name} on {workload}/{cluster}"
    meta = first.metadata
    assert meta["scheduler"] == name and meta["seed"] == 3 and meta["wall_time_s"] >= 0
    assert meta["cost"] == pytest.approx(placement_checker.cut_traffic(graph, first))
    second = scheduler.schedule(graph, nodes, seed=3)
    np.testing.assert_array_equal(first.node_of, second.node_of)
    np.testing.assert_array_equal(first.worker_of, second.worker_of)
    assert scheduler.get_params() == before


@pytest.mark.parametrize("name", available())
def test_never_better_than_brute_force_optimum(name):
    graph = tiny_graph()
    cluster = Cluster.from_types("three", (3, {"capacity": 3.0, "slots": 2}))
    optimum = brute_force_optimum(graph, cluster)
    placement = make(name).schedule(graph, cluster, seed=0)
    assert placement_checker.problems(graph, cluster, placement) == [], name
    assert placement_checker.cut_traffic(graph, placement) >= optimum - 1e-9


@pytest.mark.parametrize("name", available())
def test_total_load_above_capacity_is_infeasible(name):
    graph = workloads.workload("diamond-32")
    with pytest.raises(InfeasibleError, match="needs load 32"):
        make(name).schedule(graph, Cluster.from_types("small", (3, {"capacity": 10.0})))


@pytest.mark.parametrize("name", available())
def test_packing_infeasibility_is_reported_not_violated(name):
    """Three tasks of load 2 on two nodes of capacity 3: the total fits, no packing does."""
    graph = TaskGraph.build("heavy", ("a",), [0, 0, 0], [2.0, 2.0, 2.0], [0, 1], [1, 2], [1.0, 1.0])
    cluster = Cluster.from_types("two", (2, {"capacity": 3.0, "slots": 2}))
    with pytest.raises(InfeasibleError):
        make(name).schedule(graph, cluster)


@pytest.mark.parametrize("name", slow_params(available(), {"optimal"}))
def test_valid_with_measured_real_valued_loads(name):
    """Monitored loads and rates are noisy reals, not the papers' unit weights: diamond-30 with
    loads in [0.97, 1.03] fills 79 % of heterogeneous-10, and every scheduler must still pack it."""
    base, nodes = workloads.workload("diamond-30"), workloads.cluster("heterogeneous-10")
    rng = np.random.default_rng(5)
    graph = TaskGraph.build("measured", base.operator_names, base.task_operator, rng.uniform(0.97, 1.03, base.n_tasks),
                            base.src, base.dst, base.rate * rng.uniform(80, 120, base.n_edges))
    placement = make(name).schedule(graph, nodes, seed=1)
    assert placement_checker.problems(graph, nodes, placement) == [], name


def small_instances() -> list[tuple[TaskGraph, Cluster]]:
    """Tiny measured-style instances brute force can settle: fractional loads, every rate
    different, unequal nodes, some near full."""
    out = [(tiny_graph(seed), Cluster.from_types("three", (3, {"capacity": 3.0, "slots": 2}))) for seed in (1, 2)]
    rng = np.random.default_rng(11)
    for k in range(4):
        n = 7
        pairs = [(i, j) for i in range(n) for j in range(n) if i != j and rng.random() < 0.3]
        src, dst = zip(*pairs)
        load = rng.uniform(0.3, 1.4, n).round(3)
        graph = TaskGraph.build(f"measured-{k}", ("a", "b"), [0] * 3 + [1] * 4, load, src, dst,
                                rng.uniform(1, 50, len(pairs)).round(2))
        big = float(load.sum()) * (0.45 + 0.1 * k)  # the largest node alone cannot hold everything
        cluster = Cluster.from_types(f"unequal-{k}", (1, {"capacity": round(big, 3), "slots": 2}),
                                     (2, {"capacity": round(float(load.sum()) * 0.35, 3), "slots": 1}))
        out.append((graph, cluster))
    return out


@pytest.mark.parametrize("name", [n for n in available() if scheduler_class(n).exact])
@pytest.mark.parametrize("case", range(6))
def test_exact_scheduler_equals_brute_force(name, case):
    graph, cluster = small_instances()[case]
    optimum = brute_force_optimum(graph, cluster)
    placement = make(name, time_limit=20.0).schedule(graph, cluster, seed=0)
    assert placement_checker.problems(graph, cluster, placement) == [], f"{name} on {graph.name}"
    assert placement_checker.cut_traffic(graph, placement) == pytest.approx(optimum), f"{name} on {graph.name}"


def test_the_models_validator_agrees_with_the_independent_checker():
    """Placements near a valid one on unequal nodes (heterogeneous-10: capacities 2 to 6): a capacity
    compared with another node's (the largest, the first) would disagree here."""
    graph, cluster = workloads.workload("diamond-30"), workloads.cluster("heterogeneous-10")
    rng = np.random.default_rng(3)
    verdicts = set()
    valid = get_scheduler("even").schedule(graph, cluster, seed=0).node_of
    for trial in range(300):
        node_of = valid.copy()  # a valid placement with a few tasks moved at random
        moved = rng.choice(graph.n_tasks, 1 + trial % 4, replace=False)
        node_of[moved] = rng.integers(0, cluster.n_nodes, moved.size)
        worker_of = rng.integers(-1, 3, graph.n_tasks)
        placement = Placement.build(node_of, np.minimum(worker_of, cluster.slots[node_of] - 1))
        independent = placement_checker.problems(graph, cluster, placement)
        assert (placement.violations(graph, cluster) == []) == (independent == []), independent
        verdicts.add(independent == [])
    assert verdicts == {True, False}  # both kinds of placement were tried
