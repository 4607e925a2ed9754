"""Topologies as Nimbus stores them (docs/engines.md, "Storm: stored topologies").

Nimbus keeps each submitted topology in its blob store as ``<id>-stormcode.ser`` (gzip of a
Thrift-binary ``StormTopology``, Storm's ``storm-client/src/storm.thrift``) and
``<id>-stormconf.ser`` (gzip of the topology's JSON conf); Storm's ``TestLargeCluster`` reads
the same pair. :func:`read_topology` decodes one pair with ``thriftpy2`` and our IDL of the
topology part of storm.thrift (``storm_topology.thrift`` beside this module), and
:func:`read_dir` every pair of a directory, in id order.

- Executors: ``parallelism_hint`` per component (unset: 1, ``Thrift.getParallelismHint``);
  ``topology.tasks`` from the component's ``json_conf`` (Nimbus' ``normalizeTopology`` writes
  it) numbers the tasks, and ``Nimbus.computeExecutors`` runs ``min(hint, tasks)`` executors
  (:func:`~.plan.nimbus_executors`). ``executors="hint"`` keeps one executor per hint, as
  ``TestLargeCluster`` schedules them (``genExecsAndComps``).
- Resources per executor (``NormalizedResourceRequest``): ``topology.component.cpu.pcore.percent``
  and ``topology.component.resources.onheap.memory.mb`` / ``offheap`` from the component's
  ``json_conf`` (its ``topology.component.resources.map`` overriding), else the topology conf,
  else Storm's defaults (10 %, 128 MB, 0 MB). Ackers use ``topology.acker.*`` first.
  The graph's load is CPU in cores (percent / 100), ``memory_mb`` on- plus off-heap,
  ``onheap_mb`` the heap part and ``worker_heap_mb`` ``topology.worker.max.heap.size.mb``
  (default ``worker.heap.memory.mb``, 768).
- Ackers (``StormCommon.addAcker``): ``topology.acker.executors`` executors of ``__acker``
  (``null``: ``topology.workers``), fed by every spout and bolt and answering the spouts
  (direct). They are graph tasks only with ``ackers=True``; otherwise, as the UI reader does,
  system components stay apart (counted in :class:`NimbusTopology`).
- Structural traffic (no rates are stored): every executor pair joined by a stream is one
  connection of rate 1, counted once however many streams join it. Shuffle, fields, all,
  none, direct (the sender may name any task) and custom groupings connect every sender to
  every receiver; ``fields`` with no fields is Storm's global grouping (every sender to the
  receiver's lowest task); local-or-shuffle connects every pair too, an upper bound (which
  pairs it uses depends on the placement). A component's stream to itself joins distinct
  executors only.
"""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from streamsched.engines.storm.plan import ACKER, is_system, nimbus_executors, system_components
from streamsched.errors import InputError
from streamsched.model.taskgraph import TaskGraph
from streamsched.model.units import CORES

CODE_SUFFIX = "-stormcode.ser"
CONF_SUFFIX = "-stormconf.ser"
IDL = Path(__file__).with_name("storm_topology.thrift")

#: Storm's defaults.yaml: a component's CPU (% of a core), on- and off-heap MB; a worker's heap.
DEFAULT_CPU_PCT, DEFAULT_ONHEAP_MB, DEFAULT_OFFHEAP_MB, DEFAULT_WORKER_HEAP_MB = 10.0, 128.0, 0.0, 768.0
DEFAULT_PRIORITY = 29
CPU_KEY = "topology.component.cpu.pcore.percent"
ONHEAP_KEY = "topology.component.resources.onheap.memory.mb"
OFFHEAP_KEY = "topology.component.resources.offheap.memory.mb"
RESOURCES_MAP_KEY = "topology.component.resources.map"
ACKER_KEYS = {CPU_KEY: "topology.acker.cpu.pcore.percent", ONHEAP_KEY: "topology.acker.resources.onheap.memory.mb",
              OFFHEAP_KEY: "topology.acker.resources.offheap.memory.mb"}
#: Grouping names, by the ``Grouping`` union's set field.
GROUPINGS = {"shuffle": "shuffle", "all": "all", "none": "none", "direct": "direct",
             "custom_object": "custom", "custom_serialized": "custom", "local_or_shuffle": "local-or-shuffle"}


@dataclass(frozen=True)
class Component:
    """One spout or bolt (or ``__acker``): executors, tasks and the resources of each executor."""

    name: str
    kind: str
    executors: int
    tasks: int
    cpu_pct: float
    onheap_mb: float
    offheap_mb: float
    inputs: tuple[tuple[str, str, str], ...]
    """``(source component, stream id, grouping)`` per subscribed stream."""


