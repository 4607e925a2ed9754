"""storm-ras behaviours pinned by hand (issue 34 item 4; the survivors of ``make mutate
MODULE=schedulers/storm_ras.py``): the rack order by the topology's own executors, the shares
as they change with each executor placed, the min share as the second key, one sort per run of
a component's executors (Storm's LazyNodeSorting cache), nodes without a free slot counted in
their rack but never chosen, and ``availability`` on each of its branches.

Resources are written (cores, GB); an executor's CPU is a share of one core, as Storm's %/100."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from streamsched.errors import InfeasibleError
from streamsched.model import Cluster, Node, TaskGraph
from streamsched.schedulers import get_scheduler
from streamsched.schedulers.base import PackingFailed
from streamsched.schedulers.storm_ras import availability


def cluster_of(*nodes: tuple[str, str, float, float, int]) -> Cluster:
    """Nodes (name, rack, cores, GB, slots)."""
    return Cluster("c", tuple(Node(name, float(cores), cores=cores, ram_mb=gb * 1024.0, slots=slots, rack=rack)
                              for name, rack, cores, gb, slots in nodes), capacity_unit="cores")


def graph_of(task_operator: list[int], cores: list[float], gb: list[float], operators=("A", "B"),
             src=(), dst=()) -> TaskGraph:
    return TaskGraph.build("g", operators[:max(task_operator) + 1], task_operator, cores, list(src), list(dst),
                           [1.0] * len(src), memory_mb=[g * 1024.0 for g in gb], load_unit="cores")


def place(graph: TaskGraph, cluster: Cluster) -> list[str]:
    placement = get_scheduler("storm-ras", strict=True).schedule(graph, cluster)
    return [cluster.nodes[k].name for k in placement.node_of]


def test_the_rack_holding_the_topologys_executors_comes_first_even_when_less_available():
    """Racks r1 {a: 4 cores, 4 GB} and r2 {b: 5 cores, 4 GB}; A(2) -> B(2) all to all, each
    executor 2 cores and 1 GB. Storm's order alternates A0 B0 A1 B1 (tasks 0 2 1 3), a new sort
    for each. A0 to r2 (mean share (5/9 + 1/2) / 2 against (4/9 + 1/2) / 2). Then r2 has 3
    cores, 3 GB of 7 cores, 7 GB left, r1 4 and 4: r1 is more available, but r2 holds one of
    the topology's executors, so B0 goes to b; A1 does not fit b (1 core left): a; B1: b full,
    a."""
    cluster = cluster_of(("a", "r1", 4, 4, 4), ("b", "r2", 5, 4, 4))
    graph = graph_of([0, 0, 1, 1], [2.0] * 4, [1.0] * 4, src=[0, 0, 1, 1], dst=[2, 3, 2, 3])
    assert place(graph, cluster) == ["b", "a", "b", "a"]


def test_a_rack_with_more_nodes_but_none_of_the_topology_is_not_ahead():
    """Rack r1 has two small nodes, r2 one large node (mean share (4/6 + 4/6) / 2 against 1/3):
    the first executor goes to r2, though r1 has more nodes; every executor of the run follows."""
    cluster = cluster_of(("x", "r1", 1, 1, 4), ("y", "r1", 1, 1, 4), ("z", "r2", 4, 4, 1))
    assert place(graph_of([0, 0], [0.5, 0.5], [0.25, 0.25]), cluster) == ["z", "z"]


#: Nodes (cores, GB): c takes the 5.5-core executor first (mean share (6/12 + 6/10) / 2 = 0.55);
#: then c has 0.5 cores left. Before that, b ((2/12 + 3/10) / 2 = 0.233) is ahead of a
#: ((4/12 + 1/10) / 2 = 0.217); after, with 6.5 cores and 9.9 GB left in all, a
#: ((4/6.5 + 1/9.9) / 2 = 0.358) is ahead of b ((2/6.5 + 3/9.9) / 2 = 0.305). A CPU-heavy
#: executor thus makes CPU-rich a the next choice, once the sort sees it.
SHIFT = {"c": (6, 6), "a": (4, 1), "b": (2, 3)}


def shifting(racks: dict[str, str], memory_first: bool) -> Cluster:
    """SHIFT's nodes (c first: node position 0), each in ``racks[name]``; with ``memory_first``
    the two resources swap roles (cores <-> GB), which must not change any choice."""
    nodes = []
    for name, (cores, gb) in SHIFT.items():
        cores, gb = (gb, cores) if memory_first else (cores, gb)
        nodes.append((name, racks[name], cores, gb, 4))
    return cluster_of(*nodes)


def shifting_graph(task_operator: list[int], memory_first: bool, **edges) -> TaskGraph:
    big, small = (5.5, 0.1), (1.0, 0.1)
    cores, gb = zip(*[(b, a) if memory_first else (a, b) for a, b in (big, small)])
    return graph_of(task_operator, list(cores), list(gb), **edges)


@pytest.mark.parametrize("memory_first", [False, True])
@pytest.mark.parametrize("racks", ["one", "three"])
def test_the_next_component_is_sorted_with_the_shares_left_after_the_last_executor(racks, memory_first):
    """A -> B, one executor each (A: 5.5 cores, 0.1 GB; B: 1 core, 0.1 GB), SHIFT's nodes in
    one rack or one rack each: A to c; B (a new component, so a new sort) finds c too full and
    takes a, the more available node (or rack) once A's resources are taken from c's."""
    layout = {name: "r" if racks == "one" else f"r-{name}" for name in SHIFT}
    graph = shifting_graph([0, 1], memory_first, src=[0], dst=[1])
    assert place(graph, shifting(layout, memory_first)) == ["c", "a"]


@pytest.mark.parametrize("memory_first", [False, True])
def test_one_component_keeps_its_first_sort_for_the_whole_run(memory_first):
    """The same two executors as one component's run: Storm sorts the nodes once, before the
    run's first executor (LazyNodeSorting caches the order), so the second, not fitting c, takes
    the next node of that first order, b, not a."""
    layout = {name: "r" for name in SHIFT}
    assert place(shifting_graph([0, 0], memory_first), shifting(layout, memory_first)) == ["c", "b"]


def test_equal_mean_shares_the_larger_min_share_first():
    """Shares of the cluster (8 cores, 8 GB): r1 1 core, 3 GB: (1/8, 3/8), mean 1/4, min 1/8;
    r2 2 cores, 2 GB: (1/4, 1/4), mean 1/4, min 1/4 (exact in binary); r3's node has no free slot
    (counted in the totals, never chosen). Equal means: the larger min first, r2. The same
    nodes in one rack: the same keys on the nodes' shares of the rack, so b."""
    apart = cluster_of(("a", "r1", 1, 3, 1), ("b", "r2", 2, 2, 1), ("c", "r3", 5, 3, 0))
    together = cluster_of(("a", "r", 1, 3, 1), ("b", "r", 2, 2, 1), ("c", "r", 5, 3, 0))
    graph = graph_of([0], [0.1], [0.01])
    assert place(graph, apart) == ["b"] and place(graph, together) == ["b"]


