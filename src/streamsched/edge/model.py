"""The edge + cloud model of Ghosh, Komma and Simmhan [1]_ section 3.

A :class:`Dataflow` is a DAG of CEP queries; an :class:`EdgeSystem` is a set of edge devices
(battery powered, class 0) and cloud VMs (class 1) with a network latency and bandwidth per
pair. Definitions, with the paper's symbols:

- rates (3.1): a source emits ``Omega_in / |V_SRC|``; ``omega_out_i = omega_in_i x sigma(v_i)``;
  a query's input rate is the sum of its parents' output rates (outputs are duplicated on every
  outgoing edge).
- compute latency ``lambda_i^p`` = the query type's latency on the resource's class x the
  resource's own speed factor; on a resource holding ``m`` queries it becomes
  ``lambda_i^p (1 + pi(m))`` with the interference overhead ``pi(m) = c_p (m - 1)`` (3.3).
- path latency (3.1, ``L_p``): the sum over the path's edges ``<v_i, v_j>`` of
  ``l_{m,n} + delta_i / beta_{m,n}`` plus the compute latency of every query on the path. The
  printed equation adds only the upstream query's latency per edge, which would leave out the
  sink's compute; we count every query, as TopSet's ``L_i`` (4.1) does. Makespan ``L_G`` is the
  longest path (the critical path).

Constraints 1-3 (3.3) are checked by :func:`streamsched.edge.deployment.Deployment` and by the
GA; this module holds the data and the critical-path computations.

References
----------
.. [1] Ghosh, R.; Komma, S. P. R.; Simmhan, Y. (2018) "Adaptive energy-aware scheduling of dynamic
   event analytics across edge and cloud resources", 18th IEEE/ACM International Symposium on
   Cluster, Cloud and Grid Computing (CCGRID 2018); arXiv:1801.01087 [cs.DC].
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from importlib import resources as importlib_resources
from typing import Any

import numpy as np
import yaml

from streamsched.errors import InputError

EDGE, CLOUD = 0, 1
KIND_NAMES = ("edge", "cloud")
#: Relative slack on constraint 2 and 3 (float sums); the paper writes ``<`` for constraint 2.
TOLERANCE = 1e-9


# --------------------------------------------------------------------------- coefficients
@dataclass(frozen=True)
class QueryType:
    """One benchmarked CEP query type: selectivity, latency per resource class, event size."""

    name: str
    family: str
    selectivity: float
    latency_s: tuple[float, float]  # (edge, cloud)
    event_bytes: float


@dataclass(frozen=True)
class Coefficients:
    """The contents of ``data/edge_query_types.yaml`` (every assumption is documented there)."""

    query_types: tuple[QueryType, ...]
    resources: dict[str, Any] = field(hash=False)
    network: dict[str, Any] = field(hash=False)
    workload: dict[str, Any] = field(hash=False)

    def type_index(self, name: str) -> int:
        for k, q in enumerate(self.query_types):
            if q.name == name:
                return k
        raise InputError(f"unknown query type {name!r} (known: {', '.join(q.name for q in self.query_types)})")

    def energy_per_event(self, type_index: int) -> float:
        """epsilon of constraint 3 (mAh per event on a Pi): latency x active current / 3600."""
        pi = self.resources["pi"]
        return self.query_types[type_index].latency_s[EDGE] * pi["active_current_ma"] / 3600.0


@lru_cache(maxsize=1)
def coefficients() -> Coefficients:
    """Load the packaged coefficient file once."""
    where = "streamsched/data/edge_query_types.yaml"
    text = importlib_resources.files("streamsched").joinpath("data/edge_query_types.yaml").read_text()
    raw = yaml.safe_load(text)
    try:
        types = tuple(
            QueryType(q["name"], q["family"], float(q["selectivity"]),
                      (float(q["latency_pi_s"]), float(q["latency_vm_s"])), float(q["event_bytes"]))
            for q in raw["query_types"]
        )
        return Coefficients(types, raw["resources"], raw["network"], raw["workload"])
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{where}: malformed coefficient table ({exc})") from None


# ------------------------------------------------------------------------------ dataflow
@dataclass(frozen=True, eq=False)
class Dataflow:
    """A DAG of queries ``0..n-1``; ``parents[v]`` lists the upstream queries of ``v``.

    ``latency[v, c]`` is ``lambda`` of query ``v`` on resource class ``c`` (0 edge, 1 cloud) for a
    resource of speed factor 1; ``energy[v]`` is ``epsilon`` (mAh per input event, edge only).
    """

    name: str
    parents: tuple[tuple[int, ...], ...]
    latency: np.ndarray
    selectivity: np.ndarray
    event_bytes: np.ndarray
    energy: np.ndarray
    input_rate: float
    query_type: tuple[str, ...] = ()
    #: Input rate per query, when given instead of derived from ``input_rate`` (adapters).
    given_input_rates: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.parents)
        for v, ps in enumerate(self.parents):
            for p in ps:
                if not 0 <= p < n or p == v:
                    raise InputError(f"dataflow {self.name!r}: query {v} has invalid parent {p}")
        if self.latency.shape[0] != n or self.selectivity.shape != (n,) or self.energy.shape != (n,):
            raise InputError(f"dataflow {self.name!r}: per-query arrays differ in length")
        if len(self.topological_order) != n:
            raise InputError(f"dataflow {self.name!r}: has a cycle")

    @classmethod
    def from_query_types(cls, name: str, parents, type_indices, input_rate: float,
                         coeffs: Coefficients | None = None) -> Dataflow:
        coeffs = coeffs or coefficients()
        types = [coeffs.query_types[k] for k in type_indices]
        return cls(
            name=name,
            parents=tuple(tuple(int(p) for p in ps) for ps in parents),
            latency=np.array([q.latency_s for q in types], dtype=float).reshape(len(types), 2),
            selectivity=np.array([q.selectivity for q in types], dtype=float),
            event_bytes=np.array([q.event_bytes for q in types], dtype=float),
            energy=np.array([coeffs.energy_per_event(k) for k in type_indices], dtype=float),
            input_rate=float(input_rate),
            query_type=tuple(q.name for q in types),
        )

    @property
    def n(self) -> int:
        return len(self.parents)

    @cached_property
    def children(self) -> tuple[tuple[int, ...], ...]:
        out: list[list[int]] = [[] for _ in range(self.n)]
        for v, ps in enumerate(self.parents):
            for p in ps:
                out[p].append(v)
        return tuple(tuple(c) for c in out)

    @cached_property
    def is_source(self) -> np.ndarray:
        return np.array([not ps for ps in self.parents], dtype=bool)

    @cached_property
    def is_sink(self) -> np.ndarray:
        return np.array([not cs for cs in self.children], dtype=bool)

    @cached_property
    def depth(self) -> np.ndarray:
        """Index of the topological set of each query ([1]_ section 4.1, ``S_i``)."""
        depth = np.zeros(self.n, dtype=np.int64)
        for v in self.topological_order:
            if self.parents[v]:
                depth[v] = 1 + max(depth[p] for p in self.parents[v])
        return depth

    @cached_property
    def topological_order(self) -> tuple[int, ...]:
        """Kahn's order, lowest index first among ready queries."""
        indegree = [len(ps) for ps in self.parents]
        children: list[list[int]] = [[] for _ in range(self.n)]
        for v, ps in enumerate(self.parents):
            for p in ps:
                children[p].append(v)
        ready = [v for v in range(self.n) if indegree[v] == 0]
        order: list[int] = []
        heapq.heapify(ready)
        while ready:
            v = heapq.heappop(ready)
            order.append(v)
            for c in children[v]:
                indegree[c] -= 1
                if indegree[c] == 0:
                    heapq.heappush(ready, c)
        return tuple(order)

    @cached_property
    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        """``(src, dst)`` arrays, one entry per stream, grouped by destination in vertex order."""
        src = [p for v, ps in enumerate(self.parents) for p in ps]
        dst = [v for v, ps in enumerate(self.parents) for _ in ps]
        return np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)

    @cached_property
    def adjacency(self) -> tuple[tuple[int, ...], list[list[tuple[int, int]]], list[list[tuple[int, int]]]]:
        """``(topological order, incoming, outgoing)``; ``incoming[v]`` lists ``(parent, edge)``."""
        incoming: list[list[tuple[int, int]]] = [[] for _ in range(self.n)]
        outgoing: list[list[tuple[int, int]]] = [[] for _ in range(self.n)]
        src, dst = self.edges
        for e, (a, b) in enumerate(zip(src.tolist(), dst.tolist())):
            incoming[b].append((a, e))
            outgoing[a].append((b, e))
        return self.topological_order, incoming, outgoing

    @cached_property
    def edge_index(self) -> dict[tuple[int, int], int]:
        """``(src, dst) -> position`` in :attr:`edges`."""
        src, dst = self.edges
        return {(a, b): e for e, (a, b) in enumerate(zip(src.tolist(), dst.tolist()))}

    @cached_property
    def rates(self) -> tuple[np.ndarray, np.ndarray]:
        """``(omega_in, omega_out)`` per query (3.1); a source's input is its share of Omega_in."""
        if self.given_input_rates is not None:
            return self.given_input_rates, self.given_input_rates * self.selectivity
        n_src = int(self.is_source.sum())
        omega_in = np.zeros(self.n)
        omega_out = np.zeros(self.n)
        for v in self.topological_order:
            if self.parents[v]:
                omega_in[v] = sum(omega_out[p] for p in self.parents[v])
            else:
                omega_in[v] = self.input_rate / n_src
            omega_out[v] = omega_in[v] * self.selectivity[v]
        return omega_in, omega_out

    @property
    def omega_in(self) -> np.ndarray:
        return self.rates[0]


