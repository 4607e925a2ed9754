"""The per-node co-location rule: at most k tasks of an operator on one node.

Two engines state it. Storm's constraint solver takes ``maxNodeCoLocationCnt`` per component
(at most that many of its executors on one node): the graph's ``max_per_node`` (per operator,
0 = no limit). Flink runs each subtask in a task slot, and a slot holds at most one subtask of
each vertex of its slot sharing group; slots of different groups are distinct. A TaskManager
with s slots therefore holds, per slot sharing group g, ``max over the vertices v of g of
count(v)`` slots, and the rule is ``sum over g of max_v count(v) <= s``: the cluster's
``task_slots`` per node (0 = no limit) with the graph's ``slot_group`` per operator. With one
group (Flink's default: every vertex in ``default``) it reads "at most s subtasks of each vertex
on a TaskManager of s slots".

:class:`CoLocationRule` checks a placement (:meth:`violations`) and answers, while a scheduler
or the capacity repair places tasks one by one, whether a task may still go to a node
(:class:`CoLocationCounts`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamsched.model.cluster import Cluster
from streamsched.model.taskgraph import TaskGraph

#: Stands for "no limit" in the integer cap arrays.
UNLIMITED = np.iinfo(np.int64).max // 4


@dataclass(frozen=True, eq=False)
class CoLocationRule:
    """The rule of one graph on one cluster; :meth:`of` gives None where nothing limits."""

    graph: TaskGraph
    cluster: Cluster
    operator_cap: np.ndarray   # per operator: most tasks of it on one node (UNLIMITED)
    operator_group: np.ndarray  # per operator: index of its slot sharing group
    node_slots: np.ndarray      # per node: task slots (UNLIMITED)

    @classmethod
    def of(cls, graph: TaskGraph, cluster: Cluster) -> CoLocationRule | None:
        if not any(graph.max_per_node or ()) and not any(n.task_slots for n in cluster.nodes):
            return None
        caps = np.asarray(graph.max_per_node or [0] * len(graph.operator_names), dtype=np.int64)
        slots = np.array([n.task_slots for n in cluster.nodes], dtype=np.int64)
        _, group = np.unique(np.asarray(graph.slot_group or [""] * len(graph.operator_names), dtype=object)
                             .astype(str), return_inverse=True)
        return cls(graph, cluster, np.where(caps > 0, caps, UNLIMITED), group.astype(np.int64),
                   np.where(slots > 0, slots, UNLIMITED))

    @property
    def n_groups(self) -> int:
        return int(self.operator_group.max(initial=-1)) + 1

    def operator_node_caps(self) -> np.ndarray:
        """Operators x nodes: most tasks of each operator on each node. With one slot sharing
        group this is the whole rule; with several it is necessary, not sufficient."""
        return np.minimum(self.operator_cap[:, None], self.node_slots[None, :])

    def counts(self, node_of: np.ndarray) -> np.ndarray:
        """Operators x nodes: tasks of each operator on each node (unplaced tasks, -1, not counted)."""
        out = np.zeros((len(self.graph.operator_names), self.cluster.n_nodes), dtype=np.int64)
        placed = node_of >= 0
        np.add.at(out, (self.graph.task_operator[placed], node_of[placed]), 1)
        return out

    def slots_used(self, counts: np.ndarray) -> np.ndarray:
        """Per node, the slots the placement needs: sum over groups of the group's largest count."""
        per_group = np.zeros((self.n_groups, counts.shape[1]), dtype=np.int64)
        np.maximum.at(per_group, self.operator_group, counts)
        return per_group.sum(axis=0)

    def violations(self, node_of: np.ndarray, limit: int = 5) -> list[str]:
        counts = self.counts(np.asarray(node_of, dtype=np.int64))
        problems = []
        names, nodes = self.graph.operator_names, self.cluster.nodes
        for v, k in zip(*np.nonzero(counts > self.operator_cap[:, None])):
            problems.append(f"node {nodes[k].name!r} holds {counts[v, k]} tasks of operator {names[v]!r}; "
                            f"at most {self.operator_cap[v]} per node (max_per_node)")
        used = self.slots_used(counts)
        for k in np.flatnonzero(used > self.node_slots):
            worst = int(np.argmax(counts[:, k]))
            detail = (f"{counts[worst, k]} tasks of operator {names[worst]!r}" if self.n_groups == 1 else
                      f"{used[k]} slots over {self.n_groups} slot sharing groups")
            problems.append(f"node {nodes[k].name!r} holds {detail} but has {self.node_slots[k]} task slots "
                            f"(at most one task of an operator per slot and slot sharing group)")
        return problems[:limit]

    def tracker(self, node_of: np.ndarray) -> CoLocationCounts:
        return CoLocationCounts(self, np.asarray(node_of, dtype=np.int64))


class CoLocationCounts:
    """Counts of a placement being built; :meth:`fits` says whether one more task of an
    operator keeps a node within the rule (vectorised over nodes by :meth:`fits_mask`)."""

    def __init__(self, rule: CoLocationRule, node_of: np.ndarray):
        self.rule = rule
        self.count = rule.counts(node_of)
        self.group_max = np.zeros((rule.n_groups, rule.cluster.n_nodes), dtype=np.int64)
        np.maximum.at(self.group_max, rule.operator_group, self.count)
        self.used = self.group_max.sum(axis=0)
        self.members = [np.flatnonzero(rule.operator_group == g) for g in range(rule.n_groups)]

    def fits_mask(self, task: int) -> np.ndarray:
        """Per node, whether one more task of ``task``'s operator keeps the node within the rule."""
        v = int(self.rule.graph.task_operator[task])
        g = self.rule.operator_group[v]
        after = self.count[v] + 1
        used = self.used - self.group_max[g] + np.maximum(self.group_max[g], after)
        return (after <= self.rule.operator_cap[v]) & (used <= self.rule.node_slots)

    def fits(self, task: int, node: int) -> bool:
        v = int(self.rule.graph.task_operator[task])
        g = self.rule.operator_group[v]
        after = self.count[v, node] + 1
        used = self.used[node] - self.group_max[g, node] + max(self.group_max[g, node], after)
        return bool(after <= self.rule.operator_cap[v] and used <= self.rule.node_slots[node])

    def add(self, task: int, node: int) -> None:
        self._change(task, node, 1)

    def remove(self, task: int, node: int) -> None:
        self._change(task, node, -1)

    def _change(self, task: int, node: int, delta: int) -> None:
        v = int(self.rule.graph.task_operator[task])
        g = self.rule.operator_group[v]
        self.count[v, node] += delta
        new = int(self.count[self.members[g], node].max())
        self.used[node] += new - self.group_max[g, node]
        self.group_max[g, node] = new