def test_a_node_without_a_free_slot_counts_in_its_racks_resources():
    """r1 {a: 2 cores, 2 GB; d: 6 cores, 6 GB, no free slot} against r2 {b: 3 cores, 3 GB}:
    r1 holds 8 of 11 cores and GB, so its node a is taken before b, although b alone is more
    available than a."""
    cluster = cluster_of(("a", "r1", 2, 2, 1), ("d", "r1", 6, 6, 0), ("b", "r2", 3, 3, 1))
    assert place(graph_of([0], [0.1], [0.01]), cluster) == ["a"]


def test_a_rack_counts_its_slotless_nodes_once_and_its_other_nodes_once():
    """r1 {a: 1 core, 1 GB; d: 5 cores, 5 GB, no free slot} holds 6 of 10 cores and GB, r2 {b:
    4 cores, 4 GB} 4: r1 first, so a (counting a twice would give r1 7 against r2's 8)."""
    cluster = cluster_of(("a", "r1", 1, 1, 1), ("d", "r1", 5, 5, 0), ("b", "r2", 4, 4, 1))
    assert place(graph_of([0], [0.1], [0.01]), cluster) == ["a"]


def test_a_refused_topology_reports_no_executor_placed():
    cluster = cluster_of(("a", "r", 8, 8, 4))
    with pytest.raises(PackingFailed) as refused:
        get_scheduler("storm-ras", strict=True, max_state_search=2).schedule(graph_of([0, 0], [0.1] * 2, [0.1] * 2),
                                                                             cluster)
    assert isinstance(refused.value, InfeasibleError) and refused.value.node_of.tolist() == [-1, -1]


