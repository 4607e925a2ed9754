"""Run several schedulers on one graph and cluster and tabulate their metrics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from streamsched.errors import InfeasibleError
from streamsched.metrics import evaluate
from streamsched.model.cluster import Cluster
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.schedulers import available, scheduler_class


def resolve_names(spec: str | Iterable[str]) -> list[str]:
    """``"all"`` or a comma-separated list (or an iterable) of registered names, validated."""
    if isinstance(spec, str):
        if spec.strip() == "all":
            return available()
        spec = [s.strip() for s in spec.split(",") if s.strip()]
    names = list(spec)
    for name in names:
        scheduler_class(name)
    return names


def params_for(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """The subset of ``params`` that scheduler ``name`` declares."""
    declared = {p.name for p in scheduler_class(name).params}
    return {k: v for k, v in params.items() if k in declared}


@dataclass(frozen=True)
class Outcome:
    """One scheduler's result: its row of figures and its placement (None if infeasible)."""

    row: dict[str, Any]
    placement: Placement | None


def placement_row(name: str, graph: TaskGraph, cluster: Cluster, placement: Placement) -> dict[str, Any]:
    """``metrics.evaluate`` of one placement plus its scheduler's status, wall time, bound and gap."""
    meta = dict(placement.metadata)
    row = {"scheduler": name, **evaluate(graph, placement, cluster)}
    row["wall_time_s"] = meta.get("wall_time_s")
    row["status"] = meta.get("status", "ok" if row["valid"] else "invalid")
    for key in ("bound", "gap"):
        if key in meta:
            row[key] = meta[key]
    return row


def run_schedulers(graph: TaskGraph, cluster: Cluster, names: list[str], params: dict[str, Any] | None = None,
                   seed: int = 0, on_start: Callable[[str], None] | None = None) -> list[Outcome]:
    """Run each scheduler once; an infeasible one gets a row saying why."""
    params = params or {}
    outcomes = []
    for name in names:
        if on_start:
            on_start(name)
        scheduler = scheduler_class(name)(**params_for(name, params))
        try:
            placement = scheduler.schedule(graph, cluster, seed=seed)
        except InfeasibleError as exc:
            outcomes.append(Outcome({"scheduler": name, "valid": False, "status": "infeasible", "error": str(exc)}, None))
            continue
        outcomes.append(Outcome(placement_row(name, graph, cluster, placement), placement))
    return outcomes


def compare(graph: TaskGraph, cluster: Cluster, names: list[str], params: dict[str, Any] | None = None,
            seed: int = 0, on_start: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """One row per scheduler: metrics of its placement, or the infeasibility it reported."""
    return [o.row for o in run_schedulers(graph, cluster, names, params, seed, on_start)]
