"""Storm's Resource Aware Scheduler as Storm runs it today: ``DefaultResourceAwareStrategy`` [1]_
(``BaseResourceAwareStrategy`` with ``ExecSorterByConnectionCount`` and
``NodeSorterHostProximity``, sort type ``COMMON``), which grew out of R-Storm [2]_
(:mod:`.r_storm`, the paper's algorithm) and differs from it in two steps:

1. *Executor order* (``ExecSorterByConnectionCount``): components by their connections, the sum
   over neighbouring components (parents and children) of ``executors x neighbour's executors``,
   most first, ties by name; for each component in turn, one executor of it and then one of each
   neighbour (fewest executors first, ties by name), repeated until it and its neighbours have
   none left. System components (names starting ``__``, ackers) come last.
2. *Node order, per component* (``NodeSorterHostProximity``): before the first executor of each
   run of one component's executors (and after every backtrack) the nodes are sorted again,
   rack first: racks by the executors of this topology already on them (most first), then by
   the mean of their shares of the cluster's available CPU and memory, then by the smaller
   share (both most first), then by rack name; within a rack, nodes by the same three keys
   with shares of the rack's available resources, then by node order. The topology's own
   executors pull the next ones onto the same node and rack, so a topology fills a node
   before it opens another.
3. *Placement*: as R-Storm's step 3 (the first node in that order where CPU, memory and the
   worker heap limit fit; backtracking within ``max_state_search`` placements). Like Storm,
   a topology with ``max_state_search`` executors or more is refused before the search.

Where this differs from Storm: a node is one choice (the executor joins the node's first worker
of the topology with heap room, else a free slot), where Storm tries each of the node's slots
in turn; the resources sorted are CPU and memory only (``TestLargeCluster``'s supervisors also
declare a ``network.resource.units`` that no executor requests, which Storm's sort counts
against a rack). Topologies are scheduled in the order the caller gives; Storm's
``DefaultSchedulingPriorityStrategy`` (``topology.priority``, lowest first) is
:func:`streamsched.engines.storm.nimbus.priority_order`. Resources, CPU accounting, failures
and ``strict`` are R-Storm's (:mod:`.r_storm`).

References
----------
.. [1] The Apache Software Foundation (2026) "Apache Storm: BaseResourceAwareStrategy,
   ExecSorterByConnectionCount, NodeSorterHostProximity", github.com/apache/storm,
   storm-server/src/main/java/org/apache/storm/scheduler/resource/strategies/scheduling,
   commit 73da988d.
.. [2] Peng, B.; Hosseini, M.; Hong, Z.; Farivar, R.; Campbell, R. (2015) "R-Storm: Resource-aware
   scheduling in Storm", Proceedings of the 16th Annual Middleware Conference, ACM, pp. 149-161.
"""

from __future__ import annotations

import numpy as np

from streamsched.model.taskgraph import TaskGraph
from streamsched.schedulers import register
from streamsched.schedulers.base import PackingFailed
from streamsched.schedulers.r_storm import RStormScheduler


def storm_executor_order(graph: TaskGraph) -> list[int]:
    """Step 1: ``ExecSorterByConnectionCount.sortExecutors``."""
    names = graph.operator_names
    n_ops = len(names)
    sizes = np.bincount(graph.task_operator, minlength=n_ops)
    neighbours: list[set[int]] = [set() for _ in range(n_ops)]
    for x, y in graph.operator_pairs.tolist():
        neighbours[x].add(y)
        neighbours[y].add(x)
    system = [name.startswith("__") for name in names]
    user = [op for op in range(n_ops) if not system[op]]
    connections = lambda op: sum(int(sizes[n]) * int(sizes[op]) for n in neighbours[op] if not system[n])
    queues = {op: list(np.flatnonzero(graph.task_operator == op)[::-1]) for op in range(n_ops)}  # pop() = next
    ordered: list[int] = []
    for op in sorted(user, key=lambda op: (-connections(op), names[op])):
        around = sorted((n for n in neighbours[op] if not system[n]), key=lambda n: (int(sizes[n]), names[n]))
        polled = True
        while polled:
            polled = False
            for comp in [op] + around:
                if queues[comp]:
                    ordered.append(int(queues[comp].pop()))
                    polled = True
    return ordered + [int(t) for op in range(n_ops) if system[op] for t in reversed(queues[op])]


