"""Resource setups, the pool of 39 CEP dataflows and the arrival/departure sequences of
Ghosh et al. [1]_ section 5.

- setups: ``small`` = 96 Raspberry Pis + 4 Azure VMs over 100 control intervals (16 initial
  dataflows for the Poisson workload), ``large`` = 960 + 40 over 400 intervals (70 initial).
  Coefficients come from ``data/edge_query_types.yaml``; per-device speed, battery and the
  network of every pair are drawn once per setup from its seed.
- dataflows: 39 random DAGs in the manner of the RTRG utility the paper uses: 4-50 queries,
  1-4 sources, 1-3 sinks, fan-out at most 5, a query type drawn uniformly for each vertex
  among those that keep the downstream input rates at or below ``max_input_rate``, and a
  cumulative input rate of 100 e/s. The sizes (median 12, matching "lambda = 12 ... close to the
  median DAG size") stand in for Fig. 1, whose exact histogram is not in the text.
- workloads: ``rw-0``, ``rw-0.5``, ``rw-1`` (random walk on ``U_t`` = active queries per
  resource around ``U = 2 +/- u``: keep adding while ``U_t < U + u``, then removing while
  ``U_t > U - u``; a size is drawn with probability inversely proportional to it) and
  ``poisson`` (the initial dataflows, then alternately remove and add; sizes ~ Poisson(12)).
  One dataflow arrives or departs per control interval.

References
----------
.. [1] Ghosh, R.; Komma, S. P. R.; Simmhan, Y. (2018) "Adaptive energy-aware scheduling of dynamic
   event analytics across edge and cloud resources", 18th IEEE/ACM International Symposium on
   Cluster, Cloud and Grid Computing (CCGRID 2018); arXiv:1801.01087 [cs.DC].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamsched.errors import InputError
from streamsched.edge.model import CLOUD, EDGE, Coefficients, Dataflow, EdgeSystem, coefficients


@dataclass(frozen=True)
class Setup:
    name: str
    n_edge: int
    n_cloud: int
    intervals: int
    poisson_initial: int


SETUPS = {
    "small": Setup("small", 96, 4, 100, 16),
    "large": Setup("large", 960, 40, 400, 70),
}
WORKLOADS = ("rw-0", "rw-0.5", "rw-1", "poisson")
UTILISATION_TARGET = 2.0
POISSON_MEAN = 12
#: Sizes of the 39 dataflows (4-50 queries, median 12).
POOL_SIZES = (4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 12, 12, 13, 14, 15, 16,
              18, 20, 22, 24, 26, 28, 30, 32, 35, 38, 40, 42, 45, 48, 50)
MAX_FANOUT = 5


def setup(name: str) -> Setup:
    try:
        return SETUPS[name]
    except KeyError:
        raise InputError(f"--setup {name!r} is not one of {', '.join(SETUPS)}") from None


def build_system(spec: Setup | str, seed: int = 0, coeffs: Coefficients | None = None) -> EdgeSystem:
    """Draw the resources and the network of a setup (deterministic for a seed)."""
    spec = setup(spec) if isinstance(spec, str) else spec
    coeffs = coeffs or coefficients()
    rng = np.random.default_rng([seed, 7031])
    pi_spec, vm_spec = coeffs.resources["pi"], coeffs.resources["vm"]
    kind = np.r_[np.full(spec.n_edge, EDGE), np.full(spec.n_cloud, CLOUD)].astype(np.int64)
    on_edge = kind == EDGE
    speed = np.where(on_edge, rng.lognormal(0.0, pi_spec["speed_sigma"], kind.size),
                     rng.lognormal(0.0, vm_spec["speed_sigma"], kind.size))
    low, high = pi_spec["battery_mah"]
    battery = np.where(on_edge, rng.uniform(low, high, kind.size), np.inf)
    r = kind.size
    latency = np.zeros((r, r))
    bandwidth = np.zeros((r, r))
    pair_class = on_edge[:, None].astype(int) + on_edge[None, :].astype(int)  # 2 ee, 1 ec, 0 cc
    for value, key in ((2, "edge_edge"), (1, "edge_cloud"), (0, "cloud_cloud")):
        mask = np.triu(pair_class == value, k=1)
        lat_lo, lat_hi = coeffs.network[key]["latency_s"]
        bw_lo, bw_hi = coeffs.network[key]["bandwidth_mbps"]
        latency[mask] = rng.uniform(lat_lo, lat_hi, int(mask.sum()))
        bandwidth[mask] = rng.uniform(bw_lo, bw_hi, int(mask.sum())) * 125_000.0  # Mbps -> bytes/s
    latency = latency + latency.T
    bandwidth = bandwidth + bandwidth.T
    np.fill_diagonal(bandwidth, np.inf)
    return EdgeSystem(
        name=spec.name,
        kind=kind,
        latency_class=kind.copy(),
        speed=speed,
        interference=np.where(on_edge, pi_spec["interference"], vm_spec["interference"]),
        battery_mah=battery,
        base_load_ma=np.where(on_edge, pi_spec["base_load_ma"], 0.0),
        recharge_s=np.where(on_edge, pi_spec["recharge_s"], 0.0),
        net_latency=latency,
        net_bandwidth=bandwidth,
        names=tuple(f"pi{k + 1}" for k in range(spec.n_edge)) + tuple(f"vm{k + 1}" for k in range(spec.n_cloud)),
    )


def random_dataflow(name: str, n: int, rng: np.random.Generator, coeffs: Coefficients | None = None) -> Dataflow:
    """An RTRG-style random dataflow of ``n >= 3`` queries (see the module docstring)."""
    coeffs = coeffs or coefficients()
    if n < 3:
        raise InputError(f"dataflow {name!r}: needs at least 3 queries, got {n}")
    n_src = int(rng.integers(1, min(4, n - 2) + 1))
    n_sink = int(rng.integers(1, min(3, n - n_src - 1) + 1)) if n - n_src > 1 else 1
    first_sink = n - n_sink
    parents: list[list[int]] = [[] for _ in range(n)]
    fanout = np.zeros(n, dtype=np.int64)
    for v in range(n_src, n):
        pool = np.array([u for u in range(min(v, first_sink)) if fanout[u] < MAX_FANOUT])
        wanted = 1 + int(rng.random() < 0.3) + int(rng.random() < 0.1)
        weights = (pool + 1.0) / (pool + 1.0).sum()  # favour recent queries: deeper dataflows
        chosen = rng.choice(pool, size=min(wanted, pool.size), replace=False, p=weights)
        for u in sorted(chosen.tolist()):
            parents[v].append(u)
            fanout[u] += 1
    for u in range(first_sink):
        if fanout[u] == 0:  # every non-sink feeds something
            later = [v for v in range(max(u + 1, n_src), n) if u not in parents[v]]
            v = int(rng.choice(later))
            parents[v].append(u)
            fanout[u] += 1
    children_indegree = np.ones(n)
    for v in range(n):
        for u in parents[v]:
            children_indegree[u] = max(children_indegree[u], len(parents[v]))
    cap = coeffs.workload["max_input_rate"]
    input_rate = coeffs.workload["input_rate"]
    selectivity = np.array([q.selectivity for q in coeffs.query_types])
    types: list[int] = []
    out = np.zeros(n)
    for v in range(n):
        omega = input_rate / n_src if v < n_src else sum(out[u] for u in parents[v])
        if v >= first_sink:
            fits = np.arange(selectivity.size)
        else:
            fits = np.flatnonzero(omega * selectivity <= cap / children_indegree[v])
        k = int(rng.choice(fits)) if fits.size else int(np.argmin(selectivity))
        types.append(k)
        out[v] = omega * selectivity[k]
    return Dataflow.from_query_types(name, parents, types, input_rate, coeffs)


def dataflow_pool(seed: int = 0, coeffs: Coefficients | None = None) -> list[Dataflow]:
    """The 39 dataflows, deterministic for a seed."""
    rng = np.random.default_rng([seed, 39])
    return [random_dataflow(f"dag{k + 1:02d}-n{size}", size, rng, coeffs) for k, size in enumerate(POOL_SIZES)]


@dataclass(frozen=True)
class Event:
    """What happens at one control interval: ``add`` pool entry ``pool_index`` as ``instance``,
    or ``remove`` the active ``instance``."""

    interval: int
    action: str
    instance: int
    pool_index: int
    queries: int
    utilisation: float


def arrival_sequence(workload: str, n_resources: int, intervals: int, pool_sizes=POOL_SIZES,
                     poisson_initial: int = 16, seed: int = 0) -> list[Event]:
    """One event per control interval; ``utilisation`` is ``U_t`` after the event."""
    if workload not in WORKLOADS:
        raise InputError(f"--workload {workload!r} is not one of {', '.join(WORKLOADS)}")
    rng = np.random.default_rng([seed, 1217])
    sizes = np.asarray(pool_sizes)
    distinct = np.unique(sizes)
    inverse = (1.0 / distinct) / (1.0 / distinct).sum()
    active: dict[int, int] = {}  # instance -> pool index
    events: list[Event] = []
    queries = 0
    adding = True
    poisson = workload == "poisson"
    u = 0.0 if poisson else float(workload.split("-", 1)[1])

    def draw_size(candidates: np.ndarray) -> int:
        for _ in range(1000):
            size = int(rng.poisson(POISSON_MEAN)) if poisson else int(rng.choice(distinct, p=inverse))
            if size in candidates:
                return size
        return int(rng.choice(candidates))

    for t in range(intervals):
        if poisson:
            add = t < poisson_initial or (t - poisson_initial) % 2 == 1 or not active
        else:
            level = queries / n_resources
            if adding and level >= UTILISATION_TARGET + u:
                adding = False
            elif not adding and level <= UTILISATION_TARGET - u:
                adding = True
            add = adding or not active
        if add:
            size = draw_size(distinct)
            pool_index = int(rng.choice(np.flatnonzero(sizes == size)))
            instance = t
            active[instance] = pool_index
            queries += int(sizes[pool_index])
        else:
            size = draw_size(np.unique(sizes[list(active.values())]))
            instance = next(i for i, k in active.items() if sizes[k] == size)
            pool_index = active.pop(instance)
            queries -= int(sizes[pool_index])
        events.append(Event(t, "add" if add else "remove", instance, pool_index, int(sizes[pool_index]),
                            queries / n_resources))
    return events
