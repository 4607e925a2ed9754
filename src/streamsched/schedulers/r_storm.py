"""R-Storm: Storm's Resource Aware Scheduler, default strategy (Peng et al. [1]_; the baseline of
I-Scheduler [2]_ section 5).

1. *Executor order*: operators sorted by their number of neighbouring operators (most connected
   first, ties by operator index); each is followed by its not yet listed neighbours, again most
   connected first; executors are then taken round robin over that operator list, one per
   operator per turn (Storm's ``orderExecutors``).
2. *Node order*: nodes by resource availability, most available first: the smallest share of
   the cluster's available CPU and memory a node holds, then the mean of the two shares.
3. *Placement*: each executor in order goes to the first node where its CPU and memory (hard
   limits) and the model's load capacity fit; when none fits, the search backtracks to the
   previous executor's next node, within ``max_state_search`` placements (Storm: 10,000).

Resources: task memory is ``graph.memory_mb`` (a task without one gets Storm's component
default, ``default_memory_mb`` = 128); task CPU is ``load x cpu_per_load`` (default 10 per load
unit, Storm's component default for the micro-benchmarks' load 1); node CPU is ``cores x 100``
and node memory ``ram_mb`` (Storm's supervisor defaults 400 / 4096 are the ``Node`` defaults of
4 cores, 4096 MB); a graph with loads in cores (Storm's stored topologies) costs 100 CPU per
core. Several topologies (``schedule_many``): the CPU of the load earlier topologies put on a
node is charged at the same rate. A topology's executors on one node share one worker (slot 0
of the node's free slots), unless the graph limits a worker's heap (``worker_heap_mb``, Storm's
``topology.worker.max.heap.size.mb``): then an executor joins the node's first worker of the
topology with heap room, else opens another free slot, else the node does not fit (Storm's
``RasNode.wouldFit``). The search is vectorised over the nodes: each step is one numpy
comparison of the executor's needs with every node's remaining resources.
A topology needing more CPU or memory than all nodes together fails at once; any other
failure lists the executor's needs and every node's availability. Both fail the packing
(:class:`~streamsched.schedulers.base.PackingFailed`, with the deepest partial placement the
search reached): ``strict`` refuses (``InfeasibleError``), otherwise the capacity repair
finishes it, within the model's load capacity (not R-Storm's CPU and memory limits).

References
----------
.. [1] Peng, B.; Hosseini, M.; Hong, Z.; Farivar, R.; Campbell, R. (2015) "R-Storm: Resource-aware
   scheduling in Storm", Proceedings of the 16th Annual Middleware Conference, ACM, pp. 149-161.
.. [2] Eskandari, L.; Mair, J.; Huang, Z.; Eyers, D. (2020) "I-Scheduler: Iterative scheduling for
   distributed stream processing systems", Future Generation Computer Systems,
   doi:10.1016/j.future.2020.11.011.
"""

from __future__ import annotations

import numpy as np

from streamsched.model.cluster import Cluster
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.model.units import CORES
from streamsched.schedulers import register
from streamsched.schedulers.base import STRICT, PackingFailed, Param, Scheduler, remaining_capacity

CPU_PER_CORE = 100.0


def executor_order(graph: TaskGraph) -> list[int]:
    """Storm's ``orderExecutors``: operators by connection count with their neighbours, then round robin."""
    n_ops = len(graph.operator_names)
    neighbours = [set() for _ in range(n_ops)]
    for x, y in graph.operator_pairs.tolist():
        if x != y:
            neighbours[x].add(y)
            neighbours[y].add(x)
    by_connections = lambda ops: sorted(ops, key=lambda op: (-len(neighbours[op]), op))
    ordered: list[int] = []
    listed = np.zeros(n_ops, dtype=bool)
    for op in by_connections(range(n_ops)):
        for candidate in [op] + by_connections(neighbours[op]):
            if not listed[candidate]:
                listed[candidate] = True
                ordered.append(candidate)
    # round robin: the r-th executor of every operator (in ``ordered``) before any (r+1)-th
    position = np.empty(n_ops, dtype=np.int64)
    position[ordered] = np.arange(n_ops)
    return np.lexsort((position[graph.task_operator], graph.task_rank)).tolist()


def node_order(cpu: np.ndarray, memory: np.ndarray) -> list[int]:
    """Nodes by (min share, mean share) of the cluster's available CPU and memory, most first."""
    cpu_share = cpu / cpu.sum() if cpu.sum() > 0 else np.zeros_like(cpu)
    mem_share = memory / memory.sum() if memory.sum() > 0 else np.zeros_like(memory)
    low = np.minimum(cpu_share, mem_share)
    mean = (cpu_share + mem_share) / 2
    return [int(k) for k in np.lexsort((np.arange(cpu.size), -mean, -low))]