def lexicographic_first(keys: list[np.ndarray], candidates: np.ndarray) -> int:
    """The candidate (ascending indices) with the smallest keys, compared in turn (ties: the
    lowest index), or -1: the first candidate of ``np.lexsort(keys[::-1])`` without sorting."""
    for key in keys:
        if candidates.size <= 1:
            break
        values = key[candidates]
        candidates = candidates[values == values.min()]
    return int(candidates[0]) if candidates.size else -1


def availability(cpu: np.ndarray, mem: np.ndarray, cpu_total: np.ndarray, mem_total: np.ndarray):
    """(mean, min) of an object's shares of the available CPU and memory of what holds it (totals:
    one per object, or one for all) (``calculateAveragePercentageUsedBy`` /
    ``calculateMinPercentageUsedBy``): a resource with none available there is left out; with
    neither, the mean and min are 1."""
    has_cpu, has_mem = np.asarray(cpu_total) > 0, np.asarray(mem_total) > 0
    if has_cpu.all() and has_mem.all():
        cpu_share, mem_share = cpu / cpu_total, mem / mem_total
        return (cpu_share + mem_share) / 2, np.minimum(cpu_share, mem_share)
    with np.errstate(divide="ignore", invalid="ignore"):
        cpu_share, mem_share = cpu / cpu_total, mem / mem_total
    cpu_share, mem_share = np.where(has_cpu, cpu_share, 0.0), np.where(has_mem, mem_share, 0.0)
    counted = has_cpu.astype(np.float64) + has_mem
    mean = np.where(counted > 0, (cpu_share + mem_share) / np.maximum(counted, 1), 1.0)
    return mean, np.minimum(np.where(has_cpu, cpu_share, 1.0), np.where(has_mem, mem_share, 1.0))


class RackFirst:
    """Step 2's node order and step 3's first fit in it, over the positions of the search's
    nodes (``nodes``: cluster node ids). Nodes without a free slot count in their rack's
    available resources but are never chosen."""

    def __init__(self, graph, cluster, nodes, search, order, cpu, mem):
        self.search, self.order, self.component = search, order, graph.task_operator
        racks = sorted({n.rack for n in cluster.nodes})
        rack_of = np.array([racks.index(n.rack) for n in cluster.nodes], dtype=np.int64)
        self.rack, self.n_racks = rack_of[nodes], len(racks)
        self.members = [np.flatnonzero(self.rack == r) for r in range(self.n_racks)]
        outside = np.ones(cluster.n_nodes, dtype=bool)
        outside[nodes] = False
        self.static_cpu = np.bincount(rack_of[outside], cpu[outside], minlength=self.n_racks)
        self.static_mem = np.bincount(rack_of[outside], mem[outside], minlength=self.n_racks)
        self.sorting: Sorting | None = None
        self.taken: tuple[int, int] | None = None  # (task, node position) returned last: assigned since
        self.totals()

    def totals(self) -> None:
        """Each rack's available CPU and memory and executors of the topology, from the search."""
        s = self.search
        self.rack_cpu = self.static_cpu + np.bincount(self.rack, s.cpu, minlength=self.n_racks)
        self.rack_mem = self.static_mem + np.bincount(self.rack, s.mem, minlength=self.n_racks)
        self.rack_count = np.bincount(self.rack, s.count, minlength=self.n_racks)

    def __call__(self, position: int, resume):
        """(node position, resume): the first node in the current order where the executor at
        ``position`` fits; ``resume`` (after a backtrack) is the node taken before and the
        sorting it was taken in: the nodes are sorted again and the search goes on after as
        many nodes as came before it then (Storm's ``progressIdxForExec``)."""
        task = self.order[position]
        if resume is not None:  # undone since the last call: the totals anew
            self.totals()
        elif self.taken is not None:  # the search assigned what the last call returned
            done, at = self.taken
            r = self.rack[at]
            self.rack_cpu[r] -= self.search.need_cpu[done]
            self.rack_mem[r] -= self.search.need_mem[done]
            self.rack_count[r] += 1
        if resume is not None:
            taken, before = resume
            start = int(np.flatnonzero(before.full_order() == taken)[0]) + 1
            self.sorting = Sorting(self)
            ranked = self.sorting.full_order()[start:]
            hit = ranked[self.search.fits(task, ranked)]
            at = int(hit[0]) if hit.size else -1
        else:
            if self.sorting is None or position == 0 or self.component[self.order[position - 1]] != self.component[task]:
                self.sorting = Sorting(self)
            at = self.sorting.first(task)
        self.taken = (task, at) if at >= 0 else None
        return at, (at, self.sorting)


