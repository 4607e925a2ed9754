"""The adaptive rescheduling loop's decisions (plain Python, no Spark).

After every snapshot the chosen scheduler re-plans; the new assignment is emitted only when it
cuts the inter-node traffic of the current one, measured on the new graph, by at least
``threshold_pct`` percent (Aniello et al.'s ``traffic.improvement`` rule,
:func:`streamsched.schedulers.ols.should_reschedule`). A change of the cluster (a node joining
or leaving, as the thesis' Configuration Manager tracks it) or new tasks trigger
:func:`repair`, which keeps every task it can where it is and moves only the rest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from streamsched.errors import InfeasibleError
from streamsched.metrics import inter_node_traffic
from streamsched.model.cluster import Cluster
from streamsched.model.placement import NO_WORKER, Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.schedulers.base import Scheduler, remaining_capacity
from streamsched.schedulers.ols import should_reschedule


def repair(graph: TaskGraph, cluster: Cluster, node_name_of: dict[int, str],
           worker_of_task: dict[int, int] | None = None) -> tuple[Placement, int]:
    """Fewest moves to a valid placement on ``cluster`` from the previous ``task id -> node name``.

    Tasks whose node is gone or that are new are displaced; on a node now over capacity the
    tasks exchanging least traffic with their node-mates are displaced until it fits. Displaced
    tasks, largest load first, go to the node with room they exchange most traffic with (ties:
    most remaining capacity, then node order). Returns the placement and the number of tasks
    that changed node (new tasks count as moved).
    """
    worker_of_task = worker_of_task or {}
    node_of = np.array([cluster.index.get(node_name_of.get(int(t), ""), -1) for t in graph.task_ids], dtype=np.int64)
    room = remaining_capacity(cluster)
    sym = graph.undirected
    for k in range(cluster.n_nodes):
        on = np.flatnonzero(node_of == k)
        room[k] -= graph.load[on].sum()
        if room[k] < 0:
            mates = (node_of == k).astype(float)
            affinity = np.asarray(sym[on] @ mates).ravel()
            for t in on[np.lexsort((-graph.load[on], affinity))]:
                if room[k] >= 0:
                    break
                node_of[t] = -1
                room[k] += graph.load[t]
    displaced = np.flatnonzero(node_of < 0)
    for t in displaced[np.argsort(-graph.load[displaced], kind="stable")]:
        row = sym.getrow(t)
        traffic = np.zeros(cluster.n_nodes)
        placed = node_of[row.indices] >= 0
        np.add.at(traffic, node_of[row.indices[placed]], row.data[placed])
        fits = np.flatnonzero(room >= graph.load[t])
        if fits.size == 0:
            raise InfeasibleError(f"task {graph.task_ids[t]} (load {graph.load[t]:g}) fits on no node of {cluster.name!r}")
        best = fits[np.lexsort((fits, -room[fits], -traffic[fits]))[0]]
        node_of[t] = best
        room[best] -= graph.load[t]
    previous = np.array([node_name_of.get(int(t)) for t in graph.task_ids], dtype=object)
    names = np.array([n.name for n in cluster.nodes], dtype=object)[node_of]
    moved = int(np.sum(previous != names))
    workers = np.array([worker_of_task.get(int(t), NO_WORKER) for t in graph.task_ids])
    slots = cluster.slots[node_of]
    workers = np.where((previous == names) & (workers < slots), workers, np.where(slots > 0, 0, NO_WORKER))
    return Placement.build(node_of, workers, {"scheduler": "repair", "moved": moved}), moved


@dataclass
class Decision:
    """What the loop did with one snapshot or cluster change."""

    topology: str
    trigger: str                  # "snapshot" or "cluster"
    emitted: bool
    why: str                      # initial, improvement, below-threshold, cluster-change, new-tasks
    traffic_current: float | None
    traffic_proposed: float
    improvement_pct: float | None
    moved: int
    snapshot: str | None = None
    assignment: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Replanner:
    """Holds the current assignment per topology and applies the threshold rule."""

    scheduler: Scheduler
    cluster: Cluster
    threshold_pct: float = 1.0
    seed: int = 0
    out_dir: Path | None = None
    current: dict[str, tuple[TaskGraph, Placement, Cluster]] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)

    def on_graph(self, graph: TaskGraph, snapshot: str | None = None) -> Decision:
        proposed = self.scheduler.schedule(graph, self.cluster, seed=self.seed)
        after = inter_node_traffic(graph, proposed)
        if graph.name not in self.current:
            return self._emit(graph, proposed, "snapshot", "initial", None, after, None, graph.n_tasks, snapshot)
        old_graph, old, old_cluster = self.current[graph.name]
        names = _names(old_graph, old, old_cluster)
        if set(graph.task_ids.tolist()) - set(names):
            repaired, moved = repair(graph, self.cluster, names, _workers(old_graph, old))
            return self._emit(graph, repaired, "snapshot", "new-tasks", None, inter_node_traffic(graph, repaired),
                              None, moved, snapshot)
        carried, _ = repair(graph, self.cluster, names, _workers(old_graph, old))
        before = inter_node_traffic(graph, carried)
        gain = 100.0 * (before - after) / before if before > 0 else 0.0
        if should_reschedule(graph, carried, proposed, self.threshold_pct):
            moved = int(np.sum(carried.node_of != proposed.node_of))
            return self._emit(graph, proposed, "snapshot", "improvement", before, after, gain, moved, snapshot)
        self.current[graph.name] = (graph, carried, self.cluster)
        decision = Decision(graph.name, "snapshot", False, "below-threshold", before, after, gain, 0, snapshot)
        return self._log(decision)

    def on_cluster(self, cluster: Cluster) -> list[Decision]:
        """A node joined or left: repair every current assignment onto ``cluster``."""
        self.cluster = cluster
        out = []
        for name, (graph, placement, old_cluster) in list(self.current.items()):
            repaired, moved = repair(graph, cluster, _names(graph, placement, old_cluster), _workers(graph, placement))
            before = inter_node_traffic(graph, placement)
            out.append(self._emit(graph, repaired, "cluster", "cluster-change", before,
                                  inter_node_traffic(graph, repaired), None, moved, None))
        return out

    def _emit(self, graph, placement, trigger, why, before, after, gain, moved, snapshot) -> Decision:
        self.current[graph.name] = (graph, placement, self.cluster)
        path = None
        if self.out_dir is not None:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            path = self.out_dir / f"{graph.name}-{len(self.decisions) + 1:05d}.placement.json"
            placement.write(path, graph, self.cluster)
        decision = Decision(graph.name, trigger, True, why, before, after, gain, moved, snapshot,
                            str(path) if path else None)
        return self._log(decision)

    def _log(self, decision: Decision) -> Decision:
        self.decisions.append(decision)
        if self.out_dir is not None:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            with open(self.out_dir / "decisions.jsonl", "a") as handle:
                handle.write(json.dumps(decision.to_dict()) + "\n")
        return decision


def _names(graph: TaskGraph, placement: Placement, cluster: Cluster) -> dict[int, str]:
    return {int(t): cluster.nodes[k].name for t, k in zip(graph.task_ids, placement.node_of)}


def _workers(graph: TaskGraph, placement: Placement) -> dict[int, int]:
    return {int(t): int(w) for t, w in zip(graph.task_ids, placement.worker_of)}
