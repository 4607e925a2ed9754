"""Storm's default EvenScheduler, made capacity-aware.

Storm (``EvenScheduler.sortSlots``) groups free slots by node, orders nodes by free slots
(most first) and interleaves them: n3:6700, n2:6700, n1:6700, n3:6701, ...; the topology takes
the first ``workers`` slots and its executors, sorted by task id, go round robin over them
(fischer-metis-scheduler.txt IV-A; thesis section 1.4 "round-robin"). Storm ignores capacity;
here a task whose turn falls on a full node goes to the next slot in the rotation that fits,
so the placement stays valid on heterogeneous clusters (``InfeasibleError`` if none fits).
"""

from __future__ import annotations

import numpy as np

from streamsched.errors import InfeasibleError
from streamsched.model.placement import Placement
from streamsched.schedulers import register
from streamsched.schedulers.base import Param, Scheduler, remaining_capacity


def interleaved_slots(slots: np.ndarray) -> list[tuple[int, int]]:
    """``(node, slot)`` pairs in Storm's order: nodes by free slots (desc, ties by index), interleaved."""
    nodes = sorted(np.flatnonzero(slots > 0).tolist(), key=lambda k: (-int(slots[k]), k))
    order = []
    for level in range(int(slots.max(initial=0))):
        order.extend((k, level) for k in nodes if slots[k] > level)
    return order


@register
class EvenScheduler(Scheduler):
    name = "even"
    summary = "Storm's default round robin over interleaved worker slots (capacity-aware)"
    params = (
        Param("workers", int, 0, "worker processes for the topology (0 = every slot)", low=0),
    )

    def place(self, graph, cluster, params, seed):
        order = interleaved_slots(cluster.slots)
        if not order:
            raise InfeasibleError(f"cluster {cluster.name!r} has no worker slots")
        if params["workers"]:
            order = order[: params["workers"]]
        free = remaining_capacity(cluster)
        n_slots = len(order)
        node_of = np.empty(graph.n_tasks, np.int32)
        worker_of = np.empty(graph.n_tasks, np.int32)
        slot_node = np.array([k for k, _ in order])
        slot_index = np.array([w for _, w in order])
        load = graph.load
        cursor = 0
        for task in np.argsort(graph.task_ids, kind="stable").tolist():
            need = load[task]
            for step in range(n_slots):
                s = (cursor + step) % n_slots
                if free[slot_node[s]] >= need:
                    break
            else:
                raise InfeasibleError(
                    f"even: task {graph.task_ids[task]} (load {need:g}) fits on none of the "
                    f"{n_slots} worker slots' nodes (largest free capacity {free[slot_node].max():g})"
                )
            free[slot_node[s]] -= need
            node_of[task] = slot_node[s]
            worker_of[task] = slot_index[s]
            cursor = s + 1
        return Placement.build(node_of, worker_of, {"workers": n_slots})
