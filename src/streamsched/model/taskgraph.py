"""The weighted task graph every scheduler works on.

Vertices are tasks (vertex weight = load); directed edges carry a rate in tuples/s and in
bytes/s. Arrays are numpy and read-only, so a graph of 10^6 tasks and 10^7 edges takes about
250 MB (int32 endpoints, float64 weights) and is never copied by accident.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

import numpy as np
import scipy.sparse as sp

from streamsched.errors import InputError
from streamsched.model.topology import Topology
from streamsched.model.units import TASKS, check_unit


#: Largest load, rate (tuples/s) or byte rate a graph takes: far above any cluster, small
#: enough that the sums over 10^7 edges stay finite.
MAX_VALUE = 1e15


def _frozen(array: Any, dtype: Any) -> np.ndarray:
    out = np.ascontiguousarray(array, dtype=dtype)
    if out is array:
        out = out.copy()
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class TaskGraph:
    """Tasks ``0..n-1`` (external ids in ``task_ids``) and directed, weighted edges.

    ``load_unit`` says what a load counts: ``tasks`` (the papers' unit loads, the default) or
    ``cores`` (measured busy cores); see :mod:`streamsched.model.units`. Per operator,
    ``max_per_node`` (most tasks of it on one node, 0 = no limit; Storm's
    ``maxNodeCoLocationCnt``) and ``slot_group`` (Flink's slot sharing group) feed the
    co-location rule (:mod:`streamsched.model.colocation`); empty tuples: no limit, one group.

    Storm's resource-aware scheduling adds a per-worker limit: ``onheap_mb[t]`` is the JVM heap
    part of ``memory_mb[t]`` and ``worker_heap_mb`` the most heap one worker process of the graph
    may hold (``topology.worker.max.heap.size.mb``; 0 = no limit). Graph files do not keep them.
    ``contention`` optionally carries CAPSys's contention profile (:mod:`streamsched.model.contention`).
    """

    name: str
    operator_names: tuple[str, ...]
    task_operator: np.ndarray
    load: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    rate: np.ndarray
    bytes_rate: np.ndarray
    task_ids: np.ndarray
    memory_mb: np.ndarray
    load_unit: str = TASKS
    max_per_node: tuple[int, ...] = ()
    slot_group: tuple[str, ...] = ()
    onheap_mb: np.ndarray | None = None
    worker_heap_mb: float = 0.0
    #: CAPSys's per-task cost vectors and link types
    #: (:class:`streamsched.model.contention.ContentionProfile`), or None.
    contention: Any = None

    @classmethod
    def build(cls, name: str, operator_names, task_operator, load, src, dst, rate,
              bytes_rate=None, task_ids=None, memory_mb=None, merge_duplicates: bool = True,
              where: str | None = None, load_unit: str = TASKS, max_per_node=(), slot_group=(), onheap_mb=None,
              worker_heap_mb: float = 0.0) -> TaskGraph:
        """Validate and freeze arrays; parallel edges between the same ordered pair are summed."""
        where = where or f"graph {name!r}"
        check_unit(load_unit, f"{where}: load_unit")
        task_operator = np.asarray(task_operator, dtype=np.int32)
        n = task_operator.size
        load = np.asarray(load, dtype=np.float64)
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        rate = np.asarray(rate, dtype=np.float64)
        bytes_rate = np.zeros_like(rate) if bytes_rate is None else np.asarray(bytes_rate, dtype=np.float64)
        task_ids = np.arange(n, dtype=np.int64) if task_ids is None else np.asarray(task_ids, dtype=np.int64)
        memory_mb = np.zeros(n) if memory_mb is None else np.asarray(memory_mb, dtype=np.float64)
        if not (load.shape == task_ids.shape == memory_mb.shape == (n,)):
            raise InputError(f"{where}: task arrays differ in length")
        onheap_mb = None if onheap_mb is None else np.asarray(onheap_mb, dtype=np.float64)
        if onheap_mb is not None and (onheap_mb.shape != (n,) or np.any(onheap_mb > memory_mb)):
            raise InputError(f"{where}: onheap_mb must give one value per task, each at most its memory_mb")
        if not (worker_heap_mb >= 0):
            raise InputError(f"{where}: worker_heap_mb must be >= 0, got {worker_heap_mb!r}")
        if not (src.shape == dst.shape == rate.shape == bytes_rate.shape):
            raise InputError(f"{where}: edge arrays differ in length")
        if n and (task_operator.min() < 0 or task_operator.max() >= len(operator_names)):
            raise InputError(f"{where}: task operator index out of range")
        bad = np.flatnonzero((src < 0) | (src >= n) | (dst < 0) | (dst >= n))
        if bad.size:
            k = int(bad[0])
            raise InputError(f"{where}: edge {k} names an unknown task ({src[k]} -> {dst[k]})")

        def task(k: int) -> str:
            return f"task {task_ids[k]} ({operator_names[task_operator[k]]})"

        def pair(k: int) -> str:
            return f"pair task {task_ids[src[k]]} -> task {task_ids[dst[k]]}"

        _check_nonnegative(where, "load", load, task)
        _check_nonnegative(where, "memory_mb", memory_mb, task)
        _check_nonnegative(where, "rate", rate, pair)
        _check_nonnegative(where, "bytes", bytes_rate, pair)
        if merge_duplicates and src.size:
            key = src * n + dst
            if key.size > 1 and not np.all(key[1:] > key[:-1]):
                unique, inverse = np.unique(key, return_inverse=True)
                if unique.size < key.size:
                    rate = np.bincount(inverse, weights=rate, minlength=unique.size)
                    bytes_rate = np.bincount(inverse, weights=bytes_rate, minlength=unique.size)
                    src, dst = unique // n, unique % n
        max_per_node, slot_group = _operator_rule(where, len(operator_names), max_per_node, slot_group)
        index_type = np.int32 if n < 2**31 else np.int64
        return cls(
            name=name,
            operator_names=tuple(operator_names),
            task_operator=_frozen(task_operator, np.int32),
            load=_frozen(load, np.float64),
            src=_frozen(src, index_type),
            dst=_frozen(dst, index_type),
            rate=_frozen(rate, np.float64),
            bytes_rate=_frozen(bytes_rate, np.float64),
            task_ids=_frozen(task_ids, np.int64),
            memory_mb=_frozen(memory_mb, np.float64),
            load_unit=load_unit,
            max_per_node=max_per_node,
            slot_group=slot_group,
            onheap_mb=None if onheap_mb is None else _frozen(onheap_mb, np.float64),
            worker_heap_mb=float(worker_heap_mb),
        )

    @property
    def has_colocation_rule(self) -> bool:
        """True when some operator has a ``max_per_node`` or the operators form several slot
        sharing groups (what a graph file must then carry)."""
        return any(self.max_per_node) or len(set(self.slot_group)) > 1

    # ------------------------------------------------------------------ views
    @property
    def n_tasks(self) -> int:
        return int(self.task_operator.size)

    @property
    def n_edges(self) -> int:
        return int(self.src.size)

    @property
    def total_rate(self) -> float:
        return float(self.rate.sum())

    @property
    def total_load(self) -> float:
        return float(self.load.sum())

    @cached_property
    def bytes_per_record(self) -> np.ndarray:
        """Bytes per record of every edge: ``bytes_rate / rate`` (0 where the edge carries no records)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(self.rate > 0, self.bytes_rate / np.where(self.rate > 0, self.rate, 1.0), 0.0)
        out.setflags(write=False)
        return out

    @cached_property
    def undirected(self) -> sp.csr_matrix:
        """Symmetric adjacency ``R(ti,tj) + R(tj,ti)`` without self-loops (partitioners' input)."""
        keep = self.src != self.dst
        n = self.n_tasks
        a = sp.coo_matrix((self.rate[keep], (self.src[keep], self.dst[keep])), shape=(n, n))
        sym = (a + a.T).tocsr()
        sym.sum_duplicates()
        return sym

    @cached_property
    def operator_pairs(self) -> np.ndarray:
        """The distinct (sending operator, receiving operator) pairs joined by an edge, one row
        each, in increasing order (self-pairs included)."""
        n = len(self.operator_names)
        codes = self.task_operator[self.src].astype(np.int64) * n + self.task_operator[self.dst]
        if n * n <= 1 << 24:
            seen = np.zeros(n * n, dtype=bool)
            seen[codes] = True
            codes = np.flatnonzero(seen)
        else:
            codes = np.unique(codes)
        return np.stack([codes // n, codes % n], axis=1)

    def operator_tasks(self, operator: str | int) -> np.ndarray:
        """Task indices of one operator, in increasing order."""
        if isinstance(operator, str):
            try:
                operator = self.operator_names.index(operator)
            except ValueError:
                raise InputError(f"graph {self.name!r}: unknown operator {operator!r}") from None
        return np.flatnonzero(self.task_operator == operator)

    @cached_property
    def task_rank(self) -> np.ndarray:
        """Index of each task within its operator (0 for the operator's lowest task)."""
        order = np.lexsort((np.arange(self.n_tasks), self.task_operator))
        ops = self.task_operator[order]
        starts = np.r_[0, np.flatnonzero(ops[1:] != ops[:-1]) + 1]
        counts = np.diff(np.r_[starts, ops.size])
        rank = np.empty(self.n_tasks, dtype=np.int64)
        rank[order] = np.arange(ops.size) - np.repeat(starts, counts)
        return rank

    def task_label(self, task: int) -> str:
        return f"{self.operator_names[self.task_operator[task]]}[{self.task_rank[task]}]"

    # ------------------------------------------------------------ construction
    @classmethod
    def from_topology(cls, topology: Topology) -> TaskGraph:
        """Instantiate tasks and edges by the grouping semantics of each stream.

        Every subscriber receives the full output of its upstream operator. A task of operator u
        emits ``e_i`` tuples/s (sources: ``source_rate / p``; others: input x selectivity), and:
        shuffle / local-or-shuffle send ``e_i / p_d`` to each downstream task; fields sends
        ``e_i * w_j`` with Zipf weights ``w_j ~ (j+1)^-skew``; global sends ``e_i`` to the lowest
        task; all sends ``e_i`` to every task; forward sends ``e_i`` to task i. A stream's
        ``pair_rate`` replaces the rate of each pair it connects. Task load is ``task_load`` if
        set, else ``cpu_per_tuple`` x tuples/s processed (sources: emitted).
        """
        ops = topology.operator_map
        names = [op.name for op in topology.operators]
        offset = dict(zip(names, np.cumsum([0] + [op.parallelism for op in topology.operators])))
        incoming = {name: np.zeros(ops[name].parallelism) for name in names}
        has_input = {s.dst for s in topology.streams}
        emitted: dict[str, np.ndarray] = {}
        by_src: dict[str, list] = {name: [] for name in names}
        for stream in topology.streams:
            by_src[stream.src].append(stream)
        pairs = {(s.src, s.dst) for s in topology.streams}
        srcs, dsts, rates, byte_rates = [], [], [], []
        for name in topology.topological_order():
            op = ops[name]
            p = op.parallelism
            if name in has_input:
                emitted[name] = incoming[name] * op.selectivity
            else:
                emitted[name] = np.full(p, op.source_rate / p)
            for stream in by_src[name]:
                down = ops[stream.dst]
                s_local, d_local, r = _grouping_edges(stream, emitted[name], down.parallelism)
                incoming[stream.dst] += np.bincount(d_local, weights=r, minlength=down.parallelism)
                srcs.append(s_local + offset[name])
                dsts.append(d_local + offset[stream.dst])
                rates.append(r)
                byte_rates.append(r * op.tuple_bytes)
        loads, memory, task_operator = [], [], []
        for k, op in enumerate(topology.operators):
            processed = incoming[op.name] if op.name in has_input else emitted[op.name]
            if op.task_load is not None:
                loads.append(np.full(op.parallelism, op.task_load))
            else:
                loads.append(op.cpu_per_tuple * processed)
            memory.append(np.full(op.parallelism, op.memory_mb))
            task_operator.append(np.full(op.parallelism, k))
        cat = lambda parts, dtype: np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)
        return cls.build(
            name=topology.name,
            operator_names=names,
            task_operator=cat(task_operator, np.int32),
            load=cat(loads, np.float64),
            src=cat(srcs, np.int64),
            dst=cat(dsts, np.int64),
            rate=cat(rates, np.float64),
            bytes_rate=cat(byte_rates, np.float64),
            memory_mb=cat(memory, np.float64),
            merge_duplicates=len(pairs) < len(topology.streams),
        )

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "tasks": self.n_tasks,
            "edges": self.n_edges,
            "operators": len(self.operator_names),
            "total_rate": self.total_rate,
            "total_load": self.total_load,
            "load_unit": self.load_unit,
        }

    def __repr__(self) -> str:
        return json.dumps(self.summary())


def _operator_rule(where: str, n_operators: int, max_per_node, slot_group) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """``max_per_node`` (integers >= 0) and ``slot_group`` (strings), each empty or one per operator."""
    caps = tuple(max_per_node or ())
    groups = tuple(str(g) for g in (slot_group or ()))
    for name, values in (("max_per_node", caps), ("slot_group", groups)):
        if values and len(values) != n_operators:
            raise InputError(f"{where}: {name} has {len(values)} values for {n_operators} operators")
    for k, cap in enumerate(caps):
        if isinstance(cap, bool) or not isinstance(cap, (int, np.integer)) or cap < 0:
            raise InputError(f"{where}: max_per_node of operator {k} is {cap!r}; must be an integer >= 0")
    caps = tuple(int(c) for c in caps)
    return (caps if any(caps) else ()), (groups if len(set(groups)) > 1 else ())


def _check_nonnegative(where: str, field: str, values: np.ndarray, label) -> None:
    """Every value a finite number in [0, MAX_VALUE] (sums of larger ones overflow to inf, and
    JSON has no inf: issue 16's rates of 1e308); an error names the task or pair (``label(k)``)."""
    bad = np.flatnonzero(~((values >= 0) & (values <= MAX_VALUE)))
    if bad.size:
        k = int(bad[0])
        raise InputError(f"{where}: {label(k)}: {field} is {values[k]:g}; must be a number in [0, {MAX_VALUE:g}]")


@lru_cache(maxsize=4096)
def _grouping_pattern(grouping: str, p_up: int, p_down: int, key_skew: float):
    """(local src, local dst, weight) of a grouping: a pair's rate is ``e[src] * weight``."""
    if grouping in ("global", "forward"):
        s = np.arange(p_up)
        d = np.zeros(p_up, dtype=np.int64) if grouping == "global" else s
        return _read_only(s, d, np.ones(p_up))
    s = np.repeat(np.arange(p_up), p_down)
    d = np.tile(np.arange(p_down), p_up)
    if grouping == "fields":
        weights = np.arange(1, p_down + 1, dtype=np.float64) ** (-key_skew)
        weights /= weights.sum()
    elif grouping == "all":
        weights = np.ones(p_down)
    else:
        weights = np.full(p_down, 1.0 / p_down)
    return _read_only(s, d, np.tile(weights, p_up))


def _read_only(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    for array in arrays:
        array.setflags(write=False)
    return arrays


def _grouping_edges(stream, emitted: np.ndarray, p_down: int):
    """Edges (local src, local dst, rate) of one stream; see ``TaskGraph.from_topology``."""
    s, d, weight = _grouping_pattern(stream.grouping, emitted.size, p_down, stream.key_skew)
    if stream.pair_rate is not None:
        return s, d, np.full(s.size, stream.pair_rate)
    return s, d, emitted[s] * weight
