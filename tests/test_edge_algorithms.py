"""TopSet, TopSet/P, the GA and rebalancing (edge-cloud-topset.txt section 4) on hand-made
cases (the system and diamond dataflow of test_edge_model.py) and on the small setup."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from streamsched.edge.deployment import Deployment
from streamsched.edge.ga import GASettings, PlacementProblem, place_ga_global, place_ga_incremental, run_ga
from streamsched.edge.model import CLOUD, EDGE, Dataflow, EdgeSystem
from streamsched.edge.rebalance import edge_rebalance, rebalance, vertex_rebalance
from streamsched.edge.topset import place_topset, topological_sets, visiting_order
from streamsched.edge.workloads import arrival_sequence, build_system, dataflow_pool
from streamsched.errors import InfeasibleError

from edge_hand_cases import MS, deployed, diamond, hand_system


def six_queries() -> Dataflow:
    """Sources 0 (latency 1) and 1 (5); 2 <- 0 (1); 3 <- 0, 1 (3); 4 <- 2 (2); sink 5 <- 3, 4 (1)."""
    lat = np.array([1, 5, 1, 3, 2, 1], dtype=float)[:, None] * np.array([[1.0, 0.5]]) * MS
    return Dataflow("six", ((), (), (0,), (0, 1), (2,), (3, 4)), lat, np.ones(6), np.ones(6), np.zeros(6), 100.0)


def test_topological_sets_and_visiting_order():
    dataflow = six_queries()
    assert topological_sets(dataflow) == [[0, 1], [2, 3], [4], [5]]
    # within a set, decreasing latency: 1 (5 ms) before 0 (1 ms), 3 (3 ms) before 2 (1 ms)
    assert visiting_order(dataflow) == [1, 0, 3, 2, 4, 5]


def test_topset_places_each_query_on_the_shortest_critical_path():
    # v0: r0 and r1 tie at 1 ms -> r0; v1: r0 1+4 = 5, r1 1+2+4 = 7, r2 1+21+2 = 24 -> r0;
    # v2: r0 3, r1 5, r2 23 -> r0; v3 (sink): r2 at max(5, 3) + 21 + 1 = 27 ms
    deployment = Deployment(hand_system())
    mapping = place_topset(deployment, 0, diamond())
    assert mapping.tolist() == [0, 0, 0, 2]
    assert deployment.makespan(0) == pytest.approx(27 * MS)


def test_topset_skips_a_resource_whose_battery_would_drain():
    # r0 can power v1 but not v1 and v2 (860 vs 1220 mAh of 1000): v2 goes to r1 (1+2+2 = 5 ms)
    deployment = Deployment(hand_system(battery=(1000.0, 1000.0)))
    assert place_topset(deployment, 0, diamond()).tolist() == [0, 0, 1, 2]
    assert deployment.makespan(0) == pytest.approx(31 * MS)
    assert not deployment.violations()


def test_topset_p_avoids_slowing_the_dataflows_own_queries():
    # pi on r0 = 0.6 (m - 1), r0-r1 2.5 ms. v1 on r0: 1 + 4 x 1.6 = 7.4 ms, on r1: 1 + 2.5 + 4 = 7.5 ms.
    # TopSet takes r0; TopSet/P adds v0's slow-down on r0, 1 ms x 0.6 = 0.6 -> 8.0 > 7.5: r1.
    system = hand_system(interference=(0.6, 0.0, 0.0), edge_edge_ms=2.5)
    assert place_topset(Deployment(system), 0, diamond())[1] == 0
    assert place_topset(Deployment(system), 0, diamond(), penalty=True)[1] == 1


def test_topset_fails_cleanly_and_rolls_back():
    # the sink v3 takes 200 e/s; at 10 ms per event on the VM it would need 2 s per second
    base = diamond()
    latency = base.latency.copy()
    latency[3] = [10 * MS, 10 * MS]
    slow_sink = Dataflow("slow-sink", base.parents, latency, base.selectivity, base.event_bytes, base.energy, 100.0)
    deployment = Deployment(hand_system())
    with pytest.raises(InfeasibleError, match="query 3 .*fits on none of its 1 allowed resources"):
        place_topset(deployment, 0, slow_sink)
    assert deployment.dataflows == {} and deployment.count.tolist() == [0, 0, 0]
    assert deployment.latency_sum.tolist() == [0, 0, 0]


def brute_force(system, dataflow) -> float:
    best = np.inf
    for mapping in itertools.product(*[a.tolist() for a in system.allowed(dataflow)]):
        deployment = Deployment(system)
        deployment.deploy(0, dataflow, mapping, check=False)
        if not deployment.violations():
            best = min(best, deployment.makespan(0))
    return best


def test_ga_finds_the_brute_force_optimum_and_is_seeded():
    system = hand_system(interference=(0.1, 0.1, 0.1), battery=(1000.0, 1000.0))
    problem = PlacementProblem(system, [diamond()])
    settings = GASettings(population=32, generations=40)
    genes, fitness, _ = run_ga(problem, settings, seed=5)
    assert fitness == pytest.approx(brute_force(system, diamond()))
    again, _, _ = run_ga(problem, settings, seed=5)
    assert genes.tolist() == again.tolist()


def test_ga_penalises_invalid_chromosomes_and_reports_failure():
    system = hand_system(battery=(400.0, 400.0))
    problem = PlacementProblem(system, [diamond(energy=1.0)])
    _, violation = problem.evaluate(np.array([[0, 0, 0, 2], [0, 2, 2, 2]]))
    assert violation[0] > 0 and violation[1] > 0  # the edge under v0 is drained by its base load
    with pytest.raises(InfeasibleError, match="GA: no valid placement"):
        run_ga(problem, GASettings(population=8, generations=4), seed=0)


def test_ga_incremental_and_global_give_valid_deployments():
    system = build_system("small")
    pool = dataflow_pool()
    settings = GASettings(population=24, generations=15)
    deployment = Deployment(system)
    for dag_id, k in enumerate((0, 17, 30)):
        place_ga_incremental(deployment, dag_id, pool[k], settings, seed=dag_id)
    assert not deployment.violations()
    fresh = place_ga_global(system, dict(deployment.dataflows), settings, seed=1)
    assert not fresh.violations() and set(fresh.dataflows) == {0, 1, 2}


def test_edge_rebalance_pulls_the_costliest_stream_together():
    # [0, 0, 1, 2]: critical path v0-v2-v3 = 31 ms; its costliest stream is v2 -> v3 (25 ms).
    # v3 is a sink (cloud only), so v2 moves to r2: v0-v2-v3 = 1 + 21 + 1 + 0 + 1 = 24, makespan 27
    deployment = deployed(hand_system(), [0, 0, 1, 2])
    assert edge_rebalance(deployment) == 1
    assert deployment.mapping[0].tolist() == [0, 0, 2, 2]
    assert deployment.makespan(0) == pytest.approx(27 * MS)


def test_vertex_rebalance_moves_the_slowest_critical_query():
    # critical path v0 (1 ms), v2 (2 ms), v3 (1 ms): v2 moves to the resource with the shortest
    # path through it: r0 gives 1+0+2+21+1 = 25, r2 gives 1+21+1+0+1 = 24 -> r2; makespan 27
    deployment = deployed(hand_system(), [0, 0, 1, 2])
    assert vertex_rebalance(deployment) == 1
    assert deployment.mapping[0].tolist() == [0, 0, 2, 2]
    assert deployment.makespan(0) == pytest.approx(27 * MS)


def test_rebalance_never_worsens_the_objective_and_keeps_constraints():
    system = build_system("small")
    pool = dataflow_pool()
    deployment = Deployment(system)
    for event in arrival_sequence("rw-1", system.n, 40):
        if event.action == "add":
            place_topset(deployment, event.instance, pool[event.pool_index])
        else:
            deployment.undeploy(event.instance)
        before = deployment.total_makespan()
        rebalance(deployment, "both")
        deployment._timing.clear()  # recompute from scratch: the cache must agree
        assert deployment.total_makespan() <= before + 1e-12
    assert not deployment.violations()


def test_ga_stops_when_the_last_half_of_the_generations_brought_nothing():
    # one edge, one VM, source -> sink: the only valid chromosome is found in generation 1,
    # so the run ends at generation 1 + 20 / 2 = 11 instead of 20
    system = EdgeSystem(
        name="pair", kind=np.array([EDGE, CLOUD]), latency_class=np.array([EDGE, CLOUD]), speed=np.ones(2),
        interference=np.zeros(2), battery_mah=np.array([1e9, np.inf]), base_load_ma=np.zeros(2),
        recharge_s=np.zeros(2), net_latency=np.array([[0, 0.02], [0.02, 0]]), net_bandwidth=np.full((2, 2), np.inf))
    pair = Dataflow("pair", ((), (0,)), np.full((2, 2), MS), np.ones(2), np.ones(2), np.zeros(2), 10.0)
    genes, fitness, generations = run_ga(PlacementProblem(system, [pair]), GASettings(population=8, generations=20), 0)
    assert genes.tolist() == [0, 1] and fitness == pytest.approx(0.022) and generations == 11