# -------------------------------------------------------------------------------- system
@dataclass(frozen=True, eq=False)
class EdgeSystem:
    """Resources ``0..R-1``: kind (0 edge / 1 cloud), latency class, speed factor, interference
    coefficient, battery (``C_p`` mAh, ``kappa_p`` mA, ``tau_p`` s; infinite on VMs), and the
    pairwise network latency (s) and bandwidth (bytes/s).

    ``sources_free`` follows the paper: source queries are left out of constraints 2 and 3
    (they stand for the sensor stream). Adapters of load-unit clusters set it to False.
    """

    name: str
    kind: np.ndarray
    latency_class: np.ndarray
    speed: np.ndarray
    interference: np.ndarray
    battery_mah: np.ndarray
    base_load_ma: np.ndarray
    recharge_s: np.ndarray
    net_latency: np.ndarray
    net_bandwidth: np.ndarray
    sources_free: bool = True
    names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        r = self.kind.size
        for name in ("latency_class", "speed", "interference", "battery_mah", "base_load_ma", "recharge_s"):
            if getattr(self, name).shape != (r,):
                raise InputError(f"edge system {self.name!r}: {name} has {getattr(self, name).size} entries, expected {r}")
        if self.net_latency.shape != (r, r) or self.net_bandwidth.shape != (r, r):
            raise InputError(f"edge system {self.name!r}: network matrices must be {r} x {r}")
        for array in (self.kind, self.latency_class, self.speed, self.interference, self.battery_mah,
                      self.base_load_ma, self.recharge_s, self.net_latency, self.net_bandwidth):
            array.setflags(write=False)

    @property
    def n(self) -> int:
        return int(self.kind.size)

    @cached_property
    def all_resources(self) -> np.ndarray:
        return np.arange(self.n)

    @cached_property
    def edge_resources(self) -> np.ndarray:
        return np.flatnonzero(self.kind == EDGE)

    @cached_property
    def cloud_resources(self) -> np.ndarray:
        return np.flatnonzero(self.kind == CLOUD)

    @cached_property
    def base_energy_mah(self) -> np.ndarray:
        """First term of constraint 3: ``tau_p kappa_p`` (mA x s -> mAh)."""
        return self.recharge_s * self.base_load_ma / 3600.0

    def pi(self, m, resources=slice(None)) -> np.ndarray:
        """Interference overhead ``pi(m) = c_p (m - 1)`` for ``m >= 1`` (0 for an idle resource)."""
        return self.interference[resources] * np.maximum(np.asarray(m, dtype=float) - 1.0, 0.0)

    def allowed(self, dataflow: Dataflow) -> list[np.ndarray]:
        """Constraint 1 as a domain per query: sources on edge, sinks on cloud.

        A system without edge (cloud) resources lifts the rule for sources (sinks), so ordinary
        clusters stay usable.
        """
        return [self.allowed_for(dataflow, v) for v in range(dataflow.n)]

    def allowed_for(self, dataflow: Dataflow, v: int) -> np.ndarray:
        """The constraint-1 domain of query ``v`` (see :meth:`allowed`)."""
        if dataflow.is_source[v] and not dataflow.is_sink[v] and self.edge_resources.size:
            return self.edge_resources
        if dataflow.is_sink[v] and not dataflow.is_source[v] and self.cloud_resources.size:
            return self.cloud_resources
        return self.all_resources

    def exclusive_latency(self, dataflow: Dataflow, v: int, resources=slice(None)) -> np.ndarray:
        """``lambda_v^p`` on each resource when run alone."""
        return dataflow.latency[v, self.latency_class[resources]] * self.speed[resources]

    def edge_cost(self, dataflow: Dataflow, mapping: np.ndarray) -> np.ndarray:
        """``l_{m,n} + delta_i / beta_{m,n}`` per stream of ``dataflow.edges`` under ``mapping``."""
        src, dst = dataflow.edges
        a, b = mapping[src], mapping[dst]
        return self.net_latency[a, b] + dataflow.event_bytes[src] / self.net_bandwidth[a, b]