def node_cpu(cluster: Cluster, cpu_per_load: float) -> np.ndarray:
    """``cores x 100`` per node, minus the CPU of the load earlier topologies put there
    (:class:`~streamsched.schedulers.base.ResidualCluster`)."""
    cpu = np.array([n.cores * CPU_PER_CORE for n in cluster.nodes], dtype=np.float64)
    used = np.asarray(getattr(cluster, "used_load", ()) or np.zeros(cluster.n_nodes), dtype=np.float64)
    return np.maximum(cpu - used * cpu_per_load, 0.0)


def cpu_per_load(graph: TaskGraph, given: float) -> float:
    """CPU points per unit of load: 100 when the graph's loads are cores (Storm's percent of a
    core, :mod:`streamsched.engines.storm.nimbus`), else the ``cpu_per_load`` parameter."""
    return CPU_PER_CORE if graph.load_unit == CORES else given


def task_demands(graph: TaskGraph, cpu_per_load: float, default_memory_mb: float) -> tuple[np.ndarray, np.ndarray]:
    """(CPU points, memory MB) of every task."""
    memory = np.where(graph.memory_mb > 0, graph.memory_mb, default_memory_mb)
    return graph.load * cpu_per_load, memory


@register
class RStormScheduler(Scheduler):
    name = "r-storm"
    summary = "R-Storm: executors by connectivity onto the most available nodes, CPU/memory fit, backtracking"
    objective = "resources"
    params = (
        Param("cpu_per_load", float, 10.0, "CPU points (100 = one core) per unit of task load", low=0.0),
        Param("default_memory_mb", float, 128.0, "memory of a task whose graph gives none", low=0.0),
        Param("max_state_search", int, 10_000, "placements tried before giving up (Storm's state limit)", low=1),
        STRICT,
    )

    def place(self, graph, cluster, params, seed):
        per_load = cpu_per_load(graph, params["cpu_per_load"])
        need_cpu, need_mem = task_demands(graph, per_load, params["default_memory_mb"])
        cpu = node_cpu(cluster, per_load)
        mem = np.array([n.ram_mb for n in cluster.nodes], dtype=np.float64)
        room = remaining_capacity(cluster)
        nodes = self.search_nodes(cpu, mem, cluster)
        totals = (("CPU", need_cpu.sum(), cpu[nodes].sum()), ("MB", need_mem.sum(), mem[nodes].sum()))
        for resource, need, have in totals:
            if need > have * (1 + 1e-9) + 1e-9:
                raise PackingFailed(f"{self.name}: {graph.name!r} needs {need:g} {resource} in total; the nodes "
                                    f"with slots in {cluster.name!r} have {have:g} {resource} available",
                                    np.full(graph.n_tasks, -1), nodes=np.sort(nodes))
        search = _Search(graph, need_cpu, need_mem, cpu[nodes], mem[nodes], room[nodes], cluster.slots[nodes])
        order = self.executor_order(graph)
        first_fit = self.first_fit(graph, cluster, nodes, search, order, cpu, mem)
        choice: list = [None] * len(order)
        position, states, deepest = 0, 0, 0
        stuck = None
        while position < len(order):
            task = order[position]
            at, resume = first_fit(position, choice[position])
            if at >= 0:
                search.assign(task, at)
                choice[position] = resume
                states += 1
                position += 1
                deepest = max(deepest, position)
                continue
            if deepest == position:
                stuck = search.snapshot(task, nodes, cluster.n_nodes)
            choice[position] = None
            position -= 1
            if position < 0 or states >= params["max_state_search"]:
                raise PackingFailed(self._failure(graph, cluster, stuck, need_cpu, need_mem, states), stuck[4],
                                    np.where(stuck[4] >= 0, 0, -1), nodes=np.sort(nodes), metadata={"states": states})
            search.undo(order[position])
        node_of = np.where(search.at >= 0, nodes[np.maximum(search.at, 0)], -1)
        return Placement.build(node_of, search.worker, {"states": states})

    def search_nodes(self, cpu: np.ndarray, mem: np.ndarray, cluster: Cluster) -> np.ndarray:
        """The nodes the search may use, in the paper's order (step 2): those with a free slot."""
        return np.array([k for k in node_order(cpu, mem) if cluster.slots[k] > 0], dtype=np.int64)

    def executor_order(self, graph: TaskGraph) -> list[int]:
        """Step 1."""
        return executor_order(graph)

    def first_fit(self, graph, cluster, nodes, search, order, cpu, mem):
        """``(position, resume) -> (node position, resume)``: step 3's first node where the
        executor at ``position`` of ``order`` fits (-1: none), from the start of the node order
        (``resume`` None) or after the node it took before (the ``resume`` returned then)."""
        def first(position: int, resume: int | None) -> tuple[int, int]:
            at = search.first_fit(order[position], resume or 0)
            return at, at + 1
        return first

    def _failure(self, graph: TaskGraph, cluster: Cluster, stuck, need_cpu, need_mem, states: int) -> str:
        task, cpu, mem, room, _ = stuck
        shown = [k for k in range(cluster.n_nodes) if cluster.slots[k] > 0]
        available = ", ".join(
            f"{cluster.nodes[k].name} {cpu[k]:g} CPU/{mem[k]:g} MB/load {max(room[k], 0):.4g}" for k in shown[:8])
        if len(shown) > 8:
            available += f" and {len(shown) - 8} more nodes"
        heap = ""
        if graph.worker_heap_mb > 0 and graph.onheap_mb is not None:
            heap = f", {graph.onheap_mb[task]:g} MB heap in a worker of at most {graph.worker_heap_mb:g} MB"
        return (
            f"{self.name}: executor {graph.task_label(task)} of {graph.name!r} needs {need_cpu[task]:g} CPU, "
            f"{need_mem[task]:g} MB, load {graph.load[task]:g}{heap}; available: {available} "
            f"(after {states} placements)"
        )


