"""Storm UI REST API: the executor-level task graph, the current placement and the observed
cluster of one running topology (docs/engines.md, "Storm").

Responses are read as Storm's ``storm-webapp`` writes them (``UIHelpers.getTopologySummary`` /
``unpackTopologyInfo`` for ``/api/v1/topology/:id``, ``UIHelpers.getComponentPage`` /
``unpackBoltPageInfo`` / ``unpackSpoutPageInfo`` with ``getBoltExecutorStats``,
``getSpoutExecutorStats`` and ``getBoltInputStats`` for ``/api/v1/topology/:id/component/:c``,
``getSupervisorSummary`` for ``/api/v1/supervisor/summary``), from a live UI (:func:`fetch`) or
from saved responses in a directory (:func:`read_dir`):

- ``topology.json``: ``/api/v1/topology/<id>?window=W&sys=1`` (``sys=1`` lists the system
  components, whose executors the plan must assign too);
- ``component-<id>.json`` per component, ``<id>`` URL-encoded (``urllib.parse.quote(id,
  safe="")``, Storm's ``encodedId``): ``/api/v1/topology/<id>/component/<component>?window=W``,
  with ``sys=0`` for application components (their ``emitted``/``transferred`` then leave out
  system streams) and ``sys=1`` for system ones (optional: only their executors are used);
- ``supervisors.json`` (optional): ``/api/v1/supervisor/summary`` (supervisor ids, slots, CPU).

:func:`estimate` turns the data into a graph with one task per application executor (what
Storm can move; task id = the executor's first task, operator = component), loads in cores and
pair rates (estimator in docs/engines.md). Pure Python: ``urllib`` and ``json``.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import quote

import numpy as np

from streamsched.engines import MAX_COUNT, arithmetic
from streamsched.engines.rest_client import Deadline, HTTPStatusError, get_json, reading_deadline
from streamsched.engines.storm.plan import (
    STORM_DEFAULT_SLOTS, StormExecutor, StormLayout, is_system, java_order, nimbus_task_ids, worker_ports,
)
from streamsched.errors import InputError
from streamsched.model.io import read_document
from streamsched.model.cluster import Cluster, Node
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.model.units import CORES

#: The UI's windows (``StatsUtil``: 10 min, 3 h, 1 day, all time); ``window`` of every request.
WINDOWS = ("600", "10800", "86400", ":all-time")
DEFAULT_WINDOW = "600"
TOPOLOGY_FILE = "topology.json"
SUPERVISORS_FILE = "supervisors.json"
#: Busy cores given to a spout executor: the UI reports no busy time for spouts.
DEFAULT_SPOUT_LOAD = 0.1
#: Cores of a host when no supervisor summary says (``supervisor.cpu.capacity`` 400 = 4 cores).
DEFAULT_HOST_CORES = 4.0
#: Component of system tasks a topology page saved without ``sys=1`` does not name.
UNLISTED = "__unlisted"
LOAD_SOURCES = ("busy", "capacity")
_EXECUTOR_ID = re.compile(r"^\[(-?\d+)-(-?\d+)\]$")


def component_file(component: str) -> str:
    """File name of a component's saved page: ``component-<URL-encoded id>.json``."""
    return f"component-{quote(component, safe='')}.json"


# ------------------------------------------------------------------------------ the data
@dataclass(frozen=True)
class ExecutorStats:
    """One row of a component page's ``executorStats`` (counts over the window)."""

    component: str
    start: int
    end: int
    host: str
    port: int
    uptime_s: float
    emitted: float
    transferred: float
    executed: float | None = None
    execute_latency_ms: float | None = None
    capacity: float | None = None


@dataclass(frozen=True)
class InputStats:
    """One row of a bolt page's ``inputStats``: what ``bolt`` executed from (component, stream)."""

    bolt: str
    component: str
    stream: str
    executed: float
    execute_latency_ms: float


@dataclass(frozen=True)
class ComponentSummary:
    """A spout or bolt of the topology page (counts of executors with a heartbeat)."""

    name: str
    kind: str
    tasks: int
    executors: int