# ------------------------------------------------------------------------ critical paths
def critical_path(dataflow: Dataflow, effective_latency, edge_cost,
                  with_tail: bool = True) -> tuple[float, list[int], np.ndarray, np.ndarray | None]:
    """Longest source-to-sink path with vertex weights ``effective_latency`` and edge weights
    ``edge_cost`` (aligned with ``dataflow.edges``): ``(L_G, path, L, T)`` where ``L[v]`` is the
    longest path ending at ``v`` (TopSet's ``L_i``, ``v`` included) and ``T[v]`` the longest
    path starting at ``v`` (``v`` included; None unless ``with_tail``)."""
    eff = np.asarray(effective_latency, dtype=float).tolist()
    cost = np.asarray(edge_cost, dtype=float).tolist()
    order, incoming, outgoing = dataflow.adjacency
    n = dataflow.n
    head = [0.0] * n
    best_parent = [-1] * n
    for v in order:
        best, arg = 0.0, -1
        for p, e in incoming[v]:
            value = head[p] + cost[e]
            if arg < 0 or value > best:
                best, arg = value, p
        head[v] = best + eff[v]
        best_parent[v] = arg
    end = 0
    for v in range(1, n):
        if head[v] > head[end]:
            end = v
    path = [end]
    while best_parent[path[-1]] >= 0:
        path.append(best_parent[path[-1]])
    tail = None
    if with_tail:
        tail = [0.0] * n
        for v in reversed(order):
            best = 0.0
            for c, e in outgoing[v]:
                value = cost[e] + tail[c]
                if value > best:
                    best = value
            tail[v] = best + eff[v]
        tail = np.array(tail)
    return head[end], path[::-1], np.array(head), tail


def makespan(dataflow: Dataflow, effective_latency, edge_cost) -> float:
    """``L_G`` of 3.1: the critical path length."""
    return critical_path(dataflow, effective_latency, edge_cost)[0]
