"""CAPS, the contention-aware placement search of CAPSys [1]_ (section 4; its code, scripts/caps-go).

Objective: the contention of :mod:`streamsched.contention_metrics`, the bottleneck node's
compute, state and network cost. Tasks of one operator are interchangeable, so a plan is how
many tasks of each operator each node hosts. The search, our implementation of [1]_'s:

1. *Thresholds.* Per dimension, ``low`` is the total cost over the nodes (network: 0) and
   ``high`` the cost of filling one node with the costliest tasks; a node may not exceed
   ``low + alpha x (high - low)`` (rounded to 5 decimals as CAPS does).
2. *Outer search.* Operators one at a time, in decreasing per-task compute.
3. *Inner search.* Depth first over the nodes, giving each node some of the operator's tasks
   (at least what the later nodes cannot take); nodes with the same contents are symmetric,
   so their counts are non-decreasing in node order. A branch stops as soon as a node exceeds
   a threshold (every cost only grows as tasks are added, so the plans kept are exactly those
   within the thresholds). A link's network cost is charged when its second operator is placed.
   Unlike CAPS (counts ascending from 0, 38 goroutines), counts are tried from the node's share
   of the operator in proportion to its compute room outwards, and branches that cannot be
   completed within the thresholds are cut early by sound look-aheads (:class:`_Search`); the
   set of plans is CAPS's, the order in which they are found is not. A first-plan search
   (CAPS's ``ExitOnFirstPlan``) first *dives* (:meth:`_Search._dive`): the first path alone,
   without look-aheads or backtracking; a plan it reaches is the search's first plan.
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
is reproducible. The starting ceilings are CAPS's ``cmd/manual_tune`` (0.02, 0.02, 0.1).
Nodes take at most ``floor(capacity / smallest task load)`` tasks (CAPSys's slots on a
cluster whose capacity counts tasks); a plan that breaks a node's capacity with
unequal loads is finished by the capacity repair (:mod:`streamsched.schedulers.base`).

References
----------
.. [1] Wang, Y.; Huang, S.; Wang, J.; Kalavri, V.; Matta, I. (2025) "CAPSys: Contention-aware
   task placement for data stream processing", Proceedings of the Twentieth European Conference
   on Computer Systems (EuroSys 2025); code: github.com/CASP-Systems-BU/CAPSys (scripts/caps-go).
"""

from __future__ import annotations

import math
import sys
import time
from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import accumulate, cycle, repeat
from typing import Any

import numpy as np

from streamsched.contention_metrics import costs_from_counts
from streamsched.errors import InfeasibleError
from streamsched.model.cluster import Cluster
from streamsched.model.contention import DIMENSIONS, ContentionProfile, profile_from_graph
from streamsched.model.placement import NO_WORKER, Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.schedulers import register
from streamsched.schedulers.base import STRICT, PackingFailed, Param, Scheduler


def node_limits(graph: TaskGraph, cluster: Cluster) -> np.ndarray:
    """Most tasks each node can take: ``floor(capacity / smallest positive task load)``."""
    load = graph.load
    least = load.min() if load.size else 0.0
    if least <= 0:
        positive = load[load > 0]
        if positive.size == 0:
            return np.full(cluster.n_nodes, graph.n_tasks, dtype=np.int64)
        least = positive.min()
    most = np.floor(cluster.capacity / least * (1 + 1e-9) + 1e-9)
    return np.minimum(most, graph.n_tasks).astype(np.int64)


def threshold_bases(profile: ContentionProfile, n_nodes: int, slots: int) -> tuple[list[float], list[float]]:
    """(low, high) per dimension (CAPS's ``CalculateThreshold``): low = total / nodes (network
    0); high = one node of ``slots`` tasks filled with the costliest tasks first."""
    cost, par = profile.cost.tolist(), profile.parallelism
    low = [sum(row[k] * p for row, p in zip(cost, par)) / n_nodes for k in range(2)] + [0.0]
    high = []
    for column in zip(*cost):
        total, left = 0.0, slots
        for o in sorted(range(len(par)), key=column.__getitem__, reverse=True):  # stable: ties in order
            take = left if left < par[o] else par[o]
            total += column[o] * take
            left -= take
            if left <= 0:
                break
        high.append(total)
    return low, high