@dataclass(frozen=True)
class NimbusTopology:
    """One stored topology: its id (the file names' prefix), name, components, the conf values
    the scheduler uses, and the graph (one task per executor)."""

    topology_id: str
    name: str
    components: tuple[Component, ...]
    workers: int
    acker_executors: int
    worker_heap_mb: float
    graph: TaskGraph
    priority: int = DEFAULT_PRIORITY
    """``topology.priority``: 0 is the most important (Storm's default 29)."""

    @property
    def empty(self) -> bool:
        """No spout and no bolt (``TestLargeCluster`` ignores such a topology; one is in its
        largeCluster02)."""
        return not any(not is_system(c.name) for c in self.components)

    @property
    def executors(self) -> int:
        """Executors of the spouts and bolts (ackers and other system components apart)."""
        system = np.array([is_system(name) for name in self.graph.operator_names] + [False])
        return int(np.count_nonzero(~system[self.graph.task_operator]))


@lru_cache(maxsize=1)
def _thrift():
    import thriftpy2

    return thriftpy2.load(str(IDL), module_name="storm_topology_thrift")


def _gunzip(path: Path) -> bytes:
    try:
        return gzip.decompress(path.read_bytes())
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"{path}: not a complete gzip file ({exc})") from None


def decode_topology(path: Path):
    """The ``StormTopology`` of a ``stormcode.ser`` file; ``InputError`` naming the file when it
    is not gzip or not a complete Thrift-binary ``StormTopology``."""
    from thriftpy2.protocol import TBinaryProtocolFactory
    from thriftpy2.utils import deserialize, serialize

    data = _gunzip(path)
    module = _thrift()
    try:
        topology = deserialize(module.StormTopology(), data, TBinaryProtocolFactory())
    except Exception as exc:  # thriftpy2 raises its transport/protocol errors, or ValueError/TypeError
        raise InputError(f"{path}: not a Thrift-binary StormTopology ({type(exc).__name__}: {exc})") from None
    decoded = len(serialize(topology, TBinaryProtocolFactory()))
    if decoded != len(data):  # thriftpy2 stops quietly at a cut and skips fields it does not know
        raise InputError(f"{path}: not a complete Thrift-binary StormTopology (its fields encode {decoded} of "
                         f"{len(data)} bytes: truncated, or fields of unknown ids or types)")
    if topology.spouts is None or topology.bolts is None:
        raise InputError(f"{path}: StormTopology without its required 'spouts' and 'bolts' maps (truncated?)")
    return topology


def read_conf(path: Path) -> dict[str, Any]:
    """The JSON conf of a ``stormconf.ser`` file, which must name the topology."""
    try:
        conf = json.loads(_gunzip(path))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a gzip of a JSON conf ({exc})") from None
    if not isinstance(conf, dict):
        raise InputError(f"{path}: the conf is {type(conf).__name__}, not a JSON object")
    if not isinstance(conf.get("topology.name"), str) or not conf["topology.name"]:
        raise InputError(f"{path}: the conf has no topology.name")
    return conf


def _number(value: Any, where: str, key: str, default: float | None) -> float | None:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (value >= 0) or value == float("inf"):
        raise InputError(f"{where}: {key} is {value!r}; expected a number >= 0")
    return float(value)


def _resources(json_conf: Mapping[str, Any], conf: Mapping[str, Any], where: str, acker: bool) -> tuple[float, ...]:
    """(CPU %, on-heap MB, off-heap MB) of one executor, as ``NormalizedResourceRequest``."""
    given = {k: json_conf[k] for k in (CPU_KEY, ONHEAP_KEY, OFFHEAP_KEY) if json_conf.get(k) is not None}
    mapped = json_conf.get(RESOURCES_MAP_KEY)
    if isinstance(mapped, dict):
        given.update({k: mapped[k] for k in (CPU_KEY, ONHEAP_KEY, OFFHEAP_KEY) if mapped.get(k) is not None})
    out = []
    for key, default in ((CPU_KEY, DEFAULT_CPU_PCT), (ONHEAP_KEY, DEFAULT_ONHEAP_MB), (OFFHEAP_KEY, DEFAULT_OFFHEAP_MB)):
        source, value = key, given.get(key)
        if value is None and acker:
            source, value = ACKER_KEYS[key], conf.get(ACKER_KEYS[key])
        if value is None:
            source, value = key, conf.get(key)
        out.append(_number(value, where, source, default))
    return tuple(out)


def _grouping(grouping) -> str:
    for field, name in GROUPINGS.items():
        if getattr(grouping, field) is not None:
            return name
    if grouping.fields is not None:
        return "fields" if grouping.fields else "global"
    return "unset"