class _Search:
    """The resources left on the nodes of R-Storm's order (position ``i`` = the i-th node) while
    one topology is placed, with its workers: an executor joins the node's first worker whose
    heap stays within ``graph.worker_heap_mb`` (Storm's ``RasNode.wouldFit``), else opens a free
    slot; without a limit, one worker per node (slot 0)."""

    TOLERANCE = 1e-9

    def __init__(self, graph, need_cpu, need_mem, cpu, mem, room, slots):
        self.graph, self.need_cpu, self.need_mem = graph, need_cpu, need_mem
        self.cpu, self.mem, self.room = cpu.astype(np.float64), mem.astype(np.float64), room.astype(np.float64)
        self.limit = float(graph.worker_heap_mb)
        self.heap = graph.onheap_mb if graph.onheap_mb is not None else graph.memory_mb
        self.slots = np.asarray(slots, dtype=np.int64)
        self.opened = np.zeros(self.cpu.size, dtype=np.int64)
        self.least_heap = np.full(self.cpu.size, np.inf)  # least heap of an open worker per node
        self.workers: dict[int, list[float]] = {}  # heap of each open worker, by node position
        self.at = np.full(graph.n_tasks, -1, np.int64)
        self.count = np.zeros(self.cpu.size, dtype=np.int64)  # the topology's executors per node position
        self.worker = np.full(graph.n_tasks, 0 if self.limit <= 0 else -1, np.int32)

    def fits(self, task: int, at: slice | np.ndarray = slice(None)) -> np.ndarray:
        """Whether ``task`` fits, for the node positions ``at`` (a slice or an index array)."""
        tol = self.TOLERANCE
        fits = ((self.cpu[at] + tol >= self.need_cpu[task]) & (self.mem[at] + tol >= self.need_mem[task])
                & (self.room[at] >= self.graph.load[task]))
        if self.limit > 0:
            h = self.heap[task]
            fits &= (self.least_heap[at] + h <= self.limit + tol) | (
                (self.opened[at] < self.slots[at]) & (h <= self.limit + tol))
        return fits

    def first_fit(self, task: int, start: int) -> int:
        """The first node position >= ``start`` where ``task`` fits, or -1."""
        fits = self.fits(task, slice(start, None))
        hit = int(np.argmax(fits)) if fits.size else 0
        return start + hit if fits.size and fits[hit] else -1

    def assign(self, task: int, at: int) -> None:
        self.cpu[at] -= self.need_cpu[task]
        self.mem[at] -= self.need_mem[task]
        self.room[at] -= self.graph.load[task]
        self.at[task] = at
        self.count[at] += 1
        if self.limit > 0:
            heaps = self.workers.setdefault(at, [])
            h = self.heap[task]
            w = next((i for i, used in enumerate(heaps) if used + h <= self.limit + self.TOLERANCE), len(heaps))
            if w == len(heaps):
                heaps.append(0.0)
                self.opened[at] += 1
            heaps[w] += h
            self.worker[task] = w
            self.least_heap[at] = min(heaps)

    def undo(self, task: int) -> None:
        at = int(self.at[task])
        self.cpu[at] += self.need_cpu[task]
        self.mem[at] += self.need_mem[task]
        self.room[at] += self.graph.load[task]
        self.at[task] = -1
        self.count[at] -= 1
        if self.limit > 0:
            heaps, w = self.workers[at], int(self.worker[task])
            heaps[w] -= self.heap[task]
            if w == len(heaps) - 1 and not np.any((self.at >= 0) & (self.at == at) & (self.worker == w)):
                heaps.pop()
                self.opened[at] -= 1
            self.least_heap[at] = min(heaps) if heaps else np.inf
            self.worker[task] = -1

    def snapshot(self, task: int, nodes: np.ndarray, n_nodes: int):
        """(task, CPU, MB, load room per cluster node, node_of) for the failure message."""
        cpu, mem, room = np.zeros(n_nodes), np.zeros(n_nodes), np.zeros(n_nodes)
        cpu[nodes], mem[nodes], room[nodes] = self.cpu, self.mem, self.room
        node_of = np.where(self.at >= 0, nodes[np.maximum(self.at, 0)], -1)
        return task, cpu, mem, room, node_of
