"""``streamsched collect log``: follow a growing metrics log into immutable chunk files.

Plain Python (no Spark). tail -F semantics: the log is followed by path across rotation (the
path now names another inode: the rest of the old file is read first, found by its inode among
the log's siblings, e.g. ``app.log.1``) and truncation (the size fell below the offset: read
again from the start). Only complete lines (ending in a newline) go into chunks; a half-written
line waits for its end.

Each poll that finds complete lines writes one chunk ``<stem>-<seq>.csv`` (the log's name without suffixes, ``<kind>-`` in front when it does not start with the kind) (the native
header, then the lines) into the output directory, where ``watch`` picks it up: first its sidecar
``.<chunk>.json`` (source path, inode, byte range, line range), then the chunk under a hidden
temporary name renamed into place, then the state ``.collect-<stem>.json`` (inode, offset, line,
next sequence number). A restart reads the state; a chunk already present under the next
sequence number (a kill between the rename and the state) moves the state past it, so no line is
lost or written twice.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from streamsched.errors import InputError
from streamsched.model.paths import safe_name
from streamsched.pipeline.native_reader import fields_of

READ_BYTES = 64 << 20


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


class LogCollector:
    """Follows ``source`` (native ``kind`` rows, CSV) into chunks in ``out``."""

    def __init__(self, source: str | Path, out: str | Path, kind: str | None = None):
        self.source, self.out = Path(source).absolute(), Path(out)
        name = self.source.name
        kind = kind or ("traffic" if name.startswith("traffic") else "load" if name.startswith("load") else None)
        if kind not in ("traffic", "load"):
            raise InputError(f"{source}: say --kind traffic or --kind load (the name starts with neither)")
        self.kind = kind
        self.header = ",".join(fields_of(kind))
        stem = safe_name(self.source.name.split(".")[0])
        self.stem = stem if stem.startswith(kind) else f"{kind}-{stem}"
        self.out.mkdir(parents=True, exist_ok=True)
        self.state_file = self.out / f".collect-{self.stem}.json"
        self.state = self._load()
        self._recover()

    # ------------------------------------------------------------------ state
    def _load(self) -> dict[str, Any]:
        try:
            return json.loads(self.state_file.read_text())
        except FileNotFoundError:
            return {"source": str(self.source), "inode": None, "offset": 0, "line": 1, "seq": 1}

    def _save(self) -> None:
        _write_atomic(self.state_file, json.dumps(self.state, sort_keys=True).encode())

    def chunk_name(self, seq: int) -> str:
        return f"{self.stem}-{seq:08d}.csv"

    def _recover(self) -> None:
        """Chunks written after the last state save (a kill in between): skip past them."""
        while (self.out / self.chunk_name(self.state["seq"])).exists():
            side = json.loads((self.out / f".{self.chunk_name(self.state['seq'])}.json").read_text())
            self.state.update(inode=side["inode"], offset=side["bytes"][1], line=side["lines"][1] + 1,
                              seq=self.state["seq"] + 1)
            self._save()

    # ------------------------------------------------------------------ polling
    def _sibling_with_inode(self, inode: int) -> Path | None:
        for candidate in sorted(self.source.parent.iterdir()):
            try:
                if candidate.is_file() and candidate.stat().st_ino == inode:
                    return candidate
            except FileNotFoundError:
                continue
        return None

    def _take(self, path: Path, inode: int) -> int:
        """Complete lines of ``path`` from the state's offset -> one chunk; lines taken."""
        with open(path, "rb") as handle:
            if os.fstat(handle.fileno()).st_ino != inode:
                return 0
            size = os.fstat(handle.fileno()).st_size
            if size < self.state["offset"]:  # truncated in place: start again
                self.state.update(offset=0, line=1)
            handle.seek(self.state["offset"])
            data = handle.read(READ_BYTES)
        end = data.rfind(b"\n")
        if end < 0:
            return 0
        data = data[:end + 1]
        lines = data.split(b"\n")[:-1]
        first = self.state["line"]
        rows = [line for line in lines if line.strip() and line.strip().decode("utf-8", "replace") != self.header]
        start = self.state["offset"]
        name = self.chunk_name(self.state["seq"])
        side = {"source": str(path), "inode": inode, "bytes": [start, start + len(data)],
                "lines": [first, first + len(lines) - 1], "rows": len(rows), "written": time.time()}
        _write_atomic(self.out / f".{name}.json", json.dumps(side, sort_keys=True).encode())
        _write_atomic(self.out / name, (self.header + "\n").encode() + b"".join(r + b"\n" for r in rows))
        self.state.update(inode=inode, offset=start + len(data), line=first + len(lines), seq=self.state["seq"] + 1)
        self._save()
        return len(lines)

    def poll(self) -> int:
        """Read what is new; returns the number of source lines put into chunks."""
        taken = 0
        try:
            current = self.source.stat().st_ino
        except FileNotFoundError:
            current = None  # between a rename and the new file: the old one may still be found
        old = self.state["inode"]
        if old is not None and old != current:
            rotated = self._sibling_with_inode(old)
            if rotated is not None:
                while (n := self._take(rotated, old)):
                    taken += n
            if current is not None:
                self.state.update(inode=current, offset=0, line=1)
                self._save()
        if current is not None:
            if self.state["inode"] is None:
                self.state["inode"] = current
            while (n := self._take(self.source, current)):
                taken += n
        return taken

    def follow(self, poll_s: float = 1.0, timeout_s: float | None = None) -> None:
        started = time.monotonic()
        while timeout_s is None or time.monotonic() - started < timeout_s:
            self.poll()
            time.sleep(poll_s)
