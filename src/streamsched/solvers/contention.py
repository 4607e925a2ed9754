"""Exact minimum contention (CAPSys's bottleneck [1]_) with CP-SAT [2]_, on operator counts.

Tasks of an operator are interchangeable in the contention model
(:mod:`streamsched.contention_metrics`), so the variables are ``n[o, k]``, the tasks of
operator o on node k: ``sum_k n[o, k] = p_o``, ``sum_o n[o, k] <= limit_k`` (tasks a node takes)
and ``sum_o maxload_o n[o, k] <= capacity_k``. Node k's costs are ``C_k = sum_o c_o n[o, k]``,
``S_k`` alike, and ``N_k`` sums per link ``o -> d``: ``FORWARD`` ``net_o r`` with
``r >= n[o, k] - n[d, k]``, ``r >= 0``; otherwise ``(net_o / p_d) m`` with
``m = n[o, k] (p_d - n[d, k])`` (a product constraint). ``T_x >= X_k`` for every node gives the
bottleneck of dimension x.

Objectives: lexicographic in a stated order (minimise the first bottleneck, fix it at its
optimum, minimise the next, ...), a weighted sum ``sum_x w_x T_x / span_x`` (``span_x`` the
width CAPS's alphas scale, ``high - low`` of :func:`~streamsched.schedulers.caps.threshold_bases`),
or the total network cost ``sum_k N_k`` (the CAPS model's traffic). Ceilings on any bottleneck
and on the total network cost are constraints.

Exactness: costs are scaled to integers and rounded *down*, so every scaled value is at most
the true one and CP-SAT's bound, divided back, bounds the true optimum; the returned plan's
costs are recomputed exactly. A ceiling ``X <= c`` is a constraint of its own, on coefficients
rounded down at a scale where the largest rounding loss is at most :data:`CEILING_RTOL` x c:
every plan that meets ``c`` exactly is admitted (so an optimum is one under the ceiling as the
user wrote it) and every admitted plan meets ``c (1 + CEILING_RTOL)``, which the returned plan
is checked against. A lexicographic stage fixes its dimension the same way, at the true value
it reached, so a later stage loses no plan that ties with it up to rounding. Identical nodes are ordered by compute
(their operator counts read as one number in base ``max p + 1``, decreasing; compute where that
number would not fit 62 bits), an order every plan can be permuted to meet.

References
----------
.. [1] Wang, Y.; Huang, S.; Wang, J.; Kalavri, V.; Matta, I. (2025) "CAPSys: Contention-aware
   task placement for data stream processing", Proceedings of the Twentieth European Conference
   on Computer Systems (EuroSys 2025); code: github.com/CASP-Systems-BU/CAPSys (scripts/caps-go).
.. [2] Perron, L.; Didier, F. (2024) "CP-SAT", OR-Tools, Google; developers.google.com/optimization/cp.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from streamsched.contention_metrics import costs_from_counts
from streamsched.model.contention import DIMENSIONS, ContentionProfile
from streamsched.model.placement import CAPACITY_TOLERANCE
from streamsched.native_output import captured_native_output
from streamsched.solvers.cpsat import STATUS

#: Scaled node costs stay below 2^SCALE_BITS (CP-SAT works on 64-bit integers).
SCALE_BITS = 40
#: A ceiling c admits every plan whose cost is at most c and none above c (1 + CEILING_RTOL).
CEILING_RTOL = 1e-9
#: A ceiling's own scale keeps its row's coefficients x multipliers below 2^CEILING_BITS.
CEILING_BITS = 50


@dataclass
class ContentionSolution:
    """A plan (``counts[o, k]``) or None, its exact costs and what is proven about it."""

    counts: np.ndarray | None
    status: str
    cost: dict[str, float] = field(default_factory=dict)
    network_total: float = 0.0
    bound: dict[str, float] = field(default_factory=dict)
    gap: float = math.inf
    stages: list[dict[str, Any]] = field(default_factory=list)
    seconds_to_first: float | None = None
    seconds_to_best: float | None = None
    wall_time_s: float = 0.0


class _Timer(cp_model.CpSolverSolutionCallback):
    """Wall time of the first and of the last (best) solution of one solve."""

    def __init__(self, offset: float):
        super().__init__()
        self.offset, self.first, self.last = offset, None, None

    def on_solution_callback(self) -> None:
        now = self.offset + self.wall_time
        if self.first is None:
            self.first = now
        self.last = now


def solve_contention(profile: ContentionProfile, limits, capacity, max_load, *, objective: str = "lexicographic",
                     order: tuple[str, ...] = DIMENSIONS, weights=(1.0, 1.0, 1.0), spans=(1.0, 1.0, 1.0),
                     ceilings: dict[str, float] | None = None, network_ceiling: float | None = None,
                     time_limit: float | None = None, work_limit: float | None = None, seed: int = 0,
                     workers: int = 1, hint: np.ndarray | None = None) -> ContentionSolution:
    """Minimise contention (module docstring). ``objective``: ``lexicographic`` (in ``order``),
    ``weighted`` (``weights`` over ``spans``) or ``traffic`` (total network cost);
    ``ceilings`` caps bottlenecks, ``network_ceiling`` the total network cost (both up to
    :data:`CEILING_RTOL`). ``work_limit`` (CP-SAT's deterministic time) and ``time_limit`` (wall
    clock; None: none) are shared by all stages; with neither, the stages run to their proofs."""
    started = time.perf_counter()
    model = _Model(profile, np.asarray(limits, dtype=np.int64), np.asarray(capacity, dtype=np.float64),
                   np.asarray(max_load, dtype=np.float64))
    for dim, value in (ceilings or {}).items():
        model.ceiling(dim, value)
    if network_ceiling is not None:
        model.total_ceiling(network_ceiling)
    if hint is not None:
        model.hint(hint)
    if objective == "lexicographic":
        goals = [(dim, model.bottleneck_goal(dim)) for dim in order]
    elif objective == "weighted":
        goals = [("weighted", model.weighted_goal(weights, spans))]
    else:
        goals = [("traffic", model.total_goal())]
    out = ContentionSolution(None, "unknown")
    spent_work = 0.0
    for stage, (name, (expr, scale)) in enumerate(goals):
        left = None if time_limit is None else time_limit - (time.perf_counter() - started)
        if left is not None and left <= 0.01 or work_limit is not None and work_limit - spent_work <= 0.001:
            out.stages.append({"objective": name, "status": "not run (limit)"})
            continue
        model.model.clear_objective()
        model.model.minimize(expr)
        solver = cp_model.CpSolver()
        if left is not None:
            solver.parameters.max_time_in_seconds = left
        solver.parameters.num_workers = int(workers)
        solver.parameters.random_seed = int(seed)
        if work_limit is not None:
            solver.parameters.max_deterministic_time = work_limit - spent_work
        timer = _Timer(time.perf_counter() - started)
        with captured_native_output("CP-SAT"):
            status = STATUS.get(solver.solve(model.model, timer), "unknown")
        spent_work += float(solver.response_proto.deterministic_time)
        record = {"objective": name, "status": status}
        if status in ("optimal", "feasible"):
            counts = np.array([[solver.value(v) for v in row] for row in model.n], dtype=np.int64)
            out.counts = counts
            record["bound"] = float(solver.best_objective_bound) / scale
            if out.seconds_to_first is None:
                out.seconds_to_first = timer.first
            out.seconds_to_best = timer.last if timer.last is not None else out.seconds_to_best
            model.hint(counts)
            if name in DIMENSIONS:  # later stages keep this bottleneck at the value found
                model.ceiling(name, float(costs_from_counts(profile, counts)[:, DIMENSIONS.index(name)].max()))
        elif status == "infeasible":
            out.status = "infeasible"
            out.stages.append(record)
            break
        out.stages.append(record)
        if status == "unknown":
            break
    out.wall_time_s = time.perf_counter() - started
    if out.counts is None:
        if out.status != "infeasible":
            out.status = "unknown"
        return out
    per_node = costs_from_counts(profile, out.counts)
    top = per_node.max(axis=0)
    out.cost = dict(zip(DIMENSIONS, map(float, top)))
    out.network_total = float(per_node[:, 2].sum())
    over = [f"{d} {out.cost[d]!r} > {c!r}" for d, c in (ceilings or {}).items() if not within_ceiling(out.cost[d], c)]
    if network_ceiling is not None and not within_ceiling(out.network_total, network_ceiling):
        over.append(f"network total {out.network_total!r} > {network_ceiling!r}")
    if over:
        raise AssertionError(f"contention solver: the plan breaks a ceiling beyond CEILING_RTOL: {'; '.join(over)}")
    solved = [s for s in out.stages if "bound" in s]
    out.status = "optimal" if len(solved) == len(goals) and all(s["status"] == "optimal" for s in solved) else "feasible"
    for s in solved:
        true = _true_value(s["objective"], out, weights, spans)
        s["value"] = true
        s["bound"] = min(s["bound"], true)
        s["gap"] = 0.0 if true <= 0 else (true - s["bound"]) / true
        if s["objective"] in DIMENSIONS:
            out.bound[s["objective"]] = s["bound"]
    first = out.stages[0]
    out.gap = first.get("gap", math.inf)
    if objective != "lexicographic" and "bound" in first:
        out.bound[first["objective"]] = first["bound"]
    return out


def within_ceiling(cost: float, ceiling: float) -> bool:
    """``cost`` meets ``ceiling`` up to :data:`CEILING_RTOL` (the solver's promise both ways)."""
    return cost <= ceiling * (1 + CEILING_RTOL)


def _true_value(name: str, solution: ContentionSolution, weights, spans) -> float:
    if name in DIMENSIONS:
        return solution.cost[name]
    if name == "traffic":
        return solution.network_total
    return float(sum(w * solution.cost[d] / s for d, w, s in zip(DIMENSIONS, weights, spans) if s > 0))


class _Model:
    """The CP-SAT model of the module docstring; node cost expressions per dimension."""

    def __init__(self, profile: ContentionProfile, limits: np.ndarray, capacity: np.ndarray, max_load: np.ndarray):
        self.profile = profile
        m = self.model = cp_model.CpModel()
        n_ops, n_nodes = profile.n_operators, limits.size
        par = profile.parallelism
        self.n = [[m.new_int_var(0, int(min(par[o], limits[k])), f"n{o}_{k}") for k in range(n_nodes)]
                  for o in range(n_ops)]
        for o in range(n_ops):
            m.add(sum(self.n[o]) == par[o])
        for k in range(n_nodes):
            m.add(sum(self.n[o][k] for o in range(n_ops)) <= int(limits[k]))
        # capacity with each operator's largest task load (exact when an operator's loads are equal),
        # within the validator's band (CAPACITY_TOLERANCE): coefficients rounded up admit no load
        # above capacity + band; the scale keeps their gain (under 1 a task) within half the band,
        # so every load up to capacity + band / 2 is admitted (0.1 + 0.3 on 0.4 was refused)
        for k in range(n_nodes):
            band = CAPACITY_TOLERANCE * (capacity[k] + 1)
            largest = float(sum(max_load[o] * min(par[o], limits[k]) for o in range(n_ops)))
            load_scale = min(2 * max(int(limits[k]), 1) / band, 2.0**CEILING_BITS / max(largest, 1e-12))
            coefficients = np.ceil(max_load * load_scale).astype(np.int64)
            if np.any(coefficients > 0):
                m.add(cp_model.LinearExpr.weighted_sum([self.n[o][k] for o in range(n_ops)], coefficients.tolist())
                      <= int(math.floor((capacity[k] + band) * load_scale)))
        # per node, per dimension: (terms, multiplier bound) with multipliers >= 0
        terms: list[list[list[tuple[Any, float, int]]]] = [[[] for _ in range(3)] for _ in range(n_nodes)]
        for k in range(n_nodes):
            for o in range(n_ops):
                top = int(min(par[o], limits[k]))
                for dim in (0, 1):
                    if profile.cost[o, dim] > 0:
                        terms[k][dim].append((self.n[o][k], float(profile.cost[o, dim]), top))
            for o, d, kind in profile.links():
                net = float(profile.cost[o, 2])
                if net <= 0:
                    continue
                top = int(min(par[o], limits[k]))
                if kind == "FORWARD":
                    r = m.new_int_var(0, top, f"r{o}_{d}_{k}")
                    m.add(r >= self.n[o][k] - self.n[d][k])
                    terms[k][2].append((r, net, top))
                else:
                    q = m.new_int_var(par[d] - int(min(par[d], limits[k])), par[d], f"q{d}_{k}")
                    m.add(q == par[d] - self.n[d][k])
                    prod = m.new_int_var(0, top * par[d], f"m{o}_{d}_{k}")
                    m.add_multiplication_equality(prod, [self.n[o][k], q])
                    terms[k][2].append((prod, net / par[d], top * par[d]))
        self.terms = terms
        self.scale = []
        self.node_expr: list[list[Any]] = [[None] * n_nodes for _ in range(3)]
        self.top = np.zeros(3, dtype=np.int64)
        for dim in range(3):
            largest = max([sum(w * t for _, w, t in terms[k][dim]) for k in range(n_nodes)] + [1e-12])
            scale = 2.0**SCALE_BITS / largest
            self.scale.append(scale)
            for k in range(n_nodes):
                items = terms[k][dim]
                coefficients = [int(math.floor(w * scale)) for _, w, _ in items]
                self.node_expr[dim][k] = cp_model.LinearExpr.weighted_sum([v for v, _, _ in items], coefficients)
                self.top[dim] = max(self.top[dim], sum(c * t for c, (_, _, t) in zip(coefficients, items)))
        self.t = [m.new_int_var(0, int(self.top[dim]), f"T{dim}") for dim in range(3)]
        for dim in range(3):
            for k in range(n_nodes):
                m.add(self.t[dim] >= self.node_expr[dim][k])
        same = [k for k in range(n_nodes - 1) if limits[k] == limits[k + 1] and capacity[k] == capacity[k + 1]]
        base = int(max(par)) + 1
        if base ** n_ops < 2**62:
            # identical nodes in decreasing order of their count vectors (read as base-B numbers)
            digits = [base ** (n_ops - 1 - o) for o in range(n_ops)]
            for k in same:
                m.add(cp_model.LinearExpr.weighted_sum([self.n[o][k] for o in range(n_ops)], digits)
                      >= cp_model.LinearExpr.weighted_sum([self.n[o][k + 1] for o in range(n_ops)], digits))
        else:
            for k in same:
                m.add(self.node_expr[0][k] >= self.node_expr[0][k + 1])

    def ceiling(self, dim: str, value: float) -> None:
        """Every node's true cost in ``dim`` at most ``value`` (module docstring: up to
        :data:`CEILING_RTOL`)."""
        x = DIMENSIONS.index(dim)
        for k in range(len(self.terms)):
            self._at_most(self.terms[k][x], value)

    def total_ceiling(self, value: float) -> None:
        """The true network cost summed over nodes at most ``value`` (up to :data:`CEILING_RTOL`)."""
        self._at_most([item for node in self.terms for item in node[2]], value)

    def _at_most(self, items: list[tuple[Any, float, int]], value: float) -> None:
        """``sum w v <= value`` over ``items`` (variable, weight w >= 0, largest value of v):
        coefficients ``floor(w s)`` <= ``floor(value s)`` admits every assignment that meets
        ``value``; the scale ``s`` makes the rounding loss (at most ``sum v``) at most
        CEILING_RTOL x value. Where that scale would overflow (a ceiling some 1e4 times below the
        largest cost), the limit is tightened by the loss instead (sound, not complete). A ceiling
        of 0 rounds up instead (exact: every term with w > 0 is 0)."""
        items = [item for item in items if item[1] > 0]
        largest = sum(w * t for _, w, t in items)
        if not items or largest <= value:
            return  # no assignment can exceed it
        if value <= 0:
            self.model.add(cp_model.LinearExpr.weighted_sum([v for v, _, _ in items], [1] * len(items)) <= 0)
            return
        loss = float(sum(t for _, _, t in items))
        wanted, cap = loss / (CEILING_RTOL * value), 2.0**CEILING_BITS / largest
        scale = min(wanted, cap)
        coefficients = [int(math.floor(w * scale)) for _, w, _ in items]
        limit = value * scale - (loss if wanted > cap else 0.0)
        self.model.add(cp_model.LinearExpr.weighted_sum([v for v, _, _ in items], coefficients)
                       <= int(math.floor(limit)))

    def hint(self, counts: np.ndarray) -> None:
        self.model.clear_hints()
        for row, values in zip(self.n, np.asarray(counts).tolist()):
            for var, value in zip(row, values):
                self.model.add_hint(var, int(value))

    def bottleneck_goal(self, dim: str):
        x = DIMENSIONS.index(dim)
        return self.t[x], self.scale[x]

    def weighted_goal(self, weights, spans):
        """``sum_x w_x T_x / span_x``, each term on a common integer scale (rounded down)."""
        unit = 2.0**SCALE_BITS / max(sum(float(w) for w in weights), 1e-12)
        coefficients = []
        for x in range(3):
            per = float(weights[x]) / float(spans[x]) if spans[x] > 0 else 0.0
            coefficients.append(per * unit / self.scale[x])  # per true unit -> per scaled unit of T_x
        ints = [max(0, int(math.floor(c * 2**12))) for c in coefficients]
        expr = cp_model.LinearExpr.weighted_sum(self.t, ints)
        return expr, unit * 2**12

    def total_goal(self):
        return sum(self.node_expr[2]), self.scale[2]
