"""CAPS, the contention-aware placement search of CAPSys [1]_ (section 4; its code, scripts/caps-go).

Objective: the contention of :mod:`streamsched.contention_metrics`, the bottleneck node's
compute, state and network cost. Tasks of one operator are interchangeable, so a plan is how
many tasks of each operator each node hosts. The search, our implementation of [1]_'s:

1. *Thresholds.* Per dimension, ``low`` is the total cost over the nodes (network: 0) and
   ``high`` the cost of filling one node with the costliest tasks; a node may not exceed
   ``low + alpha x (high - low)`` (rounded to 5 decimals as CAPS does).
2. *Outer search.* Operators one at a time, in decreasing per-task compute.
3. *Inner search.* Depth first over the nodes, giving the node 0, 1, ... tasks of the operator
   (at least what the later nodes cannot take); nodes with the same contents are symmetric,
   so their counts are non-decreasing in node order. A branch stops as soon as a node exceeds
   a threshold. A link's network cost is charged when its second operator is placed.
4. Every complete plan within the thresholds is kept if no other dominates it (Pareto front);
   the placement is the front's plan with the least summed ``cost / (high - low)``
   (``pick=balanced``) or a seeded random one (``pick=random``, CAPS picks at random).

*Auto-tuning* ([1]_ section 4.3, CAPS's ``Auto_tuning``): from the ceilings, relax all alphas
by ``(1 + tune_rate)`` until a plan exists; binary-search each dimension's smallest alpha that
still gives a plan (others at their ceiling) to ``granularity``; from those minima, search for
the full front, relaxing by ``(1 + tune_rate)`` until it finds a plan. Where even alphas of 1
give no plan (a node's network above CAPS's ``high``, possible on graphs that are not CAPSys
profiles) the first plan of a search without thresholds is taken (alpha reported as inf).

CAPS stops on wall-clock timeouts and splits the search over goroutines; this search stops on
``work_limit`` node trials per search (``probe_work`` for auto-tuning's probes), so a run
is reproducible. Nodes take at most ``floor(capacity / smallest task load)`` tasks (CAPSys's
slots on a cluster whose capacity counts tasks); a plan that breaks a node's capacity with
unequal loads is finished by the capacity repair (:mod:`streamsched.schedulers.base`).

References
----------
.. [1] Wang, Y.; Huang, S.; Wang, J.; Kalavri, V.; Matta, I. (2025) "CAPSys: Contention-aware
   task placement for data stream processing", Proceedings of the Twentieth European Conference
   on Computer Systems (EuroSys 2025); code: github.com/CASP-Systems-BU/CAPSys (scripts/caps-go).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamsched.contention_metrics import bottleneck, costs_from_counts
from streamsched.errors import InfeasibleError
from streamsched.model.cluster import Cluster
from streamsched.model.contention import DIMENSIONS, ContentionProfile, profile_from_graph
from streamsched.model.placement import NO_WORKER, Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.schedulers import register
from streamsched.schedulers.base import STRICT, PackingFailed, Param, Scheduler


def node_limits(graph: TaskGraph, cluster: Cluster) -> np.ndarray:
    """Most tasks each node can take: ``floor(capacity / smallest positive task load)``."""
    positive = graph.load[graph.load > 0]
    if positive.size == 0:
        return np.full(cluster.n_nodes, graph.n_tasks, dtype=np.int64)
    return np.minimum(np.floor(cluster.capacity / positive.min() * (1 + 1e-9) + 1e-9), graph.n_tasks).astype(np.int64)


def threshold_bases(profile: ContentionProfile, n_nodes: int, slots: int) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) per dimension (CAPS's ``CalculateThreshold``): low = total / nodes (network
    0); high = one node of ``slots`` tasks filled with the costliest tasks first."""
    p = np.asarray(profile.parallelism, dtype=np.float64)
    low = (profile.cost * p[:, None]).sum(axis=0) / n_nodes
    low[2] = 0.0
    high = np.zeros(3)
    for k in range(3):
        left = slots
        for o in np.argsort(-profile.cost[:, k], kind="stable"):
            take = min(left, int(p[o]))
            high[k] += profile.cost[o, k] * take
            left -= take
            if left <= 0:
                break
    return low, high


def thresholds(low: np.ndarray, high: np.ndarray, alpha) -> np.ndarray:
    return np.round(low + (high - low) * np.asarray(alpha, dtype=np.float64), 5)