def thresholds(low: list[float], high: list[float], alpha) -> list[float]:
    """``low + alpha x (high - low)`` rounded to 5 decimals half away from zero (Go's ``math.Round``)."""
    out = []
    for lo, hi, a in zip(low, high, [float(x) for x in alpha]):
        x = lo + (hi - lo) * a
        out.append(math.copysign(math.floor(abs(x) * 1e5 + 0.5) / 1e5, x) if math.isfinite(x) else x)
    return out


def spans(low: list[float], high: list[float]) -> list[float]:
    """``high - low`` per dimension (1 where not positive): the width the alphas scale."""
    return [h - lo if h - lo > 0 else 1.0 for lo, h in zip(low, high)]


def balanced(plans: list, span: list[float]):
    """The plan (cost, counts) of least summed ``cost / span``; ties to the lesser cost vector."""
    return min(plans, key=lambda plan: (sum(x / w for x, w in zip(plan[0], span)), plan[0]))


@dataclass
class SearchResult:
    """Pareto front of one search: ``plans`` are (cost per dimension, counts per operator and
    node) pairs, as tuples and lists."""

    plans: list[tuple[tuple[float, float, float], list[list[int]]]] = field(default_factory=list)
    found: int = 0
    work: int = 0
    work_to_first: int | None = None
    first_at: float | None = None  # time.perf_counter() at the first plan
    exhausted: bool = False


class Lookahead:
    """What every search on one profile and cluster shares (thresholds aside): operators in
    decreasing per-task compute (the search's order) and, per level L (operators ``order[L:]``
    left), the look-ahead tables of :class:`_Search` (:meth:`levels`, built when a search first
    needs them): per dimension (compute, state) the prefix sums of the cheapest and of the
    costliest tasks (up to a node's slots: no node takes more) and the total. A level's tasks by
    compute are the tail of level 0's, so its cheapest compute tasks are level 0's cheapest (one
    shared table)."""

    def __init__(self, profile: ContentionProfile, limits):
        self.cost = cost = list(map(tuple, profile.cost.tolist()))
        self.par = par = list(profile.parallelism)
        self.cap = cap = np.asarray(limits, dtype=np.int64).tolist()
        n_ops = len(par)
        self.order = order = sorted(range(n_ops), key=[-row[0] for row in cost].__getitem__)
        self.level_of = level_of = [0] * n_ops
        for level, o in enumerate(order):
            level_of[o] = level
        n_tasks, slots = sum(par), sum(cap)
        self.tasks_left = list(accumulate((par[o] for o in reversed(order)), initial=0))[::-1]
        self.free_left = [slots - (n_tasks - n_left) for n_left in self.tasks_left]
        self._levels: list[tuple] | None = None

    def levels(self) -> list[tuple]:
        """Per level: (cheapest compute, cheapest state, costliest compute, costliest state,
        total compute, total state) of the operators from that level on."""
        if self._levels is not None:
            return self._levels
        cost, par, order, width = self.cost, self.par, self.order, max(self.cap)
        n_ops, n_tasks = len(par), self.tasks_left[0]
        compute = []  # every task's compute, costliest first
        for o in order:
            compute += [cost[o][0]] * par[o]
        cheapest_compute = list(accumulate(compute[:-width - 1:-1], initial=0.0))
        state: list[float] = []  # the level's tasks' state, cheapest first
        total_c = total_s = 0.0
        self._levels = levels = [()] * (n_ops + 1)
        for level in range(n_ops, -1, -1):
            if level < n_ops:
                o = order[level]
                c, s = cost[o][0], cost[o][1]
                total_c += c * par[o]
                total_s += s * par[o]
                at = bisect_right(state, s)
                state[at:at] = [s] * par[o]
            start = n_tasks - self.tasks_left[level]
            levels[level] = (cheapest_compute, list(accumulate(state[:width], initial=0.0)),
                             list(accumulate(compute[start:start + width], initial=0.0)),
                             list(accumulate(state[:-width - 1:-1], initial=0.0)), total_c, total_s)
        return levels


