"""Scheduler tags and families: what each scheduler declares, what the registry refuses, and
which schedulers ``compare`` runs on which cluster (edge strategies only where the cluster has
edge nodes; a scheduler whose placement would be another's fallback is skipped with its reason)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from streamsched import workloads
from streamsched.cli import main
from streamsched.evaluation.comparison import resolve_names, run_schedulers
from streamsched.model.cluster import Cluster
from streamsched.schedulers import available, family, register, scheduler_class
from streamsched.schedulers.base import FAMILIES, OBJECTIVES, Scheduler

EDGE = {"topset", "topset-p", "edge-only", "cloud-only", "ga-incremental", "ga-global"}
#: What each scheduler optimises, from its paper: Storm's even and Isolation schedulers spread
#: load; R-Storm fits resources; TOP- and BAN-Storm answer the thesis' research question 1
#: (resource utilisation), A3- and Gr-Storm question 2 (traffic); the edge strategies minimise
#: makespan (edge-cloud-topset.txt section 3); CAPS (CAPSys, EuroSys 2025) balances contention.
OBJECTIVE = {"even": "balance", "isolation": "balance", "r-storm": "resources", "storm-ras": "resources",
             "top-storm": "resources",
             "ban-storm": "resources", "a3-storm": "traffic", "gr-storm": "traffic", "ols": "traffic",
             "metis": "traffic", "i-scheduler": "traffic", "t3": "traffic", "optimal": "traffic",
             "caps": "contention", **{name: "makespan" for name in EDGE}}
RANDOMISED = {"metis", "i-scheduler", "t3", "optimal", "ga-incremental", "ga-global", "caps"}

EDGE_CLUSTER = """\
name: edge-cloud
node_types:
  - {count: 3, capacity: 8, slots: 4, kind: cloud}
  - {count: 6, capacity: 3, slots: 2, kind: edge}
"""


def test_every_scheduler_declares_its_tags():
    assert set(available()) == set(OBJECTIVE)
    for name in available():
        cls = scheduler_class(name)
        assert cls.family == ("edge" if name in EDGE else "cluster"), name
        assert cls.needs_edge_nodes == (name in EDGE), name
        assert cls.objective == OBJECTIVE[name], name
        assert cls.exact == (name == "optimal"), name
        assert cls.randomised == (name in RANDOMISED), name
    assert set(family("edge")) == EDGE and set(family("cluster")) == set(OBJECTIVE) - EDGE


def test_every_declared_default_is_valid_as_it_stands():
    """Schedulers check the values a user gives and take the declared defaults as they are, so
    each default must pass its own parameter's check unchanged (type included)."""
    for name in available():
        for param in scheduler_class(name).params:
            checked = param.validate(param.default, name)
            assert checked == param.default and type(checked) is type(param.default), (name, param.name)


@pytest.mark.parametrize("name", sorted(set(OBJECTIVE) - RANDOMISED))
def test_a_scheduler_tagged_deterministic_ignores_its_seed(name):
    graph, cluster = workloads.workload("diamond-12"), workloads.cluster("heterogeneous-10")
    scheduler = scheduler_class(name)()
    a, b = scheduler.schedule(graph, cluster, seed=0), scheduler.schedule(graph, cluster, seed=7)
    assert np.array_equal(a.node_of, b.node_of) and np.array_equal(a.worker_of, b.worker_of), name


@pytest.mark.parametrize("tag, value, message", [
    ("family", "fog", "family 'fog' is not one of cluster, edge"),
    ("objective", "latency", "objective 'latency' is not one of traffic, balance, resources, makespan"),
    ("exact", "yes", "tag exact must be True or False"),
])
def test_the_registry_refuses_unknown_tag_values(tag, value, message):
    cls = type("Bad", (Scheduler,), {"name": f"bad-{tag}", "summary": "", tag: value,
                                     "place": lambda self, graph, cluster, params, seed: None})
    with pytest.raises(ValueError, match=message):
        register(cls)
    assert f"bad-{tag}" not in available()
    assert FAMILIES == ("cluster", "edge") and "makespan" in OBJECTIVES


def test_all_is_the_cluster_family_unless_the_cluster_has_edge_nodes(tmp_path):
    (tmp_path / "edge.yaml").write_text(EDGE_CLUSTER)
    plain = workloads.cluster("heterogeneous-10")
    assert all(node.kind == "cloud" for node in plain.nodes)
    assert resolve_names("all", plain) == family("cluster")
    assert resolve_names("all", Cluster.load(tmp_path / "edge.yaml")) == available()
    assert resolve_names("edge", plain) == family("edge")