@dataclass
class SearchResult:
    """Pareto front of one search: ``plans`` are (cost vector, counts) pairs."""

    plans: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    found: int = 0
    work: int = 0
    work_to_first: int | None = None
    seconds_to_first: float | None = None
    exhausted: bool = False


class _Search:
    """One CAPS search under fixed thresholds (steps 2-4 of the module docstring)."""

    def __init__(self, profile: ContentionProfile, limits: np.ndarray, limit: np.ndarray,
                 work_limit: int, first_only: bool):
        self.profile = profile
        self.cost = profile.cost.tolist()
        self.par = list(profile.parallelism)
        self.down = [list(d) for d in profile.downstream]
        self.up = [list(u) for u in profile.upstream]
        self.kind = list(profile.outbound)
        self.cap = [int(x) for x in limits]
        self.limit = [float(x) for x in limit]
        self.work_limit = int(work_limit)
        self.first_only = first_only
        n_nodes = len(self.cap)
        self.order = sorted(range(profile.n_operators), key=lambda o: -self.cost[o][0])
        self.counts = [[0] * n_nodes for _ in self.par]
        self.used = [0] * n_nodes
        self.res = [[0.0, 0.0, 0.0] for _ in range(n_nodes)]
        self.placed = [False] * profile.n_operators
        self.result = SearchResult()
        self.started = time.perf_counter()
        self.stop = False

    def run(self) -> SearchResult:
        depth = len(self.par) * (len(self.cap) + 2) + 100
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old, depth + 200))
        try:
            self._outer(0)
        finally:
            sys.setrecursionlimit(old)
        self.result.exhausted = not self.stop
        return self.result

    # ---------------------------------------------------------------- outer / inner
    def _outer(self, level: int) -> None:
        if level == len(self.order):
            self._record()
            return
        o = self.order[level]
        nodes = sorted(range(len(self.cap)), key=lambda k: (-self.res[k][0], self._key(k), k))
        keys = [self._key(k) for k in nodes]
        free_after = [0] * (len(nodes) + 1)
        for i in range(len(nodes) - 1, -1, -1):
            k = nodes[i]
            free_after[i] = free_after[i + 1] + self.cap[k] - self.used[k]
        self._inner(level, o, nodes, keys, 0, self.par[o], free_after, 0)

    def _key(self, k: int) -> tuple:
        return (self.cap[k] - self.used[k], tuple(row[k] for row in self.counts))

    def _inner(self, level: int, o: int, nodes: list[int], keys: list[tuple], i: int, left: int,
               free_after: list[int], base: int) -> None:
        """Node ``nodes[i]`` gets 0.. of o's ``left`` tasks; ``keys`` are the nodes' contents
        before o, ``base`` the previous node's count (symmetric nodes: non-decreasing)."""
        if self.stop:
            return
        if i == len(nodes):
            if left == 0:
                self._close(level, o)
            return
        k = nodes[i]
        same = i > 0 and keys[i - 1] == keys[i]
        free = self.cap[k] - self.used[k]
        at_most = min(left, free)
        at_least = max(0, left - free_after[i + 1])
        if same:
            if at_most < base:
                return
            at_least = max(at_least, base)
        c, s, net = self.cost[o]
        res, lim = self.res[k], self.limit
        for num in range(at_least, at_most + 1):
            self.result.work += 1
            if self.result.work > self.work_limit:
                self.stop = True
                return
            added = 0.0
            for d in self.down[o]:
                if self.placed[d]:
                    added += self._remote(o, d, num, self.counts[d][k])
            if res[0] + c * num > lim[0] or res[1] + s * num > lim[1] or res[2] + added > lim[2]:
                break
            res[0] += c * num
            res[1] += s * num
            res[2] += added
            self.counts[o][k] = num
            self.used[k] += num
            self._inner(level, o, nodes, keys, i + 1, left - num, free_after, num)
            self.used[k] -= num
            self.counts[o][k] = 0
            res[0] -= c * num
            res[1] -= s * num
            res[2] -= added
            if self.stop:
                return

    def _remote(self, o: int, d: int, n_o: int, n_d: int) -> float:
        """Network cost of o's ``n_o`` tasks towards d on a node with ``n_d`` d tasks."""
        if self.kind[o] == "FORWARD":
            return self.cost[o][2] * max(0, n_o - n_d)
        return self.cost[o][2] * n_o * (1.0 - n_d / self.par[d])

    def _close(self, level: int, o: int) -> None:
        """All of o's tasks are placed: charge the links from placed upstream operators."""
        extra = [0.0] * len(self.cap)
        for u in self.up[o]:
            if self.placed[u]:
                for k in range(len(self.cap)):
                    extra[k] += self._remote(u, o, self.counts[u][k], self.counts[o][k])
        for k in range(len(self.cap)):
            if self.res[k][2] + extra[k] > self.limit[2]:
                return
        for k in range(len(self.cap)):
            self.res[k][2] += extra[k]
        self.placed[o] = True
        self._outer(level + 1)
        self.placed[o] = False
        for k in range(len(self.cap)):
            self.res[k][2] -= extra[k]

    def _record(self) -> None:
        result = self.result
        result.found += 1
        if result.work_to_first is None:
            result.work_to_first = result.work
            result.seconds_to_first = time.perf_counter() - self.started
        cost = np.array(self.res).max(axis=0)
        if any(np.all(p <= cost) for p, _ in result.plans):
            pass  # dominated by or equal to a kept plan
        else:
            result.plans = [(p, c) for p, c in result.plans if not np.all(cost <= p)]
            result.plans.append((cost, np.array(self.counts, dtype=np.int64)))
        if self.first_only:
            self.stop = True


