"""What an experiment is made of: cells (one scheduler run each) and the experiment itself."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from streamsched.evaluation.performance import REGIMES, ModelParams
from streamsched.model.cluster import Cluster
from streamsched.model.taskgraph import TaskGraph

#: Model presets a cell can be evaluated under: the regimes plus Fischer's set-up with acking.
MODELS: dict[str, ModelParams] = {
    **REGIMES,
    "acking": ModelParams(acking=True),
    "acking-bandwidth": REGIMES["bandwidth-bound"].with_(acking=True, tuple_bytes=None),
    "no-acking-bandwidth": REGIMES["bandwidth-bound"].with_(tuple_bytes=None),
}


@dataclass(frozen=True)
class Cell:
    """One run: a scheduler on a workload and cluster (names resolved by :func:`.registry.build_graph`
    and :func:`.registry.build_cluster`), evaluated under the listed model presets."""

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
    ``graph(name, seed)`` and ``cluster(name)`` build the instances only this experiment
    names (None for any other name); the rest are built-in workloads and clusters. ``run``
    replaces the runner's cell (one scheduler's placement) for experiments whose cells are
    something else (the edge paper's control-interval simulations)."""

    name: str
    summary: str
    schedulers: tuple[str, ...]
    cells: Callable[[tuple[str, ...], bool, int], list[Cell]]
    summarise: Callable[[list[dict[str, Any]], Path], list[Path]]
    graph: Callable[[str, int], TaskGraph | None] | None = None
    cluster: Callable[[str], Cluster | None] | None = None
    run: Callable[[Cell], dict[str, Any]] | None = None
