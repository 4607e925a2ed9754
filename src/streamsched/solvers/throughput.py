"""Exact maximum sustainable throughput (:mod:`streamsched.model.throughput`) with CP-SAT [1]_.

Maximising ``s* = 1 / U`` is minimising U, the busiest resource's utilisation at the measured
rate (T4). Variables: ``x[t, k]`` (task t on node k, one node per task) and, per edge e with
endpoints ``i -> j`` and node k, ``y[e, k] <= x[i, k]``, ``y[e, k] <= x[j, k]`` (both ends on k).
Node k's demands (T1-T3) are linear in them:

    cpu_k = sum_t l_t x[t, k] + c sum_e r_e (x[i, k] + x[j, k] - 2 y[e, k])
    out_k = sum_e b_e (x[i, k] - y[e, k]),   in_k = sum_e b_e (x[j, k] - y[e, k])

and ``U >= cpu_k / cap_k``, ``U >= out_k / net_out_k``, ``U >= in_k / net_in_k`` (an unknown
link gives no row). Since every demand falls as ``y`` grows, a solution's ``y`` is at most the
product ``x[i, k] x[j, k]`` and its U at least the true one at the optimum: U's minimum is the
true minimum. Kept as constraints: Flink's slot rule (per node, the sum over slot sharing groups
of the group's largest operator count at most the node's task slots, and ``max_per_node`` per
operator: :mod:`streamsched.model.colocation`), and optionally tasks per node and memory.
CPU capacity is not a constraint: an overloaded CPU is a utilisation above 1, as in the model.

Stages (lexicographic): minimise U; then, U kept within :data:`TIE_TOLERANCE` of the value
found, the fewest moved tasks when a ``current`` placement is given; then the least total
remote bytes ``sum_e b_e (1 - sum_k y[e, k])``, the earlier values kept.

Exactness: coefficients are scaled to integers, positive ones rounded down and negative ones
up, so every scaled demand is at most the true one and CP-SAT's bound, divided back, bounds the
true minimum of U; the returned plan's U and bytes are recomputed exactly (T1-T4). Identical
nodes (same capacities, links and limits) are ordered by the lowest task each holds, empty ones
last (``x[t, k+1] <= sum_{t' < t} x[t', k]``): every plan can be relabelled to meet it, so the
optimum is kept. With a ``current`` placement that order is left out, so that the fewest moves
are counted over every relabelling of identical nodes.

References
----------
.. [1] Perron, L.; Didier, F. (2024) "CP-SAT", OR-Tools, Google; developers.google.com/optimization/cp.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from streamsched.model.cluster import Cluster
from streamsched.model.colocation import UNLIMITED, CoLocationRule
from streamsched.model.taskgraph import TaskGraph
from streamsched.model.throughput import capacities, demands, ratio
from streamsched.native_output import captured_native_output
from streamsched.solvers.cpsat import STATUS

#: Scaled demands stay below 2^SCALE_BITS. CP-SAT works on 64-bit integers, but its presolve
#: returned a wrong "optimal" on a 5-task model scaled to 2^40 (OR-Tools 9.15; right at 2^32 and
#: below, and without presolve): 2^30, as :mod:`streamsched.solvers.cpsat` uses.
SCALE_BITS = 30
#: Later stages keep U within this relative tolerance of the first stage's value: plans whose
#: peak utilisations differ by less are of equal throughput.
TIE_TOLERANCE = 1e-6
#: Symmetry rows ``x[t, k+1] <= sum_{t' < t} x[t', k]`` for the first tasks only (each row is
#: sound alone; more add little and cost quadratic size).
SYMMETRY_TASKS = 64


@dataclass
class ThroughputSolution:
    """A plan (node per task) or None, its exact values and what is proven about U."""

    node_of: np.ndarray | None
    status: str
    peak: float = math.inf
    """U of the plan (T4), recomputed exactly."""
    bound: float = 0.0
    """A proven lower bound on the minimum of U."""
    gap: float = math.inf
    remote_bytes: float = math.inf
    moved: int | None = None
    stages: list[dict[str, Any]] = field(default_factory=list)
    wall_time_s: float = 0.0


def node_classes(cluster: Cluster, limits: np.ndarray) -> list[list[int]]:
    """Groups (of two or more, indices increasing) of identical nodes: the same capacity, links
    and column of ``limits`` (rows of per-node limits, nodes in columns)."""
    keys: dict[tuple, list[int]] = {}
    caps = capacities(cluster)
    for k in range(cluster.n_nodes):
        keys.setdefault((tuple(caps[k].tolist()), tuple(np.asarray(limits)[:, k].tolist())), []).append(k)
    return [nodes for nodes in keys.values() if len(nodes) > 1]


def solve_throughput(graph: TaskGraph, cluster: Cluster, *, net_cpu_per_record: float = 0.0,
                     max_items: np.ndarray | None = None, memory: np.ndarray | None = None,
                     node_memory: np.ndarray | None = None, current: np.ndarray | None = None,
                     hint: np.ndarray | None = None, time_limit: float | None = None,
                     work_limit: float | None = None, seed: int = 0, workers: int = 1) -> ThroughputSolution:
    """Minimise U (module docstring) for ``graph`` on ``cluster`` under Flink's slot rule.
    ``work_limit`` (CP-SAT's deterministic seconds) and ``time_limit`` (wall clock; None: none)
    are shared by all stages; with neither, each stage runs to its proof."""
    started = time.perf_counter()
    model = _Model(graph, cluster, float(net_cpu_per_record), max_items, memory, node_memory,
                   symmetry=current is None)
    if current is not None:
        current = np.asarray(current, dtype=np.int64)
    start = current if current is not None else hint
    if start is not None:
        model.hint(start)
    goals: list[tuple[str, Any]] = [("peak utilisation", model.peak_goal())]
    if current is not None:
        goals.append(("moved tasks", model.moves_goal(current)))
    goals.append(("remote bytes", model.bytes_goal()))
    out = ThroughputSolution(None, "unknown")
    spent = 0.0
    values: np.ndarray | None = None
    for name, (expr, keep) in goals:
        left = None if time_limit is None else time_limit - (time.perf_counter() - started)
        if left is not None and left <= 0.01 or work_limit is not None and work_limit - spent <= 0.001:
            out.stages.append({"objective": name, "status": "not run (limit)"})
            continue
        model.model.clear_objective()
        model.model.minimize(expr)
        solver = cp_model.CpSolver()
        if left is not None:
            solver.parameters.max_time_in_seconds = left
        if work_limit is not None:
            solver.parameters.max_deterministic_time = work_limit - spent
        solver.parameters.num_workers = int(workers)
        solver.parameters.random_seed = int(seed)
        with captured_native_output("CP-SAT"):
            status = STATUS.get(solver.solve(model.model), "unknown")
        spent += float(solver.response_proto.deterministic_time)
        record: dict[str, Any] = {"objective": name, "status": status}
        out.stages.append(record)
        if status in ("optimal", "feasible"):
            values = model.assignment(solver)
            if name == "peak utilisation":
                record["scaled_bound"] = float(solver.best_objective_bound)
            keep(int(round(solver.objective_value)))
            model.hint(values)
        elif status == "infeasible" and values is None:
            out.status = "infeasible"
            break
        else:
            break
    out.wall_time_s = time.perf_counter() - started
    if values is None:
        return out
    out.node_of = values
    util = ratio(demands(graph, values, cluster.n_nodes, net_cpu_per_record), capacities(cluster))
    out.peak = float(util.max()) if util.size else 0.0
    out.remote_bytes = float(graph.bytes_rate[values[graph.src] != values[graph.dst]].sum())
    if current is not None:
        out.moved = int(np.sum((current >= 0) & (current != values)))
    first = out.stages[0]
    out.bound = float(min(first.get("scaled_bound", 0.0) / model.scale, out.peak))
    out.gap = 0.0 if out.peak <= 0 else (out.peak - out.bound) / out.peak
    out.status = "optimal" if out.gap <= 2 * TIE_TOLERANCE else "feasible"  # within the tie tolerance
    return out


class _Model:
    """The CP-SAT model of the module docstring."""

    def __init__(self, graph: TaskGraph, cluster: Cluster, net_cpu: float, max_items, memory, node_memory,
                 symmetry: bool):
        m = self.model = cp_model.CpModel()
        n, k_nodes = graph.n_tasks, cluster.n_nodes
        caps = capacities(cluster)  # cap, net_out, net_in
        self.graph = graph
        self.x = [[m.new_bool_var(f"x{t}_{k}") for k in range(k_nodes)] for t in range(n)]
        for t in range(n):
            m.add_exactly_one(self.x[t])
        limits = self._limits(graph, cluster, max_items, memory, node_memory)
        # edges that can cost anything: not self-loops, with bytes (or records, where the stack costs CPU)
        e_src, e_dst = graph.src.astype(np.int64), graph.dst.astype(np.int64)
        useful = (e_src != e_dst) & ((graph.bytes_rate > 0) | ((graph.rate > 0) & (net_cpu > 0)))
        self.edges = np.flatnonzero(useful)
        self.y = {}
        for e in self.edges.tolist():
            i, j = int(e_src[e]), int(e_dst[e])
            for k in range(k_nodes):
                y = m.new_bool_var(f"y{e}_{k}")
                m.add_implication(y, self.x[i][k])
                m.add_implication(y, self.x[j][k])
                self.y[e, k] = y
        # per resource (node, kind): (variable, coefficient) terms of demand / capacity
        rows: list[list[tuple[Any, float]]] = []
        for k in range(k_nodes):
            cpu: list[tuple[Any, float]] = []
            if caps[k, 0] > 0:
                cpu += [(self.x[t][k], graph.load[t] / caps[k, 0]) for t in range(n) if graph.load[t] > 0]
                if net_cpu > 0:
                    for e in self.edges.tolist():
                        w = net_cpu * graph.rate[e] / caps[k, 0]
                        cpu += [(self.x[int(e_src[e])][k], w), (self.x[int(e_dst[e])][k], w), (self.y[e, k], -2 * w)]
            else:  # no CPU: a task that needs any stays off the node (else U would be infinite)
                for t in range(n):
                    if graph.load[t] > 0:
                        m.add(self.x[t][k] == 0)
            rows.append(cpu)
            for kind, end in ((1, e_src), (2, e_dst)):
                if math.isfinite(caps[k, kind]):
                    rows.append([term for e in self.edges.tolist() if graph.bytes_rate[e] > 0 for term in
                                 ((self.x[int(end[e])][k], graph.bytes_rate[e] / caps[k, kind]),
                                  (self.y[e, k], -graph.bytes_rate[e] / caps[k, kind]))])
        largest = max([sum(w for _, w in row if w > 0) for row in rows] + [1e-300])
        self.scale = 2.0**SCALE_BITS / largest
        self.u = m.new_int_var(0, 2**SCALE_BITS + len(rows) + 1, "U")
        for row in rows:
            if row:
                coefficients = [math.floor(w * self.scale) if w > 0 else -math.ceil(-w * self.scale) for _, w in row]
                m.add(self.u >= cp_model.LinearExpr.weighted_sum([v for v, _ in row], coefficients))
        if symmetry:
            for members in node_classes(cluster, limits):
                for a, b in zip(members, members[1:]):
                    self._order(a, b)

    def _order(self, a: int, b: int) -> None:
        """Identical nodes a < b: the lowest task on b above the lowest on a, b empty if a is."""
        m, x, n = self.model, self.x, len(self.x)
        held = []
        for t in range(min(n, SYMMETRY_TASKS)):
            m.add(x[t][b] <= sum(held))  # sum([]) == 0: task 0 is never on b
            held.append(x[t][a])
        if n > SYMMETRY_TASKS:
            m.add(sum(x[t][b] for t in range(n)) <= n * sum(x[t][a] for t in range(n)))

    def _limits(self, graph: TaskGraph, cluster: Cluster, max_items, memory, node_memory) -> np.ndarray:
        """Add the slot rule and the optional per-node limits; return them (rows x nodes) for
        telling identical nodes."""
        m, x, k_nodes = self.model, self.x, cluster.n_nodes
        rows = []
        rule = CoLocationRule.of(graph, cluster)
        if rule is not None:
            ops = len(graph.operator_names)
            members = [np.flatnonzero(graph.task_operator == v).tolist() for v in range(ops)]
            caps = rule.operator_node_caps()
            for v in range(ops):
                for k in range(k_nodes):
                    if caps[v, k] < len(members[v]):
                        m.add(sum(x[t][k] for t in members[v]) <= int(caps[v, k]))
            for k in range(k_nodes):
                if rule.node_slots[k] < UNLIMITED and rule.n_groups > 1:
                    group_max = []
                    for g in range(rule.n_groups):
                        top = m.new_int_var(0, graph.n_tasks, f"g{g}_{k}")
                        for v in np.flatnonzero(rule.operator_group == g).tolist():
                            m.add(top >= sum(x[t][k] for t in members[v]))
                        group_max.append(top)
                    m.add(sum(group_max) <= int(rule.node_slots[k]))
            rows += [caps[v] for v in range(ops)] + [rule.node_slots]
        if max_items is not None:
            for k in range(k_nodes):
                m.add(sum(x[t][k] for t in range(graph.n_tasks)) <= int(max_items[k]))
            rows.append(np.asarray(max_items))
        if memory is not None and node_memory is not None:
            scale = 2.0**30 / max(float(np.max(memory, initial=0.0)) * max(graph.n_tasks, 1), 1e-12)
            weights = np.ceil(np.asarray(memory, dtype=np.float64) * scale).astype(np.int64).tolist()
            for k in range(k_nodes):
                room = math.floor(float(node_memory[k]) * scale * (1 + 1e-9))
                if sum(weights) > room:
                    m.add(cp_model.LinearExpr.weighted_sum([x[t][k] for t in range(graph.n_tasks)], weights) <= room)
            rows.append(np.asarray(node_memory, dtype=np.float64))
        return np.array(rows, dtype=np.float64).reshape(len(rows), k_nodes)

    def peak_goal(self):
        def keep(value: int) -> None:
            self.model.add(self.u <= int(math.floor(value * (1 + TIE_TOLERANCE))) + 1)
        return self.u, keep

    def moves_goal(self, current: np.ndarray):
        stays = [self.x[t][int(k)] for t, k in enumerate(current.tolist()) if 0 <= k < len(self.x[t])]
        expr = len(stays) - sum(stays) if stays else 0

        def keep(value: int) -> None:
            self.model.add(expr <= value)
        return expr, keep

    def bytes_goal(self):
        """Minus the scaled bytes kept on one node (the remote bytes are their total minus these)."""
        b = self.graph.bytes_rate
        largest = max(float(b.sum()), 1e-300)
        scale = 2.0**SCALE_BITS / largest
        items = [(v, math.floor(b[e] * scale)) for (e, _), v in self.y.items() if b[e] > 0]
        expr = -cp_model.LinearExpr.weighted_sum([v for v, _ in items], [c for _, c in items]) if items else 0
        return expr, lambda value: None

    def hint(self, node_of: np.ndarray) -> None:
        self.model.clear_hints()
        for t, k in enumerate(np.asarray(node_of).tolist()):
            for j, var in enumerate(self.x[t]):
                self.model.add_hint(var, int(j == k))

    def assignment(self, solver: cp_model.CpSolver) -> np.ndarray:
        return np.array([next((k for k, v in enumerate(row) if solver.boolean_value(v)), -1) for row in self.x],
                        dtype=np.int64)
