"""``replan``: re-place a running topology with the exact solver, pricing each migrated task."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import typer

from streamsched.cli.app import app, err_console
from streamsched.cli.common import (ClusterOpt, GraphOpt, JsonOpt, ParamOpt, WorkloadOpt, check_output_file, emit,
                                    load_inputs, parse_params, read_placement)
from streamsched.cli.summaries import replan_lines
from streamsched.errors import InputError
from streamsched.metrics import evaluate as evaluate_placement
from streamsched.schedulers import get_scheduler


#: Largest cost per moved task (rate units): beyond it the solver's objective overflows.
MAX_MIGRATION_COST = 1e15


@app.command()
def replan(
    current: Path = typer.Argument(..., help="the running placement (JSON written by `schedule --out`)"),
    workload: Optional[str] = WorkloadOpt,
    graph: Optional[Path] = GraphOpt,
    cluster: str = ClusterOpt,
    migration_cost: float = typer.Option(1.0, "--migration-cost", "-m", help="cost per moved task, in rate units"),
    param: Optional[list[str]] = ParamOpt,
    seed: int = typer.Option(0, "--seed", min=0),
    as_json: bool = JsonOpt,
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="write the new placement JSON here"),
    report: Optional[Path] = typer.Option(None, "--report", help="also write an HTML page: the placement before and "
                                          "after, moved tasks outlined in red, metrics and predicted throughput"),
) -> None:
    """Minimise inter-node traffic + migration cost x moved tasks (optimal scheduler), print the
    new placement's metrics and how many tasks move."""
    if not math.isfinite(migration_cost) or not 0 <= migration_cost <= MAX_MIGRATION_COST:
        raise InputError(f"--migration-cost: must be a number in [0, {MAX_MIGRATION_COST:g}], got {migration_cost}")
    check_output_file(out)
    if report is not None:
        from streamsched.evaluation.report import check_report_path

        check_report_path(report)
    task_graph, nodes = load_inputs(workload, graph, cluster, units=False)
    running = read_placement(current, task_graph, nodes)
    with err_console.status(f"re-planning {task_graph.name}"):
        placement = get_scheduler("optimal", **parse_params(param)).replan(
            task_graph, nodes, running, migration_cost=migration_cost, seed=seed)
    if out is not None:
        placement.write(out, task_graph, nodes)
    if report is not None:
        from streamsched.evaluation.report import write_replan_report

        err_console.print(f"report: {write_replan_report(report, task_graph, nodes, running, placement)}",
                          highlight=False)
    metrics = evaluate_placement(task_graph, placement, nodes)
    emit({"metadata": dict(placement.metadata), "metrics": metrics}, as_json,
         replan_lines(task_graph, nodes, placement, metrics, evaluate_placement(task_graph, running, nodes))
         + ([f"wrote {out}"] if out is not None else []))
