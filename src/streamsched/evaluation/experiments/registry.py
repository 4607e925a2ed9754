"""The experiments registry: every module of this package that defines ``EXPERIMENT``.

Modules are imported on first use; the registry refuses two experiments of one name and
answers an unknown name with the list of known ones. The instance names cells carry are built-in
workloads and clusters (:mod:`streamsched.workloads`).
"""

from __future__ import annotations

import importlib
import pkgutil

from streamsched.errors import InputError
from streamsched.evaluation.experiments.cells import Experiment

_PACKAGE = __name__.rsplit(".", 1)[0]
_EXPERIMENTS: dict[str, Experiment] = {}


def experiments() -> dict[str, Experiment]:
    """Every experiment by name, sorted by name."""
    if not _EXPERIMENTS:
        found: dict[str, Experiment] = {}
        package = importlib.import_module(_PACKAGE)
        for module in pkgutil.iter_modules(package.__path__):
            declared = getattr(importlib.import_module(f"{_PACKAGE}.{module.name}"), "EXPERIMENT", None)
            if declared is None:
                continue
            if declared.name in found:
                raise ValueError(f"experiment {declared.name!r} defined twice")
            found[declared.name] = declared
        _EXPERIMENTS.update(sorted(found.items()))
    return _EXPERIMENTS


def experiment(name: str) -> Experiment:
    known = experiments()
    try:
        return known[name]
    except KeyError:
        raise InputError(f"unknown experiment {name!r} (known: {', '.join(known)})") from None
