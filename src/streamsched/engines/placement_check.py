"""What every engine export checks first: the placement is valid for its graph and cluster, and
each task has a worker slot (a task without one, ``NO_WORKER``, goes to its node's first worker)."""

from __future__ import annotations

import numpy as np

from streamsched.errors import InputError
from streamsched.model.cluster import Cluster
from streamsched.model.placement import NO_WORKER, Placement
from streamsched.model.taskgraph import TaskGraph


def worker_slots(placement: Placement) -> np.ndarray:
    """Each task's worker index on its node (0 where the placement names none)."""
    return np.where(placement.worker_of == NO_WORKER, 0, placement.worker_of)


def check_exportable(graph: TaskGraph, cluster: Cluster, placement: Placement) -> None:
    """``InputError`` naming the first violation of a placement that no engine should receive."""
    problems = placement.violations(graph, cluster)
    if problems:
        raise InputError(f"placement cannot be exported: {problems[0]}")
