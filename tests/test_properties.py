"""Property tests (hypothesis): random measured-style graphs on random unequal clusters that are
feasible by construction, judged by the independent checker; metrics invariant under task
relabelling."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import slow_params
from streamsched import metrics
from streamsched.model import Cluster, Placement, TaskGraph
from streamsched.schedulers import family, get_scheduler

import placement_checker


@st.composite
def feasible_instances(draw):
    """A graph of 2-12 tasks (loads 0.1-1.5, rates 0.1-100, all different) and 2-4 nodes whose
    capacities hold a hidden random placement with 0-30 % room to spare."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n = draw(st.integers(2, 12))
    n_nodes = draw(st.integers(2, 4))
    operators = np.sort(rng.integers(0, 3, n))
    pairs = [(i, j) for i in range(n) for j in range(n) if i != j and rng.random() < 0.3] or [(0, 1)]
    src, dst = map(list, zip(*pairs))
    load = rng.uniform(0.1, 1.5, n)
    hidden = rng.integers(0, n_nodes, n)
    held = np.bincount(hidden, weights=load, minlength=n_nodes)
    capacity = held * rng.uniform(1.0, 1.3, n_nodes) + 1e-6
    graph = TaskGraph.build(f"random-{seed}", ("a", "b", "c"), operators, load, src, dst,
                            rng.uniform(0.1, 100, len(pairs)))
    cluster = Cluster.from_types("unequal", *[(1, {"capacity": float(c), "slots": 2}) for c in capacity])
    return graph, cluster


#: Small budgets, in deterministic work (CP-SAT seconds): the same outcome on a busy machine.
FAST = {"optimal": {"work_limit": 0.5}, "i-scheduler": {"theta": 0.2}}


@pytest.mark.parametrize("name", slow_params(family("cluster"), {"optimal"}))
@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(instance=feasible_instances())
def test_every_cluster_scheduler_places_every_feasible_instance(name, instance):
    graph, cluster = instance
    scheduler = get_scheduler(name, **FAST.get(name, {}))
    placement = scheduler.schedule(graph, cluster, seed=0)
    assert placement_checker.problems(graph, cluster, placement) == [], f"{name} on {graph.name}"


@settings(max_examples=50, deadline=None, derandomize=True)
@given(instance=feasible_instances(), data=st.data())
def test_metrics_are_invariant_under_task_relabelling(instance, data):
    graph, cluster = instance
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    node_of = rng.integers(0, cluster.n_nodes, graph.n_tasks)
    worker_of = rng.integers(0, 2, graph.n_tasks)
    perm = rng.permutation(graph.n_tasks)  # new index of each old task
    inverse = np.argsort(perm)
    relabelled = TaskGraph.build(graph.name, graph.operator_names, graph.task_operator[inverse], graph.load[inverse],
                                 perm[graph.src], perm[graph.dst], graph.rate, task_ids=graph.task_ids[inverse])
    before = metrics.evaluate(graph, Placement.build(node_of, worker_of), cluster)
    after = metrics.evaluate(relabelled, Placement.build(node_of[inverse], worker_of[inverse]), cluster)
    for key, value in before.items():
        if isinstance(value, float):
            assert after[key] == pytest.approx(value), key
        else:
            assert after[key] == value, key
