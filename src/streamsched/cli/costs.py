"""``fit-costs``: learn per-operator CPU per tuple and the extra CPU per remote tuple from a
snapshot history and the placements its windows ran under (docs/evaluation.md, "Learning the
cost model from monitoring data"); ``fit-flink``: the throughput model fitted to a Flink job's
measured windows (:mod:`streamsched.evaluation.flink_fit`)."""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from streamsched.cli.app import app, err_console
from streamsched import resolve
from streamsched.cli.common import ClusterOpt, read_placement
from streamsched.errors import InputError
from streamsched.evaluation.cost_regression import WEIGHTINGS, Window, fit_costs
from streamsched.pipeline.store import MANIFEST, list_snapshots, load_snapshot, read_manifest

#: 120 columns when piped (rich would default to 80 and wrap the table).
console = Console(width=None if sys.stdout.isatty() else 120)


def snapshot_history(paths: list[Path], topology: Optional[str]) -> list[Path]:
    """Snapshot directories named, and every snapshot of a store named (oldest first; a store
    of several topologies needs ``topology``)."""
    found: list[Path] = []
    for path in paths:
        if (path / MANIFEST).is_file():
            found.append(path)
        elif (path / "snapshots").is_dir():
            names = sorted({p.parent.name for p in list_snapshots(path)})
            if topology is None and len(names) > 1:
                raise InputError(f"{path}: a store of {len(names)} topologies ({', '.join(names)}); give --topology")
            mine = list_snapshots(path, topology)
            if not mine:
                raise InputError(f"{path}: no snapshot" + (f" of topology {topology!r}" if topology else ""))
            found += mine
        else:
            raise InputError(f"{path}: neither a snapshot (no {MANIFEST}) nor a store (no snapshots/)")
    return found


