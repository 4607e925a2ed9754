"""Edge/cloud model (edge-cloud-topset.txt section 3): makespan, constraints 1-3, migrations,
on the hand-made case of ``edge_hand_cases.py``."""

from __future__ import annotations

import numpy as np
import pytest

from streamsched.edge.deployment import Deployment
from streamsched.edge.ga import PlacementProblem
from streamsched.edge.model import Dataflow, critical_path
from streamsched.edge.simulation import stabilization_time
from streamsched.edge.workloads import build_system, dataflow_pool
from streamsched.errors import InfeasibleError, InputError

from edge_hand_cases import MS, deployed, diamond, hand_system

def test_rates_propagate_through_the_dag():
    omega_in, omega_out = diamond().rates
    assert omega_in.tolist() == [100.0, 100.0, 100.0, 200.0]
    assert omega_out.tolist() == [100.0, 100.0, 100.0, 200.0]


def test_makespan_of_the_diamond_by_hand():
    # v0-v1-v3: 1 + 4 + (20 + 1000 B / 1e6 B/s = 21) + 1 = 27 ms
    # v0-v2-v3: 1 + 2 + 2 + 25 + 1 = 31 ms  <- critical path
    deployment = deployed(hand_system(), [0, 0, 1, 2])
    length, path, head, tail, _ = deployment.timing(0)
    assert length == pytest.approx(31 * MS)
    assert path == [0, 2, 3]
    assert head.tolist() == pytest.approx(np.array([1, 5, 5, 31]) * MS)
    assert tail.tolist() == pytest.approx(np.array([31, 26, 28, 1]) * MS)


def test_interference_slows_every_query_on_a_shared_resource():
    # r0 holds v0 and v1: pi(2) = 0.1 -> v0 1.1 ms, v1 4.4 ms; paths 27.5 and 31.1 ms
    deployment = deployed(hand_system(interference=(0.1, 0.0, 0.0)), [0, 0, 1, 2])
    assert deployment.effective_latency(0).tolist() == pytest.approx(np.array([1.1, 4.4, 2, 1]) * MS)
    assert deployment.makespan(0) == pytest.approx(31.1 * MS)


def test_vectorised_ga_fitness_matches_the_critical_path():
    system = build_system("small")
    rng = np.random.default_rng(3)
    for dataflow in dataflow_pool()[::7]:
        problem = PlacementProblem(system, [dataflow])
        genes = problem.random_genes(rng, 5)
        makespans, _ = problem.evaluate(genes)
        for row, expected in zip(genes, makespans):
            deployment = Deployment(system)
            deployment.deploy(0, dataflow, row, check=False)
            assert deployment.makespan(0) == pytest.approx(expected, rel=1e-12)
    hand = PlacementProblem(hand_system(interference=(0.1, 0, 0)), [diamond()])
    makespans, violation = hand.evaluate(np.array([[0, 0, 1, 2]]))
    assert makespans[0] == pytest.approx(31.1 * MS) and violation[0] == 0


def test_constraint_1_sources_on_edge_sinks_on_cloud():
    with pytest.raises(InfeasibleError, match="constraint 1.*query 0 must run on edge"):
        deployed(hand_system(), [2, 0, 1, 2])
    with pytest.raises(InfeasibleError, match="constraint 1.*query 3 must run on cloud"):
        deployed(hand_system(), [0, 0, 1, 1])
    allowed = hand_system().allowed(diamond())
    assert [a.tolist() for a in allowed] == [[0, 1], [0, 1, 2], [0, 1, 2], [2]]


