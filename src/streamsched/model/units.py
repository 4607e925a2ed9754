"""The unit of task loads and node capacities, and the one check where a graph meets a cluster.

``tasks``: the papers' unit, a node hosts so many unit-load tasks (built-in workloads and
clusters). ``cores``: measured busy cores (native load rows, Storm and Flink readers) and a
capacity in cores. A load in one unit never fits a capacity in the other: :func:`check_units`
refuses the pair with one line naming both units instead of letting a scheduler report
"infeasible" (docs/model.md, "Units").
"""

from __future__ import annotations

from typing import Any

from streamsched.errors import InputError

TASKS = "tasks"
CORES = "cores"
UNITS = (TASKS, CORES)


def check_unit(value: Any, where: str) -> str:
    """``value`` if it is one of :data:`UNITS`, else ``InputError`` naming ``where``."""
    if value not in UNITS:
        raise InputError(f"{where}: {value!r} is not one of {', '.join(UNITS)}")
    return value


def check_units(graph: Any, cluster: Any) -> None:
    """``InputError`` (exit 2) when the graph's load unit is not the cluster's capacity unit.

    Called wherever a graph meets a cluster: before any scheduler runs
    (``schedulers.base.check_fits``, so ``schedule``, ``compare`` and ``replan``) and when a
    placement is checked against both (``Placement.violations``: ``evaluate``, ``export``).
    """
    load_unit = getattr(graph, "load_unit", TASKS)
    capacity_unit = getattr(cluster, "capacity_unit", TASKS)
    if load_unit != capacity_unit:
        raise InputError(
            f"graph {graph.name!r} has loads in {load_unit} but cluster {cluster.name!r} has capacity in "
            f"{capacity_unit}: use a cluster whose capacity_unit is {load_unit} (docs/model.md, Units)")
