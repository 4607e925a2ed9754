"""Run several schedulers on one graph and cluster and tabulate their metrics.

``all`` is the cluster family, plus the edge strategies when the cluster has edge nodes. A
scheduler whose placement would only be another's fallback (``Scheduler.skip_reason``: an edge
strategy on a cluster without edge nodes, Isolation with no machines dedicated to the graph)
gets a row with status ``skipped`` and the reason, not a placement.

A scheduler that fails keeps the others' rows: ``InfeasibleError`` gives a row with status
``infeasible``, any other exception (a crash, ``MemoryError``, ``TimeoutError``) a row with
status ``error``; both carry the one-line reason in ``error``. Bad input (``InputError``, e.g. a
parameter outside its domain) still stops the comparison: it is the caller's to fix.

:func:`rank` orders the rows by :data:`SORT_KEY` (inter-node traffic) and marks the first placement
``best``; where the cluster states every node's link capacities (``net_in``/``net_out``), every
row carries the link-capacity model's predicted throughput and bottleneck and the order is
:data:`THROUGHPUT_SORT_KEY` (predicted throughput first).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from streamsched.errors import InfeasibleError, InputError
from streamsched.metrics import evaluate
from streamsched.performance import ModelParams, predict, regime
from streamsched.model.cluster import Cluster
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.model.throughput import predict_throughput
from streamsched.schedulers import available, family, scheduler_class
from streamsched.schedulers.base import FAMILIES, has_edge_nodes


def resolve_names(spec: str | Iterable[str], cluster: Cluster | None = None) -> list[str]:
    """``"all"``, a family (``"cluster"``, ``"edge"``) or a comma-separated list (or an
    iterable) of registered names, validated. ``"all"`` is every scheduler that serves
    ``cluster`` (the cluster family alone when no cluster is given)."""
    if not isinstance(spec, str):
        spec = list(spec)
    spec_text = spec if isinstance(spec, str) else ",".join(spec)
    if isinstance(spec, str):
        if spec.strip() == "all":
            edge = cluster is not None and has_edge_nodes(cluster)
            return [n for n in available() if scheduler_class(n).family == "cluster" or edge]
        if spec.strip() in FAMILIES:
            return family(spec.strip())
        spec = [s.strip() for s in spec.split(",") if s.strip()]
    names = list(spec)
    if not names:
        raise InputError(f"--schedulers {spec_text!r}: no scheduler named (give names, a family or all)")
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
    for key in ("bound", "gap", "bound_source", "repaired"):
        if key in meta:
            row[key] = meta[key]
    if meta.get("objective") == "throughput":
        row["objective"] = "throughput"  # its status and bound are about throughput, not traffic
    if cluster.has_links:
        add_throughput(row, graph, cluster, placement)
    return row


def add_throughput(row: dict[str, Any], graph: TaskGraph, cluster: Cluster, placement: Placement,
                   net_cpu_per_record: float = 0.0) -> dict[str, Any]:
    """Add the link-capacity model's predicted throughput (records/s at the sources), its
    bottleneck and peak utilisation (:mod:`streamsched.model.throughput`) to a row; also for an
    overloaded placement (then the throughput its overload allows)."""
    prediction = predict_throughput(graph, cluster, placement.node_of, net_cpu_per_record).to_row()
    if prediction["predicted_throughput"] == float("inf"):
        prediction["predicted_throughput"] = None  # nothing demanded: unbounded (JSON has no inf)
    row.update(prediction)
    return row


def add_prediction(row: dict[str, Any], graph: TaskGraph, cluster: Cluster, placement: Placement,
                   model: ModelParams) -> dict[str, Any]:
    """Add the performance model's throughput (also in the io- and cpu-bound regimes), latency
    and bottleneck to a row; a graph the model cannot evaluate (a cycle) gets
    ``prediction_error`` instead, the same with or without a report."""
    try:
        prediction = predict(graph, cluster, placement, model).summary()
        by_regime = {key: predict(graph, cluster, placement, regime(name)).throughput_tps
                     for key, name in (("throughput_io_tps", "io-bound"), ("throughput_cpu_tps", "cpu-bound"))}
    except InputError as exc:
        row["prediction_error"] = str(exc)
        return row
    row.update({k: prediction[k] for k in ("throughput_tps", "throughput_per_node", "source_tps",
                                           "bottleneck", "regime", "max_rate_scale")})
    row.update(by_regime)
    row["latency_ms"] = prediction["latency_s"] * 1e3
    row["task_latency_ms"] = prediction["task_latency_s"] * 1e3
    return row


def run_schedulers(graph: TaskGraph, cluster: Cluster, names: list[str], params: dict[str, Any] | None = None,
                   seed: int = 0, on_start: Callable[[str], None] | None = None,
                   model: ModelParams | None = None) -> list[Outcome]:
    """Run each scheduler once; an infeasible or failing one gets a row saying why (status
    ``infeasible`` or ``error``), and one that does not serve ``cluster`` a ``skipped`` row with
    its ``reason``. With ``model``, every placed row gets its prediction (:func:`add_prediction`).
    Where ``cluster`` states every node's link capacities, ``optimal`` maximises the predicted
    throughput (``objective=throughput``) unless ``params`` name its objective."""
    params = params or {}
    outcomes = []
    for name in names:
        chosen = params_for(name, params)
        if name == "optimal" and cluster.has_links and "objective" not in chosen:
            chosen["objective"] = "throughput"
        scheduler = scheduler_class(name)(**chosen)
        reason = scheduler.skip_reason(graph, cluster)
        if reason is not None:
            outcomes.append(Outcome({"scheduler": name, "status": "skipped", "reason": reason}, None))
            continue
        if on_start:
            on_start(name)
        try:
            placement = scheduler.schedule(graph, cluster, seed=seed)
        except InfeasibleError as exc:
            outcomes.append(Outcome({"scheduler": name, "valid": False, "status": "infeasible", "error": str(exc)}, None))
            continue
        except InputError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure of one scheduler becomes its row
            outcomes.append(Outcome({"scheduler": name, "valid": False, "status": "error",
                                     "error": failure_reason(exc)}, None))
            continue
        row = placement_row(name, graph, cluster, placement)
        if model is not None:
            add_prediction(row, graph, cluster, placement, model)
        outcomes.append(Outcome(row, placement))
    return outcomes


def failure_reason(exc: BaseException) -> str:
    """One line saying what went wrong: the exception's type and the first line of its message."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def compare(graph: TaskGraph, cluster: Cluster, names: list[str], params: dict[str, Any] | None = None,
            seed: int = 0, on_start: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """One row per scheduler: metrics of its placement, or the infeasibility it reported."""
    return [o.row for o in run_schedulers(graph, cluster, names, params, seed, on_start)]


