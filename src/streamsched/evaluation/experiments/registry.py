"""The experiments registry: every module of this package that defines ``EXPERIMENT``.

Modules are imported on first use; the registry refuses two experiments of one name and
answers an unknown name with the list of known ones. It also resolves the instance names cells
carry: an experiment's own instances first, then the built-in workloads and clusters.
"""

from __future__ import annotations

import importlib
import pkgutil

from streamsched import workloads
from streamsched.errors import InputError
from streamsched.evaluation.experiments.cells import Experiment
from streamsched.model.cluster import Cluster
from streamsched.model.taskgraph import TaskGraph

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


def build_graph(name: str, seed: int = 0) -> TaskGraph:
    """The graph an experiment names (e.g. ``fischer-payload-10``), else a built-in workload."""
    for exp in experiments().values():
        graph = exp.graph(name, seed) if exp.graph is not None else None
        if graph is not None:
            return graph
    return workloads.workload(name)


def build_cluster(name: str) -> Cluster:
    """The cluster an experiment names (e.g. ``fischer-30``), else a built-in cluster."""
    for exp in experiments().values():
        cluster = exp.cluster(name) if exp.cluster is not None else None
        if cluster is not None:
            return cluster
    return workloads.cluster(name)
