"""Workloads, the control-interval simulation (shortened small setup), the CLI and the registered
edge schedulers on clusters with edge nodes (edge-cloud-topset.txt section 5)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from streamsched import workloads
from streamsched.cli import main
from streamsched.edge.ga import GASettings
from streamsched.edge.model import CLOUD, EDGE, coefficients
from streamsched.edge.simulation import read_results, simulate, simulate_many
from streamsched.edge.workloads import (MAX_FANOUT, POOL_SIZES, arrival_sequence, build_system,
                                        dataflow_pool)
from streamsched.errors import InputError
from streamsched.model import Cluster, Node
from streamsched.schedulers import get_scheduler

FAST_GA = GASettings(population=12, generations=6)


def test_coefficient_table_has_21_query_types_in_the_papers_ranges():
    table = coefficients()
    assert len(table.query_types) == 21
    assert {q.family for q in table.query_types} == {"filter", "sequence", "pattern", "sliding", "batch"}
    selectivity = [q.selectivity for q in table.query_types]
    assert min(selectivity) <= 0.01 and max(selectivity) == 458.0
    ratio = np.array([q.latency_s[EDGE] / q.latency_s[CLOUD] for q in table.query_types])
    assert np.all((ratio > 2.5) & (ratio < 4.0))  # a Pi has about 1/3 of the VM's capacity


def test_pool_of_39_dataflows_matches_the_papers_description():
    pool = dataflow_pool()
    assert len(pool) == 39 and [d.n for d in pool] == list(POOL_SIZES)
    assert min(POOL_SIZES) == 4 and max(POOL_SIZES) == 50 and np.median(POOL_SIZES) == 12
    cap = coefficients().workload["max_input_rate"]
    for d in pool:
        assert 1 <= d.is_source.sum() <= 4 and 1 <= d.is_sink.sum() <= 3
        assert max(len(c) for c in d.children) <= MAX_FANOUT
        sources = d.omega_in[d.is_source]
        assert sources.sum() == pytest.approx(100.0) and np.all((sources >= 25) & (sources <= 100))
        assert np.all(d.omega_in[~d.is_sink] <= cap + 1e-9)
    assert [d.query_type for d in dataflow_pool()] == [d.query_type for d in pool]  # seeded


def test_setup_sizes_and_network_classes():
    system = build_system("small")
    assert system.edge_resources.size == 96 and system.cloud_resources.size == 4
    ee = system.net_latency[np.ix_(system.edge_resources, system.edge_resources)]
    ec = system.net_latency[np.ix_(system.edge_resources, system.cloud_resources)]
    assert np.all(np.diag(system.net_latency) == 0) and np.allclose(system.net_latency, system.net_latency.T)
    assert ee[~np.eye(96, dtype=bool)].max() < ec.min()  # the Internet hop dominates


@pytest.mark.parametrize("u", [0.0, 0.5, 1.0])
def test_random_walk_stays_around_the_utilisation_target(u):
    events = arrival_sequence(f"rw-{u:g}", 100, 100)
    level = np.array([e.utilisation for e in events])
    settled = level[np.argmax(level >= 2.0 + u):]
    assert settled.size > 20
    assert settled.min() >= 2.0 - u - 0.5 and settled.max() <= 2.0 + u + 0.5  # +/- one dataflow
    assert {e.action for e in events[-40:]} == {"add", "remove"}


def test_poisson_adds_the_initial_dataflows_then_alternates():
    events = arrival_sequence("poisson", 100, 30, poisson_initial=16)
    assert [e.action for e in events[:16]] == ["add"] * 16
    assert [e.action for e in events[16:22]] == ["remove", "add"] * 3


def test_unknown_workload_is_an_input_error():
    with pytest.raises(InputError, match="--workload 'rw-9' is not one of"):
        simulate("small", "rw-9", "topset")


def test_shortened_small_simulation_of_every_strategy():
    results = simulate_many("small", "rw-0.5", ["topset", "topset-p", "ga-i", "ga-g", "edge-only", "cloud-only"],
                            ["none", "edge"], intervals=8, ga=FAST_GA)
    by_run = {}
    for row in results:
        by_run.setdefault((row.strategy, row.rebalance), []).append(row)
    assert set(by_run) == {("topset", "none"), ("topset", "edge"), ("topset-p", "none"), ("topset-p", "edge"),
                           ("ga-i", "none"), ("ga-i", "edge"), ("ga-g", "none"), ("edge-only", "none"),
                           ("cloud-only", "none")}
    for (strategy, rebalance), rows in by_run.items():
        assert [r.interval for r in rows] == list(range(8))
        assert all(r.action == "add" for r in rows)  # U_t is still below 2 after 8 dataflows
        assert all(np.isfinite(r.sum_makespan_s) and not r.failed for r in rows), strategy
        if rebalance == "none" and strategy != "ga-g":
            assert all(r.migrations == 0 for r in rows)
    assert sum(r.migrations for r in by_run[("ga-g", "none")]) > 0  # GA-Global re-places everything
    # the infeasible baselines are lower bounds on the TopSet makespans
    for k in range(8):
        assert by_run[("cloud-only", "none")][k].sum_makespan_s <= by_run[("topset", "none")][k].sum_makespan_s


def test_simulation_is_deterministic_for_a_seed():
    first = simulate("small", "poisson", "ga-i", intervals=4, ga=FAST_GA, seed=3)
    second = simulate("small", "poisson", "ga-i", intervals=4, ga=FAST_GA, seed=3)
    assert [r.sum_makespan_s for r in first] == [r.sum_makespan_s for r in second]


def test_cli_edge_simulate_writes_results_and_figures(tmp_path):
    out = tmp_path / "run"
    code = main(["edge", "simulate", "--setup", "small", "--workload", "rw-0.5", "--strategy", "topset-p",
                 "--rebalance", "none,edge", "--intervals", "5", "--out", str(out)])
    assert code == 0
    rows = list(csv.DictReader((out / "intervals.csv").open()))
    assert len(rows) == 10 and {r["rebalance"] for r in rows} == {"none", "edge"}
    assert {"sum_makespan_s", "planning_time_s", "migrations", "stabilization_s"} <= set(rows[0])
    assert [r.sum_makespan_s for r in read_results(out / "intervals.csv")] == [float(r["sum_makespan_s"]) for r in rows]
    summary = json.loads((out / "summary.json").read_text())
    assert {s["rebalance"] for s in summary} == {"none", "edge"}
    for k in (3, 4, 5, 6, 7):
        assert list(out.glob(f"fig{k}_*.png"))


def test_cli_edge_simulate_bad_options_exit_2(tmp_path):
    assert main(["edge", "simulate", "--setup", "huge", "--out", str(tmp_path)]) == 2
    assert main(["edge", "simulate", "--strategy", "ga-g", "--rebalance", "edge", "--out", str(tmp_path)]) == 2


def edge_cloud_cluster() -> Cluster:
    edges = [Node(f"pi{k}", capacity=2, kind="edge", rack="field") for k in range(4)]
    clouds = [Node(f"vm{k}", capacity=6, kind="cloud", rack="dc") for k in range(2)]
    return Cluster("edge-cloud-6", tuple(edges + clouds))


@pytest.mark.parametrize("name", ["topset", "topset-p", "ga-incremental", "ga-global", "edge-only", "cloud-only"])
def test_schedulers_put_sources_on_edge_and_sinks_on_cloud(name):
    graph = workloads.workload("diamond-12")  # source (4 tasks) -> 2 middles (2 each) -> sink (4)
    cluster = edge_cloud_cluster()
    placement = get_scheduler(name).schedule(graph, cluster, seed=2)
    assert placement.is_valid(graph, cluster)
    kinds = np.array([cluster.nodes[k].kind for k in placement.node_of])
    assert set(kinds[graph.operator_tasks("source")]) == {"edge"}
    assert set(kinds[graph.operator_tasks("sink")]) == {"cloud"}
    middle = np.r_[graph.operator_tasks("mid0"), graph.operator_tasks("mid1")]
    if name == "edge-only":
        assert set(kinds[middle]) == {"edge"}
    if name == "cloud-only":
        assert set(kinds[middle]) == {"cloud"}
    assert placement.metadata["makespan"] > 0


def test_a_cluster_without_cloud_nodes_lets_sinks_run_on_edge():
    graph = workloads.workload("linear-10")
    cluster = Cluster("field", tuple(Node(f"pi{k}", capacity=4, kind="edge") for k in range(3)))
    placement = get_scheduler("topset").schedule(graph, cluster)
    assert placement.is_valid(graph, cluster)
    # load 1 per task, capacity 4: the chain fills pi0, then pi1, then pi2 (co-location is free)
    assert np.bincount(placement.node_of, minlength=3).tolist() == [4, 4, 2]