def search(profile: ContentionProfile, limits: np.ndarray, alpha, work_limit: int,
           first_only: bool = False) -> SearchResult:
    """One CAPS search with thresholds from ``alpha`` (compute, state, network ratios)."""
    low, high = threshold_bases(profile, len(limits), int(np.max(limits)))
    return _Search(profile, limits, thresholds(low, high, alpha), work_limit, first_only).run()


def auto_tune(profile: ContentionProfile, limits: np.ndarray, ceilings, granularity: float, rate: float,
              probe_work: int, work_limit: int) -> tuple[SearchResult, np.ndarray, dict[str, Any]]:
    """CAPS's two-phase auto-tuning (module docstring); returns the final search, its alphas
    and how many searches each phase ran."""
    def works(alpha) -> bool:
        return search(profile, limits, alpha, probe_work, first_only=True).found > 0

    ceiling = np.minimum(np.asarray(ceilings, dtype=np.float64), 1.0)
    relaxed = 0
    while not works(ceiling):
        if np.all(ceiling >= 1.0):
            # CAPS would retry forever; without thresholds the first plan of the search is taken
            result = _Search(profile, limits, np.full(3, np.inf), probe_work, True).run()
            if not result.plans:
                raise InfeasibleError("caps: no plan within probe_work even without thresholds")
            return result, np.full(3, np.inf), {"relax_ceiling": relaxed, "unbounded": True}
        ceiling = np.minimum(ceiling * (1 + rate), 1.0)
        relaxed += 1
    minimum, calls = ceiling.copy(), {"relax_ceiling": relaxed}
    for k, dim in enumerate(DIMENSIONS):
        lo, hi, count = 0.0, float(ceiling[k]), 0
        while hi - lo >= granularity:
            mid = lo + (hi - lo) / 2
            trial = ceiling.copy()
            trial[k] = mid
            if works(trial):
                hi = mid
            else:
                lo = mid
            count += 1
        minimum[k] = hi
        calls[dim] = count
    alpha, rounds = minimum.copy(), 1
    while True:
        result = search(profile, limits, alpha, work_limit)
        if result.plans:
            break
        if np.all(alpha >= 1.0):
            raise InfeasibleError("caps: auto-tuning found no plan within work_limit even with every alpha at 1")
        alpha = np.minimum(alpha * (1 + rate), 1.0)
        rounds += 1
    calls["phase_two"] = rounds
    return result, alpha, calls


