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
4 cores, 4096 MB). Several topologies (``schedule_many``): the CPU of the load earlier
topologies put on a node is charged at the same ``cpu_per_load``. A topology's executors on
one node share one worker (slot 0 of the node's free slots).
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
from streamsched.schedulers import register
from streamsched.schedulers.base import STRICT, PackingFailed, Param, Scheduler, remaining_capacity

CPU_PER_CORE = 100.0


def executor_order(graph: TaskGraph) -> list[int]:
    """Storm's ``orderExecutors``: operators by connection count with their neighbours, then round robin."""
    n_ops = len(graph.operator_names)
    a, b = graph.task_operator[graph.src], graph.task_operator[graph.dst]
    keep = a != b
    neighbours = [set() for _ in range(n_ops)]
    for x, y in zip(a[keep].tolist(), b[keep].tolist()):
        neighbours[x].add(y)
        neighbours[y].add(x)
    by_connections = lambda ops: sorted(ops, key=lambda op: (-len(neighbours[op]), op))
    ordered: list[int] = []
    for op in by_connections(range(n_ops)):
        for candidate in [op] + by_connections(neighbours[op]):
            if candidate not in ordered:
                ordered.append(candidate)
    queues = [graph.operator_tasks(op).tolist() for op in ordered]
    order: list[int] = []
    while any(queues):
        for queue in queues:
            if queue:
                order.append(queue.pop(0))
    return order


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
        need_cpu, need_mem = task_demands(graph, params["cpu_per_load"], params["default_memory_mb"])
        cpu = node_cpu(cluster, params["cpu_per_load"])
        mem = np.array([n.ram_mb for n in cluster.nodes], dtype=np.float64)
        room = remaining_capacity(cluster)
        nodes = [k for k in node_order(cpu, mem) if cluster.slots[k] > 0]
        totals = (("CPU", need_cpu.sum(), cpu[nodes].sum()), ("MB", need_mem.sum(), mem[nodes].sum()))
        for resource, need, have in totals:
            if need > have * (1 + 1e-9) + 1e-9:
                raise PackingFailed(f"r-storm: {graph.name!r} needs {need:g} {resource} in total; the nodes "
                                    f"with slots in {cluster.name!r} have {have:g} {resource} available",
                                    np.full(graph.n_tasks, -1), nodes=sorted(nodes))
        order = executor_order(graph)
        tol = 1e-9
        node_of = np.full(graph.n_tasks, -1, np.int32)
        choice = [0] * len(order)
        position, states, deepest = 0, 0, 0
        stuck = None
        while position < len(order):
            task = order[position]
            placed = False
            while choice[position] < len(nodes):
                k = nodes[choice[position]]
                choice[position] += 1
                if (need_cpu[task] <= cpu[k] + tol and need_mem[task] <= mem[k] + tol
                        and graph.load[task] <= room[k]):
                    cpu[k] -= need_cpu[task]
                    mem[k] -= need_mem[task]
                    room[k] -= graph.load[task]
                    node_of[task] = k
                    placed = True
                    states += 1
                    break
            if placed:
                position += 1
                deepest = max(deepest, position)
                continue
            if deepest == position:
                stuck = (task, cpu.copy(), mem.copy(), room.copy(), node_of.copy())
            choice[position] = 0
            position -= 1
            if position < 0 or states >= params["max_state_search"]:
                raise PackingFailed(self._failure(graph, cluster, stuck, need_cpu, need_mem, states), stuck[4],
                                    np.where(stuck[4] >= 0, 0, -1), nodes=sorted(nodes), metadata={"states": states})
            undo = order[position]
            k = node_of[undo]
            cpu[k] += need_cpu[undo]
            mem[k] += need_mem[undo]
            room[k] += graph.load[undo]
            node_of[undo] = -1
        return Placement.build(node_of, np.zeros(graph.n_tasks, np.int32), {"states": states})

    def _failure(self, graph: TaskGraph, cluster: Cluster, stuck, need_cpu, need_mem, states: int) -> str:
        task, cpu, mem, room, _ = stuck
        available = ", ".join(
            f"{node.name} {cpu[k]:g} CPU/{mem[k]:g} MB/load {max(room[k], 0):.4g}"
            for k, node in enumerate(cluster.nodes) if cluster.slots[k] > 0
        )
        return (
            f"r-storm: executor {graph.task_label(task)} of {graph.name!r} needs {need_cpu[task]:g} CPU, "
            f"{need_mem[task]:g} MB, load {graph.load[task]:g}; available: {available} "
            f"(after {states} placements)"
        )