def _components(topology, conf: Mapping[str, Any], code: Path) -> list[Component]:
    out = []
    for kind, specs in (("spout", topology.spouts), ("bolt", topology.bolts)):
        for name, spec in specs.items():
            where = f"{code}: component {name!r}"
            common = spec.common
            if common is None:
                raise InputError(f"{where}: no ComponentCommon")
            try:
                json_conf = json.loads(common.json_conf) if common.json_conf else {}
            except json.JSONDecodeError as exc:
                raise InputError(f"{where}: json_conf is not JSON ({exc})") from None
            if not isinstance(json_conf, dict):
                raise InputError(f"{where}: json_conf is not a JSON object")
            hint = 1 if common.parallelism_hint is None else int(common.parallelism_hint)
            if hint < 1:
                raise InputError(f"{where}: parallelism_hint {hint}; must be >= 1")
            tasks = json_conf.get("topology.tasks", hint)
            if isinstance(tasks, bool) or not isinstance(tasks, int) or tasks < 0:
                raise InputError(f"{where}: topology.tasks is {tasks!r}; expected an integer >= 0")
            inputs = []
            for stream, grouping in (common.inputs or {}).items():
                kind_name = _grouping(grouping)
                if kind_name == "unset":
                    raise InputError(f"{where}: input {stream.componentId}/{stream.streamId} has no grouping set")
                inputs.append((stream.componentId, stream.streamId, kind_name))
            cpu, onheap, offheap = _resources(json_conf, conf, where, acker=False)
            out.append(Component(name, kind, hint, tasks, cpu, onheap, offheap, tuple(sorted(inputs))))
    return out


def read_topology(code: str | Path, conf: str | Path | None = None, ackers: bool = False,
                  executors: str = "nimbus") -> NimbusTopology:
    """One stored topology (``conf`` defaults to the ``-stormconf.ser`` beside ``code``)."""
    if executors not in ("nimbus", "hint"):
        raise InputError(f"executors: {executors!r} is not one of nimbus, hint")
    code = Path(code)
    if not code.name.endswith(CODE_SUFFIX):
        raise InputError(f"{code}: not a <id>{CODE_SUFFIX} file")
    topology_id = code.name[: -len(CODE_SUFFIX)]
    conf_path = Path(conf) if conf is not None else code.with_name(topology_id + CONF_SUFFIX)
    settings = read_conf(conf_path)
    components = _components(decode_topology(code), settings, code)
    names = {c.name for c in components}
    for component in components:
        for source, stream, _ in component.inputs:
            if source not in names and not is_system(source):
                raise InputError(f"{code}: component {component.name!r} subscribes to {source}/{stream}, "
                                 "which is no component of the topology")
    where = str(conf_path)
    workers = int(_number(settings.get("topology.workers"), where, "topology.workers", 1.0))
    n_ackers = int(_number(settings.get("topology.acker.executors"), where, "topology.acker.executors", workers))
    heap = _number(settings.get("topology.worker.max.heap.size.mb"), where, "topology.worker.max.heap.size.mb",
                   _number(settings.get("worker.heap.memory.mb"), where, "worker.heap.memory.mb", DEFAULT_WORKER_HEAP_MB))
    if n_ackers and components:
        cpu, onheap, offheap = _resources({}, settings, where, acker=True)
        spouts = tuple((c.name, "__ack_init", "fields") for c in components if c.kind == "spout")
        bolts = tuple((c.name, "__ack_ack", "fields") for c in components if c.kind == "bolt")
        components.append(Component(ACKER, "system", n_ackers, n_ackers, cpu, onheap, offheap, spouts + bolts))
        components = [c if c.kind != "spout" else
                      Component(**{**c.__dict__, "inputs": c.inputs + ((ACKER, "__ack_ack", "direct"),)})
                      for c in components]
    numbering = system_components(workers, n_ackers, _count(settings, "topology.eventlogger.executors", where, 0),
                                  _consumers(settings.get("topology.metrics.consumer.register"), where))
    graph = _graph(settings["topology.name"], components, heap, ackers, executors, numbering)
    priority = int(_number(settings.get("topology.priority"), where, "topology.priority", DEFAULT_PRIORITY))
    return NimbusTopology(topology_id, settings["topology.name"], tuple(components), workers, n_ackers, heap, graph,
                          priority)


def _count(conf: Mapping[str, Any], key: str, where: str, default: int | None) -> int | None:
    value = conf.get(key)
    return default if value is None else int(_number(value, where, key, None))