#: what a dive has in place of a level's look-ahead tables (it does not use them)
_NO_TABLES = ((), (), (), (), 0.0, 0.0)


class _Stop(Exception):
    """Ends a search at once: its first plan (``first_only``) or its work limit."""


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
    slots' worth of the costliest remaining tasks. A node's count is also at most what leaves
    as many for each symmetric node after it (their counts cannot be smaller). Counts are tried
    from the floor of the node's share of the operator (in proportion to its compute room)
    outwards, so the first plan is a balanced one. A node's costs are restored, not subtracted,
    on backtracking, so a plan's cost is the same sum in operator order however it was reached.
    """

    def __init__(self, profile: ContentionProfile, limits, limit, work_limit: int, first_only: bool,
                 tables: Lookahead | None = None):
        tables = tables or Lookahead(profile, limits)
        cost = tables.cost
        self.par = par = tables.par
        forward = [kind == "FORWARD" for kind in profile.outbound]
        self.cap = tables.cap
        self.limit = [float(x) for x in limit]
        self.work_limit = int(work_limit)
        self.first_only = first_only
        n_nodes, n_ops = len(self.cap), len(par)
        self.order = order = tables.order
        level_of = tables.level_of
        self.counts = counts = [[0] * n_nodes for _ in range(n_ops)]
        self.used = [0] * n_nodes
        self.res = [[0.0, 0.0, 0.0] for _ in range(n_nodes)]
        # node contents as one number (CAPS's node key: which tasks it holds)
        self.sig = [0] * n_nodes
        weight, scale = [0] * n_ops, 1
        for o in range(n_ops):
            weight[o] = scale
            scale *= par[o] + 1
        # per level: the operator, its links to placed downstream operators (network charged as
        # its tasks are placed) and from placed upstream operators (charged when it is complete)
        downstream = profile.downstream
        ups: list[list] = [[] for _ in range(n_ops)]
        for u in range(n_ops):
            for d in downstream[u]:
                if level_of[u] < level_of[d]:
                    ups[d].append((counts[u], cost[u][2], forward[u]))
        self.steps = []
        for level, o in enumerate(order):
            links = tuple([(counts[d], par[d]) for d in downstream[o] if level_of[d] < level])
            self.steps.append((o, *cost[o], forward[o], weight[o], links, tuple(ups[o]), counts[o], par[o]))
        self.tasks_left, self.free_left, self.tables = tables.tasks_left, tables.free_left, tables
        self.result = SearchResult()
        self.dive = False
        self.work = 0
        # a little slack so that float rounding in the look-aheads never cuts a plan CAPS keeps;
        # without a threshold they still compare sums of the same costs in other orders
        totals = [sum(cost[o][k] * par[o] for o in range(n_ops)) for k in range(3)]
        self.eps = [1e-9 * max(1.0, abs(x) if math.isfinite(x) else totals[k]) for k, x in enumerate(self.limit)]

    def run(self, dive: bool = True) -> SearchResult:
        result = self.result
        depth = len(self.par) * (len(self.cap) + 2) + 300
        old = sys.getrecursionlimit()
        if depth > old:
            sys.setrecursionlimit(depth)
        try:
            if self.first_only and dive:
                self._dive()
            self._outer(0)
            result.exhausted = True
        except _Stop:  # the search is over: its state is not restored
            result.exhausted = False
        finally:
            if depth > old:
                sys.setrecursionlimit(old)
        result.work = self.work
        return result

    # ---------------------------------------------------------------- outer / inner
    def _dive(self) -> None:
        """The search's first path alone, without recursion: on each node only the count the
        search tries first, without the look-aheads. The look-aheads cut only branches without
        a plan and the first count is tried first, so a plan the dive reaches is the search's
        first plan, with the same node trials, and ends the search; a dive that meets a bound
        it cannot keep puts everything back for the whole search."""
        self.dive = True
        for level in range(len(self.order)):
            ctx, left = self._arrange(level)
            i = 0
            while left:  # _inner, diving, returns what is left of o's tasks, or None
                left = self._inner(ctx, i, left, 0.0, 0.0)
                i += 1
            if left is None or self._charge(level) is None:
                break
        else:
            self._record()
        self.dive = False
        for row in self.counts:
            row[:] = [0] * len(row)
        for r in self.res:
            r[:] = [0.0, 0.0, 0.0]
        self.used[:] = [0] * len(self.used)
        self.sig[:] = [0] * len(self.sig)

    def _outer(self, level: int) -> None:
        """Place the tasks of the level's operator on the nodes (:meth:`_inner`), then the next."""
        if level == len(self.order):
            self._record()
            return
        ctx, left = self._arrange(level)
        self._inner(ctx, 0, left, 0.0, 0.0)

    def _arrange(self, level: int) -> tuple[tuple, int]:
        """The nodes in the order the level's operator is given to them and what
        :meth:`_inner` needs of them: (context, tasks of the operator)."""
        _, c, s, net, forward, weight, links, _, counts_o, par_o = self.steps[level]
        cap, used, res, sig = self.cap, self.used, self.res, self.sig
        n_nodes = len(cap)
        # twins (interchangeable nodes) hold the same tasks and take as many: CAPS's workers are
        # alike, a residual cluster's are not
        nodes = [k for _, _, _, k in sorted([(-res[k][0], sig[k], cap[k], k) for k in range(n_nodes)])]
        dive = self.dive
        if dive:
            after = _NO_TABLES
        else:
            levels = self.tables.levels()
            now, after = levels[level], levels[level + 1]
            here_c, here_s = now[2], now[3]  # the costliest of o's and the later tasks
            most = len(here_c) - 1
        # what the nodes not yet given o's tasks can absorb (level L's tasks: o's and the later)
        lim_c, lim_s = self.limit[0], self.limit[1]
        # counts are tried from o's share in proportion to the node's compute room (free slots
        # without a compute threshold); per node i (in this order), with what the nodes after it
        # hold: (a twin of node i-1, node, free slots, twins after it
        # (they take at least i's count), free slots after it, share, share of i and after,
        # compute and state the nodes after it can absorb, nodes from i on)
        recs = [(False, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0)] * n_nodes
        free_after = twins = 0
        room_after = absorb_c = absorb_s = 0.0
        key_next = None
        for i in range(n_nodes - 1, -1, -1):
            k = nodes[i]
            r = res[k]
            key = (sig[k], cap[k])
            twins = twins + 1 if key == key_next else 0
            f = cap[k] - used[k]
            room = lim_c - r[0]
            share = (room if room > 0.0 else 0.0) if lim_c != math.inf else float(f)
            before = nodes[i - 1]
            recs[i] = (i > 0 and sig[before] == key[0] and cap[before] == key[1], k, f, twins, free_after, share,
                       room_after + share, absorb_c, absorb_s, n_nodes - i)
            free_after += f
            room_after += share
            key_next = key
            if dive:
                continue
            f = f if f < most else most
            absorb_c += room if room < here_c[f] else here_c[f]
            room = lim_s - r[1]
            absorb_s += room if room < here_s[f] else here_s[f]
        lim_n, eps_c, eps_s = self.limit[2], self.eps[0], self.eps[1]
        return (level, recs, nodes, links, c, s, net, forward, self.tasks_left[level + 1], self.free_left[level + 1],
                *after, weight, counts_o, lim_c, lim_s, lim_n, eps_c, eps_s, res, used, sig, dive), par_o

    def _inner(self, ctx, i: int, left: int, fixed_c: float, fixed_s: float) -> int | None:
        """Node ``nodes[i]`` gets some of o's ``left`` tasks (``left > 0``); twins (same contents
        before o, same limit) are symmetric, so their counts do not decrease; ``fixed_c`` and
        ``fixed_s``: what the nodes before i can still absorb of the later tasks. Diving, it
        keeps its one count and returns what is left of o's tasks (None where it cannot)."""
        (level, recs, nodes, links, c, s, net, forward, tasks_next, free_next, low_c, low_s, top_c, top_s, need_c,
         need_s, weight, counts_o, lim_c, lim_s, lim_n, eps_c, eps_s, res, used, sig, dive) = ctx
        same, k, free, twins, free_after, share, weight_after, absorb_c, absorb_s, n_rest = recs[i]
        hi = left if left < free else free
        if twins and hi * (twins + 1) > left:  # the twins after i take at least as many (so a node
            # with a twin after it never takes the last task: CAPS's corner case of a twin getting 0)
            hi = left // (twins + 1)
        at_least = left - free_after
        if at_least < 0:
            at_least = 0
        if same:
            base = counts_o[nodes[i - 1]]
            if hi < base:
                return
            if at_least < base:
                at_least = base
        res = res[k]
        have_c, have_s, have_n = res
        # CAPS's threshold rule: counts from at_least up until a node's cost exceeds a threshold
        if c > 0 and have_c + c * hi > lim_c:
            hi = _most(have_c, c, lim_c, hi)
        if s > 0 and have_s + s * hi > lim_s:
            hi = _most(have_s, s, lim_s, hi)
        if links and hi >= at_least and have_n + _added(net, forward, k, hi, links) > lim_n:
            ok, bad = at_least - 1, hi
            while bad - ok > 1:
                mid = (ok + bad) // 2
                if have_n + _added(net, forward, k, mid, links) > lim_n:
                    bad = mid
                else:
                    ok = mid
            hi = ok
        if hi < at_least:
            self.work += 1
            return
        target = int(left * share / weight_after) if weight_after > 0 else left // n_rest
        target = hi if target > hi else at_least if target < at_least else target
        for num in (target,) if hi == at_least or dive else _outward(target, at_least, hi):
            self.work += 1
            if self.work > self.work_limit:
                raise _Stop
            cost_c, cost_s = have_c + c * num, have_s + s * num
            rest = left - num
            now_c = now_s = 0.0
            if not dive:
                f = free - num
                must = tasks_next - free_next + f
                if must > 0 and (cost_c + low_c[must] > lim_c + eps_c or cost_s + low_s[must] > lim_s + eps_s):
                    continue
                if f > tasks_next:
                    f = tasks_next
                room_c, room_s = lim_c - cost_c, lim_s - cost_s
                now_c = fixed_c + (room_c if room_c < top_c[f] else top_c[f])
                now_s = fixed_s + (room_s if room_s < top_s[f] else top_s[f])
                if (now_c + absorb_c + eps_c < rest * c + need_c
                        or now_s + absorb_s + eps_s < rest * s + need_s):
                    continue
            res[0] = cost_c
            res[1] = cost_s
            if links:
                res[2] = have_n + _added(net, forward, k, num, links)
            counts_o[k] = num
            used[k] += num
            sig[k] += num * weight
            if dive:
                return rest
            if rest:
                self._inner(ctx, i + 1, rest, now_c, now_s)
            else:
                self._close(level)
            sig[k] -= num * weight
            used[k] -= num
            counts_o[k] = 0
            res[0], res[1], res[2] = have_c, have_s, have_n

    def _close(self, level: int) -> None:
        """All of the level's operator's tasks are placed: charge them, go on, take it back."""
        before = self._charge(level)
        if before is not None:
            self._outer(level + 1)
            for r, total in zip(self.res, before):
                r[2] = total

    def _charge(self, level: int) -> list[float] | None:
        """Charge the links from placed upstream operators to the level's operator, all of whose
        tasks are placed: the nodes' network before (empty without such links), or None, nothing
        charged, where a node would exceed its threshold."""
        _, _, _, _, _, _, _, ups, counts_o, p = self.steps[level]
        if not ups:
            return []
        res, lim_n = self.res, self.limit[2]
        before = [r[2] for r in res]
        for k, n_o in enumerate(counts_o):
            added = 0.0
            for counts_u, net, forward in ups:
                n_u = counts_u[k]
                if forward:
                    added += net * (n_u - n_o if n_u > n_o else 0)
                else:
                    added += net * n_u * (1.0 - n_o / p)
            total = before[k] + added
            if total > lim_n:
                for r, old in zip(res, before):
                    r[2] = old
                return None
            res[k][2] = total
        return before

    def _record(self) -> None:
        result = self.result
        result.found += 1
        if result.work_to_first is None:
            result.work_to_first = self.work
            result.first_at = time.perf_counter()
        res = self.res
        cost = (max(r[0] for r in res), max(r[1] for r in res), max(r[2] for r in res))
        if not any(p[0] <= cost[0] and p[1] <= cost[1] and p[2] <= cost[2] for p, _ in result.plans):
            result.plans = [(p, c) for p, c in result.plans
                            if not (cost[0] <= p[0] and cost[1] <= p[1] and cost[2] <= p[2])]
            result.plans.append((cost, [row[:] for row in self.counts]))
        if self.first_only:
            raise _Stop


