"""The co-location rule (at most k tasks of an operator per node: Flink's task slots per slot
sharing group, Storm's maxNodeCoLocationCnt): read from a real Flink 2.3 capture, checked by
``evaluate``, kept by every cluster scheduler (judged by tests/placement_checker.py, which shares
no code with the model), and kept exactly by ``optimal`` (brute force on tiny cases)."""

from __future__ import annotations

import itertools
import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import placement_checker
from streamsched.cli import main
from streamsched.engines import flink
from streamsched.errors import InfeasibleError, InputError
from streamsched.model import Cluster, Placement
from streamsched.model.graph_files import read_graph, write_graph
from streamsched.model.taskgraph import TaskGraph
from streamsched.schedulers import family, get_scheduler
from streamsched.solvers import solve_placement

FIXTURE = Path(__file__).parent / "fixtures" / "flink" / "live-job"
FAST = {"optimal": {"time_limit": 3.0}}


@pytest.fixture(scope="module")
def reading():
    return flink.read_capture(flink.load_capture(FIXTURE))


def _raw(snapshot: str, name: str):
    return json.loads((FIXTURE / snapshot / name).read_text())


def _job_file(snapshot: Path) -> Path:
    return next(p for p in (snapshot / "jobs").glob("*.json"))


def test_reader_records_task_slots_and_one_slot_sharing_group(reading):
    raw = {tm["id"]: tm["slotsNumber"] for tm in _raw("1", "taskmanagers.json")["taskmanagers"]}
    assert {n.name: n.task_slots for n in reading.cluster.nodes} == raw
    assert set(raw.values()) == {2}
    groups = {v["slotSharingGroupId"] for v in json.loads(_job_file(FIXTURE / "1").read_text())["vertices"]}
    assert len(groups) == 1 and reading.graph.slot_group == ()  # one group: the default, stored as none
    # Flink placed the job itself: its placement keeps the rule (2 slots, at most 2 of a vertex each)
    assert placement_checker.problems(reading.graph, reading.cluster, reading.placement) == []
    assert reading.placement.violations(reading.graph, reading.cluster) == []


def test_reader_keeps_several_slot_sharing_groups(tmp_path):
    copy = tmp_path / "job"
    shutil.copytree(FIXTURE, copy)
    for snapshot in ("0", "1"):
        path = _job_file(copy / snapshot)
        job = json.loads(path.read_text())
        for vertex in job["vertices"]:
            if vertex["name"].startswith("Calc"):
                vertex["slotSharingGroupId"] = "00000000000000000000000000000001"
        path.write_text(json.dumps(job))
    graph = flink.read_capture(flink.load_capture(copy)).graph
    groups = dict(zip(graph.operator_names, graph.slot_group))
    assert {name: g for name, g in groups.items() if name.startswith("Calc")} == {"Calc[2]": "0" * 31 + "1"}
    assert len(set(graph.slot_group)) == 2


def _cluster_schedulers(graph, cluster):
    for name in family("cluster"):
        scheduler = get_scheduler(name, **FAST.get(name, {}))
        if scheduler.skip_reason(graph, cluster) is None:
            yield name, scheduler


def test_the_rule_binds_on_the_flink_job_and_every_scheduler_keeps_it(reading):
    """The bug of issue 26: without the rule the traffic schedulers put every subtask on one
    2-slot TaskManager (3 of a vertex); with it every cluster scheduler keeps at most 2."""
    graph, cluster = reading.graph, reading.cluster
    free = replace(cluster, nodes=tuple(replace(n, task_slots=0) for n in cluster.nodes))
    crowded = get_scheduler("metis").schedule(graph, free, seed=0)
    assert placement_checker.colocation_problems(graph, cluster, crowded)  # the rule binds here
    names = []
    for name, scheduler in _cluster_schedulers(graph, cluster):
        placement = scheduler.schedule(graph, cluster, seed=0)
        assert placement_checker.problems(graph, cluster, placement) == [], name
        names.append(name)
    assert {"metis", "i-scheduler", "t3", "optimal", "r-storm", "even"} <= set(names)


