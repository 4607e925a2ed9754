"""Learning the cost model from monitoring data: per-operator CPU per tuple and the extra CPU per
remote tuple, by least squares over a snapshot history whose placements differ.

Every task t of every window w is one observation of :mod:`streamsched.model.costs`' model,

    L_wt = c[op(t)] * p_wt + c_remote * x_wt + e_wt,   x_wt = (in_remote_wt + out_remote_wt) / 2

with ``L`` the measured load, ``p`` the measured tuples/s it executes and ``x`` the remote tuples
it (de)serialises under window w's placement (M1-M2 of docs/evaluation.md). Under one placement
the remote share of a task is fixed, so ``c_remote`` is read only from differences between tasks
of an operator (any per-task cost difference, a hot key, a slower machine, would pass for remote
cost): the fit needs windows under at least two placements that differ in which tasks share a
worker. Monitoring noise is multiplicative (a load is a mean of samples with a relative error),
so by default the fit is weighted by ``1 / fitted^2`` (two-step feasible GLS; ``uniform`` is
ordinary least squares). Standard errors come from the (weighted) residual variance,
``s^2 (X'WX)^-1``; confidence intervals from Student's t with n - p degrees of freedom.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from streamsched.errors import InputError
from streamsched.model.costs import REMOTE, process_of, processed, remote_endpoint_rate
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph

WEIGHTINGS = ("relative", "uniform")


@dataclass(frozen=True)
class Window:
    """One snapshot's graph (measured rates and loads) and the placement it ran under."""

    graph: TaskGraph
    placement: Placement
    label: str


@dataclass(frozen=True)
class CostFit:
    """Estimates (CPU seconds per tuple, in the graphs' load unit x s) with their standard
    errors and confidence intervals, one per parameter (operators, then :data:`REMOTE`)."""

    parameters: tuple[str, ...]
    estimate: np.ndarray
    std_error: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    confidence: float
    weighting: str
    load_unit: str
    windows: tuple[str, ...]
    placements: int
    observations: int
    dof: int
    residual_rel_std: float
    r_squared: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "load_unit": self.load_unit, "confidence": self.confidence, "weighting": self.weighting,
            "windows": list(self.windows), "distinct_placements": self.placements,
            "observations": self.observations, "dof": self.dof,
            "residual_rel_std": self.residual_rel_std, "r_squared": self.r_squared,
            "parameters": [{"name": name, "estimate_s": float(e), "std_error_s": float(s),
                            "ci_low_s": float(lo), "ci_high_s": float(hi)}
                           for name, e, s, lo, hi in zip(self.parameters, self.estimate, self.std_error,
                                                         self.ci_low, self.ci_high)],
        }

    def value(self, name: str) -> tuple[float, float, float]:
        """(estimate, CI low, CI high) of one parameter."""
        k = self.parameters.index(name)
        return float(self.estimate[k]), float(self.ci_low[k]), float(self.ci_high[k])


def design(windows: Sequence[Window]) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    """(parameter names, X, y): one row per task and window; column o = tuples/s task t executes
    if it belongs to operator o (else 0), last column = its remote tuples/s (halved ends)."""
    operators = sorted({name for w in windows for name in w.graph.operator_names})
    column = {name: k for k, name in enumerate(operators)}
    blocks, loads = [], []
    for w in windows:
        g = w.graph
        x = np.zeros((g.n_tasks, len(operators) + 1))
        ops = np.array([column[g.operator_names[o]] for o in g.task_operator], dtype=np.int64)
        x[np.arange(g.n_tasks), ops] = processed(g, g.rate)
        x[:, -1] = remote_endpoint_rate(g, w.placement, g.rate)
        blocks.append(x)
        loads.append(g.load)
    return (*operators, REMOTE), np.vstack(blocks), np.concatenate(loads)


def _same_layout(a: Window, b: Window) -> bool:
    """True when the tasks both windows hold share processes alike in both (whatever the node or
    worker numbers): then the two placements send the same tuples between workers."""
    common = np.intersect1d(a.graph.task_ids, b.graph.task_ids)
    labels = []
    for w in (a, b):
        order = np.argsort(w.graph.task_ids)
        proc = process_of(w.placement)[order[np.searchsorted(w.graph.task_ids, common, sorter=order)]]
        _, first, label = np.unique(proc, return_index=True, return_inverse=True)
        labels.append(np.argsort(np.argsort(first))[label])
    return bool(np.array_equal(labels[0], labels[1]))


