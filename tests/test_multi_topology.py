"""Several topologies on one cluster (``schedule_many``, ``streamsched schedule -w a -w b``) and
Storm's Isolation scheduler."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import slow_params
from streamsched import workloads
from streamsched.cli import main
from streamsched.errors import InfeasibleError, ParameterError
from streamsched.model import Cluster
from streamsched.schedulers import available, get_scheduler, scheduler_class
from streamsched.schedulers.base import ResidualCluster, schedule_many
from streamsched.schedulers.isolation import parse_machines

FAST = {"time_limit": 1.0, "theta": 1.0}


def make(name: str, **extra):
    declared = {p.name for p in scheduler_class(name).params}
    return get_scheduler(name, **{k: v for k, v in FAST.items() if k in declared}, **extra)


@pytest.mark.parametrize("name", slow_params(available(), {"caps"}))
def test_every_scheduler_shares_a_cluster_without_overfilling(name):
    graphs = [workloads.workload("linear-12"), workloads.workload("star-14"), workloads.workload("diamond-10")]
    cluster = workloads.cluster("heterogeneous-10")
    placements = schedule_many(make(name), graphs, cluster, seed=3)
    total = sum(np.bincount(p.node_of, weights=g.load, minlength=cluster.n_nodes)
                for g, p in zip(graphs, placements))
    assert np.all(total <= cluster.capacity + 1e-9)
    slots_taken = [{(int(k), int(w)) for k, w in zip(p.node_of, p.worker_of) if w >= 0} for p in placements]
    for i in range(len(slots_taken)):
        for j in range(i + 1, len(slots_taken)):
            assert not slots_taken[i] & slots_taken[j]  # a worker slot serves one topology
    for graph, placement in zip(graphs, placements):
        assert np.all(placement.worker_of < cluster.slots[placement.node_of])


def test_later_graph_that_does_not_fit_is_infeasible_or_skipped():
    cluster = Cluster.from_types("small", (2, {"capacity": 8.0}))
    graphs = [workloads.workload("linear-12"), workloads.workload("linear-10")]
    with pytest.raises(InfeasibleError, match="'linear-10' needs load 10 but cluster 'small' has capacity 4"):
        schedule_many(get_scheduler("t3"), graphs, cluster)
    assert [p is None for p in schedule_many(get_scheduler("t3"), graphs, cluster, skip_infeasible=True)] == [False, True]


def test_residual_cluster_keeps_what_is_left():
    cluster = Cluster.from_types("big", (2, {"capacity": 8.0, "slots": 2, "ram_mb": 2048.0}))
    first = workloads.workload("linear-10")  # 10 tasks of 128 MB
    seen = []

    class Spy:
        def schedule(self, graph, residual, seed=0):
            seen.append(residual)
            return get_scheduler("r-storm").schedule(graph, residual, seed)

    schedule_many(Spy(), [first, workloads.workload("linear-10")], cluster, skip_infeasible=True)
    residual = seen[1]
    assert isinstance(residual, ResidualCluster)
    assert residual.capacity.tolist() == [0.0, 6.0]  # r-storm filled the first node
    assert [n.ram_mb for n in residual.nodes] == [2048.0 - 8 * 128, 2048.0 - 2 * 128]
    assert residual.slots.tolist() == [1, 1] and residual.occupied == (True, True)
    assert cluster.capacity.tolist() == [8.0, 8.0]  # the input cluster is untouched


# ------------------------------------------------------------------ isolation
FOUR = Cluster.from_types("four", (2, {"capacity": 16.0, "slots": 4}), (2, {"capacity": 12.0, "slots": 4}))


def test_isolated_topology_gets_dedicated_machines():
    wordcount, exclamation = workloads.workload("wordcount"), workloads.workload("exclamation")
    scheduler = get_scheduler("isolation", machines="wordcount=2")
    placed_wc, placed_ex = schedule_many(scheduler, [wordcount, exclamation], FOUR)
    assert sorted(set(placed_wc.node_of.tolist())) == [0, 1]  # the two largest machines
    assert placed_wc.metadata["dedicated_nodes"] == [0, 1]
    assert sorted(set(placed_ex.node_of.tolist())) == [2, 3]  # never on the dedicated ones


def test_isolated_topology_needs_machines_free_of_others():
    wordcount, exclamation = workloads.workload("wordcount"), workloads.workload("exclamation")
    scheduler = get_scheduler("isolation", machines="wordcount=2")
    with pytest.raises(InfeasibleError, match="needs 2 dedicated machines; 0 are free"):
        schedule_many(scheduler, [exclamation, wordcount], FOUR)  # exclamation spread over all four


def test_isolated_topology_too_big_for_its_machines():
    with pytest.raises(InfeasibleError, match="its 1 dedicated machines have capacity 16"):
        get_scheduler("isolation", machines="wordcount=1").schedule(workloads.workload("wordcount"), FOUR)


def test_machines_parameter_is_parsed_and_checked():
    assert parse_machines("wordcount=2, exclamation=1") == {"wordcount": 2, "exclamation": 1}
    assert parse_machines("") == {}
    with pytest.raises(ParameterError, match="isolation.params.machines: 'wordcount=0'"):
        parse_machines("wordcount=0")
    with pytest.raises(ParameterError, match="'wordcount'"):
        get_scheduler("isolation", machines="wordcount").schedule(workloads.workload("wordcount"), FOUR)


# ------------------------------------------------------------------ command line
def test_cli_schedules_several_topologies(capsys, tmp_path):
    out = tmp_path / "plan.json"
    code = main(["schedule", "-w", "wordcount", "-w", "exclamation", "-c", "high-low-4-0", "-s", "isolation",
                 "-p", "machines=wordcount=2", "-o", str(out), "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert [t["graph"] for t in result["topologies"]] == ["wordcount", "exclamation"]
    assert all(t["metrics"]["valid"] for t in result["topologies"])
    assert (tmp_path / "plan-wordcount.json").exists() and (tmp_path / "plan-exclamation.json").exists()


def test_cli_several_topologies_that_do_not_fit_exit_3(capsys):
    code = main(["schedule", "-w", "linear-32", "-w", "linear-32", "-c", "homogeneous-10", "-s", "t3"])
    assert code == 3
    assert "linear-32" in capsys.readouterr().err


def test_compare_runs_the_greedy_schedulers_side_by_side(capsys):
    code = main(["compare", "-w", "diamond-16", "-c", "heterogeneous-10", "--schedulers",
                 "t3,ols,r-storm,top-storm,a3-storm,ban-storm,isolation", "-p", "machines=diamond-16=3", "--json"])
    assert code == 0
    rows = json.loads(capsys.readouterr().out)["results"]
    assert sorted(r["scheduler"] for r in rows) == sorted(["t3", "ols", "r-storm", "top-storm", "a3-storm", "ban-storm",
                                                           "isolation"])  # ranked by traffic, not in the order named
    assert all(r["valid"] for r in rows)
