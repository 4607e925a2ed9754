"""Storm: the plan a custom ``IScheduler`` applies with ``Cluster.assign`` (docs/engines.md, "Storm").

Nimbus fixes a topology's executors at submit time, so a plan can only name executors that exist,
with Storm's task ids. This module knows how Storm numbers them and lifts a placement of
streamsched tasks to ``(supervisor id, port) -> [[start, end], ...]``:

- :func:`nimbus_task_ids` and :func:`nimbus_executors` compute task ids and executors the way
  Nimbus does (``StormCommon.stormTaskInfoImpl``: components, system ones included, sorted by id
  as Java strings, tasks numbered from 1; ``Nimbus.computeExecutors``: each component's sorted
  tasks cut into ``parallelism hint`` chunks by ``Utils.partitionFixed``);
- :func:`system_components` lists the system components Storm adds (``StormCommon.addAcker``,
  ``addEventLogger``, ``metricsConsumerBoltSpecs``; ``__system`` has no task);
- :class:`StormLayout` is one running (or to-be-submitted) topology's executors, supervisor ids
  and worker ports: from the UI REST data (:mod:`.ui_rest`) or from a task graph
  (:func:`layout_from_graph`);
- :func:`storm_plan` writes the plan (schema: ``engines/schemas/storm-plan.schema.json``) and
  :func:`placement_from_plan` reads one back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from streamsched.engines.placement_check import check_exportable, worker_slots
from streamsched.errors import InputError
from streamsched.model.cluster import Cluster
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph

PLAN_FORMAT = "streamsched.storm-plan/1"
#: First port of ``supervisor.slots.ports`` in Storm's defaults.yaml (6700-6703).
STORM_BASE_PORT = 6700
#: Storm's default ``supervisor.slots.ports`` has four ports.
STORM_DEFAULT_SLOTS = 4
ACKER = "__acker"
EVENT_LOGGER = "__eventlogger"
METRICS_PREFIX = "__metrics"
SYSTEM_PREFIX = "__"


def is_system(name: str) -> bool:
    """``Utils.isSystemId``: component and stream ids starting with ``__`` are Storm's own."""
    return name.startswith(SYSTEM_PREFIX)


def java_order(name: str) -> bytes:
    """Sort key equal to Java's ``String.compareTo`` (UTF-16 code units; a ``TreeMap`` of ids)."""
    return name.encode("utf-16-be", "surrogatepass")


def partition_fixed(max_chunks: int, items: Sequence[int]) -> list[list[int]]:
    """``Utils.partitionFixed``: at most ``max_chunks`` consecutive chunks, larger ones first
    (``integerDivided``: ``n % k`` chunks of ``n // k + 1``, the rest of ``n // k``); empty
    chunks are not returned, so a hint above the task count gives one task per executor."""
    if max_chunks <= 0:
        return []
    n = len(items)
    base, bigger = divmod(n, max_chunks)
    sizes = [base + 1] * bigger + [base] * (max_chunks - bigger)
    chunks, at = [], 0
    for size in sizes:
        if at >= n:
            break
        chunks.append(list(items[at:at + size]))
        at += size
    return chunks


def nimbus_task_ids(task_counts: Mapping[str, int]) -> dict[str, range]:
    """Each component's task ids, as ``StormCommon.stormTaskInfoImpl`` numbers them: component
    ids in a ``TreeMap`` (Java string order), ids from 1, a component's tasks consecutive."""
    out: dict[str, range] = {}
    next_id = 1
    for name in sorted(task_counts, key=java_order):
        count = int(task_counts[name])
        if count < 0:
            raise InputError(f"Storm component {name!r}: {count} tasks; must be >= 0")
        out[name] = range(next_id, next_id + count)
        next_id += count
    return out


@dataclass(frozen=True)
class StormExecutor:
    """One executor: Storm's ``ExecutorDetails(startTask, endTask)`` of a component."""

    component: str
    start: int
    end: int

    @property
    def system(self) -> bool:
        return is_system(self.component)

    @property
    def tasks(self) -> range:
        return range(self.start, self.end + 1)


def nimbus_executors(components: Mapping[str, tuple[int, int]]) -> list[StormExecutor]:
    """``Nimbus.computeExecutors``: ``components[name] = (tasks, executors)`` (``topology.tasks``
    and the parallelism hint); each component's tasks, in id order, cut by :func:`partition_fixed`.
    Returned in task id order."""
    ids = nimbus_task_ids({name: tasks for name, (tasks, _) in components.items()})
    out = []
    for name, task_range in ids.items():
        for chunk in partition_fixed(int(components[name][1]), list(task_range)):
            out.append(StormExecutor(name, chunk[0], chunk[-1]))
    return sorted(out, key=lambda e: e.start)