def _check_identifiable(names: tuple[str, ...], x: np.ndarray, windows: Sequence[Window]) -> int:
    """The number of distinct placements; an InputError when the history cannot tell the
    parameters apart (one placement, or collinear columns)."""
    layouts: list[Window] = []
    for w in windows:
        if not any(_same_layout(w, seen) for seen in layouts):
            layouts.append(w)
    if len(layouts) < 2:
        raise InputError(
            f"all {len(windows)} windows share one placement (the same tasks share a worker in each): the extra CPU "
            f"per remote tuple cannot be told apart from the per-operator costs; give windows under at least two "
            f"placements that differ")
    scale = np.linalg.norm(x, axis=0)
    unused = [names[k] for k in np.flatnonzero(scale == 0)]
    if unused:
        raise InputError(f"no window measures {', '.join(map(repr, unused))} (no tuples): it cannot be estimated")
    _, singular, vt = np.linalg.svd(x / scale, full_matrices=False)
    if singular[-1] <= singular[0] * 1e-9:
        tied = [names[k] for k in np.flatnonzero(np.abs(vt[-1]) > 1e-6)]
        raise InputError(f"the windows cannot tell {', '.join(map(repr, tied))} apart (their tuples move together "
                         f"in every window); give windows whose placements or rates differ")
    return len(layouts)


def fit_costs(windows: Sequence[Window], confidence: float = 0.95, weighting: str = "relative") -> CostFit:
    """Least-squares estimate of every operator's CPU per tuple and the extra CPU per remote tuple."""
    if weighting not in WEIGHTINGS:
        raise InputError(f"--weighting: {weighting!r} is not one of {', '.join(WEIGHTINGS)}")
    if not 0 < confidence < 1:
        raise InputError(f"--confidence: must be in (0, 1), got {confidence}")
    if len(windows) < 2:
        raise InputError(f"{len(windows)} window(s): the fit needs snapshots of at least two windows under different "
                         f"placements")
    units = {w.graph.load_unit for w in windows}
    if len(units) > 1:
        raise InputError(f"the snapshots' loads are in different units ({', '.join(sorted(units))})")
    names, x, y = design(windows)
    placements = _check_identifiable(names, x, windows)
    n, p = x.shape
    if n <= p:
        raise InputError(f"{n} task observations for {p} parameters: give more windows")
    scale = np.linalg.norm(x, axis=0)  # columns of very different size: solve on unit columns
    beta = np.linalg.lstsq(x / scale, y, rcond=None)[0] / scale
    weight = np.ones(n)
    if weighting == "relative":
        fitted = x @ beta
        floor = 1e-3 * np.median(np.abs(fitted[fitted != 0])) if np.any(fitted != 0) else 1.0
        weight = 1.0 / np.maximum(np.abs(fitted), floor) ** 2
        root = np.sqrt(weight)
        beta = np.linalg.lstsq(x * root[:, None] / scale, y * root, rcond=None)[0] / scale
    residual = y - x @ beta
    dof = n - p
    s2 = float(weight @ residual ** 2) / dof
    covariance = s2 * np.linalg.inv((x * weight[:, None]).T @ x)
    std_error = np.sqrt(np.maximum(np.diag(covariance), 0.0))
    from scipy import stats  # on use: scipy.stats slows the CLI's start-up

    half = stats.t.ppf((1 + confidence) / 2, dof) * std_error
    total = float(((y - y.mean()) ** 2).sum())
    fitted = x @ beta
    relative = residual[fitted > 0] / fitted[fitted > 0]
    return CostFit(
        parameters=names, estimate=beta, std_error=std_error, ci_low=beta - half, ci_high=beta + half,
        confidence=confidence, weighting=weighting, load_unit=units.pop(), windows=tuple(w.label for w in windows),
        placements=placements, observations=n, dof=dof,
        residual_rel_std=float(np.sqrt(np.mean(relative ** 2))) if relative.size else 0.0,
        r_squared=1.0 - float((residual ** 2).sum()) / total if total > 0 else 1.0)
