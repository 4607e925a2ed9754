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
    """One CAPS search under fixed thresholds (steps 2-4 of the module docstring), with plain
    Python numbers on the hot path.

    CAPS's rule is kept exactly: a node's compute, state and network only grow as operators are
    added, so a branch is cut where a node exceeds a threshold, and every complete plan within
    the thresholds stays reachable. Two sound look-aheads cut branches that cannot be completed
    within them (CAPS explores these until they fail): a node that must still take ``m`` of the
    remaining tasks (the others' free slots cannot hold them all) ends at least at its cost plus
    the ``m`` cheapest remaining tasks'; and the remaining compute (state) must fit in what the
    nodes can still take, each at most its room under the threshold and at most its free
    slots' worth of the costliest remaining tasks. Counts are tried from the node's share of the
    operator in proportion to its compute room outwards, so the first plan is a balanced one.
    """

    def __init__(self, profile: ContentionProfile, limits: np.ndarray, limit: np.ndarray,
                 work_limit: int, first_only: bool):
        self.cost = [tuple(float(x) for x in row) for row in profile.cost.tolist()]
        self.par = [int(p) for p in profile.parallelism]
        self.down = [tuple(d) for d in profile.downstream]
        self.up = [tuple(u) for u in profile.upstream]
        self.forward = [kind == "FORWARD" for kind in profile.outbound]
        self.cap = [int(x) for x in limits]
        self.limit = [float(x) for x in limit]
        self.work_limit = int(work_limit)
        self.first_only = first_only
        n_nodes, n_ops = len(self.cap), len(self.par)
        self.order = sorted(range(n_ops), key=lambda o: -self.cost[o][0])
        self.counts = [[0] * n_nodes for _ in range(n_ops)]
        self.used = [0] * n_nodes
        self.res = [[0.0, 0.0, 0.0] for _ in range(n_nodes)]
        self.placed = [False] * n_ops
        self.result = SearchResult()
        self.started = time.perf_counter()
        self.stop = False
        self.work = 0
        # look-ahead tables per level L (operators order[L:] left): tasks, free slots, and per
        # dimension (compute, state) the total and the prefix sums of the costliest / cheapest
        self.tasks_left, self.free_left, self.total, self.top, self.low = [], [], [], [], []
        slots = sum(self.cap)
        for level in range(n_ops + 1):
            rest = self.order[level:]
            n_left = sum(self.par[o] for o in rest)
            self.tasks_left.append(n_left)
            self.free_left.append(slots - (sum(self.par) - n_left))
            totals, tops, lows = [], [], []
            for dim in (0, 1):
                values = sorted(self.cost[o][dim] for o in rest for _ in range(self.par[o]))
                lows.append(_prefix(values))
                tops.append(_prefix(values[::-1]))
                totals.append(sum(values))
            self.total.append(totals)
            self.top.append(tops)
            self.low.append(lows)
        # a little slack so that float rounding in the look-aheads never cuts a plan CAPS keeps
        self.eps = [1e-9 * max(1.0, abs(x)) if x != float("inf") else 0.0 for x in self.limit]

    def run(self) -> SearchResult:
        depth = len(self.par) * (len(self.cap) + 2) + 100
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old, depth + 200))
        try:
            self._outer(0)
        finally:
            sys.setrecursionlimit(old)
        result = self.result
        result.work = self.work
        result.exhausted = not self.stop
        result.plans = [(np.array(cost), np.array(counts, dtype=np.int64)) for cost, counts in result.plans]
        return result

    # ---------------------------------------------------------------- outer / inner
    def _outer(self, level: int) -> None:
        if level == len(self.order):
            self._record()
            return
        o = self.order[level]
        n_nodes = len(self.cap)
        keys = [(self.cap[k] - self.used[k], tuple(row[k] for row in self.counts)) for k in range(n_nodes)]
        nodes = sorted(range(n_nodes), key=lambda k: (-self.res[k][0], keys[k], k))
        keys = [keys[k] for k in nodes]
        free = [self.cap[k] - self.used[k] for k in nodes]
        free_after = [0] * (n_nodes + 1)
        for i in range(n_nodes - 1, -1, -1):
            free_after[i] = free_after[i + 1] + free[i]
        # what the nodes not yet given o's tasks can absorb (level L's tasks: o's and the later)
        lim_c, lim_s = self.limit[0], self.limit[1]
        top_c, top_s = self.top[level]
        room = [lim_c - self.res[k][0] for k in nodes]
        absorb_c = [0.0] * (n_nodes + 1)
        absorb_s = [0.0] * (n_nodes + 1)
        for i in range(n_nodes - 1, -1, -1):
            k, f = nodes[i], min(free[i], len(top_c) - 1)
            absorb_c[i] = absorb_c[i + 1] + min(room[i], top_c[f])
            absorb_s[i] = absorb_s[i + 1] + min(lim_s - self.res[k][1], top_s[f])
        # counts are tried from o's share in proportion to the node's compute room (free slots
        # without a compute threshold)
        share = [max(r, 0.0) for r in room] if lim_c != float("inf") else [float(f) for f in free]
        room_after = [0.0] * (n_nodes + 1)
        for i in range(n_nodes - 1, -1, -1):
            room_after[i] = room_after[i + 1] + share[i]
        # network added on a node by o's tasks towards its placed downstream operators
        links = [(d, self.par[d]) for d in self.down[o] if self.placed[d]]
        self._inner(level, o, nodes, keys, free, free_after, absorb_c, absorb_s, share, room_after, links,
                    0, self.par[o], 0, 0.0, 0.0)

    def _added(self, o: int, k: int, num: int, links) -> float:
        net, added = self.cost[o][2], 0.0
        for d, p in links:
            n_d = self.counts[d][k]
            if self.forward[o]:
                added += net * max(0, num - n_d)
            else:
                added += net * num * (1.0 - n_d / p)
        return added

    def _inner(self, level, o, nodes, keys, free, free_after, absorb_c, absorb_s, share, room_after, links,
               i, left, base, fixed_c, fixed_s) -> None:
        """Node ``nodes[i]`` gets some of o's ``left`` tasks; ``keys`` are the nodes' contents
        before o, ``base`` the previous node's count (symmetric nodes: non-decreasing);
        ``fixed_c``/``fixed_s`` what the nodes before i can still absorb of the later tasks."""
        same = 0 < i < len(nodes) and keys[i - 1] == keys[i]
        if left == 0:
            if not (same and base > 0):  # CAPS's corner case: a twin of the last node would get 0
                self._close(level, o)
            return
        k = nodes[i]
        at_most = min(left, free[i])
        at_least = max(0, left - free_after[i + 1])
        if same:
            if at_most < base:
                return
            at_least = max(at_least, base)
        c, s, _ = self.cost[o]
        res = self.res[k]
        lim_c, lim_s, lim_n = self.limit
        # CAPS's threshold rule: counts from at_least up until a node's cost exceeds a threshold
        hi = at_most
        if c > 0:
            hi = min(hi, _most(res[0], c, lim_c, hi))
        if s > 0:
            hi = min(hi, _most(res[1], s, lim_s, hi))
        if links and hi >= at_least and res[2] + self._added(o, k, hi, links) > lim_n:
            lo_ok, hi_bad = at_least - 1, hi
            while hi_bad - lo_ok > 1:
                mid = (lo_ok + hi_bad) // 2
                if res[2] + self._added(o, k, mid, links) > lim_n:
                    hi_bad = mid
                else:
                    lo_ok = mid
            hi = lo_ok
        if hi < at_least:
            self.work += 1
            return
        # look-ahead tables of the level after o
        nxt = level + 1
        tasks_next, free_next = self.tasks_left[nxt], self.free_left[nxt]
        top_c, top_s = self.top[nxt]
        low_c, low_s = self.low[nxt]
        need_c, need_s = self.total[nxt]
        eps_c, eps_s = self.eps[0], self.eps[1]
        weight = room_after[i]
        target = round(left * share[i] / weight) if weight > 0 else round(left / (len(nodes) - i))
        counts_o, used, stop_at = self.counts[o], self.used, self.work_limit
        for num in _outward(min(max(target, at_least), hi), at_least, hi):
            self.work += 1
            if self.work > stop_at:
                self.stop = True
                return
            cost_c, cost_s = res[0] + c * num, res[1] + s * num
            f = free[i] - num
            must = tasks_next - (free_next - f)
            if must > 0 and (cost_c + low_c[must] > lim_c + eps_c or cost_s + low_s[must] > lim_s + eps_s):
                continue
            f = min(f, tasks_next)
            now_c = fixed_c + min(lim_c - cost_c, top_c[f])
            now_s = fixed_s + min(lim_s - cost_s, top_s[f])
            rest = left - num
            if (now_c + absorb_c[i + 1] + eps_c < rest * c + need_c
                    or now_s + absorb_s[i + 1] + eps_s < rest * s + need_s):
                continue
            added = self._added(o, k, num, links) if links else 0.0
            res[0] = cost_c
            res[1] = cost_s
            res[2] += added
            counts_o[k] = num
            used[k] += num
            self._inner(level, o, nodes, keys, free, free_after, absorb_c, absorb_s, share, room_after, links,
                        i + 1, rest, num, now_c, now_s)
            used[k] -= num
            counts_o[k] = 0
            res[0] -= c * num
            res[1] -= s * num
            res[2] -= added
            if self.stop:
                return

    def _remote(self, o: int, d: int, n_o: int, n_d: int) -> float:
        """Network cost of o's ``n_o`` tasks towards d on a node with ``n_d`` d tasks."""
        if self.forward[o]:
            return self.cost[o][2] * max(0, n_o - n_d)
        return self.cost[o][2] * n_o * (1.0 - n_d / self.par[d])

    def _close(self, level: int, o: int) -> None:
        """All of o's tasks are placed: charge the links from placed upstream operators."""
        n_nodes = len(self.cap)
        extra = [0.0] * n_nodes
        ups = [u for u in self.up[o] if self.placed[u]]
        if ups:
            for k in range(n_nodes):
                n_o = self.counts[o][k]
                for u in ups:
                    extra[k] += self._remote(u, o, self.counts[u][k], n_o)
                if self.res[k][2] + extra[k] > self.limit[2]:
                    return
            for k in range(n_nodes):
                self.res[k][2] += extra[k]
        self.placed[o] = True
        self._outer(level + 1)
        self.placed[o] = False
        if ups:
            for k in range(n_nodes):
                self.res[k][2] -= extra[k]

    def _record(self) -> None:
        result = self.result
        result.found += 1
        if result.work_to_first is None:
            result.work_to_first = self.work
            result.seconds_to_first = time.perf_counter() - self.started
        cost = tuple(max(r[d] for r in self.res) for d in range(3))
        if not any(all(p[d] <= cost[d] for d in range(3)) for p, _ in result.plans):
            result.plans = [(p, c) for p, c in result.plans if not all(cost[d] <= p[d] for d in range(3))]
            result.plans.append((cost, [row[:] for row in self.counts]))
        if self.first_only:
            self.stop = True


def _prefix(values: list[float]) -> list[float]:
    out, total = [0.0], 0.0
    for v in values:
        total += v
        out.append(total)
    return out


def _most(have: float, per: float, limit: float, at_most: int) -> int:
    """Largest ``n <= at_most`` with ``have + per * n <= limit`` (CAPS's float test), -1 if none."""
    if have > limit:
        return -1
    if limit == float("inf"):
        return at_most
    n = min(at_most, int((limit - have) / per))
    while n >= 0 and have + per * n > limit:
        n -= 1
    while n < at_most and have + per * (n + 1) <= limit:
        n += 1
    return n


def _outward(start: int, lo: int, hi: int):
    """``start``, then alternately above and below it, within ``[lo, hi]``."""
    yield start
    step = 1
    while start + step <= hi or start - step >= lo:
        if start + step <= hi:
            yield start + step
        if start - step >= lo:
            yield start - step
        step += 1


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