def test_availability_when_both_resources_are_available_is_the_mean_and_min_share():
    """(3 of 4 cores, 1 of 4 GB): mean (0.75 + 0.25) / 2 = 0.5, min 0.25; totals below one unit
    count as available (0.25 of 0.5 cores, 0.5 of 0.5 GB: mean 0.75, min 0.5)."""
    mean, low = availability(np.array([3.0, 0.25]), np.array([1.0, 0.5]), np.array([4.0, 0.5]),
                             np.array([4.0, 0.5]))
    assert mean.tolist() == [0.5, 0.75] and low.tolist() == [0.25, 0.5]


def test_availability_with_one_resource_missing_everywhere_uses_the_other_alone():
    """No memory anywhere (total 0): the mean and min are the CPU share alone, (3 of 4) 0.75 and
    (1 of 4) 0.25; no CPU anywhere: the memory share, (0.5 of 0.5) 1 and (0.1 of 0.5) 0.2; no
    numpy warning for the division by zero it leaves out."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mean, low = availability(np.array([3.0, 1.0]), np.array([0.0, 0.0]), np.array([4.0, 4.0]),
                                 np.array([0.0, 0.0]))
        assert mean.tolist() == [0.75, 0.25] and low.tolist() == [0.75, 0.25]
        mean, low = availability(np.array([0.0, 0.0]), np.array([0.5, 0.1]), 0.0, 0.5)
        assert mean.tolist() == [1.0, 0.2] and low.tolist() == pytest.approx([1.0, 0.2])
        mean, low = availability(np.array([0.0, 1.0]), np.array([0.0, 0.5]), np.array([0.0, 2.0]),
                                 np.array([0.0, 2.0]))  # neither; then both
        assert mean.tolist() == [1.0, 0.375] and low.tolist() == [1.0, 0.25]


def test_the_rack_totals_kept_between_sorts_and_the_resumed_order_agree_with_recomputing_them(monkeypatch):
    """Random tight clusters of 2-3 racks where the search backtracks: after every step the
    racks' available CPU, memory and executor counts kept incrementally equal those recomputed
    from the search's state, and the full order a resume walks (``full_order``) gives the same
    first fit as the lazy per-rack lookup (``first``) on the same sort."""
    from streamsched.schedulers import storm_ras

    original = storm_ras.RackFirst.__call__
    resumes = []

    def checked(self, position, resume):
        out = original(self, position, resume)
        kept = (self.rack_cpu.copy(), self.rack_mem.copy(), self.rack_count.copy())
        self.totals()
        assert np.allclose(kept[0], self.rack_cpu) and np.allclose(kept[1], self.rack_mem)
        assert kept[2].tolist() == self.rack_count.tolist()
        self.rack_cpu, self.rack_mem, self.rack_count = kept
        task, sorting = self.order[position], self.sorting
        order = sorting.full_order()
        fitting = order[self.search.fits(task, order)]
        if resume is None:
            assert out[0] == (int(fitting[0]) if fitting.size else -1)
        resumes.append(resume is not None)
        return out

    monkeypatch.setattr(storm_ras.RackFirst, "__call__", checked)
    rng = np.random.default_rng(7)
    placed = 0
    for _ in range(60):
        nodes = [(f"n{k}", f"r{rng.integers(3)}", float(rng.integers(2, 6)), float(rng.integers(2, 6)),
                  int(rng.integers(1, 4))) for k in range(int(rng.integers(3, 6)))]
        n_tasks = int(rng.integers(3, 8))
        ops = sorted(rng.integers(0, 2, n_tasks).tolist())
        ops[0] = 0
        cores, gb = rng.uniform(0.5, 3.0, n_tasks).round(1), rng.uniform(0.5, 3.0, n_tasks).round(1)
        src = [s for s in range(n_tasks) for d in range(n_tasks) if ops[s] == 0 and ops[d] == 1]
        dst = [d for s in range(n_tasks) for d in range(n_tasks) if ops[s] == 0 and ops[d] == 1]
        try:
            place(graph_of(ops, cores.tolist(), gb.tolist(), src=src, dst=dst), cluster_of(*nodes))
            placed += 1
        except InfeasibleError:  # PackingFailed too: no fit even with backtracking
            pass
    assert placed >= 10 and sum(resumes) >= 10  # backtracking was exercised