def _chain(max_per_node=(), slot_group=()) -> TaskGraph:
    """Three operators of four tasks, all-to-all edges with rates 1..32 (no two pairs alike)."""
    ops = np.repeat(np.arange(3), 4)
    src, dst = [], []
    for a, b in ((0, 1), (1, 2)):
        for i in range(4):
            for j in range(4):
                src.append(4 * a + i)
                dst.append(4 * b + j)
    rate = np.arange(1, len(src) + 1, dtype=float)
    return TaskGraph.build("chain", ["a", "b", "c"], ops, np.ones(12), src, dst, rate,
                           max_per_node=max_per_node, slot_group=slot_group)


@pytest.mark.parametrize("max_per_node, slot_group, task_slots", [
    ((1, 0, 2), (), 0),             # Storm: maxNodeCoLocationCnt per component
    ((), ("x", "x", "y"), 3),       # Flink: two slot sharing groups, 3 slots per TaskManager
])
def test_every_scheduler_keeps_storm_caps_and_slot_groups(max_per_node, slot_group, task_slots):
    graph = _chain(max_per_node, slot_group)
    cluster = Cluster.from_types("four", (4, {"capacity": 12.0, "slots": 2, "task_slots": task_slots}))
    for name, scheduler in _cluster_schedulers(graph, cluster):
        placement = scheduler.schedule(graph, cluster, seed=1)
        assert placement_checker.problems(graph, cluster, placement) == [], name
        assert placement.violations(graph, cluster) == [], name


def _brute_force(graph, cluster):
    """Least inter-node traffic over every assignment the independent checker accepts."""
    best = np.inf
    for nodes in itertools.product(range(cluster.n_nodes), repeat=graph.n_tasks):
        placement = Placement.build(nodes)
        if not placement_checker.problems(graph, cluster, placement):
            best = min(best, placement_checker.cut_traffic(graph, placement))
    return best


def _tiny(max_per_node=()):
    """Two operators of three tasks, rates all different, on three nodes."""
    rng = np.random.default_rng(7)
    src = [0, 0, 1, 1, 2, 2, 0, 3]
    dst = [3, 4, 4, 5, 5, 3, 1, 5]
    rate = rng.uniform(1, 10, len(src)).round(2)
    return TaskGraph.build("tiny", ["p", "q"], [0, 0, 0, 1, 1, 1], [1.0, 1.0, 2.0, 1.0, 1.0, 1.5], src, dst, rate,
                           max_per_node=max_per_node)


@pytest.mark.parametrize("max_per_node, task_slots, capacity", [
    ((), (2, 2, 2), (8.0, 8.0, 8.0)),      # Flink: 2 slots per TaskManager, capacity never binds
    ((), (2, 1, 2), (8.0, 6.0, 3.0)),      # uneven slots and capacities
    ((1, 2), (0, 0, 0), (8.0, 8.0, 8.0)),  # Storm: at most 1 of p, 2 of q per node
])
def test_optimal_equals_brute_force_under_the_rule(max_per_node, task_slots, capacity):
    graph = _tiny(max_per_node)
    cluster = Cluster("three", tuple(
        replace(n, capacity=c, task_slots=s) for n, c, s in
        zip(Cluster.from_types("x", (3, {"capacity": 1.0})).nodes, capacity, task_slots)))
    expected = _brute_force(graph, cluster)
    placement = get_scheduler("optimal", time_limit=5.0, warm_starts=False).schedule(graph, cluster, seed=0)
    assert placement.metadata["status"] == "optimal" and not placement.metadata.get("repaired")
    assert placement_checker.problems(graph, cluster, placement) == []
    assert placement_checker.cut_traffic(graph, placement) == pytest.approx(expected)
    without = _brute_force(replace(graph, max_per_node=()), replace(cluster, nodes=tuple(
        replace(n, task_slots=0) for n in cluster.nodes)))
    assert without < expected  # each case is one where the rule costs traffic