def _added(net: float, forward: bool, k: int, num: int, links) -> float:
    """Network added on node ``k`` by ``num`` tasks of an operator towards its placed downstream
    operators (``links``: their counts per node and parallelism)."""
    added = 0.0
    for counts_d, p in links:
        n_d = counts_d[k]
        if forward:
            added += net * (num - n_d if num > n_d else 0)
        else:
            added += net * num * (1.0 - n_d / p)
    return added


def _most(have: float, per: float, limit: float, at_most: int) -> int:
    """Largest ``n <= at_most`` with ``have + per * n <= limit`` (CAPS's float test), -1 if none."""
    if have > limit:
        return -1
    if limit == math.inf:
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
           first_only: bool = False, bases: tuple[list[float], list[float]] | None = None,
           tables: Lookahead | None = None, dive: bool = True) -> SearchResult:
    """One CAPS search with thresholds from ``alpha`` (compute, state, network ratios);
    ``bases`` (:func:`threshold_bases`) and ``tables`` when the caller has them. A
    ``first_only`` search dives first (``_Search._dive``) unless ``dive`` is false: the same
    plan, less work on the way."""
    low, high = bases or threshold_bases(profile, len(limits), int(np.max(limits)))
    return _Search(profile, limits, thresholds(low, high, alpha), work_limit, first_only, tables).run(dive)


