"""Every algorithm module cites its papers in a numpydoc "References" block (authors, year,
title, venue), and no docstring cites a paper by this repository's local file name."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import streamsched

ROOT = Path(streamsched.__file__).parent
SCHEDULERS = sorted(p for p in (ROOT / "schedulers").glob("*.py")
                    if p.stem not in ("__init__", "registry", "limits") and not p.stem.startswith("_"))
OTHER_ALGORITHMS = [ROOT / "edge" / f"{name}.py" for name in
                    ("adapter", "deployment", "ga", "model", "rebalance", "simulation", "topset", "workloads")]
OTHER_ALGORITHMS += [ROOT / "partitioning" / f"{name}.py" for name in ("backends", "balance", "workers")]
SOLVERS = [ROOT / "solvers" / f"{name}.py" for name in
           ("__init__", "problem", "formulations", "bounds", "relaxation", "local_search", "neighbourhoods")]
#: ``.. [1] Karypis, G.; Kumar, V. (1998) "A fast ...", SIAM ...``: authors, (year), "title", venue.
ENTRY = re.compile(r'^\.\. \[\d+\] (?P<authors>[^()]+?) \((?P<year>(19|20)\d\d)\) "(?P<title>[^"]+)", (?P<venue>\S.*)$')
#: The short file names of the papers (README.md, Papers) and of the prior-art notes.
LOCAL_FILE = re.compile(r"[\w-]+\.txt\b|prior-art\.md")


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text())) or ""


def _entries(doc: str) -> list[str]:
    """The References block's entries, each joined into one line."""
    _, found, block = doc.partition("\nReferences\n----------\n")
    assert found, "no References block"
    entries: list[str] = []
    for line in block.splitlines():
        if line.startswith(".. ["):
            entries.append(line.strip())
        elif line.startswith("   ") and entries:
            entries[-1] += " " + line.strip()
        elif line.strip():
            break
    return entries


@pytest.mark.parametrize("path", SCHEDULERS + OTHER_ALGORITHMS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_algorithm_module_has_a_references_block(path):
    entries = _entries(_docstring(path))
    assert entries, f"{path.name}: empty References block"
    for entry in entries:
        match = ENTRY.match(entry)
        if path.parent.name == "partitioning" and match is None:  # older style: title unquoted
            match = re.match(r"^\.\. \[\d+\] .+ \((19|20)\d\d\) .+", entry)
        assert match, f"{path.name}: {entry!r} is not 'authors (year) \"title\", venue'"
    cited = set(re.findall(r"\[(\d+)\]_", _docstring(path)))
    listed = {re.match(r"\.\. \[(\d+)\]", e).group(1) for e in entries}
    assert cited <= listed, f"{path.name}: cites {sorted(cited - listed)} without an entry"


@pytest.mark.parametrize("path", SOLVERS, ids=lambda p: p.name)
def test_solver_module_has_references(path):
    doc = _docstring(path)
    assert "\nReferences\n----------\n" in doc and re.search(r"\b(19|20)\d\d\b", doc.split("References")[1]), path.name


def test_no_docstring_cites_a_local_file():
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.parent.name not in ("schedulers", "edge", "partitioning", "solvers"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node) or ""
                offenders += [f"{path.relative_to(ROOT)}: {m}" for m in LOCAL_FILE.findall(doc)]
    assert not offenders, offenders
