"""The common battery every registered scheduler must pass (style.md: CommonPackingTests,
parametrize_with_checks): valid placement, same seed -> same placement, a clear
InfeasibleError, parameters untouched, never better than the brute-force optimum."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from streamsched import metrics, workloads
from streamsched.errors import InfeasibleError, InputError, ParameterError
from streamsched.model import Cluster, TaskGraph
from streamsched.schedulers import Scheduler, available, get_scheduler, register, scheduler_class

#: Parameters that bound a scheduler's running time are set low so that the battery stays fast.
FAST = {"time_limit": 1.0, "theta": 1.0}

INSTANCES = [
    ("diamond-10", "homogeneous-10"),
    ("star-12", "heterogeneous-10"),
    ("linear-14", "heterogeneous-10"),
    ("wordcount", "high-low-1-2"),
]


def make(name: str, **extra) -> Scheduler:
    declared = {p.name: p for p in scheduler_class(name).params}
    params = {k: v for k, v in FAST.items() if k in declared}
    return get_scheduler(name, **params, **extra)


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
    assert first.violations(graph, nodes) == []
    meta = first.metadata
    assert meta["scheduler"] == name and meta["seed"] == 3 and meta["wall_time_s"] >= 0
    assert meta["cost"] == pytest.approx(metrics.inter_node_traffic(graph, first))
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
    assert placement.violations(graph, cluster) == []
    assert metrics.inter_node_traffic(graph, placement) >= optimum - 1e-9


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


@pytest.mark.parametrize("name", available())
def test_valid_with_measured_real_valued_loads(name):
    """Monitored loads and rates are noisy reals, not the papers' unit weights: diamond-30 with
    loads in [0.97, 1.03] fills 79 % of heterogeneous-10, and every scheduler must still pack it."""
    base, nodes = workloads.workload("diamond-30"), workloads.cluster("heterogeneous-10")
    rng = np.random.default_rng(5)
    graph = TaskGraph.build("measured", base.operator_names, base.task_operator, rng.uniform(0.97, 1.03, base.n_tasks),
                            base.src, base.dst, base.rate * rng.uniform(80, 120, base.n_edges))
    placement = make(name).schedule(graph, nodes, seed=1)
    assert placement.violations(graph, nodes) == []