def auto_tune(profile: ContentionProfile, limits: np.ndarray, ceilings, granularity: float, rate: float,
              probe_work: int, work_limit: int) -> tuple[SearchResult, np.ndarray, dict[str, Any]]:
    """CAPS's two-phase auto-tuning (module docstring); returns the final search, its alphas
    and how many searches each phase ran."""
    bases = threshold_bases(profile, len(limits), int(np.max(limits)))
    tables = Lookahead(profile, limits)

    def works(alpha) -> bool:
        return search(profile, limits, alpha, probe_work, first_only=True, bases=bases, tables=tables).found > 0

    ceiling = np.minimum(np.asarray(ceilings, dtype=np.float64), 1.0)
    relaxed = 0
    while not works(ceiling):
        if np.all(ceiling >= 1.0):
            # CAPS would retry forever; without thresholds the first plan of the search is taken
            result = _Search(profile, limits, np.full(3, np.inf), probe_work, True, tables).run()
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
        result = search(profile, limits, alpha, work_limit, bases=bases, tables=tables)
        if result.plans:
            break
        if np.all(alpha >= 1.0):
            raise InfeasibleError("caps: auto-tuning found no plan within work_limit even with every alpha at 1")
        alpha = np.minimum(alpha * (1 + rate), 1.0)
        rounds += 1
    calls["phase_two"] = rounds
    return result, alpha, calls


