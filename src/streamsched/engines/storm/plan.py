"""Storm: executor -> worker slot assignments (../shared/reference/formats.md, "Outputs")."""

from __future__ import annotations

from typing import Any

import numpy as np

from streamsched.engines.placement_check import check_exportable, worker_slots
from streamsched.model.cluster import Cluster
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph

STORM_BASE_PORT = 6700


def storm_assignment(graph: TaskGraph, cluster: Cluster, placement: Placement,
                     base_port: int = STORM_BASE_PORT) -> dict[str, Any]:
    """Executors as Storm names them, ``[start_task, end_task]`` ranges, per ``node:port`` slot.

    A task-level plan is lifted to executors: the tasks of one component, in task id order,
    form one executor per maximal run of consecutive ids on the same slot, so every executor is a
    contiguous range within its component (what an ``IScheduler`` passes to
    ``cluster.assign(slot, topologyId, executors)``).
    """
    check_exportable(graph, cluster, placement)
    worker = worker_slots(placement)
    slots: dict[tuple[str, int], list[list[int]]] = {}
    components: dict[str, list[list[int]]] = {}
    for op, name in enumerate(graph.operator_names):
        tasks = np.flatnonzero(graph.task_operator == op)
        tasks = tasks[np.argsort(graph.task_ids[tasks], kind="stable")]
        runs: list[list[int]] = []
        previous = None
        for t in tasks.tolist():
            slot = (cluster.nodes[placement.node_of[t]].name, base_port + int(worker[t]))
            tid = int(graph.task_ids[t])
            if previous is not None and previous[0] == slot and tid == previous[1] + 1:
                runs[-1][1] = tid
            else:
                runs.append([tid, tid])
                slots.setdefault(slot, []).append(runs[-1])
            previous = (slot, tid)
        components[name] = runs
    return {
        "topology": graph.name,
        "assignments": [
            {"node": node, "port": port, "executors": sorted(execs)}
            for (node, port), execs in sorted(slots.items())
        ],
        "components": {name: runs for name, runs in components.items()},
    }