def system_components(workers: int = 1, ackers: int | None = None, event_loggers: int | None = 0,
                      metrics_consumers: Sequence[tuple[str, int]] = ()) -> dict[str, tuple[int, int]]:
    """The components Storm adds at submit time, ``name -> (tasks, executors)``; each has as many
    executors as tasks.

    - ``__acker``: ``topology.acker.executors``, which defaults (``null``) to ``topology.workers``
      (default 1) (``StormCommon.addAcker``); ``ackers=0`` leaves no acker task;
    - ``__eventlogger``: ``topology.eventlogger.executors`` (default 0; ``None`` means
      ``topology.workers``) (``StormCommon.addEventLogger``);
    - ``__metrics<class>`` per ``topology.metrics.consumer.register`` entry ``(class,
      parallelism.hint)``, a repeated class as ``__metrics<class>#2`` (``metricsConsumerBoltSpecs``);
    - ``__system`` has no task (``addSystemComponents``: ``topology.tasks`` 0).
    """
    if workers < 0:
        raise InputError(f"Storm topology.workers: {workers}; must be >= 0")
    n_ackers = workers if ackers is None else int(ackers)
    if n_ackers < 0:
        raise InputError(f"Storm ackers: {n_ackers}; must be >= 0")
    out = {ACKER: (n_ackers, n_ackers)}
    n_loggers = workers if event_loggers is None else int(event_loggers)
    if n_loggers > 0:
        out[EVENT_LOGGER] = (n_loggers, n_loggers)
    seen: dict[str, int] = {}
    for class_name, hint in metrics_consumers:
        seen[class_name] = seen.get(class_name, 0) + 1
        suffix = f"#{seen[class_name]}" if seen[class_name] > 1 else ""
        out[f"{METRICS_PREFIX}{class_name}{suffix}"] = (int(hint), int(hint))
    return out


def worker_ports(observed: Iterable[int], slots: int, base_port: int = STORM_BASE_PORT) -> tuple[int, ...]:
    """A host's worker ports in worker-index order: the ports seen in use, topped up to
    ``slots`` with Storm's default ports (6700, 6701, ...) not seen, all sorted."""
    ports = set(int(p) for p in observed)
    candidate = base_port
    while len(ports) < slots:
        if candidate not in ports:
            ports.add(candidate)
        candidate += 1
    return tuple(sorted(ports))


@dataclass(frozen=True)
class StormLayout:
    """What Storm fixed for one topology: its executors, and where slots are.

    ``supervisors[node]`` is the supervisor id of a cluster node (default: the node name);
    ``ports[node]`` the ports of its worker slots in worker-index order (default ``6700 + w``).
    ``source`` says where the executors came from (``storm-ui`` or ``nimbus``, computed).
    """

    topology_name: str
    topology_id: str | None
    executors: tuple[StormExecutor, ...]
    supervisors: Mapping[str, str] = field(default_factory=dict)
    ports: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    source: str = "nimbus"

    def __post_init__(self) -> None:
        object.__setattr__(self, "executors", tuple(sorted(self.executors, key=lambda e: e.start)))
        object.__setattr__(self, "supervisors", MappingProxyType(dict(self.supervisors)))
        object.__setattr__(self, "ports", MappingProxyType({k: tuple(v) for k, v in self.ports.items()}))
        previous = None
        for executor in self.executors:
            if executor.start < 1 or executor.end < executor.start:
                raise InputError(f"Storm topology {self.topology_name!r}: executor "
                                 f"[{executor.start}-{executor.end}] of {executor.component!r} is not a task range")
            if previous is not None and executor.start <= previous.end:
                raise InputError(f"Storm topology {self.topology_name!r}: executors [{previous.start}-{previous.end}] "
                                 f"and [{executor.start}-{executor.end}] overlap")
            previous = executor

    def component_executors(self, component: str) -> list[StormExecutor]:
        return [e for e in self.executors if e.component == component]

    @property
    def components(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(e.component for e in self.executors))

    def supervisor_id(self, node: str) -> str:
        return self.supervisors.get(node, node)

    def port(self, node: str, worker: int) -> int:
        ports = self.ports.get(node)
        if ports is None:
            return STORM_BASE_PORT + int(worker)
        if worker >= len(ports):
            return worker_ports(ports, worker + 1)[worker]
        return ports[worker]

    def worker_of_port(self, node: str, port: int) -> int:
        ports = self.ports.get(node)
        if ports is None:
            return int(port) - STORM_BASE_PORT
        if port not in ports:
            raise InputError(f"Storm node {node!r}: port {port} is not one of its slots {list(ports)}")
        return ports.index(port)


