"""storm-ras (Storm's DefaultResourceAwareStrategy): Storm's executor order and rack-first node
order by hand, the first-fit shortcut against a full sort, Storm's refusal of topologies with
as many executors as states, the priority order, and TestLargeCluster's assertions (every
executor placed, no node, slot or worker over its limits) on the real sets, checked by an
independent checker."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from streamsched import workloads
from streamsched.engines.storm import nimbus
from streamsched.errors import InfeasibleError
from streamsched.model import Cluster, Node, TaskGraph
from streamsched.schedulers import get_scheduler
from streamsched.schedulers.base import reschedule_each, schedule_many
from streamsched.schedulers.storm_ras import availability, lexicographic_first, storm_executor_order

PEERS = Path(__file__).resolve().parents[3] / "shared" / "peers" / "storm-clusterconf"
if not PEERS.is_dir():
    PEERS = Path("/work/shared/peers/storm-clusterconf")
needs_peers = pytest.mark.skipif(not PEERS.is_dir(), reason="Storm's clusterconf files are not beside the project")


def cores_graph(name, operators, task_operator, cpu_pct, memory_mb, src=(), dst=()):
    n = len(task_operator)
    return TaskGraph.build(name, operators, task_operator, np.full(n, cpu_pct / 100.0), list(src), list(dst),
                           [1.0] * len(src), memory_mb=np.full(n, memory_mb), load_unit="cores")


def test_storm_executor_order_by_hand():
    """A(2) -> B(3) -> C(1), A -> D(1). Connections: B 2*3 + 1*3 = 9, A 3*2 + 1*2 = 8, C 3, D 2.
    B first, its neighbours fewest executors first (C, then A): B0 C0 A0, B1 A1, B2; then A with
    D and B: D0. Tasks: A 0-1, B 2-4, C 5, D 6."""
    graph = cores_graph("g", ("A", "B", "C", "D"), [0, 0, 1, 1, 1, 2, 3], 10, 128,
                        src=[0, 0, 0, 1, 1, 1, 2, 3, 4, 0, 1], dst=[2, 3, 4, 2, 3, 4, 5, 5, 5, 6, 6])
    assert storm_executor_order(graph) == [2, 5, 0, 3, 1, 4, 6]


def test_system_components_come_last():
    graph = cores_graph("g", ("__acker", "s", "b"), [0, 1, 2, 2], 10, 128, src=[1, 1, 2, 3], dst=[2, 3, 0, 0])
    assert storm_executor_order(graph) == [2, 1, 3, 0]


def test_racks_sorted_by_mean_then_min_share_as_storm_common_sort():
    """Storm's RAS overview example racks (one supervisor each; CPU %, MB):
    rack-0 4000/80000, rack-1 2000/40000, rack-2 0/80000, rack-3 100/200000, rack-4 6100/10000;
    cluster 12200 % / 410000 MB. Mean shares: rack-4 (50.00 + 2.44) / 2 = 26.22 %, rack-0
    (32.79 + 19.51) / 2 = 26.15 %, rack-3 (0.82 + 48.78) / 2 = 24.80 %, rack-1 13.07 %, rack-2
    9.76 %: the COMMON sort (mean first) takes rack-4, rack-0, rack-3, rack-1, rack-2 (the
    overview's older min-first order would be rack-0, rack-1, rack-4, rack-3, rack-2)."""
    racks = {"rack-0": (40, 80000), "rack-1": (20, 40000), "rack-2": (0, 80000), "rack-3": (1, 200000),
             "rack-4": (61, 10000)}
    nodes = tuple(Node(f"n{r}", capacity=float(c), cores=c, ram_mb=float(m), slots=4, rack=r)
                  for r, (c, m) in racks.items())
    cluster = Cluster("docs", nodes, capacity_unit="cores")
    order = []
    # one executor of 10 % and 1 MB per topology, each topology alone on the full cluster
    for _ in range(4):
        graph = cores_graph("one", ("s",), [0], 10, 1)
        placement = get_scheduler("storm-ras", strict=True).schedule(graph, _without(cluster, order))
        order.append(int(placement.node_of[0]))
    assert [nodes[k].rack for k in order] == ["rack-4", "rack-0", "rack-3", "rack-1"]  # rack-2 has no CPU


def test_availability_leaves_out_a_resource_none_of_which_is_available():
    """Storm's calculateAverage/MinPercentageUsedBy skip a resource whose total is 0: object 0
    (no CPU anywhere, 10 of 20 MB) has mean and min 0.5; object 1 (neither) 1 and 1; object 2
    (3 of 4 CPU, 5 of 20 MB) mean (0.75 + 0.25) / 2 = 0.5, min 0.25."""
    mean, low = availability(np.array([0.0, 0.0, 3.0]), np.array([10.0, 0.0, 5.0]), np.array([0.0, 0.0, 4.0]),
                             np.array([20.0, 0.0, 20.0]))
    assert mean.tolist() == [0.5, 1.0, 0.5] and low.tolist() == [0.5, 1.0, 0.25]


def _without(cluster: Cluster, taken: list[int]) -> Cluster:
    """``cluster`` with the nodes in ``taken`` left without slots (still counted in their racks)."""
    return Cluster(cluster.name, tuple(Node(n.name, n.capacity, cores=n.cores, ram_mb=n.ram_mb, rack=n.rack,
                                            slots=0 if k in taken else n.slots)
                                       for k, n in enumerate(cluster.nodes)), cluster.capacity_unit)


def test_a_topology_fills_a_node_then_its_rack_before_another_rack():
    """Rack r1: n0 and n1 with 4 cores, 4096 MB; rack r2: n2 with 6 cores, 6144 MB. Five
    executors of 150 % and 1024 MB. r1 has 8/14 of the CPU and memory, so n0 takes the first;
    its count keeps it first until its 100 % left cannot hold one; n1 (same rack, which holds
    executors) takes two; then r2. R-Storm's one node order (n2 most available) starts on n2."""
    cluster = Cluster("c", (Node("n0", 4.0, cores=4, ram_mb=4096, rack="r1"), Node("n1", 4.0, cores=4, ram_mb=4096,
                                                                                    rack="r1"),
                            Node("n2", 6.0, cores=6, ram_mb=6144, rack="r2")), capacity_unit="cores")
    graph = cores_graph("five", ("s",), [0] * 5, 150, 1024)
    assert get_scheduler("storm-ras").schedule(graph, cluster).node_of.tolist() == [0, 0, 1, 1, 2]
    assert get_scheduler("r-storm").schedule(graph, cluster).node_of.tolist()[0] == 2


def test_lexicographic_first_is_the_first_of_a_full_sort():
    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        keys = [rng.integers(0, 3, n).astype(float) for _ in range(4)]
        mask = rng.random(n) < 0.6
        ranked = np.lexsort(keys[::-1])
        first = [int(k) for k in ranked if mask[k]]
        assert lexicographic_first(keys, np.flatnonzero(mask)) == (first[0] if first else -1)


def test_backtracking_finds_the_fit_a_greedy_pass_misses():
    """Two nodes of 2 cores in one rack; executors of 100 %, 50 %, 150 %, 100 % in that order.
    Greedy: a takes 100 + 50 (its count keeps it first), b 150, and the last 100 fits nowhere.
    Backtracking: the 150 % has no other node; the 50 % moves to b; then the 150 % goes to b
    and the last 100 % to a. States (placements made): 3, then 50 % again, 150 %, 100 %: 6."""
    cluster = Cluster("c", (Node("a", 2.0, cores=2, ram_mb=4096), Node("b", 2.0, cores=2, ram_mb=4096)), "cores")
    graph = TaskGraph.build("bt", ("s",), [0] * 4, [1.0, 0.5, 1.5, 1.0], [], [], [], memory_mb=[10.0] * 4,
                            load_unit="cores")
    placement = get_scheduler("storm-ras", strict=True).schedule(graph, cluster)
    assert placement.node_of.tolist() == [0, 1, 1, 0] and placement.metadata["states"] == 6


def test_storm_refuses_as_many_executors_as_states():
    cluster = Cluster("c", (Node("a", 8.0, cores=8, ram_mb=8192),), "cores")
    graph = cores_graph("three", ("s",), [0] * 3, 10, 10)
    with pytest.raises(InfeasibleError, match="3 executors, not fewer than max_state_search 3"):
        get_scheduler("storm-ras", strict=True, max_state_search=3).schedule(graph, cluster)
    assert get_scheduler("storm-ras", strict=True, max_state_search=4).schedule(graph, cluster).node_of.tolist() == [0] * 3


def test_schedule_many_follows_the_order_and_answers_in_graph_order():
    """One node with 2 cores: the graph placed first takes it, the other finds no room."""
    cluster = Cluster("c", (Node("a", 2.0, cores=2, ram_mb=8192, slots=4),), "cores")
    graphs = [cores_graph("x", ("s",), [0], 150, 10), cores_graph("y", ("s",), [0], 150, 10)]
    scheduler = get_scheduler("storm-ras", strict=True)
    assert [p is not None for p in schedule_many(scheduler, graphs, cluster, skip_infeasible=True)] == [True, False]
    assert [p is not None for p in schedule_many(scheduler, graphs, cluster, skip_infeasible=True,
                                                 order=[1, 0])] == [False, True]
    with pytest.raises(ValueError, match="no ordering"):
        schedule_many(scheduler, graphs, cluster, order=[0, 0])


@needs_peers
def test_priority_order_of_the_large_cluster_sets():
    """topology.priority in the confs: largeCluster01 has TopologyName00026 at 0 and
    TopologyName00039 at 2, every other at 29; largeCluster03 TopologyName00048 at 2."""
    one = nimbus.read_dir(PEERS / "largeCluster01", executors="hint")
    order = [one[k].topology_id for k in nimbus.priority_order(one)]
    assert order[:3] == ["TopologyName00026", "TopologyName00039", "TopologyName00000"]
    assert order[2:] == sorted(order[2:])
    three = nimbus.read_dir(PEERS / "largeCluster03", executors="hint")
    assert three[nimbus.priority_order(three)[0]].topology_id == "TopologyName00048"


def check_set(graphs, placements, cluster):
    """TestLargeCluster's assertions, independently: every executor placed; per node CPU
    (% of a core) and memory within the supervisor's, at most its slots in use and no slot
    shared by two topologies; each worker's heap within its topology's limit."""
    cpu, memory, owner = np.zeros(cluster.n_nodes), np.zeros(cluster.n_nodes), {}
    for k, (graph, placement) in enumerate(zip(graphs, placements)):
        assert np.all(placement.node_of >= 0) and np.all(placement.worker_of >= 0)
        for task in range(graph.n_tasks):
            node = int(placement.node_of[task])
            cpu[node] += graph.load[task] * 100
            memory[node] += graph.memory_mb[task]
        for node, worker in set(zip(placement.node_of.tolist(), placement.worker_of.tolist())):
            assert owner.setdefault((node, worker), k) == k
            assert 0 <= worker < cluster.nodes[node].slots
            heap = sum(graph.onheap_mb[t] for t in range(graph.n_tasks)
                       if placement.node_of[t] == node and placement.worker_of[t] == worker)
            assert heap <= graph.worker_heap_mb + 1e-6
    for k, node in enumerate(cluster.nodes):
        assert cpu[k] <= node.cores * 100 + 1e-6 and memory[k] <= node.ram_mb + 1e-6


@needs_peers
def test_largecluster03_fully_scheduled_and_rescheduled_as_storm_asserts():
    """Storm's TestLargeCluster on largeCluster03 with the default strategy: all 50 topologies
    fully scheduled (priority order), then each removed and scheduled again."""
    topologies = nimbus.read_dir(PEERS / "largeCluster03", executors="hint")
    graphs = [t.graph for t in topologies]
    cluster = workloads.cluster("storm-large-03")
    scheduler = get_scheduler("storm-ras", strict=True)
    placements = schedule_many(scheduler, graphs, cluster, order=nimbus.priority_order(topologies))
    assert len(placements) == 50
    check_set(graphs, placements, cluster)
    again = reschedule_each(scheduler, graphs, cluster, placements)
    assert [reason for _, reason, _ in again] == [None] * 50
    check_set(graphs, [p for p, _, _ in again], cluster)


# ------------------------------------------------------------------ the schedule-many command
def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    from streamsched.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_schedule_many_writes_each_placement_and_exits_4_for_the_unplaced(tmp_path, capsys):
    """One node of 400 % CPU (4 cores) and 4096 MB: two topologies of 20 executors x 10 % take
    all of it, the third (two executors) is not placed; its reason is in summary.json, exit 4.
    Executors in a chain (graph files need an edge)."""
    from streamsched.model.graph_files import write_graph

    (tmp_path / "c.yaml").write_text("name: one\nnode_types:\n  - {count: 1, capacity: 100, cores: 4, slots: 4}\n")
    paths = []
    for name, n in (("a", 20), ("b", 20), ("c", 2)):
        paths += ["--graph", str(tmp_path / f"{name}.json")]
        chain = TaskGraph.build(name, ("s",), [0] * n, [1.0] * n, list(range(n - 1)), list(range(1, n)), [1.0] * (n - 1))
        write_graph(chain, tmp_path / f"{name}.json")
    code, out, err = run_cli(capsys, "schedule-many", *paths, "-c", str(tmp_path / "c.yaml"), "-p", "strict=true",
                             "--out", str(tmp_path / "out"), "--json")
    assert code == 4 and "1 of 3 topologies not scheduled: c" in err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary == json.loads(out)
    assert [r["placed"] for r in summary["topologies"]] == [True, True, False]
    assert "needs 20 CPU in total" in summary["topologies"][2]["reason"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.json", "b.json", "summary.json"]
    placed = json.loads((tmp_path / "out" / "a.json").read_text())
    assert placed["metadata"]["scheduler"] == "storm-ras"


def test_schedule_many_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys):
    cases = [(["--out", str(tmp_path / "o")], "give exactly one of --nimbus DIR or --graph FILE"),
             (["--nimbus", str(tmp_path / "none"), "--out", str(tmp_path / "o")], "not a directory"),
             (["--graph", str(tmp_path / "g.json"), "--order", "priority", "--out", str(tmp_path / "o")],
              "--order priority needs --nimbus"),
             (["--nimbus", str(tmp_path), "--order", "fifo", "--out", str(tmp_path / "o")],
              "'fifo' is not one of priority, given")]
    for argv, message in cases:
        code, out, err = run_cli(capsys, "schedule-many", *argv)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, (argv, err)
    assert not (tmp_path / "o").exists()


@needs_peers
def test_schedule_many_reproduces_test_large_cluster_03(tmp_path, capsys):
    """``schedule-many --nimbus`` on largeCluster03, strict, with the second phase: all 50
    placed and placed again; the written placements pass the independent checker."""
    code, out, _ = run_cli(capsys, "schedule-many", "--nimbus", str(PEERS / "largeCluster03"), "-c", "storm-large-03",
                           "-p", "strict=true", "--reschedule", "--out", str(tmp_path / "o"))
    assert code == 0 and "50/50 topologies placed on storm-large-03 by storm-ras" in out
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["order"][0] == "TopologyName00048" and summary["rescheduled"] == 50
    topologies = {t.topology_id: t.graph for t in nimbus.read_dir(PEERS / "largeCluster03", executors="hint")}
    from streamsched.model import Placement

    graphs = [topologies[row["id"]] for row in summary["topologies"]]
    cluster = workloads.cluster("storm-large-03")
    placements = [Placement.read(tmp_path / "o" / row["file"], g, cluster) for row, g in zip(summary["topologies"], graphs)]
    check_set(graphs, placements, cluster)


def test_operator_pairs_by_hand_and_for_many_operators():
    """Tasks 0-1 of a, 2-3 of b, 4 of c; edges a->b twice, b->b, c->a: pairs (a,b), (b,b),
    (c,a) once each, sorted. 5,000 one-task operators in a chain (past the bitmap's size): the
    4,999 consecutive pairs."""
    graph = TaskGraph.build("p", ("a", "b", "c"), [0, 0, 1, 1, 2], [1.0] * 5, [0, 1, 2, 4], [2, 3, 3, 0], [1.0] * 4)
    assert graph.operator_pairs.tolist() == [[0, 1], [1, 1], [2, 0]]
    n = 5000
    chain = TaskGraph.build("chain", tuple(f"o{k}" for k in range(n)), list(range(n)), [1.0] * n,
                            list(range(n - 1)), list(range(1, n)), [1.0] * (n - 1))
    assert chain.operator_pairs.tolist() == [[k, k + 1] for k in range(n - 1)]