@dataclass(frozen=True)
class Supervisor:
    id: str
    host: str
    slots: int | None = None
    cpu_cores: float | None = None
    memory_mb: float | None = None


@dataclass(frozen=True)
class StormUIData:
    """What the UI said about one topology for one window."""

    topology_id: str
    topology_name: str
    window: str
    tasks_total: int
    executors_total: int
    components: tuple[ComponentSummary, ...]
    executors: tuple[ExecutorStats, ...]
    inputs: tuple[InputStats, ...]
    workers: tuple[tuple[str, str, int], ...]
    """``(supervisor id, host, port)`` of each worker."""
    supervisors: tuple[Supervisor, ...] = ()
    memory_mb: Mapping[str, float] = field(default_factory=dict)
    """Requested memory (on + off heap) per executor of a component."""

    @property
    def window_s(self) -> float | None:
        return None if self.window == ":all-time" else float(self.window)


@dataclass(frozen=True)
class StormUIReading:
    """:func:`estimate`'s result: graph (one task per application executor), the current
    placement on the observed cluster, the layout a plan needs, and warnings."""

    graph: TaskGraph
    placement: Placement
    cluster: Cluster
    layout: StormLayout
    warnings: tuple[str, ...] = ()


# ---------------------------------------------------------------------------- field access
def _field(obj: Any, key: str, where: str, required: bool = True) -> Any:
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected an object, got {type(obj).__name__}")
    if obj.get(key) is None:
        if required:
            raise InputError(f"{where}.{key}: missing")
        return None
    return obj[key]


