"""Edge/cloud commands: ``streamsched edge simulate`` (edge-cloud-topset.txt section 5)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from streamsched.cli.app import app
from streamsched.cli.common import finite_or_null
from streamsched.errors import InputError
from streamsched.model.paths import staged_directory

console = Console()
edge_app = typer.Typer(no_args_is_help=True, help="Dataflows arriving and departing on edge + cloud resources.")
app.add_typer(edge_app, name="edge")


def _names(option: str, text: str, known: tuple[str, ...]) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return list(known)
    for name in names:
        if name not in known:
            raise InputError(f"{option} {name!r} is not one of {', '.join(known)} (or 'all')")
    if not names:
        raise InputError(f"{option}: give at least one name")
    return names


@edge_app.command("simulate")
def simulate(
    setup: str = typer.Option("small", "--setup", help="small (96 Pi + 4 VM, 100 intervals) or large (960 + 40, 400)"),
    workload: str = typer.Option("rw-0.5", "--workload", help="rw-0, rw-0.5, rw-1 or poisson"),
    strategy: str = typer.Option("topset-p", "--strategy", help="comma list of topset, topset-p, ga-i, ga-g, edge-only, cloud-only, or all"),
    rebalance: str = typer.Option("none", "--rebalance", help="comma list of none, vertex, edge, both, or all"),
    out: Path = typer.Option(..., "--out", help="directory for intervals.csv, summary.json and the figures"),
    intervals: Optional[int] = typer.Option(None, "--intervals", min=1, help="stop after this many control intervals (default: all of the setup's)"),
    seed: int = typer.Option(0, "--seed", min=0, help="seed of the setup, dataflows, workload and GA"),
    population: int = typer.Option(64, "--population", min=4, help="GA population"),
    generations: int = typer.Option(100, "--generations", min=1, help="GA generations (at most)"),
    figures: bool = typer.Option(True, "--figures/--no-figures", help="draw Figs. 3-7"),
    as_json: bool = typer.Option(False, "--json", help="print the summary per strategy as JSON instead of a table"),
) -> None:
    """Simulate control intervals; write per-interval results and the plots of Figs. 3-7."""
    from streamsched.edge.figures import write_figures
    from streamsched.edge.ga import GASettings
    from streamsched.edge.rebalance import STRATEGIES as REBALANCES
    from streamsched.edge.simulation import STRATEGIES, simulate_many, summarise, write_results

    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a directory")
    strategies = _names("--strategy", strategy, STRATEGIES)
    rebalances = _names("--rebalance", rebalance, REBALANCES)
    ga = GASettings(population=population, generations=generations)
    with console.status(f"simulating {setup} / {workload}"):
        results = simulate_many(setup, workload, strategies, rebalances, seed, intervals, ga)
    with staged_directory(out) as stage:  # out appears complete, or not at all
        write_results(results, stage)
        drawn = write_figures(results, stage, f"({setup}, {workload})") if figures else []
    path, drawn = out / "intervals.csv", [out / p.relative_to(stage) for p in drawn]
    if as_json:
        console.print_json(data=finite_or_null({"summary": summarise(results), "intervals": str(path),
                                                "figures": [str(p) for p in drawn]}))
        return
    table = Table("strategy", "rebalance", "failed", "mean sum of makespans (s)", "mean / max planning (ms)",
                  "migrations", "mean psi (s)", title=f"edge simulate: {setup}, {workload}")
    for row in summarise(results):
        makespan = row["mean_sum_makespan_s"]
        table.add_row(row["strategy"], row["rebalance"], str(row["failed"]),
                      "-" if makespan is None else f"{makespan:.4f}",
                      f"{1e3 * row['mean_planning_time_s']:.2f} / {1e3 * row['max_planning_time_s']:.2f}",
                      str(row["total_migrations"]), f"{row['mean_stabilization_s']:.3f}")
    console.print(table)
    console.print(f"wrote {path}" + (f" and {len(drawn)} figures" if drawn else ""))
