"""The CPU cost of tuples: per-operator CPU per processed tuple plus extra CPU per remote tuple.

A task's load in busy cores is, at edge rates ``r`` (tuples/s) under a placement,

    L_t = c[op(t)] * p_t + c_remote * (in_remote_t + out_remote_t) / 2

``p_t`` = tuples/s task t executes (its input rate; a source's output rate), as the
performance model's M1 (docs/evaluation.md); ``in_remote_t`` / ``out_remote_t`` = tuples/s it
receives / sends over edges that leave their worker. A remote tuple costs ``c_remote`` in all,
half on the sender (serialisation) and half on the receiver (deserialisation), as M2 charges
it. ``crossing_edges`` is M2's test (a tuple leaves its worker; a task without a worker is a
process of its own). The generator (``gen-metrics --cpu-per-tuple``) writes loads that follow
this model and :mod:`streamsched.evaluation.cost_regression` estimates ``c`` and ``c_remote``
back from snapshots.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

import numpy as np

from streamsched.errors import InputError
from streamsched.model.placement import NO_WORKER, Placement
from streamsched.model.taskgraph import TaskGraph

#: Name of the remote-tuple cost among the per-operator ones (tables, JSON).
REMOTE = "remote tuple"
_PER_SECOND = {"": 1.0, "s": 1.0, "ms": 1e3, "us": 1e6, "µs": 1e6, "ns": 1e9}
_VALUE = re.compile(r"^\s*([0-9.eE+-]+)\s*(s|ms|us|µs|ns)?\s*$")


@dataclass(frozen=True)
class CostModel:
    """CPU seconds per tuple: ``cpu_per_tuple[operator]`` per executed tuple (``default`` for
    operators not named) and ``remote_cpu_per_tuple`` per tuple that leaves its worker."""

    cpu_per_tuple: Mapping[str, float]
    remote_cpu_per_tuple: float = 0.0
    default: float | None = None

    def operator_cost(self, graph: TaskGraph) -> np.ndarray:
        """``c[op(t)]`` of every task; an operator without a cost is an InputError naming it."""
        costs = []
        for name in graph.operator_names:
            cost = self.cpu_per_tuple.get(name, self.default)
            if cost is None:
                raise InputError(f"--cpu-per-tuple: no cost for operator {name!r} of graph {graph.name!r} "
                                 f"(give {name}=SECONDS, or a bare SECONDS for every operator)")
            costs.append(cost)
        return np.asarray(costs, float)[graph.task_operator]

    def loads(self, graph: TaskGraph, placement: Placement, rate: np.ndarray) -> np.ndarray:
        """``L_t`` (busy cores) of every task at edge rates ``rate`` (tuples/s, or tuples per
        interval for CPU seconds per interval) under ``placement``."""
        return (self.operator_cost(graph) * processed(graph, rate)
                + self.remote_cpu_per_tuple * remote_endpoint_rate(graph, placement, rate))

    def to_dict(self) -> dict:
        return {"cpu_per_tuple_s": dict(self.cpu_per_tuple), "default_cpu_per_tuple_s": self.default,
                "remote_cpu_per_tuple_s": self.remote_cpu_per_tuple}


def parse_seconds(text: str, where: str) -> float:
    """``2e-5``, ``20us``, ``0.02ms``: CPU seconds >= 0; else an InputError naming ``where``."""
    match = _VALUE.match(text)
    try:
        value = float(match.group(1)) / _PER_SECOND[match.group(2) or ""] if match else math.nan
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise InputError(f"{where}: {text!r} is not a CPU time >= 0 (seconds, or with s, ms, us, ns)")
    return value


def parse_cost_model(specs: list[str], remote: str | None) -> CostModel | None:
    """``--cpu-per-tuple [OPERATOR=]TIME`` (repeatable; a bare TIME for every operator not
    named) and ``--remote-cpu-per-tuple TIME`` -> a CostModel, or None when neither is given."""
    if not specs and remote is None:
        return None
    if not specs:
        raise InputError("--remote-cpu-per-tuple: give --cpu-per-tuple too (the per-operator cost)")
    named: dict[str, float] = {}
    default = None
    for spec in specs:
        operator, sep, value = spec.rpartition("=")
        where = f"--cpu-per-tuple {spec}"
        if not sep:
            if default is not None:
                raise InputError(f"{where}: a cost for every operator is already given")
            default = parse_seconds(value, where)
        elif not operator or operator in named:
            raise InputError(f"{where}: {'operator name missing' if not operator else 'operator given twice'}")
        else:
            named[operator] = parse_seconds(value, where)
    c_remote = 0.0 if remote is None else parse_seconds(remote, "--remote-cpu-per-tuple")
    return CostModel(MappingProxyType(named), c_remote, default)


def processed(graph: TaskGraph, rate: np.ndarray) -> np.ndarray:
    """Tuples each task executes at edge rates ``rate``: its input, a source its output (M1)."""
    rate = np.asarray(rate, float)
    in_rate = np.bincount(graph.dst, weights=rate, minlength=graph.n_tasks)
    out_rate = np.bincount(graph.src, weights=rate, minlength=graph.n_tasks)
    return np.where(in_rate > 0, in_rate, out_rate)


def process_of(placement: Placement) -> np.ndarray:
    """A process (worker JVM) id per task: (node, worker); a task without a worker is a process
    of its own (as the performance model's M2 counts it)."""
    key = placement.node_of.astype(np.int64) * (1 << 32) + placement.worker_of.astype(np.int64)
    alone = placement.worker_of == NO_WORKER
    key[alone] = -1 - np.flatnonzero(alone)
    return key


def crossing_edges(graph: TaskGraph, placement: Placement) -> np.ndarray:
    """True for every edge whose tuples leave their worker (serialised; self-loops never do)."""
    proc = process_of(placement)
    return (proc[graph.src] != proc[graph.dst]) & (graph.src != graph.dst)


def remote_endpoint_rate(graph: TaskGraph, placement: Placement, rate: np.ndarray) -> np.ndarray:
    """``(in_remote_t + out_remote_t) / 2``: the remote tuples each task (de)serialises, halved
    so that one remote tuple counts once over its two ends."""
    remote = np.asarray(rate, float) * crossing_edges(graph, placement)
    return (np.bincount(graph.dst, weights=remote, minlength=graph.n_tasks)
            + np.bincount(graph.src, weights=remote, minlength=graph.n_tasks)) / 2
