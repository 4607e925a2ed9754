"""Built-in workloads: the shapes of i-scheduler.txt Fig. 3 / Table 3 and the applications."""

import numpy as np
import pytest

from streamsched import workloads
from streamsched.errors import InputError
from streamsched.model import TaskGraph


@pytest.mark.parametrize("n", workloads.MICRO_SIZES)
def test_micro_benchmark_shapes(n):
    """Fig. 3: linear 2 tasks per operator; diamond source/sink 4, middle 2; star centre 4,
    sources and sinks 2 added alternately. Rate 1 per task pair, load 1 per task."""
    linear, diamond, star = (workloads.workload(f"{s}-{n}") for s in ("linear", "diamond", "star"))
    for g in (linear, diamond, star):
        assert g.n_tasks == n and set(g.load.tolist()) == {1.0} and set(g.rate.tolist()) == {1.0}
    assert linear.n_edges == 4 * (n // 2 - 1)
    assert diamond.n_edges == 2 * 4 * 2 * ((n - 8) // 2)
    outer = (n - 4) // 2
    assert star.n_edges == outer * 2 * 4
    n_sources = sum(1 for name in star.operator_names if name.startswith("source"))
    assert n_sources - (outer - n_sources) in (0, 1)


def test_application_shapes():
    wc = workloads.workload("wordcount")  # storm-starter: 5 -> 8 shuffle -> 12 fields
    assert [wc.operator_tasks(o).size for o in ("spout", "split", "count")] == [5, 8, 12]
    taxi = workloads.workload("taxi-routes")  # DEBS 2015: 16/16/8/4/1, last stream global
    assert [taxi.operator_tasks(o).size for o in taxi.operator_names] == [16, 16, 8, 4, 1]
    top = taxi.operator_tasks("top_routes")[0]
    assert np.sum(taxi.dst == top) == 4  # every route counter sends to the single sink
    home = workloads.workload("smart-home")
    assert home.n_tasks == 40


def test_parallel_chains_are_disjoint():
    """fischer-metis-scheduler.txt Fig. 3: P chains of D + 1 tasks that never exchange tuples."""
    g = workloads.workload("parallel")
    assert g.n_tasks == 80 and g.n_edges == 70
    assert np.all(g.task_rank[g.src] == g.task_rank[g.dst])
    payload = workloads.workload("payload")
    assert payload.bytes_rate.sum() / payload.rate.sum() == 3072


def test_random_dag_is_seeded_and_bounded():
    a, b = workloads.topology("random-40-s3"), workloads.topology("random-40-s3")
    assert a == b and a != workloads.topology("random-40-s4")
    fanout = {}
    for s in a.streams:
        fanout[s.src] = fanout.get(s.src, 0) + 1
    assert max(fanout.values()) <= 5
    g = TaskGraph.from_topology(a)
    assert g.n_tasks == a.n_tasks and np.all(g.rate >= 0)


@pytest.mark.parametrize("name", ["linear-11", "linear-34", "nope", "high-low-0-0"])
def test_unknown_names(name):
    with pytest.raises(InputError, match="unknown"):
        workloads.workload(name) if not name.startswith("high") else workloads.cluster(name)