def placement_from_counts(graph: TaskGraph, cluster: Cluster, profile: ContentionProfile,
                          counts) -> tuple[np.ndarray, np.ndarray]:
    """Tasks onto nodes by operator counts (rows per operator, one count per node): a
    ``FORWARD`` partner of equal parallelism already assigned puts task i beside its partner's
    task i where counts allow; then rank order. Worker slots are used round robin on each node."""
    n_ops = profile.n_operators
    rows = counts.tolist() if isinstance(counts, np.ndarray) else counts
    par = profile.parallelism
    partner: list[int | None] = [None] * n_ops  # the first earlier FORWARD partner of equal parallelism
    for o, d, kind in profile.links():
        if kind == "FORWARD" and par[o] == par[d]:
            first, second = min(o, d), max(o, d)
            if partner[second] is None or first < partner[second]:
                partner[second] = first
    task_operator = graph.task_operator.tolist()
    by_operator = sorted(range(len(task_operator)), key=task_operator.__getitem__)  # stable: task order
    tasks = [by_operator[a - p:a] for a, p in zip(accumulate(par), par)]
    node_of = [-1] * len(task_operator)
    for o, want in enumerate(rows):
        rest = tasks[o]
        if partner[o] is not None:
            want, rest = list(want), []
            for t, twin in zip(tasks[o], tasks[partner[o]]):
                k = node_of[twin]
                if want[k] > 0:
                    node_of[t] = k
                    want[k] -= 1
                else:
                    rest.append(t)
        ranked: list[int] = []
        for k, w in enumerate(want):
            ranked += [k] * w
        if rest and rest[-1] - rest[0] == len(rest) - 1:  # consecutive task numbers: one slice
            node_of[rest[0]:rest[-1] + 1] = ranked
        else:
            for t, k in zip(rest, ranked):
                node_of[t] = k
    turns = [cycle(range(s)) if s > 0 else repeat(NO_WORKER) for s in cluster.slots.tolist()]  # per node
    worker_of = [next(turns[k]) for k in node_of]
    return np.array(node_of, dtype=np.int64), np.array(worker_of, dtype=np.int64)


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
        Param("ceiling_compute", float, 0.02, "autotune: starting ceiling for compute (CAPS's cmd/manual_tune)", low=0.0, high=1.0),
        Param("ceiling_state", float, 0.02, "autotune: starting ceiling for state (CAPS's cmd/manual_tune)", low=0.0, high=1.0),
        Param("ceiling_network", float, 0.1, "autotune: starting ceiling for network (CAPS's cmd/manual_tune)", low=0.0,
              high=1.0),
        Param("granularity", float, 0.01, "autotune: binary search stops at this alpha width", low=1e-4, high=1.0),
        Param("tune_rate", float, 0.2, "autotune: relax alphas by this factor (1 + rate)", low=0.01, high=10.0),
        Param("first_plan", bool, False, "stop at the first plan within the thresholds (CAPS's ExitOnFirstPlan)"),
        Param("work_limit", int, 1_000_000, "node trials per full search (deterministic stop)", low=1),
        Param("probe_work", int, 100_000, "node trials per autotune probe", low=1),
        Param("pick", str, "balanced", "plan taken from the Pareto front", choices=("balanced", "random")),
        STRICT,
    )

    def place(self, graph: TaskGraph, cluster: Cluster, params: dict[str, Any], seed: int) -> Placement:
        started = time.perf_counter()
        profile = profile_from_graph(graph)
        limits = node_limits(graph, cluster)
        most = limits.tolist()
        if sum(most) < graph.n_tasks:
            raise InfeasibleError(f"caps: graph {graph.name!r} has {graph.n_tasks} tasks but the nodes of "
                                  f"{cluster.name!r} take at most {sum(most)}")
        bases = threshold_bases(profile, len(most), max(most))
        calls: dict[str, Any] = {}
        if params["autotune"]:
            ceilings = (params["ceiling_compute"], params["ceiling_state"], params["ceiling_network"])
            result, alpha, calls = auto_tune(profile, limits, ceilings, params["granularity"], params["tune_rate"],
                                             params["probe_work"], params["work_limit"])
        else:
            alpha = np.array([params["alpha_compute"], params["alpha_state"], params["alpha_network"]])
            result = search(profile, limits, alpha, params["work_limit"], first_only=params["first_plan"], bases=bases)
            if not result.plans:
                why = "searched every plan" if result.exhausted else f"stopped at work_limit={params['work_limit']}"
                raise InfeasibleError(f"caps: no plan of {graph.name!r} within alpha=({', '.join(f'{a:g}' for a in alpha)}) "
                                      f"({why}); raise the alphas or use autotune=true")
        plans = result.plans
        if params["pick"] == "random":
            chosen = plans[int(np.random.default_rng(seed).integers(len(plans)))]
        else:
            chosen = balanced(plans, spans(*bases))
        node_of, worker_of = placement_from_counts(graph, cluster, profile, chosen[1])
        metadata = {
            "contention": dict(zip(DIMENSIONS, chosen[0])), "alpha": [float(a) for a in alpha],
            "pareto_front": [dict(zip(DIMENSIONS, cost)) for cost in sorted(cost for cost, _ in plans)],
            "plans_found": result.found, "work": result.work, "work_to_first": result.work_to_first,
            "seconds_to_first": result.first_at - started, "search_seconds": time.perf_counter() - started,
            "exhausted": result.exhausted, "measured": list(profile.measured),
        }
        if calls:
            metadata["autotune_searches"] = calls
        load = np.bincount(node_of, weights=graph.load, minlength=cluster.n_nodes).tolist()
        if any(x > c * (1 + 1e-9) + 1e-9 for x, c in zip(load, cluster.capacity.tolist())):
            raise PackingFailed(f"caps: the plan exceeds a node's capacity (unequal task loads)", node_of, worker_of,
                                metadata=metadata)
        return Placement.build(node_of, worker_of, metadata)


