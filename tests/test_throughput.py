"""The throughput model (docs/model.md, T1-T5) on hand-computed cases, and ``optimal -p
objective=throughput`` against brute force over every placement of tiny graphs."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from streamsched.errors import InputError
from streamsched.model.cluster import Cluster, Node
from streamsched.model.colocation import CoLocationRule
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.model.throughput import predict_throughput, source_rate
from streamsched.schedulers import get_scheduler
from streamsched.solvers.throughput import TIE_TOLERANCE, solve_throughput

MB = 1e6


def lab_graph() -> TaskGraph:
    """Two sources S0, S1 and two receivers K0, K1 (tasks 0-3), 1,000-byte records: S0 sends
    2,300 and 2,200 records/s to K0 and K1, S1 2,300 and 1,000; every task 0.6 cores."""
    rates = np.array([2300.0, 2200.0, 2300.0, 1000.0])
    return TaskGraph.build("lab", ["S", "K"], [0, 0, 1, 1], [0.6] * 4, [0, 0, 1, 1], [2, 3, 2, 3], rates,
                           bytes_rate=rates * 1000.0, load_unit="cores")


def lab_cluster(**extra) -> Cluster:
    """Two TaskManagers of 2 cores and 2 task slots behind 20 Mbit/s (2.5 MB/s) links each way."""
    return Cluster("lab", tuple(Node(f"tm{i}", 2.0, slots=1, cores=2, task_slots=2, net_in=2.5 * MB,
                                     net_out=2.5 * MB, **extra) for i in (1, 2)), capacity_unit="cores")


def test_network_lab_least_bytes_plan_is_slower_than_the_even_split():
    graph, cluster = lab_graph(), lab_cluster()
    assert source_rate(graph) == 7800.0
    assert graph.bytes_per_record.tolist() == [1000.0] * 4
    # least remote bytes under the CPU capacity (3 tasks on a node at most): K1 alone, every
    # byte it receives (2.2 + 1.0 MB/s) into tm2 -> U = 3.2 / 2.5 = 1.28
    least = predict_throughput(graph, cluster, np.array([0, 0, 0, 1]))
    assert least.remote_bytes == pytest.approx(3.2 * MB)
    assert least.peak == pytest.approx(1.28)
    assert least.throughput == pytest.approx(7800 / 1.28)  # 6,093.75 records/s
    assert least.overloaded and least.bottleneck in ("link out of tm1", "link in of tm2")
    # the even split: 2.2 MB/s tm1 -> tm2, 2.3 MB/s back -> U = 2.3 / 2.5 = 0.92
    even = predict_throughput(graph, cluster, np.array([0, 1, 0, 1]))
    assert even.remote_bytes == pytest.approx(4.5 * MB)
    assert even.peak == pytest.approx(0.92)
    assert even.throughput == pytest.approx(7800 / 0.92)  # 8,478 records/s
    assert even.bottleneck == "link in of tm1" and not even.overloaded
    assert even.throughput > least.throughput
    assert even.utilisation[:, 0].tolist() == pytest.approx([0.6, 0.6])  # 1.2 cores of 2
    # everything on one node: no bytes, CPU 2.4 of 2 cores
    alone = predict_throughput(graph, cluster, np.array([0, 0, 0, 0]))
    assert (alone.remote_bytes, alone.peak, alone.bottleneck) == (0.0, pytest.approx(1.2), "cpu of tm1")
    assert alone.throughput == pytest.approx(6500.0)


def test_network_stack_cpu_counts_at_both_ends():
    graph, cluster = lab_graph(), lab_cluster()
    # even split: 2,200 remote records/s leave tm1 and 2,300 enter it; 1e-4 cores each at both ends
    p = predict_throughput(graph, cluster, np.array([0, 1, 0, 1]), net_cpu_per_record=1e-4)
    assert p.utilisation[:, 0].tolist() == pytest.approx([(1.2 + 0.45) / 2] * 2)
    heavy = predict_throughput(graph, cluster, np.array([0, 1, 0, 1]), net_cpu_per_record=3e-4)
    assert heavy.bottleneck == "cpu of tm1" and heavy.peak == pytest.approx((1.2 + 1.35) / 2)
    with pytest.raises(InputError, match="net_cpu_per_record"):
        predict_throughput(graph, cluster, np.array([0, 1, 0, 1]), net_cpu_per_record=-1)


def test_unknown_links_never_saturate_and_overload_still_gets_a_number():
    graph = lab_graph()
    cpu_only = Cluster("c", (Node("a", 1.0, cores=1), Node("b", 2.0, cores=2)), capacity_unit="cores")
    p = predict_throughput(graph, cpu_only, np.array([0, 0, 0, 1]))
    assert p.peak == pytest.approx(1.8) and p.bottleneck == "cpu of a"  # 1.8 cores on a 1-core node
    assert p.throughput == pytest.approx(7800 / 1.8) and p.overloaded


def test_net_fields_validated_and_kept():
    for field, value in (("net_in", 0), ("net_out", -5), ("net_in", "fast")):
        with pytest.raises(InputError, match=f"nodes\\[0\\].{field}: "):
            Cluster.from_dict({"nodes": [{"name": "a", "capacity": 1, field: value}]}, "c.yaml")
    cluster = Cluster.from_dict({"nodes": [{"name": "a", "capacity": 1, "net_in": 2.5e6, "net_out": 1e6},
                                           {"name": "b", "capacity": 1}]})
    assert not cluster.has_links
    again = Cluster.from_dict(cluster.to_dict())
    assert (again.nodes[0].net_in, again.nodes[0].net_out, again.nodes[1].net_in) == (2.5e6, 1e6, None)
    assert again.fingerprint() == cluster.fingerprint()
    slower = Cluster.from_dict({"nodes": [{"name": "a", "capacity": 1, "net_in": 2e6, "net_out": 1e6},
                                          {"name": "b", "capacity": 1}]})
    assert slower.fingerprint() != cluster.fingerprint()


# ------------------------------------------------------------------ exact solver against brute force
def random_instance(rng: np.random.Generator, groups: bool = False) -> tuple[TaskGraph, Cluster, float]:
    parallelism = rng.integers(1, 4, size=rng.integers(2, 4))
    while parallelism.sum() > 6:
        parallelism = parallelism[:-1]
    ops = np.repeat(np.arange(parallelism.size), parallelism)
    n = ops.size
    src, dst = [], []
    for a in range(n):
        for b in range(n):
            if ops[b] == ops[a] + 1 or (ops[b] > ops[a] and rng.random() < 0.2):
                src.append(a)
                dst.append(b)
    rate = rng.uniform(100, 2000, size=len(src)).round()
    record_bytes = rng.choice([100.0, 500.0, 1000.0], size=len(src))
    graph = TaskGraph.build("random", [f"o{k}" for k in range(parallelism.size)], ops, rng.uniform(0.05, 0.8, n).round(2),
                            src, dst, rate, bytes_rate=rate * record_bytes, load_unit="cores",
                            slot_group=[f"g{k % 2}" for k in range(parallelism.size)] if groups else ())
    k = int(rng.integers(2, 4))
    nodes = []
    for i in range(k):
        equal = i > 0 and rng.random() < 0.4  # some identical nodes (symmetry broken)
        nodes.append(Node(f"n{i}", nodes[-1].capacity if equal else float(rng.choice([1.0, 2.0, 3.0])), slots=1,
                          task_slots=nodes[-1].task_slots if equal else int(rng.integers(2, 4)),
                          net_in=nodes[-1].net_in if equal else float(rng.choice([0.5, 1.0, 2.0])) * MB,
                          net_out=nodes[-1].net_out if equal else float(rng.choice([0.5, 1.0, 3.0])) * MB))
    return graph, Cluster("random", tuple(nodes), capacity_unit="cores"), float(rng.choice([0.0, 0.0, 2e-4]))


def every_placement(graph: TaskGraph, cluster: Cluster, net_cpu: float):
    """(node_of, U, remote bytes) of every placement that keeps the slot rule."""
    rule = CoLocationRule.of(graph, cluster)
    for plan in itertools.product(range(cluster.n_nodes), repeat=graph.n_tasks):
        node_of = np.array(plan)
        if rule is not None and rule.violations(node_of, limit=1):
            continue
        p = predict_throughput(graph, cluster, node_of, net_cpu)
        yield node_of, p.peak, p.remote_bytes


@pytest.mark.parametrize("seed", range(24))
def test_objective_throughput_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    graph, cluster, net_cpu = random_instance(rng, groups=seed % 3 == 2)
    plans = list(every_placement(graph, cluster, net_cpu))
    result = solve_throughput(graph, cluster, net_cpu_per_record=net_cpu, work_limit=30)
    if not plans:  # the slot rule leaves no placement
        assert (result.status, result.node_of) == ("infeasible", None)
        return
    best = min(u for _, u, _ in plans)
    tied = [(node_of, b) for node_of, u, b in plans if u <= best * (1 + TIE_TOLERANCE)]
    assert result.status == "optimal"
    assert result.peak == pytest.approx(best, rel=1e-9)
    assert result.bound <= best * (1 + 1e-12)
    assert result.bound == pytest.approx(best, rel=1e-6)
    assert result.remote_bytes == pytest.approx(min(b for _, b in tied), rel=1e-6)
    rule = CoLocationRule.of(graph, cluster)
    assert not rule.violations(result.node_of)
    # replan from a random slot-feasible plan: the fewest moves among plans of the best U
    current = plans[int(rng.integers(len(plans)))][0]
    moved = solve_throughput(graph, cluster, net_cpu_per_record=net_cpu, current=current, work_limit=30)
    assert moved.peak == pytest.approx(best, rel=1e-9)
    assert moved.moved == min(int(np.sum(node_of != current)) for node_of, _ in tied)


def test_optimal_scheduler_throughput_metadata_and_identical_nodes_swapped_move_nothing():
    graph, cluster = lab_graph(), lab_cluster()
    placement = get_scheduler("optimal", objective="throughput").schedule(graph, cluster)
    meta = placement.metadata
    assert (meta["status"], meta["objective"], meta["gap"] <= 2 * TIE_TOLERANCE) == ("optimal", "throughput", True)
    assert meta["peak_utilisation"] == pytest.approx(0.92) and meta["bound"] <= 0.92
    assert meta["predicted_throughput"] == pytest.approx(7800 / 0.92)
    # equal U (0.92) for the even split (4.5 MB/s) and {S0, K1} | {S1, K0} (3.3 MB/s): fewer bytes
    assert meta["remote_bytes"] == pytest.approx(3.3 * MB)
    # the running even split with the two identical TaskManagers swapped: already optimal, nothing moves
    running = Placement.build([1, 0, 1, 0])
    again = get_scheduler("optimal", objective="throughput").replan(graph, cluster, running)
    assert again.metadata["moved"] == 0 and again.node_of.tolist() == [1, 0, 1, 0]


# ------------------------------------------------------------------ ranking and verdict
def test_compare_ranks_by_predicted_throughput_where_links_are_known():
    from streamsched.evaluation.comparison import SORT_KEY, THROUGHPUT_SORT_KEY, rank_outcomes, run_schedulers
    from streamsched.evaluation.verdict import verdict

    graph, cluster = lab_graph(), lab_cluster()
    outcomes = rank_outcomes(run_schedulers(graph, cluster, ["even", "i-scheduler", "optimal"]))
    rows = [o.row for o in outcomes]
    by_name = {r["scheduler"]: r for r in rows}
    # i-scheduler cuts the fewest bytes (3,200 records/s, K1 alone) but sends them all into one node
    assert by_name["i-scheduler"]["inter_node_traffic"] < by_name["optimal"]["inter_node_traffic"]
    assert by_name["i-scheduler"]["predicted_throughput"] == pytest.approx(7800 / 1.28)
    assert by_name["optimal"]["predicted_throughput"] == pytest.approx(7800 / 0.92)
    assert by_name["optimal"]["objective"] == "throughput"  # optimal maximises throughput here by default
    assert [r["scheduler"] for r in rows][-1] == "i-scheduler"
    assert rows[0]["predicted_throughput"] >= rows[1]["predicted_throughput"] >= rows[2]["predicted_throughput"]
    assert all("predicted_bottleneck" in r for r in rows)
    decision = verdict(rows)
    assert (decision["ranked_by"], decision["sort_key"], decision["model"]) == (
        "predicted throughput", THROUGHPUT_SORT_KEY, "link-capacity")
    assert decision["recommended"] == "optimal" and "records/s" in decision["text"]
    # the same graph on a cluster without link capacities: by traffic, as before
    plain = Cluster("plain", tuple(Node(n.name, n.capacity, slots=1, cores=2, task_slots=2) for n in cluster.nodes),
                    capacity_unit="cores")
    rows = [o.row for o in rank_outcomes(run_schedulers(graph, plain, ["even", "i-scheduler"]))]
    assert rows[0]["scheduler"] == "i-scheduler" and not any("predicted_throughput" in r for r in rows)
    assert verdict(rows)["sort_key"] == SORT_KEY and verdict(rows)["ranked_by"] == "inter-node traffic"


def test_an_overloaded_running_placement_is_predicted_ranked_and_the_baseline():
    from streamsched.evaluation.comparison import placement_row, rank
    from streamsched.evaluation.verdict import verdict

    graph, cluster = lab_graph(), lab_cluster()
    running = Placement.build([0, 0, 0, 0], metadata={"engine": "flink", "current": True})  # 2.4 cores on 2
    row = placement_row("current", graph, cluster, running)
    assert row["valid"] is False and row["overloaded"] is True
    assert row["predicted_throughput"] == pytest.approx(6500.0)  # what the overload allows: 7,800 / 1.2
    assert row["predicted_bottleneck"] == "cpu of tm1"
    better = placement_row("optimal", graph, cluster, Placement.build([0, 1, 0, 1]))
    rows = rank([row, better])
    assert [r["rank"] for r in rows] == [1, 2] and rows[1]["scheduler"] == "current"
    decision = verdict(rows)
    assert decision["baseline"] == "current"
    assert decision["throughput_tps"]["current"] == pytest.approx(6500.0)
    assert decision["throughput_tps"]["change_pct"] == pytest.approx(100 * (7800 / 0.92 / 6500 - 1))
    assert decision["text"].startswith("verdict: use optimal: predicted throughput 8,478 records/s")  # +30.4 % > 25 %
