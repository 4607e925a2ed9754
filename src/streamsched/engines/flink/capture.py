"""Saved captures: the REST answers of each snapshot under their REST paths (package docstring)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from streamsched.engines.flink.documents import (
    CAPTURE_FILE,
    FORMAT,
    Capture,
    Snapshot,
    _get,
)
from streamsched.errors import InputError
from streamsched.model.io import read_document
from streamsched.model.paths import inside


def save_capture(capture: Capture, directory: str | Path) -> Path:
    """Write ``capture.json`` and one directory per snapshot (layout in the module docstring)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    entries = []
    for k, snap in enumerate(capture.snapshots):
        root = directory / str(k)
        for key, doc in sorted(snap.documents.items()):
            path = inside(root, f"{key}.json", f"{capture.url or capture.job_id}: answer {key!r}")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        entry = {"dir": str(k), "time": snap.time}
        if snap.taskmanagers:
            entry["taskmanagers"] = {tm: list(times) for tm, times in sorted(snap.taskmanagers.items())}
        entries.append(entry)
    manifest = {"format": FORMAT, "url": capture.url, "job_id": capture.job_id, "snapshots": entries}
    (directory / CAPTURE_FILE).write_text(json.dumps(manifest, indent=1) + "\n")
    return directory


def _read_tree(root: Path) -> dict[str, Any]:
    documents = {}
    for path in sorted(root.rglob("*.json")):
        key = path.relative_to(root).as_posix()[: -len(".json")]
        if key == "capture":
            continue
        documents[key] = read_document(path)
    return documents


def _taskmanager_times(entry: Any, where: str) -> dict[str, tuple[float, float]]:
    """``{"<TaskManager id>": [poll before, poll that saw its fresh answer], ...}`` (optional)."""
    times = _get(entry, "taskmanagers", where, dict, required=False) or {}
    out = {}
    for tm, pair in times.items():
        w = f"{where}.taskmanagers[{tm!r}]"
        if (not isinstance(pair, list) or len(pair) != 2
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in pair) or pair[0] > pair[1]):
            raise InputError(f"{w}: expected [poll before, poll that saw the answer] (unix seconds, in order), got {pair!r}")
        out[tm] = (float(pair[0]), float(pair[1]))
    return out


def load_capture(directory: str | Path) -> Capture:
    """Read what :func:`save_capture` wrote, or a bare directory of REST responses."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(f"{directory}: not a directory")
    manifest_path = directory / CAPTURE_FILE
    if manifest_path.is_file():
        manifest = read_document(manifest_path)
        w = str(manifest_path)
        if _get(manifest, "format", w, str) != FORMAT:
            raise InputError(f"{w}.format: expected {FORMAT!r}")
        job_id = _get(manifest, "job_id", w, str)
        snapshots = []
        for k, entry in enumerate(_get(manifest, "snapshots", w, list)):
            ew = f"{w}.snapshots[{k}]"
            sub = _get(entry, "dir", ew, str)
            when = _get(entry, "time", ew, (int, float))
            root = directory / sub
            if not root.is_dir():
                raise InputError(f"{ew}.dir: {root} is not a directory")
            snapshots.append(Snapshot(float(when), _read_tree(root), str(root), _taskmanager_times(entry, ew)))
        if not snapshots:
            raise InputError(f"{w}.snapshots: empty")
        url = manifest.get("url") if isinstance(manifest.get("url"), str) else None
        return Capture(job_id, tuple(snapshots), url, str(directory))
    documents = _read_tree(directory)
    jobs = sorted(key.split("/")[1] for key in documents if re.fullmatch(r"jobs/[^/]+", key))
    if len(jobs) != 1:
        raise InputError(f"{directory}: expected {CAPTURE_FILE} or exactly one jobs/<job id>.json, found "
                         f"{len(jobs)}{': ' + ', '.join(jobs) if jobs else ''}")
    job = documents[f"jobs/{jobs[0]}"]
    now = job.get("now") if isinstance(job, dict) else None
    when = float(now) / 1000.0 if isinstance(now, (int, float)) and not isinstance(now, bool) else 0.0
    return Capture(jobs[0], (Snapshot(when, documents, str(directory)),), None, str(directory))
