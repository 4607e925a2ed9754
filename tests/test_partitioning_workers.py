"""Second level of scheduling (i-scheduler.txt section 4.4, Algorithm 1 lines 55-62)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from streamsched.errors import InfeasibleError, InputError
from streamsched.metrics import inter_worker_traffic
from streamsched.model.cluster import Cluster
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.partitioning import assign_workers
from streamsched.partitioning.workers import workers_needed
from streamsched.workloads import cluster, workload


def graph_of(n: int, edges: list[tuple[int, int, float]], name: str = "g") -> TaskGraph:
    src, dst, rate = zip(*edges) if edges else ((), (), ())
    return TaskGraph.build(name, ["op"], np.zeros(n), np.ones(n), src, dst, rate)


def one_node(slots: int, capacity: float = 100.0) -> Cluster:
    return Cluster.from_types("one", (1, {"capacity": capacity, "slots": slots}))


def two_cliques(size: int = 5, heavy: float = 10.0, light: float = 1.0) -> TaskGraph:
    """Two cliques of ``size`` tasks (edges ``heavy``) joined by one edge of rate ``light``."""
    edges = []
    for base in (0, size):
        edges += [(base + i, base + j, heavy) for i, j in itertools.combinations(range(size), 2)]
    edges.append((size - 1, size, light))
    return graph_of(2 * size, edges)


def test_workers_needed_is_ceil_t_over_T_capped_by_slots():
    assert workers_needed(12, slots=4, max_tasks_per_worker=5) == 3
    assert workers_needed(10, slots=4, max_tasks_per_worker=5) == 2
    assert workers_needed(12, slots=2, max_tasks_per_worker=5) == 2
    assert workers_needed(1, slots=4, max_tasks_per_worker=5) == 1


def test_two_cliques_get_one_worker_each():
    g = two_cliques()
    worker_of = assign_workers(g, one_node(slots=4), np.zeros(10, np.int64))
    # t = 10, T = 5 -> w = 2 workers, each clique whole: only the light edge crosses
    assert sorted(np.bincount(worker_of).tolist()) == [5, 5]
    assert len(set(worker_of[:5].tolist())) == 1 and len(set(worker_of[5:].tolist())) == 1
    placement = Placement.build(np.zeros(10), worker_of)
    assert inter_worker_traffic(g, placement) == 1.0


def test_matches_brute_force_on_two_triangles():
    # two triangles (rates 3) joined by a path of rate 2; T = 3 -> 2 workers of 3 tasks
    g = graph_of(6, [(0, 1, 3), (1, 2, 3), (0, 2, 3), (3, 4, 3), (4, 5, 3), (3, 5, 3), (2, 3, 2)])
    worker_of = assign_workers(g, one_node(slots=4), np.zeros(6, np.int64), max_tasks_per_worker=3)
    got = inter_worker_traffic(g, Placement.build(np.zeros(6), worker_of))
    best = min(
        inter_worker_traffic(g, Placement.build(np.zeros(6), [1 if t in half else 0 for t in range(6)]))
        for half in itertools.combinations(range(6), 3)
    )
    assert got == best == 2.0


def test_at_most_T_tasks_per_worker_and_workers_within_slots():
    g = workload("star-32")
    c = Cluster.from_types("c", (1, {"capacity": 16.0, "slots": 4}), (1, {"capacity": 16.0, "slots": 2}))
    node_of = np.array([0] * 16 + [1] * 16)
    worker_of = assign_workers(g, c, node_of, max_tasks_per_worker=5)
    # node 0: 16 tasks -> ceil(16/5) = 4 workers (<= 4 slots), each <= 5 tasks
    per_worker = np.bincount(worker_of[node_of == 0])
    assert per_worker.size == 4 and per_worker.max() <= 5 and per_worker.sum() == 16
    # node 1: 16 tasks but only 2 slots -> 2 workers of at most ceil(16/2) = 8 tasks
    per_worker = np.bincount(worker_of[node_of == 1])
    assert per_worker.size == 2 and per_worker.max() <= 8
    assert Placement.build(node_of, worker_of).violations(g, c) == []


def test_workers_numbered_from_zero_in_order_of_lowest_task():
    g = workload("linear-20")
    worker_of = assign_workers(g, one_node(slots=4), np.zeros(20, np.int64), max_tasks_per_worker=5)
    firsts = [int(np.flatnonzero(worker_of == w)[0]) for w in range(int(worker_of.max()) + 1)]
    assert firsts == sorted(firsts) and worker_of[0] == 0
    assert set(worker_of.tolist()) == {0, 1, 2, 3}


def test_same_seed_same_workers_and_inputs_untouched():
    g = workload("diamond-32")
    c = cluster("high-low-2-0")
    node_of = np.arange(32) % 2
    before = node_of.copy()
    a = assign_workers(g, c, node_of, seed=7)
    b = assign_workers(g, c, node_of, seed=7)
    assert np.array_equal(a, b)
    assert np.array_equal(node_of, before)


def test_node_with_tasks_but_no_slots_is_infeasible():
    c = Cluster.from_types("c", (1, {"capacity": 10.0, "slots": 0}), (1, {"capacity": 10.0, "slots": 2}))
    g = workload("linear-10")
    with pytest.raises(InfeasibleError, match="no worker slots"):
        assign_workers(g, c, np.zeros(10, np.int64))
    # a slotless node without tasks is fine
    assert assign_workers(g, c, np.ones(10, np.int64)).max() <= 1


def test_bad_input_names_the_problem():
    g = workload("linear-10")
    c = cluster("homogeneous-10")
    with pytest.raises(InputError, match="node_of has shape"):
        assign_workers(g, c, np.zeros(9, np.int64))
    with pytest.raises(InputError, match="unknown node index 10"):
        assign_workers(g, c, np.full(10, 10))
    with pytest.raises(InputError, match="max_tasks_per_worker"):
        assign_workers(g, c, np.zeros(10, np.int64), max_tasks_per_worker=0)


def test_kahip_backend_also_separates_the_cliques():
    pytest.importorskip("kahip")
    g = two_cliques()
    worker_of = assign_workers(g, one_node(slots=4), np.zeros(10, np.int64), backend="kahip")
    assert inter_worker_traffic(g, Placement.build(np.zeros(10), worker_of)) == 1.0


def test_large_node_few_workers_recursive_bisection_within_the_cap():
    """A node of 600 tasks (> AUTO_BOTH_LIMIT) into 4 workers: METIS recursive bisection (its
    manual's advice for up to 8 parts), each worker at most ceil(600 / 4) = 150 tasks."""
    rng = np.random.default_rng(0)
    n = 600
    src = np.repeat(np.arange(n), 4)
    dst = (src + rng.integers(1, 30, src.size)) % n
    g = TaskGraph.build("g", ["op"], np.zeros(n), np.ones(n), src, dst, rng.uniform(1, 10, src.size))
    node_of = np.zeros(n, np.int64)
    worker_of = assign_workers(g, one_node(slots=4, capacity=1000.0), node_of)
    assert np.bincount(worker_of).tolist() and np.bincount(worker_of).max() <= 150
    assert np.array_equal(worker_of, assign_workers(g, one_node(slots=4, capacity=1000.0), node_of))
    from streamsched.partitioning.workers import _method
    assert _method(600, 4) == "recursive" and _method(400, 4) == "auto" and _method(600, 9) == "auto"
