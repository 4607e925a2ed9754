"""Evaluation commands: ``reproduce`` (the papers' experiments) and ``predict`` (the
performance model on a placement file)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from streamsched.cli.app import app, err_console
from streamsched.cli.common import (ClusterOpt, GraphOpt, JsonOpt, WorkloadOpt, emit, load_inputs,
                                    read_placement)
from streamsched.cli.summaries import prediction_lines
from streamsched.errors import InputError
from streamsched.evaluation.experiments.registry import experiments
from streamsched.evaluation.experiments.runner import reproduce as run_reproduction
from streamsched.performance import REGIMES, describe, predict as predict_placement, regime
from streamsched.schedulers import available

console = Console()


@app.command()
def reproduce(
    name: str = typer.Argument(..., help="experiment: " + ", ".join(experiments()) + ", or list"),
    out: Path = typer.Option(Path("reproduction"), "--out", "-o", help="directory for tables, figures and rows"),
    schedulers: Optional[str] = typer.Option(None, "--schedulers", help="comma-separated names (default: the paper's)"),
    quick: bool = typer.Option(False, "--quick", help="a small subset of the grid (minutes -> seconds)"),
    seed: int = typer.Option(0, "--seed", min=0),
    engine: str = typer.Option("local", "--engine", help="local (processes) or spark (one Spark task per cell)"),
    jobs: int = typer.Option(1, "--jobs", "-j", help="local worker processes"),
    master: str = typer.Option("local[2]", "--master", help="--engine spark: Spark master (local[N], spark://host:7077, ...)"),
    as_json: bool = JsonOpt,
) -> None:
    """Recompute one of the papers' experiments; writes comparison.md/.csv (paper beside ours),
    results.csv/.json and figures/*.png into --out (see docs/reproduction.md)."""
    if name == "list":
        table = Table("experiment", "what", "schedulers", title="experiments")
        for exp in experiments().values():
            table.add_row(exp.name, exp.summary, ", ".join(exp.schedulers))
        console.print(table)
        return
    chosen = None if schedulers is None else [s.strip() for s in schedulers.split(",") if s.strip()]
    if chosen is not None and not chosen:
        raise InputError("--schedulers: empty list")
    if name not in experiments():
        raise InputError(f"reproduce: unknown experiment {name!r} (known: {', '.join(experiments())}, list)")
    unknown = [s for s in chosen or [] if s not in available()]
    if unknown:
        raise InputError(f"--schedulers: {', '.join(map(repr, unknown))} not registered (see `streamsched list schedulers`)")
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a directory")
    if engine == "spark":  # the sweep runs on the session started here
        from streamsched.pipeline.session import spark_session

        with err_console.status(f"starting Spark ({master})"):
            spark_session(master)
    with err_console.status(f"reproducing {name}") as status:
        result = run_reproduction(name, out, chosen, quick=quick, seed=seed, engine=engine, jobs=jobs,
                                  progress=lambda i, n: status.update(f"{name}: cell {i} of {n}"))
    if result.missing:
        err_console.print(f"not registered, not run: {', '.join(result.missing)}", highlight=False)
    failed = [r for r in result.rows if r.get("status") in ("error", "infeasible")]
    for row in failed[:10]:
        err_console.print(f"{row['scheduler']} on {row['workload']}/{row['cluster']}: {row['error']}", highlight=False)
    statuses: dict[str, int] = {}
    for row in result.rows:
        statuses[row.get("status", "ok")] = statuses.get(row.get("status", "ok"), 0) + 1
    emit({"experiment": name, "rows": len(result.rows), "status": statuses, "missing": result.missing,
          "wall_time_s": result.wall_time_s, "written": [str(p) for p in result.written]}, as_json,
         [f"{name}: {len(result.rows)} rows in {result.wall_time_s:.1f} s; wrote "
          + ", ".join(str(p) for p in result.written[:4]) + f" and {max(0, len(result.written) - 4)} more"])


@app.command()
def predict(
    placement: Path = typer.Argument(..., help="placement JSON written by `schedule --out`"),
    workload: Optional[str] = WorkloadOpt,
    graph: Optional[Path] = GraphOpt,
    cluster: str = ClusterOpt,
    model: str = typer.Option("default", "--model", help="fitted parameter set (docs/evaluation.md, Calibration): "
                              + ", ".join(REGIMES)),
    acking: bool = typer.Option(False, "--acking", help="model Storm's acking traffic"),
    as_json: bool = JsonOpt,
) -> None:
    """The performance model's throughput, latency and bottleneck for a placement (a model, not
    a measurement; formulas in docs/evaluation.md)."""
    task_graph, nodes = load_inputs(workload, graph, cluster)
    loaded = read_placement(placement, task_graph, nodes)
    problems = loaded.violations(task_graph, nodes)
    if problems:  # as `export` refuses it and `evaluate` flags it (issue 16)
        raise InputError(f"{placement}: invalid placement, not predicted: {problems[0]}")
    params = regime(model).with_(acking=acking) if acking else regime(model)
    prediction = predict_placement(task_graph, nodes, loaded, params).to_dict()
    prediction["model"] = {"set": model, "acking": acking, "calibration": describe(model)}
    emit(prediction, as_json, prediction_lines(nodes, prediction, describe(model) + (", with acking" if acking else "")))