def layout_from_graph(graph: TaskGraph, topology_id: str | None = None,
                      executors: Mapping[str, int] | None = None, workers: int = 1, ackers: int | None = None,
                      event_loggers: int | None = 0, metrics_consumers: Sequence[tuple[str, int]] = (),
                      supervisors: Mapping[str, str] | None = None) -> StormLayout:
    """The executors Nimbus would create for ``graph`` submitted as a Storm topology: each
    operator a component with as many tasks as it has graph tasks (``topology.tasks``) and
    ``executors[name]`` executors (the parallelism hint; default one per task), plus the system
    components of :func:`system_components`."""
    counts = np.bincount(graph.task_operator, minlength=len(graph.operator_names))
    hints = dict(executors or {})
    unknown = sorted(set(hints) - set(graph.operator_names))
    if unknown:
        raise InputError(f"Storm executors: {unknown[0]!r} is not an operator of graph {graph.name!r} "
                         f"(operators: {', '.join(graph.operator_names)})")
    components: dict[str, tuple[int, int]] = {}
    for name, count in zip(graph.operator_names, counts.tolist()):
        if is_system(name):
            raise InputError(f"graph {graph.name!r}: operator {name!r} starts with '__', which Storm reserves")
        hint = int(hints.get(name, count))
        if hint < 1:
            raise InputError(f"Storm executors of {name!r}: {hint}; must be >= 1")
        components[name] = (count, hint)
    components.update(system_components(workers, ackers, event_loggers, metrics_consumers))
    return StormLayout(graph.name, topology_id, tuple(nimbus_executors(components)),
                       supervisors=supervisors or {}, source="nimbus")


def graph_executors(graph: TaskGraph, layout: StormLayout) -> list[tuple[StormExecutor, list[int]]]:
    """Each application executor of ``layout`` with the graph task indices it runs.

    The graph tasks of a component, in task id order, are its executors when they are as many
    (a graph read from the Storm UI: one task per executor), else its Storm tasks when they are
    as many (then several graph tasks share an executor). Anything else is an error."""
    app = [c for c in layout.components if not is_system(c)]
    missing = sorted(set(graph.operator_names) - set(app))
    if missing:
        raise InputError(f"graph operator {missing[0]!r} is not a component of Storm topology "
                         f"{layout.topology_name!r} (components: {', '.join(sorted(app))})")
    out: list[tuple[StormExecutor, list[int]]] = []
    for component in app:
        executors = layout.component_executors(component)
        if component not in graph.operator_names:
            raise InputError(f"Storm component {component!r} has no tasks in graph {graph.name!r}")
        tasks = graph.operator_tasks(component)
        tasks = tasks[np.argsort(graph.task_ids[tasks], kind="stable")].tolist()
        n_storm_tasks = sum(len(e.tasks) for e in executors)
        if len(tasks) == len(executors):
            out.extend((e, [t]) for e, t in zip(executors, tasks))
        elif len(tasks) == n_storm_tasks:
            at = 0
            for e in executors:
                out.append((e, tasks[at:at + len(e.tasks)]))
                at += len(e.tasks)
        else:
            raise InputError(f"Storm component {component!r}: graph {graph.name!r} has {len(tasks)} tasks of it, "
                             f"Storm has {len(executors)} executors and {n_storm_tasks} tasks")
    return out