def _consumers(register: Any, where: str) -> list[tuple[str, int]]:
    """``topology.metrics.consumer.register`` as ``(class, parallelism.hint)`` pairs."""
    if register is None:
        return []
    if not isinstance(register, list) or not all(isinstance(r, dict) and isinstance(r.get("class"), str)
                                                 for r in register):
        raise InputError(f"{where}: topology.metrics.consumer.register is not a list of {{class, ...}} entries")
    return [(r["class"], _count(r, "parallelism.hint", where, 1)) for r in register]


def _graph(name: str, components: list[Component], heap: float, ackers: bool, executors: str,
           numbering: Mapping[str, tuple[int, int]]) -> TaskGraph:
    """One task per executor (see the module docstring). Task ids: with ``executors="nimbus"``
    each executor's first Storm task id (:func:`~.plan.nimbus_executors` over the components
    and the system ones of ``numbering``); with ``"hint"`` 0, 1, ... in component order."""
    by_name = {c.name: c for c in components}
    first_ids: dict[str, list[int]] = {}
    if executors == "nimbus":
        every = {**numbering, **{c.name: (c.tasks, c.executors) for c in components}}
        for executor in nimbus_executors(every):
            first_ids.setdefault(executor.component, []).append(executor.start)
    counts = {c.name: len(first_ids.get(c.name, ())) if executors == "nimbus" else c.executors for c in components}
    kept = [c.name for c in components if (ackers or not is_system(c.name)) and counts[c.name] > 0]
    offset, at = {}, 0
    task_ids, operator, cpu, onheap, offheap = [], [], [], [], []
    for k, comp in enumerate(kept):
        n, c = counts[comp], by_name[comp]
        offset[comp] = at
        task_ids.append(np.asarray(first_ids[comp]) if executors == "nimbus" else np.arange(at, at + n))
        at += n
        operator.append(np.full(n, k))
        cpu.append(np.full(n, c.cpu_pct))
        onheap.append(np.full(n, c.onheap_mb))
        offheap.append(np.full(n, c.offheap_mb))
    strongest: dict[tuple[str, str], str] = {}
    for comp in kept:
        for source, _, grouping in by_name[comp].inputs:
            if source in offset:
                pair = (source, comp)
                if strongest.get(pair) in (None, "global"):
                    strongest[pair] = grouping
    srcs, dsts = [], []
    for (source, dest), grouping in sorted(strongest.items()):
        p, q = counts[source], counts[dest]
        if grouping == "global":
            s, d = np.arange(p), np.zeros(p, np.int64)
        else:
            s, d = np.repeat(np.arange(p), q), np.tile(np.arange(q), p)
        s, d = s + offset[source], d + offset[dest]
        if source == dest:
            keep = s != d
            s, d = s[keep], d[keep]
        srcs.append(s)
        dsts.append(d)
    cat = lambda parts, dtype: np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)
    src, dst = cat(srcs, np.int64), cat(dsts, np.int64)
    onheap_mb, offheap_mb = cat(onheap, np.float64), cat(offheap, np.float64)
    return TaskGraph.build(
        name=name, operator_names=kept, task_operator=cat(operator, np.int32), load=cat(cpu, np.float64) / 100.0,
        src=src, dst=dst, rate=np.ones(src.size), task_ids=cat(task_ids, np.int64),
        memory_mb=onheap_mb + offheap_mb, onheap_mb=onheap_mb, worker_heap_mb=heap,
        merge_duplicates=False, load_unit=CORES)


def read_dir(directory: str | Path, ackers: bool = False, executors: str = "nimbus") -> list[NimbusTopology]:
    """Every ``<id>-stormcode.ser`` of ``directory`` with its ``<id>-stormconf.ser``, in id order."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(f"{directory}: not a directory")
    codes = sorted(directory.glob("*" + CODE_SUFFIX))
    if not codes:
        raise InputError(f"{directory}: no <id>{CODE_SUFFIX} file")
    out = [read_topology(code, ackers=ackers, executors=executors) for code in codes]
    seen: dict[str, str] = {}
    for topology in out:
        if topology.name in seen:
            raise InputError(f"{directory}: topology name {topology.name!r} in both {seen[topology.name]} and "
                             f"{topology.topology_id}")
        seen[topology.name] = topology.topology_id
    return out


def priority_order(topologies: list[NimbusTopology]) -> list[int]:
    """The order Storm's Resource Aware Scheduler schedules ``topologies`` of one user in
    (``DefaultSchedulingPriorityStrategy``: ``topology.priority`` ascending, then the longest
    up first, then the topology id; topologies submitted together tie on uptime, as in
    ``TestLargeCluster``): indices into ``topologies``."""
    return sorted(range(len(topologies)), key=lambda k: (topologies[k].priority, topologies[k].topology_id))
