"""One-way layers: the import graph of streamsched, read from the source with ``ast``.

Every ``import`` counts, at module level or inside a function: a function-level import that
closes a cycle still ties the two modules together. ``from a.b import c`` is an edge to
``a.b.c`` when that is a module, else to ``a.b`` (the package's ``__init__``); importing a
module is not counted as importing its parent package.

Rules (README "Layout"): no import cycle between streamsched modules; pyspark only under
``streamsched.pipeline``; and every import points down the layers of :data:`LAYERS` (or stays
in its own layer), so that:

- the model, the metrics and the pure performance model reach no scheduler;
- engine formats reach neither a scheduler nor the pipeline (the pipeline calls them);
- the pipeline reaches no scheduler;
- the evaluation layer (comparison, verdict, report, experiments) sits above the schedulers,
  the main job (``streamsched.job``) above the evaluation, and the CLI above everything.
"""

from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

import streamsched

ROOT = Path(streamsched.__file__).parent


def _module_name(path: Path) -> str:
    parts = ("streamsched",) + path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(source: str, module: str, is_package: bool, known: set[str]) -> list[tuple[str, int]]:
    """(imported name, line) of every import statement in ``source``, anywhere in the module.
    Names are absolute; for ``from x import y`` the name is ``x.y`` when that is in ``known``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                anchor = package[:len(package) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.append((full if full in known else base, node.lineno))
    return found


def _owner(name: str, known: set[str]) -> str | None:
    """The streamsched module ``name`` denotes (its longest known prefix), or None."""
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        prefix = ".".join(parts[:k])
        if prefix in known:
            return prefix
    return None


def _import_graph() -> tuple[dict[str, set[str]], dict[str, list[tuple[str, int]]]]:
    """(edges between streamsched modules, every imported name per module with its line)."""
    files = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}
    known = set(files)
    edges: dict[str, set[str]] = {m: set() for m in files}
    raw: dict[str, list[tuple[str, int]]] = {}
    for module, path in files.items():
        raw[module] = _imports(path.read_text(), module, path.name == "__init__.py", known)
        for name, _ in raw[module]:
            target = _owner(name, known)
            if target is not None and target != module:
                edges[module].add(target)
    return edges, raw


def find_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) per strongly connected component of more than one module."""
    names = sorted(set(edges) | {t for ts in edges.values() for t in ts})
    index = {n: i for i, n in enumerate(names)}
    rows = [index[a] for a, ts in edges.items() for _ in ts]
    cols = [index[t] for ts in edges.values() for t in ts]
    matrix = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(names), len(names)))
    count, label = connected_components(matrix, directed=True, connection="strong")
    cycles = []
    for component in range(count):
        members = {names[i] for i in np.flatnonzero(label == component)}
        if len(members) < 2:
            continue
        start = min(members)
        came_from: dict[str, str] = {}
        queue = deque([start])
        while queue:  # breadth first inside the component, back to start
            node = queue.popleft()
            if start in edges.get(node, ()):
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                cycles.append(path[::-1] + [start])
                break
            for nxt in sorted(edges.get(node, ())):
                if nxt in members and nxt not in came_from and nxt != start:
                    came_from[nxt] = node
                    queue.append(nxt)
    return cycles


def _reach(edges: dict[str, set[str]], start: str, banned: str) -> list[str] | None:
    """An import path from ``start`` to a module under ``banned``, or None."""
    came_from = {start: start}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == banned or node.startswith(banned + "."):
            path = [node]
            while path[-1] != start:
                path.append(came_from[path[-1]])
            return path[::-1]
        for nxt in sorted(edges.get(node, ())):
            if nxt not in came_from:
                came_from[nxt] = node
                queue.append(nxt)
    return None


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


GRAPH, IMPORTED = _import_graph()


def test_the_cycle_finder_and_the_import_reader_on_hand_made_input():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e", "a"}}
    assert find_cycles(edges) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []
    source = "import os\nfrom . import sibling\nfrom ..model import x\n\ndef f():\n    from pyspark.sql import F\n"
    known = {"p", "p.q", "p.q.m", "p.q.sibling", "p.model"}
    assert _imports(source, "p.q.m", False, known) == [("os", 1), ("p.q.sibling", 2), ("p.model", 3),
                                                       ("pyspark.sql", 6)]
    assert _imports("from .m import y\n", "p.q", True, known) == [("p.q.m", 1)]


def test_the_graph_sees_function_level_imports():
    # cli/pipeline.py imports the pipeline only inside its commands (the CLI starts without a JVM)
    assert "streamsched.pipeline.ingest" in GRAPH["streamsched.cli.pipeline"]
    assert len(GRAPH) > 50


def test_no_import_cycles():
    cycles = find_cycles(GRAPH)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_pyspark_only_in_the_pipeline():
    offenders = [f"{module} line {line}: {name}" for module, names in IMPORTED.items()
                 if not _under(module, "streamsched.pipeline")
                 for name, line in names if name.split(".")[0] == "pyspark"]
    assert not offenders, "pyspark imported outside streamsched.pipeline: " + "; ".join(offenders)


@pytest.mark.parametrize("layer, banned", [
    ("streamsched.pipeline", "streamsched.schedulers"),
    ("streamsched.model", "streamsched.schedulers"),
    ("streamsched.metrics", "streamsched.schedulers"),
    ("streamsched.schedulers", "streamsched.cli"),
    ("streamsched.engines", "streamsched.schedulers"),
    ("streamsched.engines", "streamsched.pipeline"),
])
def test_layer_reaches_nothing_above_it(layer, banned):
    paths = [_reach(GRAPH, m, banned) for m in sorted(GRAPH) if _under(m, layer)]
    found = [" -> ".join(p) for p in paths if p]
    assert not found, f"{layer} reaches {banned}: " + "; ".join(found)


#: The layers, bottom first: a module may import from its own layer and the ones below it.
LAYERS = (
    ("streamsched", "streamsched.errors", "streamsched.model", "streamsched.native_output"),
    ("streamsched.metrics", "streamsched.workloads"),
    ("streamsched.performance",),
    ("streamsched.engines", "streamsched.partitioning", "streamsched.solvers", "streamsched.edge"),
    ("streamsched.schedulers", "streamsched.pipeline"),
    ("streamsched.resolve",),
    ("streamsched.evaluation",),
    ("streamsched.job",),
    ("streamsched.cli",),
)


def _layer(module: str) -> int:
    """The layer of ``module``: the longest package prefix listed in :data:`LAYERS`."""
    best, depth = None, -1
    for rank, packages in enumerate(LAYERS):
        for package in packages:
            if _under(module, package) and package.count(".") > depth:
                best, depth = rank, package.count(".")
    assert best is not None, f"{module} is in no layer: add its package to LAYERS"
    return best


def test_every_import_points_down_the_layers():
    upward = [f"{module} (layer {_layer(module)}) -> {target} (layer {_layer(target)})"
              for module, targets in sorted(GRAPH.items()) for target in sorted(targets)
              if _layer(target) > _layer(module)]
    assert not upward, "imports pointing up: " + "; ".join(upward)


def test_the_layer_table_on_hand_made_names():
    assert _layer("streamsched.model.io") == 0 and _layer("streamsched.performance") == 2
    assert _layer("streamsched.evaluation.comparison") == 6 > _layer("streamsched.schedulers.base")
    assert _layer("streamsched.job") == 7 < _layer("streamsched.cli.core")