def placement_from_counts(graph: TaskGraph, cluster: Cluster, profile: ContentionProfile,
                          counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tasks onto nodes by operator counts: a ``FORWARD`` partner of equal parallelism already
    assigned puts task i beside its partner's task i where counts allow; then rank order.
    Worker slots are used round robin on each node."""
    node_of = np.full(graph.n_tasks, -1, dtype=np.int64)
    n_ops = profile.n_operators
    tasks = [graph.operator_tasks(o) for o in range(n_ops)]
    done: list[int] = []
    partners = {o: set() for o in range(n_ops)}
    for o, d, kind in profile.links():
        if kind == "FORWARD" and profile.parallelism[o] == profile.parallelism[d]:
            partners[o].add(d)
            partners[d].add(o)
    for o in range(n_ops):
        mine = tasks[o]
        want = counts[o].copy()
        partner = next((x for x in done if x in partners[o]), None)
        if partner is not None:
            for rank, t in enumerate(mine):
                k = node_of[tasks[partner][rank]]
                if want[k] > 0:
                    node_of[t] = k
                    want[k] -= 1
        rest = [t for t in mine if node_of[t] < 0]
        fill = np.repeat(np.arange(cluster.n_nodes), want)
        node_of[rest] = fill
        done.append(o)
    worker_of = np.full(graph.n_tasks, NO_WORKER, dtype=np.int64)
    seen = np.zeros(cluster.n_nodes, dtype=np.int64)
    for t in range(graph.n_tasks):
        k = node_of[t]
        if cluster.slots[k] > 0:
            worker_of[t] = seen[k] % cluster.slots[k]
        seen[k] += 1
    return node_of, worker_of


@register
class CapsScheduler(Scheduler):
    name = "caps"
    summary = "CAPSys's contention-aware placement search: bottleneck compute, state, network (Pareto, auto-tuned)"
    objective = "contention"
    randomised = True
    params = (
        Param("alpha_compute", float, 0.08, "threshold ratio for compute (without autotune)", low=0.0, high=1.0),
        Param("alpha_state", float, 0.15, "threshold ratio for state (without autotune)", low=0.0, high=1.0),
        Param("alpha_network", float, 0.6, "threshold ratio for network (without autotune)", low=0.0, high=1.0),
        Param("autotune", bool, True, "tune the alphas (CAPS's Auto_tuning) instead of using the three above"),
        Param("ceiling_compute", float, 0.07, "autotune: starting ceiling for compute", low=0.0, high=1.0),
        Param("ceiling_state", float, 0.07, "autotune: starting ceiling for state", low=0.0, high=1.0),
        Param("ceiling_network", float, 0.5, "autotune: starting ceiling for network", low=0.0, high=1.0),
        Param("granularity", float, 0.01, "autotune: binary search stops at this alpha width", low=1e-4, high=1.0),
        Param("tune_rate", float, 0.2, "autotune: relax alphas by this factor (1 + rate)", low=0.01, high=10.0),
        Param("first_plan", bool, False, "stop at the first plan within the thresholds (CAPS's ExitOnFirstPlan)"),
        Param("work_limit", int, 200_000, "node trials per full search (deterministic stop)", low=1),
        Param("probe_work", int, 20_000, "node trials per autotune probe", low=1),
        Param("pick", str, "balanced", "plan taken from the Pareto front", choices=("balanced", "random")),
        STRICT,
    )

    def place(self, graph: TaskGraph, cluster: Cluster, params: dict[str, Any], seed: int) -> Placement:
        profile = profile_from_graph(graph)
        limits = node_limits(graph, cluster)
        if int(limits.sum()) < graph.n_tasks:
            raise InfeasibleError(f"caps: graph {graph.name!r} has {graph.n_tasks} tasks but the nodes of "
                                  f"{cluster.name!r} take at most {int(limits.sum())}")
        started = time.perf_counter()
        calls: dict[str, Any] = {}
        if params["autotune"]:
            ceilings = (params["ceiling_compute"], params["ceiling_state"], params["ceiling_network"])
            result, alpha, calls = auto_tune(profile, limits, ceilings, params["granularity"], params["tune_rate"],
                                             params["probe_work"], params["work_limit"])
        else:
            alpha = np.array([params["alpha_compute"], params["alpha_state"], params["alpha_network"]])
            result = search(profile, limits, alpha, params["work_limit"], first_only=params["first_plan"])
            if not result.plans:
                why = "searched every plan" if result.exhausted else f"stopped at work_limit={params['work_limit']}"
                raise InfeasibleError(f"caps: no plan of {graph.name!r} within alpha=({', '.join(f'{a:g}' for a in alpha)}) "
                                      f"({why}); raise the alphas or use autotune=true")
        low, high = threshold_bases(profile, len(limits), int(np.max(limits)))
        span = np.where(high - low > 0, high - low, 1.0)
        if params["pick"] == "random":
            chosen = result.plans[int(np.random.default_rng(seed).integers(len(result.plans)))]
        else:
            chosen = min(result.plans, key=lambda plan: (float((plan[0] / span).sum()), tuple(plan[0])))
        node_of, worker_of = placement_from_counts(graph, cluster, profile, chosen[1])
        per_node = costs_from_counts(profile, chosen[1])
        metadata = {
            "contention": bottleneck(per_node), "alpha": [float(a) for a in alpha],
            "pareto_front": [dict(zip(DIMENSIONS, map(float, p))) for p, _ in
                             sorted(result.plans, key=lambda plan: tuple(plan[0]))],
            "plans_found": result.found, "work": result.work, "work_to_first": result.work_to_first,
            "seconds_to_first": result.seconds_to_first, "search_seconds": time.perf_counter() - started,
            "exhausted": result.exhausted, "measured": list(profile.measured),
        }
        if calls:
            metadata["autotune_searches"] = calls
        load = np.bincount(node_of, weights=graph.load, minlength=cluster.n_nodes)
        if np.any(load > cluster.capacity * (1 + 1e-9) + 1e-9):
            raise PackingFailed(f"caps: the plan exceeds a node's capacity (unequal task loads)", node_of, worker_of,
                                metadata=metadata)
        return Placement.build(node_of, worker_of, metadata)


def exact_contention_placement(graph: TaskGraph, cluster: Cluster, *, objective: str, weights, ceilings: dict[str, float],
                               network_ceiling: float | None, time_limit: float, work_limit: float | None, seed: int,
                               workers: int, warm_start: bool) -> Placement:
    """``optimal``'s contention objective: :func:`streamsched.solvers.contention.solve_contention`
    on ``graph``'s profile, from this search's plan when ``warm_start`` (module docstring);
    ``objective`` is a comma-separated order of dimensions, ``weighted`` or ``network-total``."""
    from streamsched.solvers.contention import solve_contention

    profile = profile_from_graph(graph)
    limits = node_limits(graph, cluster)
    if int(limits.sum()) < graph.n_tasks:
        raise InfeasibleError(f"optimal: graph {graph.name!r} has {graph.n_tasks} tasks but the nodes of "
                              f"{cluster.name!r} take at most {int(limits.sum())}")
    max_load = np.zeros(profile.n_operators)
    np.maximum.at(max_load, graph.task_operator, graph.load)
    low, high = threshold_bases(profile, len(limits), int(np.max(limits)))
    hint, warm = None, None
    if warm_start:
        try:
            result, _, _ = auto_tune(profile, limits, (0.07, 0.07, 0.5), 0.01, 0.2, 2_000, 20_000)
            span = np.where(high - low > 0, high - low, 1.0)
            hint = min(result.plans, key=lambda plan: float((plan[0] / span).sum()))[1]
            warm = dict(zip(DIMENSIONS, map(float, costs_from_counts(profile, hint).max(axis=0))))
        except InfeasibleError:
            hint = None
    if objective in ("weighted", "network-total"):
        kind, order = ("weighted" if objective == "weighted" else "traffic"), DIMENSIONS
    else:
        kind, order = "lexicographic", tuple(objective.split(","))
    solution = solve_contention(profile, limits, cluster.capacity, max_load, objective=kind, order=order,
                                weights=weights, spans=tuple(np.where(high - low > 0, high - low, 1.0)),
                                ceilings=ceilings, network_ceiling=network_ceiling, time_limit=time_limit,
                                work_limit=work_limit, seed=seed, workers=workers, hint=hint)
    if solution.status == "infeasible":
        raise InfeasibleError(f"optimal: no placement of {graph.name!r} on {cluster.name!r} meets the contention "
                              f"ceilings and capacities")
    if solution.counts is None:
        raise InfeasibleError(f"optimal: no placement of {graph.name!r} found within time_limit={time_limit:g} s")
    node_of, worker_of = placement_from_counts(graph, cluster, profile, solution.counts)
    first = solution.stages[0]
    return Placement.build(node_of, worker_of, {
        "status": solution.status, "bound": first.get("bound"), "gap": solution.gap, "contention": solution.cost,
        "contention_bound": solution.bound, "network_total": solution.network_total, "stages": solution.stages,
        "seconds_to_first": solution.seconds_to_first, "seconds_to_best": solution.seconds_to_best,
        "solver_time_s": solution.wall_time_s, "warm_start": warm, "measured": list(profile.measured),
        "objective": objective})