@pytest.mark.parametrize("formulation", ["configurations", "assignment"])
def test_solver_operator_caps_equal_brute_force(formulation):
    graph = _tiny()
    caps = np.array([[2, 1, 2], [1, 2, 2]])  # group x node
    result = solve_placement(graph.load, graph.src, graph.dst, graph.rate, np.full(3, 6.0), formulation=formulation,
                             time_limit=5.0, operator_caps=(graph.task_operator, caps))
    best = np.inf
    for nodes in itertools.product(range(3), repeat=6):
        held = np.zeros((2, 3), int)
        np.add.at(held, (graph.task_operator, list(nodes)), 1)
        if (held <= caps).all():
            best = min(best, placement_checker.cut_traffic(graph, Placement.build(nodes)))
    assert result.status == "optimal"
    assert result.objective == pytest.approx(best)
    held = np.zeros((2, 3), int)
    np.add.at(held, (graph.task_operator, result.assignment), 1)
    assert (held <= caps).all()


def test_strict_refuses_and_check_fits_names_the_rule(reading):
    graph, cluster = reading.graph, reading.cluster
    with pytest.raises(InfeasibleError, match="co-location rule"):
        get_scheduler("t3", strict=True).schedule(graph, cluster, seed=0)
    small = replace(cluster, nodes=(replace(cluster.nodes[0], task_slots=1), replace(cluster.nodes[1], task_slots=1)))
    with pytest.raises(InfeasibleError, match="has 3 tasks but the co-location rule allows at most 2"):
        get_scheduler("metis").schedule(graph, small, seed=0)
    groups = _chain((), ("x", "y", "z"))
    cluster = Cluster.from_types("two", (2, {"capacity": 12.0, "task_slots": 5}))
    with pytest.raises(InfeasibleError, match="needs 12 task slots .* has 10"):
        get_scheduler("even").schedule(groups, cluster, seed=0)


def test_replan_from_the_running_placement_keeps_the_rule(reading):
    graph, cluster = reading.graph, reading.cluster
    for name in ("metis", "t3"):
        placement = get_scheduler(name).replan(graph, cluster, reading.placement, seed=0, threshold_pct=0.0)
        assert placement_checker.problems(graph, cluster, placement) == [], name


def _written(tmp_path, reading):
    out = tmp_path / "read"
    assert main(["read-engine", "flink", "--dir", str(FIXTURE), "-o", str(out)]) == 0
    return out


def test_evaluate_flags_and_predict_export_refuse_a_plan_breaking_the_rule(tmp_path, reading, capsys):
    out = _written(tmp_path, reading)
    document = json.loads((out / "placement.json").read_text())
    document["node"] = [0] * len(document["node"])  # load 0.54 of 2 cores: fits, but 3 of a vertex
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(document))
    files = ["--graph", str(out / "graph.json"), "--cluster", str(out / "cluster.yaml")]
    capsys.readouterr()
    assert main(["evaluate", str(bad), *files, "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["valid"] is False
    assert any("holds 3 tasks of operator" in v and "has 2 task slots" in v for v in metrics["violations"])
    assert main(["predict", str(bad), *files]) == 2
    assert main(["evaluate", str(out / "placement.json"), *files, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["valid"] is True


def test_files_carry_the_rule(tmp_path, reading):
    out = _written(tmp_path, reading)
    cluster = Cluster.load(out / "cluster.yaml")
    assert [n.task_slots for n in cluster.nodes] == [2, 2]
    graph = _chain((2, 0, 1), ("x", "x", "y"))
    for suffix in ("json", "csv", "parquet"):
        write_graph(graph, tmp_path / f"g.{suffix}")
        again = read_graph(tmp_path / f"g.{suffix}")
        assert (again.max_per_node, again.slot_group) == ((2, 0, 1), ("x", "x", "y")), suffix
    text = (tmp_path / "g.tasks.csv").read_text().splitlines()
    text[2] = text[2].replace(",2,", ",3,", 1)  # the second task of operator a says 3
    (tmp_path / "g.tasks.csv").write_text("\n".join(text) + "\n")
    with pytest.raises(InputError, match=r"g.tasks.csv: line 3: max_per_node 3 differs from 2"):
        read_graph(tmp_path / "g.csv")
    with pytest.raises(InputError, match=r"task_slots: must be >= 0"):
        Cluster.from_dict({"name": "c", "nodes": [{"name": "a", "capacity": 1, "task_slots": -1}]})
