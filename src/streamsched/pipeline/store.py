"""The provenance store: every pipeline result is an immutable snapshot, history kept.

Layout under a store directory::

    snapshots/<topology>/<seq>-<window end, UTC>/<topology>.parquet        edges (core format)
                                                 <topology>.tasks.parquet  tasks (core format)
                                                 manifest.json            window, sources, counts
    quarantine/<run id>/part-*.parquet                                    rejected rows + reason
    runs/<run id>.json                                                    run reports
    tmp/<run id>/_owner.json                                              a running ingest's work
    ingested/<input key>.json                                             report per ingested input

A snapshot is written into ``snapshots/<topology>/.tmp-<random>/`` and renamed into place
when complete (rename of a directory is atomic on POSIX), so a crash leaves at most a hidden
temporary directory, which readers skip and the next write removes. Plain Python (pyarrow via
the core model): no Spark needed to read a store.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from streamsched.errors import InputError
from streamsched.model.graph_files import read_graph, write_graph
from streamsched.model.paths import safe_name
from streamsched.model.taskgraph import TaskGraph
from streamsched.model.units import TASKS, check_unit

FORMAT = "streamsched.snapshot/1"
MANIFEST = "manifest.json"
_SNAPSHOT_NAME = re.compile(r"^(\d{6})-\d{8}T\d{6}Z$")
_STALE_TMP_S = 3600.0


def snapshot_root(store: str | Path, topology: str) -> Path:
    return Path(store) / "snapshots" / safe_name(topology)


def write_snapshot(store: str | Path, graph: TaskGraph, manifest: dict[str, Any]) -> Path:
    """Write ``graph`` and its manifest atomically as the next snapshot of its topology."""
    root = snapshot_root(store, graph.name)
    root.mkdir(parents=True, exist_ok=True)
    _remove_stale_tmp(root)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
    try:
        stem = safe_name(graph.name)
        write_graph(graph, tmp / f"{stem}.parquet")
        window_end = float(manifest.get("window", {}).get("end", time.time()))
        full = {
            "format": FORMAT,
            **manifest,
            "topology": graph.name,
            "graph": f"{stem}.parquet",
            "tasks_file": f"{stem}.tasks.parquet",
            "n_tasks": graph.n_tasks,
            "n_edges": graph.n_edges,
            "total_rate": graph.total_rate,
            "total_load": graph.total_load,
            "load_unit": graph.load_unit,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        _write_json(tmp / MANIFEST, full)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(window_end))
        while True:
            target = root / f"{_next_sequence(root):06d}-{stamp}"
            try:
                os.rename(tmp, target)  # fails if another writer took the name: try the next
                return target
            except OSError:
                if not target.exists():
                    raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def list_snapshots(store: str | Path, topology: str | None = None) -> list[Path]:
    """Complete snapshots, oldest first (per topology; all topologies when ``topology`` is None)."""
    base = Path(store) / "snapshots"
    roots = [snapshot_root(store, topology)] if topology else sorted(p for p in base.glob("*") if p.is_dir())
    out: list[Path] = []
    for root in roots:
        if root.is_dir():
            out += sorted(p for p in root.iterdir() if _SNAPSHOT_NAME.match(p.name) and (p / MANIFEST).is_file())
    return out


def latest_snapshot(store: str | Path, topology: str) -> Path:
    snapshots = list_snapshots(store, topology)
    if not snapshots:
        raise InputError(f"{store}: no snapshot of topology {topology!r}")
    return snapshots[-1]


def read_manifest(snapshot: str | Path) -> dict[str, Any]:
    path = Path(snapshot) / MANIFEST
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"{snapshot}: not a snapshot (no {MANIFEST})") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from None
    if data.get("format") != FORMAT:
        raise InputError(f"{path}.format: expected {FORMAT!r}")
    return data


def load_snapshot(snapshot: str | Path) -> TaskGraph:
    """The snapshot's task graph, read by the core reader (edges + sibling tasks file); its load
    unit is the manifest's ``load_unit`` (``tasks`` for snapshots written before units)."""
    manifest = read_manifest(snapshot)
    graph = read_graph(Path(snapshot) / manifest["graph"])
    unit = check_unit(manifest.get("load_unit", TASKS), f"{Path(snapshot) / MANIFEST}.load_unit")
    if unit != graph.load_unit:
        raise InputError(f"{Path(snapshot) / MANIFEST}.load_unit: {unit!r} but the tasks table says {graph.load_unit!r}")
    return _renamed(graph, manifest["topology"])


def _renamed(graph: TaskGraph, name: str) -> TaskGraph:
    from dataclasses import replace

    return replace(graph, name=name)


