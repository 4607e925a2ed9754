"""Storm's default EvenScheduler, made capacity-aware.

Storm (``EvenScheduler.sortSlots``) groups free slots by node, orders nodes by free slots
(most first) and interleaves them: n3:6700, n2:6700, n1:6700, n3:6701, ...; the topology takes
the first ``workers`` slots and its executors, sorted by task id, go round robin over them
(Storm [1]_; Fischer and Bernstein [2]_ section IV-A; Muhammad [3]_ section 1.2, "round-robin").
Storm ignores capacity; here a task whose turn falls on a full node goes to the next slot in
the rotation that fits, so the placement stays valid on heterogeneous clusters; a task no
slot's node can take is left out and the packing fails
(:class:`~streamsched.schedulers.base.PackingFailed`: repaired, or refused with ``strict``).

References
----------
.. [1] Toshniwal, A.; Taneja, S.; Shukla, A.; Ramasamy, K.; Patel, J. M.; Kulkarni, S.; Jackson, J.;
   Gade, K.; Fu, M.; Donham, J.; Bhagat, N.; Mittal, S.; Ryaboy, D. (2014) "Storm @Twitter",
   Proceedings of the 2014 ACM SIGMOD International Conference on Management of Data, pp. 147-156.
.. [2] Fischer, L.; Bernstein, A. (2015) "Workload scheduling in distributed stream processors using
   graph partitioning", 2015 IEEE International Conference on Big Data (IEEE BigData 2015), Santa
   Clara, CA, IEEE Computer Society.
.. [3] Muhammad, A. (2023) "A scheduler for efficient scheduling of stream processing tasks on
   computational clusters", PhD thesis, Department of Computer Science, Capital University of
   Science and Technology, Islamabad.
"""

from __future__ import annotations

import numpy as np

from streamsched.errors import InfeasibleError
from streamsched.model.placement import Placement
from streamsched.schedulers import register
from streamsched.schedulers.base import STRICT, PackingFailed, Param, Scheduler, remaining_capacity


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
    objective = "balance"
    params = (
        Param("workers", int, 0, "worker processes for the topology (0 = every slot)", low=0),
        STRICT,
    )

    def place(self, graph, cluster, params, seed):
        order = interleaved_slots(cluster.slots)
        if not order:
            raise InfeasibleError(f"cluster {cluster.name!r} has no worker slots")
        if params["workers"]:
            order = order[: params["workers"]]
        free = remaining_capacity(cluster)
        n_slots = len(order)
        node_of = np.full(graph.n_tasks, -1, np.int32)
        worker_of = np.full(graph.n_tasks, -1, np.int32)
        slot_node = np.array([k for k, _ in order])
        slot_index = np.array([w for _, w in order])
        load = graph.load
        cursor = 0
        refused = None
        for task in np.argsort(graph.task_ids, kind="stable").tolist():
            need = load[task]
            for step in range(n_slots):
                s = (cursor + step) % n_slots
                if free[slot_node[s]] >= need:
                    break
            else:
                refused = refused or (
                    f"even: task {graph.task_ids[task]} (load {need:g}) fits on none of the "
                    f"{n_slots} worker slots' nodes (largest free capacity {free[slot_node].max():g})"
                )
                continue
            free[slot_node[s]] -= need
            node_of[task] = slot_node[s]
            worker_of[task] = slot_index[s]
            cursor = s + 1
        if refused:
            raise PackingFailed(refused, node_of, worker_of, nodes=np.unique(slot_node), metadata={"workers": n_slots})
        return Placement.build(node_of, worker_of, {"workers": n_slots})