def test_constraint_3_refuses_a_placement_that_drains_the_battery():
    # base 50 mA x 36000 s = 500 mAh; each of v1, v2 draws 100 e/s x 1e-4 mAh x 36000 s = 360 mAh
    system = hand_system(battery=(1000.0, 1000.0))
    deployed(system, [0, 0, 1, 2])  # 860 mAh on r0 and on r1: fine
    with pytest.raises(InfeasibleError, match="constraint 3: edge 0 needs 1220.0 mAh.*holds 1000.0 mAh"):
        deployed(system, [0, 0, 0, 2])
    deployment = Deployment(system)
    deployment.add_dataflow(0, diamond())
    for v, r in ((0, 0), (1, 0)):
        deployment.add_query(0, v, r)
    assert deployment.valid_resources(0, 2, np.array([0, 1, 2])).tolist() == [False, True, True]


def test_source_queries_draw_no_battery_and_no_rate_budget():
    # the paper leaves source queries out of constraints 2 and 3
    system = hand_system(battery=(500.0, 500.0))  # exactly the base load
    deployment = deployed(system, [0, 1, 1, 2], diamond(energy=0.0))
    assert deployment.energy_rate[0] == 0.0 and deployment.latency_sum[0] == 0.0
    assert deployment.count[0] == 1  # but it counts as a co-located query for pi(m)


def test_constraint_2_rate_with_interference():
    # one VM with pi(m) = 0.5 (m - 1); queries of 2 ms at 100 e/s in parallel after one source:
    # two: 100 x 4 ms x 1.5 = 0.6 <= 1; three: 100 x 6 ms x 2.0 = 1.2 > 1
    system = hand_system(interference=(0.0, 0.0, 0.5))
    fan = Dataflow("fan", ((), (0,), (0,), (0,)), np.tile([[2 * MS, 2 * MS]], (4, 1)), np.ones(4),
                   np.zeros(4), np.zeros(4), 100.0)
    deployment = Deployment(system)
    deployment.add_dataflow(0, fan)
    deployment.add_query(0, 0, 0)
    deployment.add_query(0, 1, 2)
    deployment.add_query(0, 2, 2)
    assert deployment.violations() == ["dataflow 'fan' query 3 is not placed"]
    assert deployment.valid_resources(0, 3, np.array([1, 2])).tolist() == [True, False]
    deployment.add_query(0, 3, 2)
    assert deployment.violations() == ["constraint 2: resource 2 serves input rate 100 e/s but supports 83.3333 e/s"]


def test_stabilization_time_of_a_migration():
    # v2 (100 e/s) moves r1 -> r2 where it takes 1 ms: q = 100 x 1 s = 100 events,
    # psi = 100 / (1000 - 100) s
    system = hand_system()
    deployment = deployed(system, [0, 0, 1, 2])
    before = deployment.snapshot()
    deployment.move(0, 2, 2)
    migrations, psi = stabilization_time(deployment, before, eta=1.0)
    assert migrations == 1
    assert psi == pytest.approx(100 / 900)


def test_undeploy_reclaims_everything():
    system = hand_system(interference=(0.1, 0.1, 0.1))
    deployment = deployed(system, [0, 0, 1, 2])
    deployment.undeploy(0)
    assert deployment.count.tolist() == [0, 0, 0]
    assert deployment.latency_sum.tolist() == [0, 0, 0] and deployment.energy_rate.tolist() == [0, 0, 0]
    assert deployment.total_makespan() == 0.0


def test_cycles_and_bad_parents_are_input_errors():
    with pytest.raises(InputError, match="cycle"):
        Dataflow("loop", ((1,), (0,)), np.ones((2, 2)), np.ones(2), np.ones(2), np.ones(2), 1.0)
    with pytest.raises(InputError, match="invalid parent 5"):
        Dataflow("bad", ((), (5,)), np.ones((2, 2)), np.ones(2), np.ones(2), np.ones(2), 1.0)


def test_critical_path_ties_pick_the_lowest_vertex():
    dataflow = Dataflow("two", ((), ()), np.ones((2, 2)), np.ones(2), np.ones(2), np.ones(2), 1.0)
    length, path, _, _ = critical_path(dataflow, [1.0, 1.0], [])
    assert (length, path) == (1.0, [0])
