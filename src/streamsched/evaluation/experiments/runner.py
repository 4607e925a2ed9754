"""Running an experiment: its cells (locally, in processes, or on Spark), its rows, its summary."""

from __future__ import annotations

import csv
import json
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from streamsched.evaluation.comparison import params_for, placement_row
from streamsched.errors import InfeasibleError, InputError
from streamsched.model.paths import staged_directory
from streamsched.evaluation.experiments.cells import Cell, model_params
from streamsched import workloads
from streamsched.evaluation.experiments.registry import experiment
from streamsched.performance import predict
from streamsched.schedulers import available, scheduler_class


def run_cell(cell: Cell) -> dict[str, Any]:
    """Run one cell: the cell's fields, :func:`streamsched.evaluation.comparison.placement_row` of its
    placement and the model's figures under each of its presets. Expected failures become a
    ``status`` (missing, infeasible, error), never raise."""
    row: dict[str, Any] = {**{k: v for k, v in asdict(cell).items() if k not in ("params", "models")},
                           "params": dict(cell.params)}
    if cell.scheduler not in available():
        return {**row, "status": "missing", "error": f"scheduler {cell.scheduler!r} is not registered"}
    graph, cluster = workloads.workload(cell.workload, cell.seed), workloads.cluster(cell.cluster)
    row.update(tasks=graph.n_tasks, nodes=cluster.n_nodes)
    try:
        scheduler = scheduler_class(cell.scheduler)(**params_for(cell.scheduler, dict(cell.params)))
        placement = scheduler.schedule(graph, cluster, seed=cell.seed)
    except InfeasibleError as exc:
        return {**row, "status": "infeasible", "error": str(exc)}
    except Exception as exc:  # a broken scheduler must not stop a sweep; the row says why
        return {**row, "status": "error", "error": f"{type(exc).__name__}: {exc}"}
    row.update(placement_row(cell.scheduler, graph, cluster, placement))
    for model in cell.models:
        p = predict(graph, cluster, placement, model_params(model))
        row[f"throughput_{model}"] = p.throughput_tps
        row[f"per_node_{model}"] = p.throughput_per_node
        row[f"latency_ms_{model}"] = p.latency_s * 1e3
        row[f"bottleneck_{model}"] = p.regime
        row[f"messages_per_source_tuple_{model}"] = p.messages_per_s / p.source_tps if p.source_tps else None
        row[f"wire_bytes_per_source_tuple_{model}"] = p.wire_bytes_per_source_tuple
    return row


def run_cells(cells: list[Cell], engine: str = "local", jobs: int = 1,
              progress: Callable[[int, int], None] | None = None,
              run: Callable[[Cell], dict[str, Any]] = run_cell) -> list[dict[str, Any]]:
    """Rows of every cell, in order: ``local`` (``jobs`` processes) or ``spark`` (one Spark
    task per cell, :func:`streamsched.pipeline.sweep.map_on_spark`)."""
    if engine == "spark":
        from streamsched.pipeline.sweep import map_on_spark

        return map_on_spark(run, cells)
    if engine != "local":
        raise InputError(f"--engine: {engine!r} is not one of local, spark")
    if jobs < 1:
        raise InputError(f"--jobs: must be >= 1, got {jobs}")
    rows: list[dict[str, Any]] = []
    if jobs == 1:
        for i, cell in enumerate(cells):
            rows.append(run(cell))
            if progress:
                progress(i + 1, len(cells))
        return rows
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for i, row in enumerate(pool.map(run, cells)):
            rows.append(row)
            if progress:
                progress(i + 1, len(cells))
    return rows


@dataclass
class ReproductionResult:
    experiment: str
    rows: list[dict[str, Any]]
    written: list[Path]
    missing: list[str]
    wall_time_s: float


def reproduce(name: str, out_dir: str | Path, schedulers: Iterable[str] | None = None, quick: bool = False,
              seed: int = 0, engine: str = "local", jobs: int = 1,
              progress: Callable[[int, int], None] | None = None) -> ReproductionResult:
    """Run experiment ``name`` and write ``results.csv/json``, ``comparison.csv/md`` and
    ``figures/*.png`` into ``out_dir``. Schedulers the paper used but the registry lacks are
    listed as missing (their cells are not run)."""
    exp = experiment(name)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a directory")
    chosen = tuple(schedulers) if schedulers is not None else exp.schedulers
    registered = set(available())
    missing = [s for s in chosen if s not in registered]
    start = time.perf_counter()
    cells = exp.cells(tuple(s for s in chosen if s in registered), quick, seed)
    rows = run_cells(cells, engine=engine, jobs=jobs, progress=progress, run=exp.run or run_cell)
    rows += [{"experiment": name, "scheduler": s, "workload": "-", "cluster": "-", "seed": seed, "label": "",
              "status": "missing", "error": f"scheduler {s!r} is not registered"} for s in missing]
    with staged_directory(out) as stage:  # out appears complete, or not at all
        written = _write_rows(stage, rows) + exp.summarise(rows, stage)
    written = [out / path.relative_to(stage) for path in written]
    return ReproductionResult(name, rows, written, missing, time.perf_counter() - start)


#: Row fields written to results.json only (one entry per simulated interval: too long for a CSV cell).
JSON_ONLY = ("interval_rows",)


def _write_rows(out: Path, rows: list[dict[str, Any]]) -> list[Path]:
    keys: list[str] = []
    for row in rows:
        keys.extend(k for k in row if k not in keys and k not in JSON_ONLY)
    csv_path, json_path = out / "results.csv", out / "results.json"
    with csv_path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=keys)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in row.items()
                             if k not in JSON_ONLY})
    json_path.write_text(json.dumps(rows, indent=1, default=str))
    return [csv_path, json_path]
