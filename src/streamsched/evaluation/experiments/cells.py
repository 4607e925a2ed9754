"""What an experiment is made of: cells (one scheduler run each) and the experiment itself."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from streamsched.performance import ModelParams, regime

#: Presets a cell can be evaluated under besides :data:`REGIMES`: Fischer's set-up with acking
#: (Storm 0.9, fischer-metis-scheduler.txt V-B2) on the set fitted to his cluster, and the same
#: without acking for the tuple-size sweep (V-B1).
FISCHER_MODELS = {"acking": {"acking": True}, "acking-bandwidth": {"acking": True}, "no-acking-bandwidth": {}}


def model_params(name: str) -> ModelParams:
    """The parameter set a cell names: a fitted set of :data:`REGIMES` or a Fischer preset."""
    if name in FISCHER_MODELS:
        return regime("fischer-imac").with_(**FISCHER_MODELS[name])
    return regime(name)


@dataclass(frozen=True)
class Cell:
    """One run: a scheduler on a workload and cluster (built-in names, :mod:`streamsched.workloads`), evaluated under the listed model presets."""

    experiment: str
    scheduler: str
    workload: str
    cluster: str
    seed: int = 0
    params: tuple[tuple[str, Any], ...] = ()
    models: tuple[str, ...] = ("default",)
    label: str = ""


@dataclass(frozen=True)
class Experiment:
    """One paper's experiment. ``cells(schedulers, quick, seed)`` lists its runs;
    ``summarise(rows, out_dir)`` writes its tables and figures and returns their paths.
    Cells name built-in workloads and clusters (:mod:`streamsched.workloads`). ``run``
    replaces the runner's cell (one scheduler's placement) for experiments whose cells are
    something else (the edge paper's control-interval simulations)."""

    name: str
    summary: str
    schedulers: tuple[str, ...]
    cells: Callable[[tuple[str, ...], bool, int], list[Cell]]
    summarise: Callable[[list[dict[str, Any]], Path], list[Path]]
    run: Callable[[Cell], dict[str, Any]] | None = None
