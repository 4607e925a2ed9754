"""What a back-end returns, and the row scaling integer-only solvers need."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamsched.errors import InputError
from streamsched.solvers.problem import TOLERANCE


@dataclass(frozen=True)
class MilpSolution:
    """Raw answer of a back-end: values of the variables (None if none found), objective
    without the model's offset, proven bound on it, and one of the four statuses."""

    values: np.ndarray | None
    objective: float
    bound: float
    status: str
    work: float = 0.0  # deterministic time spent (CP-SAT), 0 where the back-end has none


#: Scale of rows whose coefficients have more than 6 decimals.
INEXACT_SCALE = 1e9


class SolverLimitError(InputError):
    """The back-end cannot take this model (missing package, licence or size limits)."""


def integer_rows(rows, lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scale rows to integer coefficients: each row by the smallest 10^d (d <= 6) that makes its
    coefficients and finite bounds integers; past that, by 10^9 with coefficients rounded up and
    the upper bound widened by the placement validator's tolerance (1e-9 relative), so that a
    ``<=`` row with non-negative coefficients (a capacity) accepts exactly what the validator
    accepts. Returns (coefficients aligned with ``rows.data``, lower, upper)."""
    n_rows = rows.shape[0]
    row_of = np.repeat(np.arange(n_rows), np.diff(rows.indptr))
    data = rows.data.astype(np.float64)
    scale = np.full(n_rows, np.nan)
    for digits in range(7):
        factor = 10.0**digits
        off = np.abs(data * factor - np.round(data * factor)) > 1e-9 * factor
        bad = np.bincount(row_of, weights=off, minlength=n_rows) > 0
        for bound in (lower, upper):
            finite = np.isfinite(bound)
            bad |= finite & (np.abs(np.where(finite, bound, 0) * factor - np.round(np.where(finite, bound, 0) * factor))
                             > 1e-9 * np.maximum(1.0, np.abs(np.where(finite, bound, 0)) * factor))
        scale[np.isnan(scale) & ~bad] = factor
    exact = ~np.isnan(scale)
    scale[~exact] = INEXACT_SCALE
    scaled = data * scale[row_of]
    coefficients = np.where(exact[row_of], np.round(scaled), np.ceil(scaled - 1e-9))
    with np.errstate(invalid="ignore"):
        new_lower = np.where(exact, np.round(lower * scale), np.ceil(lower * scale - 1e-9))
        slack = upper * (1 + TOLERANCE) + TOLERANCE  # the placement validator's own slack
        new_upper = np.where(exact, np.round(upper * scale), np.floor(slack * scale))
    return coefficients, new_lower, new_upper