def _fixed(value: float, digits: int) -> str:
    """``value`` with about ``digits`` significant digits, in fixed notation with separators."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:,.{decimals}f}"


@app.command("fit-costs")
def fit_costs_command(
    paths: list[Path] = typer.Argument(..., help="snapshot directories, or a store (all its snapshots, oldest first)"),
    placement: list[Path] = typer.Option(
        ..., "--placement", help="placement JSON a window ran under: one per snapshot, in the order of the snapshots"),
    cluster: str = ClusterOpt,
    topology: Optional[str] = typer.Option(None, "--topology", help="the topology of a store holding several"),
    confidence: float = typer.Option(0.95, "--confidence", help="confidence level of the intervals"),
    weighting: str = typer.Option(
        "relative", "--weighting",
        help="relative (errors in proportion to the load) or uniform (ordinary least squares)"),
    as_json: bool = typer.Option(False, "--json", help="print the fit as JSON"),
) -> None:
    """Estimate each operator's CPU per tuple and the extra CPU per remote tuple (tuples leaving
    their worker) by least squares over snapshots whose placements differ, with confidence
    intervals."""
    if weighting not in WEIGHTINGS:
        raise InputError(f"--weighting: {weighting!r} is not one of {', '.join(WEIGHTINGS)}")
    snapshots = snapshot_history(paths, topology)
    if len(placement) != len(snapshots):
        raise InputError(f"{len(snapshots)} snapshots but {len(placement)} --placement files: give one per snapshot, "
                         f"in this order: {', '.join(str(s) for s in snapshots)}")
    nodes = resolve.cluster(cluster)
    windows = []
    for snapshot, placed in zip(snapshots, placement):
        graph = load_snapshot(snapshot)
        defaulted = read_manifest(snapshot).get("tasks_with_default_load") or 0
        if defaulted:
            err_console.print(f"warning: {snapshot}: {defaulted} tasks had no load sample and carry a default load, "
                              f"which the fit reads as measured", highlight=False)
        windows.append(Window(graph, read_placement(placed, graph, nodes), f"{snapshot} <- {placed}"))
    fit = fit_costs(windows, confidence=confidence, weighting=weighting)
    if as_json:
        print(json.dumps(fit.to_dict(), indent=1))
        return
    cpu = "CPU µs" if fit.load_unit == "cores" else f"µs x load ({fit.load_unit})"
    table = Table("parameter", f"{cpu} per tuple", "std. error", f"{fit.confidence:.0%} interval")
    for name, estimate, error, low, high in zip(fit.parameters, fit.estimate, fit.std_error, fit.ci_low, fit.ci_high):
        table.add_row(name, _fixed(estimate * 1e6, 4), _fixed(error * 1e6, 2),
                      f"{_fixed(low * 1e6, 4)} .. {_fixed(high * 1e6, 4)}")
    console.print(table)
    console.print(f"fitted on {len(fit.windows)} windows ({fit.placements} placements, {fit.observations:,} task "
                  f"observations), {fit.weighting} weighting; residual {fit.residual_rel_std:.2%} of the fitted load "
                  f"(rms), R² {fit.r_squared:.4f}")


@app.command("fit-flink")
def fit_flink_command(
    measurements: Path = typer.Argument(..., help="measurement file: windows of a Flink job under several placements, "
                                        "with each TaskManager's CPU (benchmarks/network_lab.py --json)"),
    reference: str = typer.Option("flink-default", "--reference",
                                  help="the placement whose reading predicts the others (the running one)"),
    as_json: bool = typer.Option(False, "--json", help="print the fits and held-out errors as JSON"),
) -> None:
    """Fit the throughput model to a Flink job's measurements (CPU per record per operator and
    per remote record from the TaskManagers' CPU time, the links' payload share) and state its
    held-out error: each placement predicted by a fit without it, beside "placement changes
    nothing"."""
    from streamsched.evaluation import flink_fit
    from streamsched.model.io import read_document

    cells = flink_fit.read_measurements(read_document(measurements), str(measurements))
    out = []
    for name, cluster, windows in cells:
        model = flink_fit.fit(windows, cluster)
        held = flink_fit.held_out(windows, cluster, reference)
        out.append({"cell": name, "fit": model.to_dict(), "held_out": held})
    if as_json:
        print(json.dumps(out, indent=1))
        return
    for cell in out:
        model = cell["fit"]
        console.print(f"{cell['cell']}: CPU µs per record " + ", ".join(
            f"{op} {_fixed(v * 1e6, 3)}" for op, v in model["operator_cpu_s_per_record"].items())
            + f"; per remote record {_fixed(model['net_cpu_s_per_remote_record'] * 1e6, 3)}; TaskManager "
            f"{model['base_cores']:.2f} cores; links carry {model['link_efficiency']:.1%} payload "
            f"({model['windows']} windows, {model['placements']} placements, CPU residual "
            f"{model['cpu_residual_rel']:.1%})", highlight=False)
        table = Table("placement", "measured records/s", "predicted (held out)", "error", "'nothing changes' error",
                      f"predicted (fit on {reference} alone)", "error")
        for h in cell["held_out"]:
            prior = ("", "") if h["prior"] is None else (_fixed(h["prior"], 4), f"{h['prior_error']:.1%}")
            table.add_row(h["placement"], _fixed(h["measured"], 4), _fixed(h["predicted"], 4), f"{h['error']:.1%}",
                          f"{h['unchanged_error']:.1%}", *prior)
        console.print(table)
        errors = [h["error"] for h in cell["held_out"]]
        priors = [h["prior_error"] for h in cell["held_out"] if h["prior_error"] is not None]
        console.print(f"median held-out error {statistics.median(errors):.1%} against "
                      f"{statistics.median(h['unchanged_error'] for h in cell['held_out']):.1%} for "
                      f"'nothing changes'; fitted on {reference} alone {statistics.median(priors):.1%}"
                      f" ({len(priors)} placements)", highlight=False)