def exact_contention_placement(graph: TaskGraph, cluster: Cluster, *, objective: str, weights, ceilings: dict[str, float],
                               network_ceiling: float | None, time_limit: float | None, work_limit: float | None, seed: int,
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
            hint = np.array(balanced(result.plans, spans(low, high))[1])
            warm = dict(zip(DIMENSIONS, map(float, costs_from_counts(profile, hint).max(axis=0))))
        except InfeasibleError:
            hint = None
    if objective in ("weighted", "network-total"):
        kind, order = ("weighted" if objective == "weighted" else "traffic"), DIMENSIONS
    else:
        kind, order = "lexicographic", tuple(objective.split(","))
    solution = solve_contention(profile, limits, cluster.capacity, max_load, objective=kind, order=order,
                                weights=weights, spans=tuple(spans(low, high)),
                                ceilings=ceilings, network_ceiling=network_ceiling, time_limit=time_limit,
                                work_limit=work_limit, seed=seed, workers=workers, hint=hint)
    if solution.status == "infeasible":
        raise InfeasibleError(f"optimal: no placement of {graph.name!r} on {cluster.name!r} meets the contention "
                              f"ceilings and capacities")
    if solution.counts is None:
        raise InfeasibleError(f"optimal: no placement of {graph.name!r} found within "
                              + (f"time_limit={time_limit:g} s" if time_limit else f"work_limit={work_limit:g}"))
    node_of, worker_of = placement_from_counts(graph, cluster, profile, solution.counts)
    first = solution.stages[0]
    return Placement.build(node_of, worker_of, {
        "status": solution.status, "bound": first.get("bound"), "gap": solution.gap, "contention": solution.cost,
        "contention_bound": solution.bound, "network_total": solution.network_total, "stages": solution.stages,
        "seconds_to_first": solution.seconds_to_first, "seconds_to_best": solution.seconds_to_best,
        "solver_time_s": solution.wall_time_s, "warm_start": warm, "measured": list(profile.measured),
        "objective": objective})