class Sorting:
    """One sort of the nodes (Storm's ``LazyNodeSorting``): the racks' order now, and each
    rack's nodes sorted when first reached (then kept, as Storm caches them). A rack's nodes
    by their executors of the topology, mean share and min share of the rack's available
    resources (all most first), then position."""

    def __init__(self, owner: RackFirst):
        self.owner, n_racks = owner, owner.n_racks
        self.rack_cpu, self.rack_mem, count = owner.rack_cpu.copy(), owner.rack_mem.copy(), owner.rack_count
        mean, low = availability(self.rack_cpu, self.rack_mem, self.rack_cpu.sum(), self.rack_mem.sum())
        self.racks = np.lexsort((np.arange(n_racks), -low, -mean, -count)).tolist()
        self.keys: dict[int, list[np.ndarray]] = {}

    def rack_keys(self, r: int) -> list[np.ndarray]:
        """Ascending keys of rack ``r``'s nodes (``owner.members[r]``), computed on first use."""
        if r not in self.keys:
            s, at = self.owner.search, self.owner.members[r]
            mean, low = availability(s.cpu[at], s.mem[at], self.rack_cpu[r], self.rack_mem[r])
            self.keys[r] = [-s.count[at], -mean, -low]
        return self.keys[r]

    def first(self, task: int) -> int:
        """The first node position in this order where ``task`` fits, or -1."""
        for r in self.racks:
            members = self.owner.members[r]
            fits = np.flatnonzero(self.owner.search.fits(task, members))
            if fits.size:
                return int(members[lexicographic_first(self.rack_keys(r), fits)])
        return -1

    def full_order(self) -> np.ndarray:
        """Every node position in this order."""
        return np.concatenate([self.owner.members[r][np.lexsort(self.rack_keys(r)[::-1])] for r in self.racks])


@register
class StormRasScheduler(RStormScheduler):
    name = "storm-ras"
    summary = "Storm's RAS (DefaultResourceAwareStrategy): R-Storm with racks first and nodes re-sorted per component"
    objective = "resources"

    def place(self, graph, cluster, params, seed):
        if graph.n_tasks >= params["max_state_search"]:
            raise PackingFailed(f"storm-ras: {graph.name!r} has {graph.n_tasks} executors, not fewer than "
                                f"max_state_search {params['max_state_search']} (Storm refuses it)",
                                np.full(graph.n_tasks, -1))
        return super().place(graph, cluster, params, seed)

    def search_nodes(self, cpu, mem, cluster):
        """Every node with a free slot, in cluster order (the order is :class:`RackFirst`'s)."""
        return np.flatnonzero(cluster.slots > 0).astype(np.int64)

    def executor_order(self, graph):
        return storm_executor_order(graph)

    def first_fit(self, graph, cluster, nodes, search, order, cpu, mem):
        return RackFirst(graph, cluster, nodes, search, order, cpu, mem)