def _compare_json(capsys, *args) -> list[dict]:
    capsys.readouterr()
    assert main(["compare", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["results"]


def test_compare_all_on_a_cluster_without_edge_nodes_has_no_fallback_rows(capsys):
    """diamond-30 on heterogeneous-10: no edge strategy runs (on these nodes all six were
    TopSet's placement), Isolation without dedicated machines is skipped (it would be even's
    placement), and every other row is a placement of its own."""
    rows = _compare_json(capsys, "-w", "diamond-30", "-c", "heterogeneous-10", "--schedulers", "all")
    names = [row["scheduler"] for row in rows]
    assert sorted(names) == sorted(family("cluster"))  # ranked by traffic (comparison.rank)
    assert not EDGE & set(names)
    [isolation] = [row for row in rows if row["scheduler"] == "isolation"]
    assert isolation["status"] == "skipped" and "machines=diamond-30=N" in isolation["reason"]
    assert all(row["status"] in ("ok", "optimal") for row in rows if row["scheduler"] != "isolation")


def test_an_edge_strategy_named_on_a_cluster_without_edge_nodes_is_skipped(capsys):
    rows = _compare_json(capsys, "-w", "diamond-12", "-c", "heterogeneous-10", "--schedulers", "topset,even")
    # ranked (comparison.rank): the placement first, the skipped row last, with no rank
    assert rows[1] == {"scheduler": "topset", "status": "skipped",
                       "reason": "needs nodes of kind 'edge'; cluster 'heterogeneous-10' has none",
                       "rank": None, "best": False}
    assert rows[0]["scheduler"] == "even" and rows[0]["valid"] and rows[0]["best"]
    capsys.readouterr()
    assert main(["compare", "-w", "diamond-12", "-c", "heterogeneous-10", "--schedulers", "topset"]) == 0
    assert "topset: skipped: needs nodes of kind 'edge'" in capsys.readouterr().err.replace("\n", " ")


def test_edge_strategies_run_on_a_cluster_with_edge_nodes(tmp_path, capsys):
    """Constraint 1 of edge-cloud-topset.txt section 3: a query without upstream (a source)
    runs on an edge device, one without downstream (a sink) in the cloud."""
    path = tmp_path / "edge.yaml"
    path.write_text(EDGE_CLUSTER)
    cluster = Cluster.load(path)
    graph = workloads.workload("diamond-12")
    outcomes = {o.row["scheduler"]: o for o in run_schedulers(graph, cluster, resolve_names("all", cluster))}
    sources = np.setdiff1d(np.arange(graph.n_tasks), graph.dst)
    sinks = np.setdiff1d(np.arange(graph.n_tasks), graph.src)
    kind = np.array([node.kind for node in cluster.nodes])
    for name in ("topset", "edge-only", "cloud-only", "ga-incremental"):
        outcome = outcomes[name]
        assert outcome.row["status"] == "ok" and outcome.row["valid"], name
        assert set(kind[outcome.placement.node_of[sources]]) == {"edge"}, name
        assert set(kind[outcome.placement.node_of[sinks]]) == {"cloud"}, name
    on_edge = {name: int(np.sum(kind[outcomes[name].placement.node_of] == "edge")) for name in ("edge-only", "cloud-only")}
    assert on_edge["edge-only"] > on_edge["cloud-only"]
    # The two that equal another edge strategy on any cluster are skipped, saying which.
    assert "topset's" in outcomes["topset-p"].row["reason"]
    assert "ga-incremental's" in outcomes["ga-global"].row["reason"]
    rows = _compare_json(capsys, "-w", "diamond-12", "-c", str(path), "--schedulers", "edge")
    assert {row["scheduler"]: row["status"] for row in rows} == {
        "cloud-only": "ok", "edge-only": "ok", "ga-global": "skipped", "ga-incremental": "ok",
        "topset": "ok", "topset-p": "skipped"}


def test_list_schedulers_shows_family_objective_and_tags(capsys):
    capsys.readouterr()
    assert main(["list", "schedulers"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if "scheduler" in line and "family" in line)
    assert header.index("family") < header.index("objective") < header.index("tags")
    for name in available():
        [row] = [line for line in lines if line.split("│")[1:2] and line.split("│")[1].strip() == name]
        cells = [cell.strip() for cell in row.split("│")[2:5]]
        assert cells[:2] == [scheduler_class(name).family, scheduler_class(name).objective], name
        assert ("exact" in cells[2]) == scheduler_class(name).exact, name
        assert ("needs edge" in cells[2]) == scheduler_class(name).needs_edge_nodes, name
