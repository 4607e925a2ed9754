"""Re-planning a running placement: repair, the traffic-improvement rule, the adaptive loop.

:meth:`streamsched.schedulers.base.Scheduler.replan` (Heron's ``repack`` [3]_: a new plan
from the running one) is, by default, :func:`repair` combined with a fresh schedule by
:func:`adopt_if_better`: the fresh placement replaces the repaired one only when it cuts the
inter-node traffic by at least ``threshold_pct`` percent (Aniello et al.'s
``traffic.improvement`` rule [1]_, as Fischer and Bernstein [2]_ section IV-B2 ran it, with
1 %). The optimal scheduler's exact form prices every moved task instead
(:meth:`streamsched.schedulers.optimal.OptimalScheduler.replan`).

:class:`Replanner` is the adaptive rescheduling loop's bookkeeping (no Spark): the current
placement per topology and a :class:`~streamsched.model.decision.Decision` per snapshot or
cluster change. A change of the cluster (a node joining or leaving, as the Configuration
Manager of [4]_ section 3.1 tracks it) triggers :func:`repair`, which keeps every task it can
where it is and moves only the rest.
The monitoring pipeline receives a ``Replanner`` from the CLI; it imports no scheduler.

References
----------
.. [1] Aniello, L.; Baldoni, R.; Querzoni, L. (2013) "Adaptive online scheduling in Storm",
   Proceedings of the 7th ACM International Conference on Distributed Event-Based Systems
   (DEBS '13), pp. 207-218.
.. [2] Fischer, L.; Bernstein, A. (2015) "Workload scheduling in distributed stream processors
   using graph partitioning", 2015 IEEE International Conference on Big Data (IEEE BigData
   2015), IEEE Computer Society.
.. [3] Kulkarni, S.; Bhagat, N.; Fu, M.; Kedigehalli, V.; Kellogg, C.; Mittal, S.; Patel, J. M.;
   Ramasamy, K.; Taneja, S. (2015) "Twitter Heron: Stream processing at scale", Proceedings of
   the 2015 ACM SIGMOD International Conference on Management of Data, pp. 239-250.
.. [4] Muhammad, A. (2023) "A scheduler for efficient scheduling of stream processing tasks on
   computational clusters", PhD thesis, Capital University of Science and Technology, Islamabad.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np

from streamsched.errors import InfeasibleError, InputError
from streamsched.metrics import inter_node_traffic
from streamsched.model.cluster import Cluster
from streamsched.model.colocation import CoLocationCounts, CoLocationRule
from streamsched.model.decision import Decision
from streamsched.model.paths import safe_name
from streamsched.model.placement import NO_WORKER, Placement, remaining_capacity
from streamsched.model.taskgraph import TaskGraph

#: Aniello et al.'s ``traffic.improvement`` as Fischer and Bernstein set it, in percent.
DEFAULT_THRESHOLD_PCT = 1.0


def should_reschedule(graph: TaskGraph, current: Placement, proposed: Placement, traffic_improvement: float) -> bool:
    """Aniello et al.'s rule [1]_ (Fischer and Bernstein [2]_ section IV-B2): move to
    ``proposed`` only when it cuts the inter-node traffic of ``current``, and by at least
    ``traffic_improvement`` percent."""
    if not 0 <= traffic_improvement <= 100:
        raise ValueError(f"traffic_improvement must be in [0, 100], got {traffic_improvement}")
    before = inter_node_traffic(graph, current)
    after = inter_node_traffic(graph, proposed)
    return after < before and after <= before * (1 - traffic_improvement / 100)


#: Passes of traffic-gaining moves after a best-fit-decreasing packing (each pass visits every
#: moved task once; a pass without a move ends the search earlier).
IMPROVEMENT_PASSES = 20
#: Work budget (CP-SAT deterministic seconds) of the exact feasibility search of :func:`repair` step 4.
FEASIBILITY_SECONDS = 10.0


def repair(graph: TaskGraph, cluster: Cluster, current: Placement) -> Placement:
    """Fewest moves to a valid placement on ``cluster`` from ``current`` (node -1: unplaced).

    The one capacity repair of streamsched: re-planning uses it on a running placement, and
    :meth:`~streamsched.schedulers.base.Scheduler.schedule` on the partial or overloaded
    assignment a paper's packing step left (``PackingFailed``).

    1. Unplaced tasks (new, or their node is gone) are displaced; on a node over capacity the
       tasks exchanging least traffic with their node-mates are displaced until it fits.
    2. Displaced tasks, largest load first, go to the node with room they exchange most traffic
       with (ties: most remaining capacity, then node order).
    3. Only when step 2 leaves a task with no node: the displaced tasks are packed largest load
       first around the tasks that stay, best fit (onto the node it fills most tightly, ties by
       traffic), else first fit over the nodes by decreasing capacity; if both fail, every task
       is packed the same two ways. Then moved tasks move again, one at a time, to the node
       with room that cuts the most inter-node traffic (Kernighan-Lin style single moves),
       until no move gains.
    4. Only when both packings fail (near-full clusters): the exact solver looks for any
       placement that fits (no traffic in the model: a bin-packing feasibility problem, which is
       complete), for at most :data:`FEASIBILITY_SECONDS`; then the moves of step 3.

    Every step keeps the co-location rule (:mod:`streamsched.model.colocation`: at most k tasks
    of an operator per node, Flink's task slots) when the graph or cluster states one: step 1
    also displaces the tasks that break it, steps 2-4 place a task only where it still holds.

    ``InfeasibleError`` when step 4 proves that no placement exists, or finds none in its time
    (the message says which). A task that stays keeps its
    worker slot. The metadata's ``moved`` counts the tasks whose node changed (unplaced ones
    included).
    """
    if current.n_tasks != graph.n_tasks:
        raise InputError(f"current placement has {current.n_tasks} tasks, graph {graph.name!r} has {graph.n_tasks}")
    start = np.asarray(current.node_of, dtype=np.int64)
    start = np.where((start >= 0) & (start < cluster.n_nodes), start, -1)
    capacity = remaining_capacity(cluster)
    sym = graph.undirected
    rule = CoLocationRule.of(graph, cluster)
    kept = _displace_overflow(graph, cluster, start, sym)
    if rule is not None:
        kept = _displace_crowded(graph, rule, kept, sym)
    node_of = _insert_by_traffic(graph, capacity, kept, sym, rule)
    if node_of is None:
        nothing = np.full(graph.n_tasks, -1, np.int64)
        packings = (_pack_decreasing(graph, capacity, fixed, sym, tightest, rule)
                    for fixed in (kept, nothing) for tightest in (True, False))
        node_of = next((packed for packed in packings if packed is not None), None)
        if node_of is None:
            node_of = _any_fitting_placement(graph, cluster, capacity, rule)
        _improve_by_moves(graph, capacity, node_of, np.flatnonzero(node_of != start), sym, rule)
    stayed = node_of == start
    slots = cluster.slots[node_of]
    workers = np.where(stayed & (current.worker_of < slots), current.worker_of, np.where(slots > 0, 0, NO_WORKER))
    return Placement.build(node_of, workers, {"scheduler": "repair", "moved": int(np.sum(~stayed))})


def _any_fitting_placement(graph: TaskGraph, cluster: Cluster, capacity: np.ndarray,
                           rule: CoLocationRule | None = None) -> np.ndarray:
    """Step 4 of :func:`repair`: the exact solver on the bin-packing problem alone (every rate
    0), so that ``InfeasibleError`` means proven infeasible or not found in time. With several
    slot sharing groups the solver knows the per-operator caps only; an answer that breaks the
    slot rule counts as none found."""
    from streamsched.solvers import solve_placement

    none = np.zeros(0, np.int64)
    caps = {} if rule is None else {"operator_caps": (graph.task_operator, rule.operator_node_caps())}
    found = solve_placement(graph.load, none, none, np.zeros(0), capacity, work_limit=FEASIBILITY_SECONDS,
                            **caps)
    what = (f"graph {graph.name!r} (load {graph.total_load:g}, largest task {graph.load.max():g}) on "
            f"{cluster.name!r} (capacity {cluster.total_capacity:g})")
    if rule is not None:
        what += " within the co-location rule"
    if found.status == "infeasible":
        raise InfeasibleError(f"no placement of {what} exists (proven by the exact bin-packing model)")
    if found.status in ("optimal", "feasible") and rule is not None and rule.violations(found.assignment):
        found = replace(found, status="unknown")
    if found.status not in ("optimal", "feasible"):
        raise InfeasibleError(f"no placement of {what} was found: best and first fit decreasing failed and the "
                              f"exact bin-packing search found none in {FEASIBILITY_SECONDS:g} deterministic s (not a proof)")
    return np.asarray(found.assignment, np.int64)


def _displace_overflow(graph: TaskGraph, cluster: Cluster, start: np.ndarray, sym) -> np.ndarray:
    """``start`` with the tasks of over-capacity nodes that talk least to their node-mates
    set to -1 until each node fits (step 1 of :func:`repair`)."""
    node_of = start.copy()
    room = remaining_capacity(cluster) - np.bincount(node_of[node_of >= 0], weights=graph.load[node_of >= 0],
                                                     minlength=cluster.n_nodes)
    for k in np.flatnonzero(room < 0).tolist():
        on = np.flatnonzero(node_of == k)
        mates = (node_of == k).astype(float)
        affinity = np.asarray(sym[on] @ mates).ravel()
        for t in on[np.lexsort((-graph.load[on], affinity))]:
            if room[k] >= 0:
                break
            node_of[t] = -1
            room[k] += graph.load[t]
    return node_of


def _displace_crowded(graph: TaskGraph, rule: CoLocationRule, start: np.ndarray, sym) -> np.ndarray:
    """``start`` with tasks displaced (-1) until every node keeps the co-location rule: on a
    node that breaks it, the task whose removal lowers the excess and that exchanges least
    traffic with its node-mates goes first (step 1 of :func:`repair`)."""
    node_of = start.copy()
    counts = rule.tracker(node_of)
    for k in range(rule.cluster.n_nodes):
        while True:
            on = np.flatnonzero(node_of == k)
            ops = graph.task_operator[on]
            groups = rule.operator_group[ops]
            over_cap = counts.count[ops, k] > rule.operator_cap[ops]
            over_slots = counts.used[k] > rule.node_slots[k]
            helps = over_cap | (over_slots & (counts.count[ops, k] == counts.group_max[groups, k]))
            if not helps.any():
                break
            candidates = on[helps]
            affinity = np.asarray(sym[candidates] @ (node_of == k).astype(float)).ravel()
            t = int(candidates[np.lexsort((-graph.load[candidates], affinity))[0]])
            node_of[t] = -1
            counts.remove(t, k)
    return node_of


def _allowed(counts: CoLocationCounts | None, task: int, room_ok: np.ndarray) -> np.ndarray:
    """Nodes with room for ``task`` (``room_ok``) where the co-location rule also lets it go."""
    return room_ok if counts is None else room_ok & counts.fits_mask(task)


def _traffic_to_nodes(sym, node_of: np.ndarray, task: int, n_nodes: int) -> np.ndarray:
    """Traffic ``task`` exchanges with the tasks on each node (unplaced neighbours ignored)."""
    row = slice(sym.indptr[task], sym.indptr[task + 1])
    where = node_of[sym.indices[row]]
    placed = where >= 0
    return np.bincount(where[placed], weights=sym.data[row][placed], minlength=n_nodes)


def _room(graph: TaskGraph, capacity: np.ndarray, node_of: np.ndarray) -> np.ndarray:
    placed = node_of >= 0
    return capacity - np.bincount(node_of[placed], weights=graph.load[placed], minlength=capacity.size)


def _by_load(graph: TaskGraph, tasks: np.ndarray) -> np.ndarray:
    return tasks[np.argsort(-graph.load[tasks], kind="stable")]


def _insert_by_traffic(graph: TaskGraph, capacity: np.ndarray, kept: np.ndarray, sym,
                       rule: CoLocationRule | None = None) -> np.ndarray | None:
    """Step 2 of :func:`repair`; None when some task fits on no node."""
    node_of = kept.copy()
    room = _room(graph, capacity, node_of)
    counts = None if rule is None else rule.tracker(node_of)
    for t in _by_load(graph, np.flatnonzero(node_of < 0)).tolist():
        fits = np.flatnonzero(_allowed(counts, t, room >= graph.load[t]))
        if fits.size == 0:
            return None
        traffic = _traffic_to_nodes(sym, node_of, t, capacity.size)
        best = fits[np.lexsort((fits, -room[fits], -traffic[fits]))[0]]
        node_of[t] = best
        room[best] -= graph.load[t]
        if counts is not None:
            counts.add(t, best)
    return node_of


def _pack_decreasing(graph: TaskGraph, capacity: np.ndarray, kept: np.ndarray, sym,
                     tightest: bool, rule: CoLocationRule | None = None) -> np.ndarray | None:
    """The unplaced tasks of ``kept``, largest first, each onto the node with the least room
    that fits it (``tightest``, best fit; ties: most traffic with it, then node order) or onto
    the first that fits in order of decreasing capacity (first fit); None when one fits nowhere."""
    node_of = kept.copy()
    room = _room(graph, capacity, node_of)
    capacity_rank = np.empty(capacity.size, np.int64)
    capacity_rank[np.lexsort((np.arange(capacity.size), -capacity))] = np.arange(capacity.size)
    counts = None if rule is None else rule.tracker(node_of)
    for t in _by_load(graph, np.flatnonzero(node_of < 0)).tolist():
        fits = np.flatnonzero(_allowed(counts, t, room >= graph.load[t]))
        if fits.size == 0:
            return None
        if tightest:
            traffic = _traffic_to_nodes(sym, node_of, t, capacity.size)
            best = fits[np.lexsort((fits, -traffic[fits], room[fits]))[0]]
        else:
            best = fits[np.argmin(capacity_rank[fits])]
        node_of[t] = best
        room[best] -= graph.load[t]
        if counts is not None:
            counts.add(t, best)
    return node_of


def _improve_by_moves(graph: TaskGraph, capacity: np.ndarray, node_of: np.ndarray, movable: np.ndarray,
                      sym, rule: CoLocationRule | None = None) -> None:
    """Move each of ``movable`` (in place) to the node with room that gains the most traffic
    back onto one node, while some move gains (at most :data:`IMPROVEMENT_PASSES` passes)."""
    room = _room(graph, capacity, node_of)
    counts = None if rule is None else rule.tracker(node_of)
    for _ in range(IMPROVEMENT_PASSES):
        moved = False
        for t in _by_load(graph, movable).tolist():
            here = int(node_of[t])
            traffic = _traffic_to_nodes(sym, node_of, t, capacity.size)
            gain = np.where(_allowed(counts, t, room >= graph.load[t]), traffic - traffic[here], -np.inf)
            gain[here] = -np.inf
            best = int(np.argmax(gain))
            if gain[best] > 1e-12 * max(traffic[here], 1.0):
                node_of[t] = best
                room[here] += graph.load[t]
                room[best] -= graph.load[t]
                if counts is not None:
                    counts.remove(t, here)
                    counts.add(t, best)
                moved = True
        if not moved:
            return


def adopt_if_better(graph: TaskGraph, current: Placement, kept: Placement, fresh: Placement,
                    threshold_pct: float) -> Placement:
    """``fresh`` if :func:`should_reschedule` says it beats ``kept`` (``current`` repaired) by
    ``threshold_pct``, else ``kept``. The metadata adds ``replan`` ("rescheduled" or "kept"),
    ``moved`` (tasks whose node differs from ``current``), ``traffic_kept`` and ``traffic_fresh``."""
    rescheduled = should_reschedule(graph, kept, fresh, threshold_pct)
    chosen = fresh if rescheduled else kept
    traffic_kept, traffic_fresh = inter_node_traffic(graph, kept), inter_node_traffic(graph, fresh)
    return chosen.with_metadata(
        replan="rescheduled" if rescheduled else "kept", threshold_pct=float(threshold_pct),
        moved=int(np.sum(chosen.node_of != current.node_of)),
        cost=traffic_fresh if rescheduled else traffic_kept, traffic_kept=traffic_kept, traffic_fresh=traffic_fresh)


def carry_over(graph: TaskGraph, cluster: Cluster, old_graph: TaskGraph, old: Placement,
               old_cluster: Cluster) -> Placement:
    """``old`` (a placement of ``old_graph`` on ``old_cluster``) as a placement of ``graph`` on
    ``cluster``, matched by task id and node name; node -1 for a new task or a node gone."""
    index = {int(t): i for i, t in enumerate(old_graph.task_ids.tolist())}
    node_of = np.full(graph.n_tasks, -1, dtype=np.int64)
    worker_of = np.full(graph.n_tasks, NO_WORKER, dtype=np.int64)
    for i, task in enumerate(graph.task_ids.tolist()):
        j = index.get(int(task))
        if j is None or old.node_of[j] < 0:
            continue
        node_of[i] = cluster.index.get(old_cluster.nodes[int(old.node_of[j])].name, -1)
        worker_of[i] = old.worker_of[j] if node_of[i] >= 0 else NO_WORKER
    return Placement.build(node_of, worker_of)


class Replans(Protocol):
    """What :class:`Replanner` needs of a scheduler."""

    def schedule(self, graph: TaskGraph, cluster: Cluster, seed: int = 0) -> Placement: ...

    def replan(self, graph: TaskGraph, cluster: Cluster, current: Placement, seed: int = 0,
               **options: Any) -> Placement: ...


@dataclass
class Replanner:
    """Holds the current assignment per topology; re-plans each new graph with the scheduler's
    :meth:`~streamsched.schedulers.base.Scheduler.replan` (``replan_options``, e.g.
    ``{"threshold_pct": 1.0}``) and emits an assignment when a task moves.

    ``running(graph, cluster)``, when given, is the placement the engine runs now (``collect flink``'s
    :func:`~streamsched.pipeline.collect_rest.running_placement`, or None): the first window of a
    topology starts from it instead of a fresh schedule, every window is re-planned from it
    (what runs, whether or not the last assignment was applied), and each decision records the
    inter-node traffic measured on it (``measured_before``; the next window's is the decision's
    ``measured_after``, also logged as a ``measured`` line)."""

    scheduler: Replans
    cluster: Cluster
    replan_options: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    out_dir: Path | None = None
    current: dict[str, tuple[TaskGraph, Placement, Cluster]] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)
    running: Callable[[TaskGraph, Cluster], Placement | None] | None = None

    def on_graph(self, graph: TaskGraph, snapshot: str | None = None) -> Decision:
        observed = self.running(graph, self.cluster) if self.running is not None else None
        measured = None if observed is None else inter_node_traffic(graph, observed)
        self._measured_after(graph.name, measured)
        if observed is not None:
            self.current[graph.name] = (graph, observed, self.cluster)
        if graph.name not in self.current:
            placement = self.scheduler.schedule(graph, self.cluster, seed=self.seed)
            return self._emit(graph, placement, "snapshot", "initial", None, inter_node_traffic(graph, placement),
                              None, graph.n_tasks, snapshot)
        return self._replan(graph, snapshot, measured)

    def _measured_after(self, topology: str, measured: float | None) -> None:
        """The last decision on ``topology`` gets this window's measured traffic as its after."""
        last = next((d for d in reversed(self.decisions) if d.topology == topology), None)
        if last is None or measured is None or last.measured_after is not None:
            return
        last.measured_after = measured
        if self.out_dir is not None:
            self._write_line({"topology": topology, "measured": "after", "decision": self.decisions.index(last) + 1,
                              "inter_node_traffic": measured})

    def _replan(self, graph: TaskGraph, snapshot: str | None, measured: float | None) -> Decision:
        old_graph, old, old_cluster = self.current[graph.name]
        current = carry_over(graph, self.cluster, old_graph, old, old_cluster)
        placement = self.scheduler.replan(graph, self.cluster, current, seed=self.seed, **self.replan_options)
        moved = int(np.sum(placement.node_of != current.node_of))
        after = inter_node_traffic(graph, placement)
        proposed = float(placement.metadata.get("traffic_fresh", after))
        if set(graph.task_ids.tolist()) - set(old_graph.task_ids.tolist()):
            return self._emit(graph, placement, "snapshot", "new-tasks", None, after, None, moved, snapshot, measured)
        before = inter_node_traffic(graph, current) if np.all(current.node_of >= 0) else None
        gain = 100.0 * (before - proposed) / before if before else None
        if moved:
            why = "repair" if placement.metadata.get("replan") == "kept" else "improvement"
            return self._emit(graph, placement, "snapshot", why, before, proposed, gain, moved, snapshot, measured)
        self.current[graph.name] = (graph, placement, self.cluster)
        return self._log(Decision(graph.name, "snapshot", False, "below-threshold", before, proposed, gain, 0,
                                  snapshot, measured_before=measured))

    def resume(self, graph: TaskGraph, assignment: dict[str, Any]) -> None:
        """Take up an assignment a previous run emitted (:meth:`Placement.to_dict` JSON) as the
        current placement of ``graph``'s topology, matched by task id and node name, without
        emitting: a restarted loop weighs its next window against it (the threshold rule) instead
        of starting afresh. A task or node not found is unplaced (-1): the next re-plan repairs it."""
        nodes = [self.cluster.index.get(str(name), -1) for name in assignment["nodes"]]
        where = dict(zip(assignment["tasks"], zip(assignment["node"], assignment["worker"])))
        node_of = np.full(graph.n_tasks, -1, dtype=np.int64)
        worker_of = np.full(graph.n_tasks, NO_WORKER, dtype=np.int64)
        for i, task in enumerate(graph.task_ids.tolist()):
            node, worker = where.get(task, (-1, NO_WORKER))
            if 0 <= node < len(nodes) and nodes[node] >= 0:
                node_of[i], worker_of[i] = nodes[node], worker
        self.current[graph.name] = (graph, Placement.build(node_of, worker_of, {"resumed": True}), self.cluster)

    def on_cluster(self, cluster: Cluster) -> list[Decision]:
        """A node joined or left: repair every current assignment onto ``cluster``."""
        self.cluster = cluster
        out = []
        for graph, placement, old_cluster in list(self.current.values()):
            repaired = repair(graph, cluster, carry_over(graph, cluster, graph, placement, old_cluster))
            out.append(self._emit(graph, repaired, "cluster", "cluster-change", inter_node_traffic(graph, placement),
                                  inter_node_traffic(graph, repaired), None, repaired.metadata["moved"], None))
        return out

    def _emit(self, graph, placement, trigger, why, before, after, gain, moved, snapshot, measured=None) -> Decision:
        self.current[graph.name] = (graph, placement, self.cluster)
        path = None
        if self.out_dir is not None:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            number = len(self.decisions) + 1
            while (path := self.out_dir / f"{safe_name(graph.name)}-{number:05d}.placement.json").exists():
                number += 1  # an earlier run's assignment (a restarted loop): keep it
            placement.write(path, graph, self.cluster)
        decision = Decision(graph.name, trigger, True, why, before, after, gain, moved, snapshot,
                            str(path) if path else None, measured_before=measured)
        return self._log(decision)

    def _log(self, decision: Decision) -> Decision:
        self.decisions.append(decision)
        if self.out_dir is not None:
            self._write_line(decision.to_dict())
        return decision

    def _write_line(self, record: dict[str, Any]) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        with open(self.out_dir / "decisions.jsonl", "a") as handle:
            handle.write(json.dumps(record) + "\n")