def storm_plan(graph: TaskGraph, cluster: Cluster, placement: Placement, layout: StormLayout | None = None,
               topology_id: str | None = None, **nimbus: Any) -> dict[str, Any]:
    """The plan: per worker slot (supervisor id, port) the executors ``[start, end]`` to pass to
    ``Cluster.assign(new WorkerSlot(supervisorId, port), topologyId, executors)``.

    ``layout`` gives the executors (from the Storm UI); without it they are computed as Nimbus
    would (:func:`layout_from_graph`, with ``nimbus`` its keyword options). An executor whose
    graph tasks sit on different slots cannot be placed (Storm moves executors whole): error.
    System executors (ackers, metrics consumers, event loggers) go round robin over the slots
    the plan uses, in slot order, so that the plan assigns every executor of the topology.
    """
    check_exportable(graph, cluster, placement)
    if layout is None:
        layout = layout_from_graph(graph, topology_id=topology_id, **nimbus)
    elif nimbus:
        raise InputError(f"Storm plan: {', '.join(sorted(nimbus))} apply only without Storm UI data")
    topology_id = topology_id or layout.topology_id
    worker = worker_slots(placement)
    slot_of: dict[tuple[int, int], list[StormExecutor]] = {}
    rows: list[dict[str, Any]] = []
    for executor, tasks in graph_executors(graph, layout):
        slots = sorted({(int(placement.node_of[t]), int(worker[t])) for t in tasks})
        if len(slots) > 1:
            where = ", ".join(f"{cluster.nodes[n].name}:{layout.port(cluster.nodes[n].name, w)}" for n, w in slots)
            raise InputError(f"Storm executor [{executor.start}-{executor.end}] of {executor.component!r}: its tasks "
                             f"are placed on several slots ({where}); Storm moves executors whole")
        slot_of.setdefault(slots[0], []).append(executor)
        rows.append(_executor_row(executor, graph.task_ids[tasks].tolist()))
    used = sorted(slot_of)
    system = [e for e in layout.executors if e.system]
    if system and not used:
        raise InputError(f"Storm plan of {graph.name!r}: no application executor, nowhere to put the system ones")
    for k, executor in enumerate(system):
        slot_of[used[k % len(used)]].append(executor)
        rows.append(_executor_row(executor, []))
    assignments = []
    for (node, w), executors in sorted(slot_of.items()):
        name = cluster.nodes[node].name
        assignments.append({
            "supervisor_id": layout.supervisor_id(name),
            "node": name,
            "port": layout.port(name, w),
            "worker": w,
            "executors": [[e.start, e.end] for e in sorted(executors, key=lambda e: e.start)],
        })
    return {
        "format": PLAN_FORMAT,
        "topology_name": layout.topology_name,
        "topology_id": topology_id,
        "executors_from": layout.source,
        "assignments": assignments,
        "executors": sorted(rows, key=lambda r: r["start"]),
    }


def _executor_row(executor: StormExecutor, graph_tasks: list[int]) -> dict[str, Any]:
    return {"start": executor.start, "end": executor.end, "component": executor.component,
            "system": executor.system, "graph_tasks": [int(t) for t in graph_tasks]}


def plan_graph_tasks(document: Mapping[str, Any]) -> list[int]:
    """Every graph task a plan places, in executor order (system executors place none)."""
    return [t for row in document["executors"] for t in row["graph_tasks"]]


def placement_from_plan(document: Mapping[str, Any], graph: TaskGraph, cluster: Cluster,
                        layout: StormLayout | None = None, where: str = "Storm plan") -> Placement:
    """Read a plan back: each slot's supervisor id and port become a node and a worker (through
    ``layout``'s supervisor ids and ports; without it the node is the supervisor id and the
    worker ``port - 6700``), each executor's graph tasks go there."""
    layout = layout or StormLayout(graph.name, None, ())
    node_by_supervisor = {layout.supervisor_id(n.name): k for k, n in enumerate(cluster.nodes)}
    tasks_of = {(row["start"], row["end"]): row["graph_tasks"] for row in document["executors"]}
    index = {int(t): k for k, t in enumerate(graph.task_ids.tolist())}
    node_of = np.full(graph.n_tasks, -1, np.int64)
    worker_of = np.full(graph.n_tasks, -1, np.int64)
    for i, slot in enumerate(document["assignments"]):
        node = node_by_supervisor.get(slot["supervisor_id"])
        if node is None:
            raise InputError(f"{where}.assignments[{i}].supervisor_id: {slot['supervisor_id']!r} is not a node of "
                             f"cluster {cluster.name!r}")
        w = layout.worker_of_port(cluster.nodes[node].name, int(slot["port"]))
        for start, end in slot["executors"]:
            for task_id in tasks_of.get((start, end), []):
                if task_id not in index:
                    raise InputError(f"{where}: graph task {task_id} is not in graph {graph.name!r}")
                node_of[index[task_id]], worker_of[index[task_id]] = node, w
    missing = np.flatnonzero(node_of < 0)
    if missing.size:
        raise InputError(f"{where}: graph task {graph.task_ids[missing[0]]} is in no assignment")
    return Placement.build(node_of, worker_of, {"source": "storm-plan", "topology_id": document.get("topology_id")})
