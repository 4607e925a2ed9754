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
    a, b = graph.task_operator[graph.src].astype(np.int64), graph.task_operator[graph.dst].astype(np.int64)
    pairs = np.unique(a * n_ops + b)
    neighbours: list[set[int]] = [set() for _ in range(n_ops)]
    for x, y in zip((pairs // n_ops).tolist(), (pairs % n_ops).tolist()):
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
    """(mean, min) of an object's shares of the available CPU and memory of what holds it
    (``calculateAveragePercentageUsedBy`` / ``calculateMinPercentageUsedBy``): a resource with
    none available there is left out; with neither, the mean and min are 1."""
    shares = [np.divide(have, total, out=np.zeros_like(have), where=total > 0)
              for have, total in ((cpu, cpu_total), (mem, mem_total))]
    counted = (cpu_total > 0).astype(np.float64) + (mem_total > 0)
    mean = np.divide(shares[0] + shares[1], counted, out=np.ones_like(shares[0]), where=counted > 0)
    low = np.minimum(np.where(cpu_total > 0, shares[0], 1.0), np.where(mem_total > 0, shares[1], 1.0))
    return mean, low


class RackFirst:
    """Step 2's node order and step 3's first fit in it, over the positions of the search's
    nodes (``nodes``: cluster node ids). Nodes without a free slot count in their rack's
    available resources but are never chosen."""

    def __init__(self, graph, cluster, nodes, search, order, cpu, mem):
        self.search, self.order, self.component = search, order, graph.task_operator
        racks = sorted({n.rack for n in cluster.nodes})
        rack_of = np.array([racks.index(n.rack) for n in cluster.nodes], dtype=np.int64)
        self.rack, self.n_racks = rack_of[nodes], len(racks)
        outside = np.ones(cluster.n_nodes, dtype=bool)
        outside[nodes] = False
        self.static_cpu = np.bincount(rack_of[outside], cpu[outside], minlength=self.n_racks)
        self.static_mem = np.bincount(rack_of[outside], mem[outside], minlength=self.n_racks)
        self.index = np.arange(len(nodes))
        self.keys: list[np.ndarray] | None = None

    def sort_keys(self) -> list[np.ndarray]:
        """Ascending keys of every node position: rack rank, then the node's count, mean share
        and min share (negated: most first); the position breaks the last ties."""
        s = self.search
        rack_cpu = self.static_cpu + np.bincount(self.rack, s.cpu, minlength=self.n_racks)
        rack_mem = self.static_mem + np.bincount(self.rack, s.mem, minlength=self.n_racks)
        rack_count = np.bincount(self.rack, s.count, minlength=self.n_racks)
        total_cpu, total_mem = np.full(self.n_racks, rack_cpu.sum()), np.full(self.n_racks, rack_mem.sum())
        rack_mean, rack_min = availability(rack_cpu, rack_mem, total_cpu, total_mem)
        rank = np.empty(self.n_racks, dtype=np.int64)
        rank[np.lexsort((np.arange(self.n_racks), -rack_min, -rack_mean, -rack_count))] = np.arange(self.n_racks)
        mean, low = availability(s.cpu, s.mem, rack_cpu[self.rack], rack_mem[self.rack])
        return [rank[self.rack], -s.count, -mean, -low]

    def __call__(self, position: int, resume):
        """(node position, resume): the first node in the current order where the executor at
        ``position`` fits; ``resume`` (after a backtrack) is the node taken before and the keys
        it was taken under: the nodes are sorted again and the search goes on after as many
        nodes as came up to it then (Storm's ``progressIdxForExec``)."""
        task = self.order[position]
        fits = self.search.fits(task)
        if resume is not None:
            taken, keys = resume
            start = int(np.flatnonzero(np.lexsort(keys[::-1]) == taken)[0]) + 1
            self.keys = self.sort_keys()
            ranked = np.lexsort(self.keys[::-1])[start:]
            hit = ranked[fits[ranked]]
            at = int(hit[0]) if hit.size else -1
        else:
            if self.keys is None or position == 0 or self.component[self.order[position - 1]] != self.component[task]:
                self.keys = self.sort_keys()
            at = lexicographic_first(self.keys, np.flatnonzero(fits))
        return at, (at, self.keys)


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