def _number(obj: Any, key: str, where: str, required: bool = True) -> float | None:
    """A count or a ``StatsUtil.floatStr`` string (``"0.048"``), in [0, :data:`MAX_COUNT`]."""
    value = _field(obj, key, where, required)
    if value is None:
        return None
    if isinstance(value, bool):
        raise InputError(f"{where}.{key}: expected a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{where}.{key}: expected a number, got {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise InputError(f"{where}.{key}: {value!r} is not a finite number >= 0")
    if number > MAX_COUNT:
        raise InputError(f"{where}.{key}: {value!r} is above 2^63 ({MAX_COUNT:.4g}): no count Storm keeps is "
                         f"(a Java long)")
    return number


def _integer(obj: Any, key: str, where: str, required: bool = True) -> int | None:
    number = _number(obj, key, where, required)
    if number is None:
        return None
    if number != int(number):
        raise InputError(f"{where}.{key}: expected an integer, got {obj[key]!r}")
    return int(number)


def _string(obj: Any, key: str, where: str) -> str:
    value = _field(obj, key, where)
    if not isinstance(value, str) or not value:
        raise InputError(f"{where}.{key}: expected a non-empty string, got {value!r}")
    return value


def _list(obj: Any, key: str, where: str) -> list:
    value = _field(obj, key, where, required=False)
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(f"{where}.{key}: expected a list, got {type(value).__name__}")
    return value


def _window(doc: Any, where: str) -> str:
    window = str(_field(doc, "window", where))
    if window not in WINDOWS:
        raise InputError(f"{where}.window: {window!r} is not one of {', '.join(WINDOWS)}")
    return window


# --------------------------------------------------------------------------------- parsing
def parse_topology(doc: Any, where: str = TOPOLOGY_FILE) -> dict[str, Any]:
    """``UIHelpers.getTopologySummary``: id, name, window, totals, workers, spouts and bolts."""
    if isinstance(doc, dict) and "error" in doc and "id" not in doc:
        raise InputError(f"{where}: the UI answered an error: {doc.get('errorMessage') or doc['error']}")
    components = []
    for key, id_key, kind in (("spouts", "spoutId", "spout"), ("bolts", "boltId", "bolt")):
        for i, row in enumerate(_list(doc, key, where)):
            at = f"{where}.{key}[{i}]"
            components.append(ComponentSummary(_string(row, id_key, at), kind,
                                               _integer(row, "tasks", at), _integer(row, "executors", at)))
    names = [c.name for c in components]
    if len(set(names)) < len(names):
        raise InputError(f"{where}: component {sorted(n for n in names if names.count(n) > 1)[0]!r} listed twice")
    if not any(not is_system(c.name) for c in components):
        raise InputError(f"{where}: no spout or bolt listed (is the topology running?)")
    workers = []
    for i, row in enumerate(_list(doc, "workers", where)):
        at = f"{where}.workers[{i}]"
        workers.append((_string(row, "supervisorId", at), _string(row, "host", at), _integer(row, "port", at)))
    return {
        "id": _string(doc, "id", where),
        "name": _string(doc, "name", where),
        "window": _window(doc, where),
        "tasks_total": _integer(doc, "tasksTotal", where),
        "executors_total": _integer(doc, "executorsTotal", where),
        "components": tuple(components),
        "workers": tuple(workers),
    }


def parse_component(doc: Any, component: str, topology_id: str, where: str) -> dict[str, Any]:
    """``UIHelpers.getComponentPage``: ``executorStats`` (``getBoltExecutorStats`` /
    ``getSpoutExecutorStats``) and, for bolts, ``inputStats`` (``getBoltInputStats``)."""
    if isinstance(doc, dict) and "error" in doc and "id" not in doc:
        raise InputError(f"{where}: the UI answered an error: {doc.get('errorMessage') or doc['error']}")
    if _string(doc, "id", where) != component:
        raise InputError(f"{where}.id: {doc['id']!r}, expected component {component!r}")
    if _string(doc, "topologyId", where) != topology_id:
        raise InputError(f"{where}.topologyId: {doc['topologyId']!r}, expected {topology_id!r}")
    kind = _string(doc, "componentType", where).lower()
    if kind not in ("spout", "bolt"):
        raise InputError(f"{where}.componentType: {doc['componentType']!r} is neither spout nor bolt")
    executors = []
    for i, row in enumerate(_list(doc, "executorStats", where)):
        at = f"{where}.executorStats[{i}]"
        match = _EXECUTOR_ID.match(str(_field(row, "id", at)))
        if not match or int(match[1]) < 1 or int(match[2]) < int(match[1]):
            raise InputError(f"{at}.id: {row['id']!r} is not an executor '[start-end]' of tasks >= 1")
        bolt = kind == "bolt"
        executors.append(ExecutorStats(
            component=component, start=int(match[1]), end=int(match[2]),
            host=_string(row, "host", at), port=_integer(row, "port", at),
            uptime_s=_integer(row, "uptimeSeconds", at),
            emitted=_number(row, "emitted", at), transferred=_number(row, "transferred", at),
            executed=_number(row, "executed", at) if bolt else None,
            execute_latency_ms=_number(row, "executeLatency", at) if bolt else None,
            capacity=_number(row, "capacity", at, required=False) if bolt else None,
        ))
    inputs = []
    for i, row in enumerate(_list(doc, "inputStats", where) if kind == "bolt" else []):
        at = f"{where}.inputStats[{i}]"
        inputs.append(InputStats(component, _string(row, "component", at), _string(row, "stream", at),
                                 _number(row, "executed", at), _number(row, "executeLatency", at)))
    memory = sum(_number(doc, key, where, required=False) or 0.0
                 for key in ("requestedMemOnHeap", "requestedMemOffHeap"))
    return {"kind": kind, "window": _window(doc, where), "executors": executors, "inputs": inputs,
            "memory_mb": memory}


def parse_supervisors(doc: Any, where: str = SUPERVISORS_FILE) -> tuple[Supervisor, ...]:
    """``UIHelpers.getSupervisorSummary``: ``supervisors[]`` with ``id``, ``host``, ``slotsTotal``,
    ``totalCpu`` (percent of a core: 400 = 4 cores) and ``totalMem`` (MB)."""
    out = []
    for i, row in enumerate(_list(doc, "supervisors", where)):
        at = f"{where}.supervisors[{i}]"
        cpu = _number(row, "totalCpu", at, required=False)
        out.append(Supervisor(_string(row, "id", at), _string(row, "host", at), _integer(row, "slotsTotal", at, False),
                              None if cpu is None else cpu / 100.0, _number(row, "totalMem", at, False)))
    return tuple(out)


def from_documents(documents: Mapping[str, Any], where: str = "", window: str | None = None) -> StormUIData:
    """:class:`StormUIData` from responses keyed by the file names of the saved layout."""
    prefix = f"{where}/" if where else ""
    if TOPOLOGY_FILE not in documents:
        raise InputError(f"{prefix}{TOPOLOGY_FILE}: missing")
    topo = parse_topology(documents[TOPOLOGY_FILE], prefix + TOPOLOGY_FILE)
    if window is not None and str(window) != topo["window"]:
        raise InputError(f"{prefix}{TOPOLOGY_FILE}.window: {topo['window']!r}, not the window {window!r} asked for")
    executors: list[ExecutorStats] = []
    inputs: list[InputStats] = []
    memory: dict[str, float] = {}
    for component in topo["components"]:
        name = component_file(component.name)
        if name not in documents:
            if is_system(component.name):
                continue
            raise InputError(f"{prefix}{name}: missing (page of component {component.name!r})")
        page = parse_component(documents[name], component.name, topo["id"], prefix + name)
        if page["window"] != topo["window"]:
            raise InputError(f"{prefix}{name}.window: {page['window']!r}, but {TOPOLOGY_FILE} has {topo['window']!r}")
        if page["kind"] != component.kind:
            raise InputError(f"{prefix}{name}.componentType: {page['kind']!r}, but {TOPOLOGY_FILE} lists a {component.kind}")
        if not page["executors"] and not is_system(component.name):
            raise InputError(f"{prefix}{name}.executorStats: empty (component {component.name!r} has no running executor)")
        executors.extend(page["executors"])
        inputs.extend(page["inputs"])
        memory[component.name] = page["memory_mb"]
    supervisors: tuple[Supervisor, ...] = ()
    if documents.get(SUPERVISORS_FILE) is not None:
        supervisors = parse_supervisors(documents[SUPERVISORS_FILE], prefix + SUPERVISORS_FILE)
    return StormUIData(topo["id"], topo["name"], topo["window"], topo["tasks_total"], topo["executors_total"],
                       topo["components"], tuple(executors), tuple(inputs), topo["workers"], supervisors, memory)


def read_dir(directory: str | Path, window: str | None = None) -> StormUIData:
    """Saved responses (the layout of the module docstring); ``window``, when given, must be the
    window they were saved with."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(f"{directory}: not a directory")
    documents: dict[str, Any] = {}
    for path in sorted(directory.glob("*.json")):
        if path.name == TOPOLOGY_FILE or path.name == SUPERVISORS_FILE or path.name.startswith("component-"):
            documents[path.name] = read_document(path)
    return from_documents(documents, str(directory), window)


# ------------------------------------------------------------------------------------ live
def fetch(url: str, topology_id: str, window: str = DEFAULT_WINDOW, timeout: float | None = None,
          save_dir: str | Path | None = None, http_timeout: float | None = None) -> StormUIData:
    """Ask a live Storm UI (``http://host:8080``) for the topology page (``sys=1``), the
    supervisor summary and every component's page, all within ``timeout`` seconds (None:
    ``rest_client.READ_TIMEOUT_S``), each request within ``http_timeout`` (None:
    ``rest_client.REQUEST_TIMEOUT_S``); ``save_dir`` keeps the responses in the layout
    :func:`read_dir` reads. An unreachable UI is one ``InputError``."""
    documents = fetch_documents(url, topology_id, window, http_timeout, reading_deadline(timeout))
    data = from_documents(documents, url, str(window))
    if save_dir is not None:
        save_dir = Path(save_dir)
        save_dir.mkdir(parents=True, exist_ok=True)
        for name, doc in documents.items():
            (save_dir / name).write_text(json.dumps(doc, indent=1) + "\n")
    return data


def fetch_documents(url: str, topology_id: str, window: str = DEFAULT_WINDOW, timeout: float | None = None,
                    deadline: Deadline | None = None) -> dict[str, Any]:
    """The responses :func:`fetch` reads, keyed by the file names of the saved layout; each
    request within ``timeout`` s (None: ``rest_client.REQUEST_TIMEOUT_S``) and all of them by
    ``deadline`` (None: a reading's default, ``rest_client.READ_TIMEOUT_S`` from now). A
    topology page for another topology than ``topology_id`` is refused (component pages are
    checked against it by :func:`parse_component`)."""
    window = str(window)
    if window not in WINDOWS:
        raise InputError(f"--window: {window!r} is not one of {', '.join(WINDOWS)}")
    deadline = deadline if deadline is not None else reading_deadline()
    base = url.rstrip("/")
    topo_url = f"{base}/api/v1/topology/{quote(topology_id, safe='')}"
    query = f"window={quote(window, safe='')}"
    documents: dict[str, Any] = {TOPOLOGY_FILE: _get_json(f"{topo_url}?{query}&sys=1", timeout, deadline)}
    topo = parse_topology(documents[TOPOLOGY_FILE], f"{topo_url}?{query}&sys=1")
    if topo["id"] != topology_id:
        raise InputError(f"{topo_url}?{query}&sys=1.id: the answer is for topology {topo['id']!r}, "
                         f"not the one asked for ({topology_id!r})")
    try:
        documents[SUPERVISORS_FILE] = _get_json(f"{base}/api/v1/supervisor/summary", timeout, deadline)
    except HTTPStatusError:
        pass  # optional: slots and CPU then take their defaults
    for component in topo["components"]:
        sys_flag = 1 if is_system(component.name) else 0
        page_url = f"{topo_url}/component/{quote(component.name, safe='')}?{query}&sys={sys_flag}"
        documents[component_file(component.name)] = _get_json(page_url, timeout, deadline)
    return documents


def _get_json(url: str, timeout: float | None, deadline: Deadline) -> Any:
    return get_json(url, timeout, "Storm UI", _storm_error, deadline)


def _storm_error(body: Any) -> str:
    """The message of the UI's ``{"error": ..., "errorMessage": ...}`` answer."""
    return str(body.get("errorMessage") or body.get("error") or "")


def read(url: str | None = None, topology_id: str | None = None, directory: str | Path | None = None,
         window: str | None = None, timeout: float | None = None, save_dir: str | Path | None = None,
         http_timeout: float | None = None) -> StormUIData:
    """A live UI (``url`` and ``topology_id``; ``window`` default 600; the whole read within
    ``timeout`` s, each request within ``http_timeout`` s: :func:`fetch`) or saved responses
    (``directory``; ``window`` default: the one they were saved with), never both."""
    if (url is None) == (directory is None):
        raise InputError("give either --url URL --topology-id ID (a live Storm UI) or --dir DIR (saved responses)")
    if directory is not None:
        if topology_id is not None:
            raise InputError("--topology-id goes with --url; with --dir the topology is the saved one")
        return read_dir(directory, window)
    if not topology_id:
        raise InputError("--url needs --topology-id (the id Storm gave the topology, e.g. wordcount-3-1714557000)")
    return fetch(url, topology_id, window or DEFAULT_WINDOW, timeout, save_dir, http_timeout)


# ------------------------------------------------------------------------------- estimate
def all_executors(data: StormUIData) -> tuple[list[StormExecutor], list[str]]:
    """Every executor of the topology, and warnings. Executors come from the component pages;
    the tasks of ``1..tasksTotal`` no page covers are system tasks (each its own executor, as
    Storm gives every system component as many executors as tasks), named by numbering the
    topology page's components as Nimbus does when their task counts add up to ``tasksTotal``,
    else :data:`UNLISTED`."""
    warnings: list[str] = []
    executors = [StormExecutor(e.component, e.start, e.end) for e in data.executors]
    covered = set()
    for e in executors:
        overlap = covered.intersection(e.tasks)
        if overlap:
            raise InputError(f"{data.topology_id}: task {min(overlap)} is in two executors (component pages disagree)")
        covered.update(e.tasks)
    if covered and max(covered) > data.tasks_total:
        raise InputError(f"{data.topology_id}: executor task {max(covered)} above tasksTotal {data.tasks_total}")
    counts = {c.name: c.tasks for c in data.components}
    numbered = nimbus_task_ids(counts) if sum(counts.values()) == data.tasks_total else None
    component_of = {t: name for name, ids in (numbered or {}).items() for t in ids}
    for task in sorted(set(range(1, data.tasks_total + 1)) - covered):
        name = component_of.get(task, UNLISTED)
        if not is_system(name):
            raise InputError(f"{data.topology_id}: task {task} of component {name!r} is in no executor of its page "
                             f"(an executor without heartbeat?); read again when every executor runs")
        executors.append(StormExecutor(name, task, task))
    if any(e.component == UNLISTED for e in executors):
        warnings.append(f"{TOPOLOGY_FILE} lists no system component (saved without sys=1): system tasks "
                        f"are named {UNLISTED!r}")
    if len(executors) != data.executors_total:
        warnings.append(f"{len(executors)} executors found, the topology page says executorsTotal "
                        f"{data.executors_total}")
    return sorted(executors, key=lambda e: e.start), warnings


def estimate(data: StormUIData, spout_load: float = DEFAULT_SPOUT_LOAD, load: str = "busy",
             host_cores: float = DEFAULT_HOST_CORES) -> StormUIReading:
    """Graph, current placement, observed cluster and layout from the UI data.

    - Tasks: one per application executor (system components excluded), id = first task,
      operator = component; load in cores: ``executed x executeLatency (ms) / 1000 / T`` with
      ``T`` the executor's seconds in the window (``min(window, uptime)``; ``:all-time``:
      uptime) (``load="busy"``), or Storm's ``capacity`` (``load="capacity"``, always over the
      last 10 minutes); spouts ``spout_load`` (the UI reports no busy time for them).
    - Pair rates: a bolt B executed ``X`` tuples of (component C, stream s), s not a system
      stream: the fraction ``f = X / sum_b executed_b`` of B's executions. Receiver b takes
      ``f x executed_b / T_b`` tuples/s of it, split over C's executors by their share of C's
      transfer rate ``w_c = (transferred_c / T_c) / sum_c' (transferred_c' / T_c')`` (even when
      C transferred nothing): ``R(c, b) = w_c x f x executed_b / T_b``. Exact for shuffle
      grouping (and all, global) with one input per bolt; for fields grouping it assumes every
      sender sends the same key mix.
    - Placement: node = host, worker = index of the port among the host's ports.
    - Cluster: one node per host; capacity and cores from the supervisor summary (``totalCpu``
      / 100), else ``host_cores``; slots ``slotsTotal``, else the ports seen (at least 4).
    """
    if load not in LOAD_SOURCES:
        raise InputError(f"load: {load!r} is not one of {', '.join(LOAD_SOURCES)}")
    if not (spout_load >= 0 and math.isfinite(spout_load)):
        raise InputError(f"spout load: {spout_load!r}; must be a finite number >= 0")
    with arithmetic(f"Storm topology {data.topology_id}"):  # numbers in range that combine out of it
        executors, warnings = all_executors(data)
        app = sorted((e for e in data.executors if not is_system(e.component)), key=lambda e: e.start)
        kinds = {c.name: c.kind for c in data.components}
        operators = sorted({e.component for e in app}, key=java_order)
        op_index = {name: k for k, name in enumerate(operators)}
        window_s = data.window_s
        seconds = np.array([min(window_s, e.uptime_s) if window_s is not None else e.uptime_s for e in app])
        loads = np.empty(len(app))
        for k, e in enumerate(app):
            if kinds[e.component] == "spout":
                loads[k] = spout_load
            elif load == "capacity":
                loads[k] = e.capacity or 0.0
            else:
                loads[k] = e.executed * e.execute_latency_ms / 1000.0 / seconds[k] if seconds[k] > 0 else 0.0
        by_component: dict[str, list[int]] = {}
        for k, e in enumerate(app):
            by_component.setdefault(e.component, []).append(k)
        src, dst, rate = [], [], []
        for row in data.inputs:
            if is_system(row.component) or is_system(row.stream) or is_system(row.bolt) or row.executed == 0:
                continue
            senders, receivers = by_component.get(row.component), by_component.get(row.bolt)
            if not senders or not receivers:
                warnings.append(f"bolt {row.bolt!r} executed {row.executed:g} tuples from {row.component!r}, "
                                f"which has no executor in the data: left out")
                continue
            w = _shares([app[k].transferred / seconds[k] if seconds[k] > 0 else 0.0 for k in senders])
            received = np.array([app[b].executed or 0.0 for b in receivers])
            fraction = row.executed / received.sum() if received.sum() > 0 else 0.0
            per_second = np.array([fraction * n / seconds[b] if seconds[b] > 0 else 0.0
                                   for n, b in zip(received, receivers)])
            src.append(np.repeat(senders, len(receivers)))
            dst.append(np.tile(receivers, len(senders)))
            rate.append(np.outer(w, per_second).ravel())
        memory = np.array([data.memory_mb.get(e.component, 0.0) for e in app])
        graph = TaskGraph.build(
            name=data.topology_name,
            operator_names=operators,
            task_operator=[op_index[e.component] for e in app],
            load=loads,
            src=np.concatenate(src) if src else np.zeros(0, np.int64),
            dst=np.concatenate(dst) if dst else np.zeros(0, np.int64),
            rate=np.concatenate(rate) if rate else np.zeros(0),
            task_ids=[e.start for e in app],
            memory_mb=memory,
            where=f"Storm topology {data.topology_id}",
            load_unit=CORES,
        )
        cluster, layout_ports, supervisors = _observed_cluster(data, host_cores)
        hosts = [n.name for n in cluster.nodes]
        node_of = [hosts.index(e.host) for e in app]
        worker_of = [layout_ports[e.host].index(e.port) for e in app]
        placement = Placement.build(node_of, worker_of, {
            "source": "storm-ui", "topology_id": data.topology_id, "window": data.window})
        layout = StormLayout(data.topology_name, data.topology_id, tuple(executors), supervisors, layout_ports,
                             source="storm-ui")
        return StormUIReading(graph, placement, cluster, layout, tuple(warnings))


def _shares(values: list[float]) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    total = values.sum()
    return values / total if total > 0 else np.full(values.size, 1.0 / values.size)


def _observed_cluster(data: StormUIData, host_cores: float):
    """One node per host running an executor or worker of the topology."""
    if not (host_cores > 0 and math.isfinite(host_cores)):
        raise InputError(f"host cores: {host_cores!r}; must be a positive number")
    ports: dict[str, set[int]] = {}
    for e in data.executors:
        ports.setdefault(e.host, set()).add(e.port)
    supervisor_ids: dict[str, set[str]] = {}
    for sid, host, port in data.workers:
        ports.setdefault(host, set()).add(port)
        supervisor_ids.setdefault(host, set()).add(sid)
    summary = {s.host: s for s in data.supervisors}
    for host in ports:
        if host in summary:
            supervisor_ids.setdefault(host, set()).add(summary[host].id)
    for host, ids in supervisor_ids.items():
        if len(ids) > 1:
            raise InputError(f"{data.topology_id}: host {host!r} runs several supervisors ({', '.join(sorted(ids))}); "
                             f"one node per host cannot say which")
    nodes, layout_ports = [], {}
    for host in sorted(ports):
        known = summary.get(host)
        slots = max(len(ports[host]), known.slots if known and known.slots is not None else STORM_DEFAULT_SLOTS)
        cores = known.cpu_cores if known and known.cpu_cores else host_cores
        ram = known.memory_mb if known and known.memory_mb else Node.__dataclass_fields__["ram_mb"].default
        layout_ports[host] = worker_ports(ports[host], slots)
        nodes.append(Node(name=host, capacity=float(cores), slots=slots, cores=max(1, math.ceil(cores)), ram_mb=ram))
    supervisors = {host: next(iter(ids)) for host, ids in supervisor_ids.items()}
    cluster = Cluster(name=f"storm-{data.topology_name}", nodes=tuple(nodes), capacity_unit=CORES)
    return cluster, layout_ports, supervisors
