"""Large-neighbourhood search: re-solve a few nodes at a time exactly, keep what improves.

A neighbourhood is 2-4 nodes joined by much cut traffic (sometimes plus the node with the most
free room); the items on them (at most ``MAX_FREE``, those with the most traffic leaving their
node first) are freed and everything else stays fixed. The sub-problem is an ordinary
:class:`PlacementProblem`: one zero-load *anchor* item pinned to each neighbourhood node carries
the fixed items' traffic towards it, and the fixed items' load, memory and count are taken off
the node's capacity. It is solved with the exact assignment model
(:func:`streamsched.solvers.formulations.assignment_model`), hinted with the current sub-
assignment, so an accepted change never costs more.

References
----------
- P. Shaw, 1998. Using constraint programming and local search methods to solve vehicle
  routing problems. CP 1998, LNCS 1520 (section 3: remove related items, re-insert them with
  an exact search).
- D. Pisinger, S. Ropke, 2010. Large neighborhood search. Handbook of Metaheuristics, 2nd ed.,
  ch. 13 (section 13.2: destroy and repair).
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from streamsched.solvers.formulations import assignment_model, find_symmetry
from streamsched.solvers.local_search import traffic_towards_nodes
from streamsched.solvers.problem import TOLERANCE, PlacementProblem, build_problem

#: Items freed per neighbourhood; CP-SAT deterministic time per sub-problem; work counted for
#: the rest of a round (choosing nodes, building the sub-problem).
MAX_FREE = 40
SUB_WORK = 0.5
ROUND_WORK = 0.005


class NeighbourhoodSearch:
    """Destroy-and-repair rounds on one problem with one back-end module (CP-SAT)."""

    def __init__(self, problem: PlacementProblem, adjacency: sp.csr_matrix, module, seed: int):
        self.problem, self.adjacency, self.module, self.seed = problem, adjacency, module, seed
        self.rng = np.random.default_rng(seed)
        self.tried = self.improved = 0

    def improve(self, assignment: np.ndarray, deadline: float, work: float) -> np.ndarray:
        """Rounds until ``work`` (CP-SAT deterministic time plus ``ROUND_WORK`` per round: the
        same stopping point on every run) is spent, ``deadline`` passes (wall clock, the safety
        net) or many rounds in a row fail."""
        best = np.asarray(assignment, dtype=np.int64).copy()
        best_cost = self.problem.cost(best)
        failures, spent = 0, 0.0
        while time.perf_counter() + 0.05 < deadline and spent < work and failures < 50 * max(4, self.problem.n_nodes):
            nodes = self._pick_nodes(best)
            if nodes is None:
                break
            found, used = self._repair(best, nodes, deadline)
            spent += used + ROUND_WORK
            self.tried += 1
            if found is not None:
                cost = self.problem.cost(found)
                if cost < best_cost - 1e-9 * max(1.0, best_cost):
                    best, best_cost = found, cost
                    self.improved += 1
                    failures = 0
                    continue
            failures += 1
        return best

    def _pick_nodes(self, node_of: np.ndarray) -> np.ndarray | None:
        """A random node weighted by its cut traffic, then the nodes it exchanges most with."""
        problem, m = self.problem, self.problem.n_nodes
        if m < 2:
            return None
        towards = traffic_towards_nodes(self.adjacency, node_of, m)
        between = sp.csr_matrix((towards.data, (node_of[towards.row], towards.col)), shape=(m, m))
        between.setdiag(0)
        between.eliminate_zeros()
        cut = np.asarray(between.sum(axis=1)).ravel()
        if cut.sum() <= 0:
            return None
        size = int(self.rng.integers(2, min(4, m) + 1))
        chosen = [int(self.rng.choice(m, p=cut / cut.sum()))]
        while len(chosen) < size:
            score = np.asarray(between[chosen].sum(axis=0)).ravel() * self.rng.uniform(0.5, 1.5, m)
            score[chosen] = -1
            if score.max() <= 0 or self.rng.random() < 0.25:
                load = np.bincount(node_of, weights=problem.loads, minlength=m)
                score = problem.capacity - load
                score[chosen] = -np.inf
            chosen.append(int(np.argmax(score)))
        return np.array(chosen, dtype=np.int64)

    def _repair(self, node_of: np.ndarray, nodes: np.ndarray, deadline: float) -> tuple[np.ndarray | None, float]:
        """The best re-assignment of the items freed on ``nodes`` (None if none better was
        found) and the deterministic time spent."""
        problem = self.problem
        on_nodes = np.flatnonzero(np.isin(node_of, nodes))
        if on_nodes.size == 0:
            return None, 0.0
        if on_nodes.size > MAX_FREE:
            towards = traffic_towards_nodes(self.adjacency[on_nodes], node_of, problem.n_nodes).tocsr()
            own = np.asarray(towards[np.arange(on_nodes.size), node_of[on_nodes]]).ravel()
            leaving = np.asarray(towards.sum(axis=1)).ravel() - own
            noisy = leaving * self.rng.uniform(0.7, 1.3, on_nodes.size)
            on_nodes = on_nodes[np.argsort(-noisy, kind="stable")[:MAX_FREE]]
        free = on_nodes
        sub = self._sub_problem(node_of, free, nodes)
        if sub is None:
            return None, 0.0
        sub_problem, start = sub
        milp = assignment_model(sub_problem, find_symmetry(sub_problem))
        hint = milp.encode(start)
        wall = deadline - time.perf_counter()
        if wall <= 0.02:
            return None, 0.0
        raw = self.module.solve(milp, time_limit=wall, work_limit=SUB_WORK, seed=int(self.rng.integers(1 << 30)),
                                workers=1, hint=hint)
        if raw.values is None:
            return None, raw.work
        placed = milp.decode(raw.values)
        if sub_problem.violations(placed):
            return None, raw.work
        out = node_of.copy()
        out[free] = nodes[placed[:free.size]]
        return (out if not problem.violations(out) else None), raw.work

    def _sub_problem(self, node_of: np.ndarray, free: np.ndarray, nodes: np.ndarray):
        """Items = ``free`` then one anchor per node; returns (problem, current sub-assignment)."""
        problem, k = self.problem, nodes.size
        local = np.full(problem.n_nodes, -1, dtype=np.int64)
        local[nodes] = np.arange(k)
        fixed = np.ones(problem.n_items, dtype=bool)
        fixed[free] = False
        fixed_on = fixed & (local[node_of] >= 0)
        held = np.bincount(local[node_of[fixed_on]], weights=problem.loads[fixed_on], minlength=k)
        room = _room(problem.capacity[nodes], held)
        position = np.full(problem.n_items, -1, dtype=np.int64)
        position[free] = np.arange(free.size)
        rows = self.adjacency[free].tocoo()
        other = rows.col
        inside = position[other] >= 0
        a, b, w = rows.row[inside], position[other[inside]], rows.data[inside]
        keep = a < b
        src, dst, rate = [a[keep]], [b[keep]], [w[keep]]
        towards_fixed = ~inside & (local[node_of[other]] >= 0)
        src.append(rows.row[towards_fixed])
        dst.append(free.size + local[node_of[other[towards_fixed]]])
        rate.append(rows.data[towards_fixed])
        loads = np.r_[problem.loads[free], np.zeros(k)]
        allowed = np.vstack([problem.allowed[free][:, nodes], np.eye(k, dtype=bool)])
        extra = {}
        if problem.memory is not None:
            held_memory = np.bincount(local[node_of[fixed_on]], weights=problem.memory[fixed_on], minlength=k)
            extra.update(memory=np.r_[problem.memory[free], np.zeros(k)],
                         node_memory=_room(problem.node_memory[nodes], held_memory))
        if problem.max_items is not None:
            held = np.bincount(local[node_of[fixed_on]], minlength=k)
            extra["max_items"] = np.maximum(problem.max_items[nodes] - held, 0) + 1  # + the anchor
        if problem.group_cap is not None:  # anchors: a group of their own, one per node
            n_groups = problem.group_cap.shape[0]
            held = np.zeros((n_groups, k), dtype=np.int64)
            np.add.at(held, (problem.item_group[fixed_on], local[node_of[fixed_on]]), 1)
            caps = np.vstack([np.maximum(problem.group_cap[:, nodes] - held, 0), np.ones((1, k), dtype=np.int64)])
            extra["operator_caps"] = (np.r_[problem.item_group[free], np.full(k, n_groups)], caps)
        if problem.current is not None:
            home = local[np.maximum(problem.current[free], 0)]
            home[problem.current[free] < 0] = -1
            extra.update(current=np.r_[home, np.arange(k)], migration_cost=problem.migration_cost)
        start = np.r_[local[node_of[free]], np.arange(k)]
        sub = build_problem(loads, np.concatenate(src), np.concatenate(dst), np.concatenate(rate), room,
                            excluded=~allowed, **extra)
        return (sub, start) if not sub.violations(start) else None


def _room(capacity: np.ndarray, held: np.ndarray) -> np.ndarray:
    """Capacity left beside ``held``, such that the validator's slack on it (x (1 + tol) + tol)
    allows exactly what the slack on the whole node allows."""
    return np.maximum((capacity * (1 + TOLERANCE) - held) / (1 + TOLERANCE), 0.0)