#: The order of :func:`rank`, as the compare output states it. Inter-node traffic is the cluster
#: schedulers' objective (i-scheduler.txt eq. 3; t3-scheduler.txt eq. 1); the model's predicted
#: throughput breaks ties (placements of equal traffic can load the nodes differently).
SORT_KEY = ("inter-node traffic (lowest first), then predicted throughput (highest first), nodes used, "
            "scheduler name; rows without a valid placement last (invalid, infeasible, error, skipped)")

#: The order of :func:`rank` where the cluster states every node's link capacities: the
#: link-capacity model's predicted throughput (docs/model.md, T1-T5) decides.
THROUGHPUT_SORT_KEY = ("predicted throughput (link capacities known), highest first; then inter-node traffic "
                       "(lowest first), nodes used, scheduler name; rows without a valid placement last (invalid, "
                       "infeasible, error, skipped; the running placement is ranked also when overloaded)")

#: The row of a job's running placement (``compare --current``).
CURRENT = "current"
#: Where rows without a valid placement go, after every valid one, in this order.
_LAST = {"invalid": 1, "infeasible": 2, "error": 3, "skipped": 4}


def by_throughput(rows: list[dict[str, Any]]) -> bool:
    """Rows ranked by predicted throughput: some row has the link-capacity model's prediction
    (:func:`placement_row` adds it where every node has ``net_in`` and ``net_out``)."""
    return any("predicted_throughput" in row for row in rows)


def sort_key(rows: list[dict[str, Any]]) -> str:
    """:data:`THROUGHPUT_SORT_KEY` or :data:`SORT_KEY`, as :func:`rank` orders ``rows``."""
    return THROUGHPUT_SORT_KEY if by_throughput(rows) else SORT_KEY


def _rank_key(row: dict[str, Any], throughput_first: bool = False) -> tuple:
    placed = "inter_node_traffic" in row
    if placed:
        # by throughput, the running placement (it runs) is judged also where it overloads a node
        keep = row.get("valid", True) or throughput_first and row.get("scheduler") == CURRENT
        group = 0 if keep else _LAST["invalid"]
    else:
        group = _LAST.get(row.get("status"), _LAST["error"])
    if throughput_first:
        predicted = row.get("predicted_throughput", 0.0)
        predicted = float("inf") if predicted is None and placed else float(predicted or 0.0)
        return (group, -predicted, float(row["inter_node_traffic"]) if placed else 0.0,
                row.get("nodes_used") or 0, str(row.get("scheduler")))
    throughput = row.get("throughput_tps")
    return (group,
            float(row["inter_node_traffic"]) if placed else 0.0,
            -float(throughput) if isinstance(throughput, (int, float)) and throughput == throughput else 0.0,
            row.get("nodes_used") or 0,
            str(row.get("scheduler")))


def rank(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` sorted by :func:`sort_key` (:data:`SORT_KEY`, or :data:`THROUGHPUT_SORT_KEY`
    where the rows carry the link-capacity model's prediction), each given its 1-based ``rank`` and ``best`` (True
    for the first row with a valid placement only). Rows without a valid placement keep no rank."""
    throughput_first = by_throughput(rows)
    ordered = sorted(rows, key=lambda row: _rank_key(row, throughput_first))
    position = 0
    for row in ordered:
        placed = _rank_key(row, throughput_first)[0] == 0
        position += placed
        row["rank"] = position if placed else None
        row["best"] = placed and position == 1
    return ordered


def rank_outcomes(outcomes: list[Outcome]) -> list[Outcome]:
    """``outcomes`` in the order of :func:`rank` (their rows ranked and marked in place)."""
    order = {id(row): k for k, row in enumerate(rank([o.row for o in outcomes]))}
    return sorted(outcomes, key=lambda o: order[id(o.row)])