def _next_sequence(root: Path) -> int:
    numbers = [int(m.group(1)) for p in root.iterdir() if (m := _SNAPSHOT_NAME.match(p.name))]
    return max(numbers, default=0) + 1


def _remove_stale_tmp(root: Path) -> None:
    """Temporary directories of writers that crashed (older than an hour)."""
    now = time.time()
    for p in root.glob(".tmp-*"):
        try:
            if now - p.stat().st_mtime > _STALE_TMP_S:
                shutil.rmtree(p, ignore_errors=True)
        except FileNotFoundError:
            pass


def _write_json(path: Path, data: Any) -> None:
    with open(path, "w") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())


def _replace_json(path: Path, data: Any) -> Path:
    """``data`` as JSON at ``path``, atomically (a temporary file, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    _write_json(tmp, data)
    os.replace(tmp, path)
    return path


def write_run_report(store: str | Path, run_id: str, report: dict[str, Any]) -> Path:
    return _replace_json(Path(store) / "runs" / f"{run_id}.json", report)


# --------------------------------------------------------------------------- run hygiene
OWNER = "_owner.json"  # Spark's readers skip names starting with "_"


#: Locks of the work directories this process claimed (released when it exits, or killed).
_CLAIMED: dict[Path, FileLock] = {}


def _lock_of(work: Path) -> Path:
    return work.parent / f".{work.name}.lock"


def claim_tmp(store: str | Path, run_id: str) -> Path:
    """``STORE/tmp/<run_id>``, created and locked (``filelock``: an OS lock the system drops
    when the process ends, however it ends) with the owner recorded (pid, host, start), after
    removing the stale ones of earlier runs (:func:`remove_stale_runs`)."""
    remove_stale_runs(store)
    work = Path(store) / "tmp" / run_id
    work.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(_lock_of(work))
    lock.acquire(timeout=0)
    work.mkdir(exist_ok=False)
    _CLAIMED[work] = lock
    _write_json(work / OWNER, {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()})
    return work


def release_tmp(work: Path) -> None:
    """Remove a work directory :func:`claim_tmp` gave, and its lock."""
    shutil.rmtree(work, ignore_errors=True)
    lock = _CLAIMED.pop(work, None)
    if lock is not None:
        _lock_of(work).unlink(missing_ok=True)
        lock.release()


def remove_stale_runs(store: str | Path, max_age_s: float = _STALE_TMP_S) -> list[Path]:
    """Remove ``STORE/tmp/<run id>`` directories of killed runs: those whose lock no process
    holds, and unlocked ones (an earlier version's) older than ``max_age_s``. Returns what was
    removed."""
    root = Path(store) / "tmp"
    removed: list[Path] = []
    if not root.is_dir():
        return removed
    now = time.time()
    for work in sorted(root.iterdir()):
        if not work.is_dir() or work in _CLAIMED:
            continue
        lock_path = _lock_of(work)
        if lock_path.exists():
            lock = FileLock(lock_path)
            try:
                lock.acquire(timeout=0)
            except Timeout:
                continue  # its run is alive
            try:
                shutil.rmtree(work, ignore_errors=True)
                removed.append(work)
            finally:
                lock.release()
                lock_path.unlink(missing_ok=True)
            continue
        try:
            age = now - work.stat().st_mtime
        except FileNotFoundError:
            continue
        if age > max_age_s:
            shutil.rmtree(work, ignore_errors=True)
            removed.append(work)
    return removed


def input_key(files: list[str | Path], settings: dict[str, Any]) -> str:
    """Key of an ingest's input: the files' content hashes (not their names) and the settings
    (window, format, options) that shape the snapshot."""
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
    for content in sorted(_file_hash(f) for f in files):
        digest.update(content.encode())
    return digest.hexdigest()


def _file_hash(path: str | Path) -> str:
    """SHA-256 of a file's content, read once per process while its identity, size and
    modification time stay the same (the CLI's check for an earlier ingest and the ingest
    itself both need it: gigabytes of input were read twice)."""
    stat = os.stat(path)
    return _content_hash(str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=4096)
def _content_hash(path: str, inode: int, size: int, mtime_ns: int) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def find_ingested(store: str | Path, key: str) -> dict[str, Any] | None:
    """The run report of an earlier ingest of the same input, when its snapshots still exist."""
    path = Path(store) / "ingested" / f"{key}.json"
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not report.get("snapshots") or not all((Path(s) / MANIFEST).is_file() for s in report["snapshots"]):
        return None
    return report


def record_ingested(store: str | Path, key: str, report: dict[str, Any]) -> Path:
    return _replace_json(Path(store) / "ingested" / f"{key}.json", report)
