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

**Checks.** The state names its source: another log of the same name (another directory) is
refused, not mixed in. A state file that is not valid is rebuilt from the chunks' sidecars
(one warning line), or refused when they are not valid either. Besides the size (below the
offset: truncated), the state keeps a SHA-256 of the bytes before the offset (the first and
the last :data:`DIGEST_BYTES`): a log truncated and rewritten longer than the offset no longer
matches and is read again from its start (a warning), instead of going on from the middle of a
line. A line longer than ``max_line`` bytes is quarantined (``quarantine/<stem>.jsonl``: byte
and line range, its first 200 bytes), not looped on; the lines after it are collected. Anything
but a regular file (a named pipe would block ``open``) is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from pathlib import Path
from typing import Any, Callable

from streamsched.errors import InputError
from streamsched.model.paths import safe_name
from streamsched.pipeline.native_reader import fields_of

#: Most bytes read at once.
READ_BYTES = 64 << 20
#: Default longest line, bytes (``--max-line``).
MAX_LINE = 1 << 20
#: Bytes at each end of the part already read that the state's checksum covers.
DIGEST_BYTES = 4096
_STATE_KEYS = {"source": str, "inode": (int, type(None)), "offset": int, "line": int, "seq": int}


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _open_regular(path: Path):
    """``path`` opened for reading without blocking on a FIFO; refused unless a regular file."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(f"{path}: not a regular file (a named pipe or device); collect log follows files")
    return os.fdopen(fd, "rb")


def _digest(handle, offset: int) -> str:
    """SHA-256 of the first and last :data:`DIGEST_BYTES` of ``handle``'s bytes before ``offset``."""
    handle.seek(0)
    head = handle.read(min(offset, DIGEST_BYTES))
    handle.seek(max(0, offset - DIGEST_BYTES))
    tail = handle.read(offset - max(0, offset - DIGEST_BYTES))
    return hashlib.sha256(head + b"|" + tail).hexdigest()


class LogCollector:
    """Follows ``source`` (native ``kind`` rows, CSV) into chunks in ``out``; ``warn`` gets one
    line per event the user should know of (a rebuilt state, a rewritten log, a quarantined
    line)."""

    def __init__(self, source: str | Path, out: str | Path, kind: str | None = None, max_line: int = MAX_LINE,
                 warn: Callable[[str], None] = lambda message: None):
        self.source, self.out = Path(source).absolute(), Path(out)
        name = self.source.name
        kind = kind or ("traffic" if name.startswith("traffic") else "load" if name.startswith("load") else None)
        if kind not in ("traffic", "load"):
            raise InputError(f"{source}: say --kind traffic or --kind load (the name starts with neither)")
        if isinstance(max_line, bool) or not isinstance(max_line, int) or not 16 <= max_line <= READ_BYTES:
            raise InputError(f"--max-line: {max_line!r}; must be a whole number of bytes in [16, {READ_BYTES}]")
        if self.source.exists() and not self.source.is_file():
            raise InputError(f"{source}: not a regular file (a named pipe or device); collect log follows files")
        self.kind, self.max_line, self.warn = kind, max_line, warn
        self.header = ",".join(fields_of(kind))
        stem = safe_name(self.source.name.split(".")[0])
        self.stem = stem if stem.startswith(kind) else f"{kind}-{stem}"
        self.out.mkdir(parents=True, exist_ok=True)
        self.state_file = self.out / f".collect-{self.stem}.json"
        self.state = self._load()
        if self.state["source"] != str(self.source):
            raise InputError(f"{self.state_file}: the state of {self.state['source']}, not of {self.source} (two logs "
                             f"of the same name): collect each into its own --out")
        self._recover()
        if self.state["inode"] is None and self.source.exists():  # follow this file from the start
            self.state["inode"] = self.source.stat().st_ino
            self._save()

    # ------------------------------------------------------------------ state
    def _fresh(self) -> dict[str, Any]:
        return {"source": str(self.source), "inode": None, "offset": 0, "line": 1, "seq": 1, "digest": None,
                "skipping": False}

    def _load(self) -> dict[str, Any]:
        try:
            state = json.loads(self.state_file.read_text())
        except FileNotFoundError:
            return self._fresh()
        except (ValueError, UnicodeDecodeError) as exc:
            return self._rebuild(f"not JSON ({exc})")
        problem = self._state_problem(state)
        return self._rebuild(problem) if problem else state

    @staticmethod
    def _state_problem(state: Any) -> str | None:
        if not isinstance(state, dict):
            return "not an object"
        for key, kind in _STATE_KEYS.items():
            if not isinstance(state.get(key), kind) or isinstance(state.get(key), bool):
                return f"{key}: {state.get(key)!r}"
        if state["offset"] < 0 or state["line"] < 1 or state["seq"] < 1:
            return "negative offset, line or sequence number"
        return None

    def _rebuild(self, problem: str) -> dict[str, Any]:
        """The state after the last chunk, from its sidecar (a state file cut short by a crash)."""
        state = self._fresh()
        sides = sorted(self.out.glob(f".{self.stem}-*.csv.json"))
        sides = [p for p in sides if (self.out / p.name[1:-len(".json")]).exists()]
        if sides:
            try:
                side = json.loads(sides[-1].read_text())
                state.update(source=str(self.source), inode=int(side["inode"]), offset=int(side["bytes"][1]),
                             line=int(side["lines"][1]) + 1, seq=int(sides[-1].name.rsplit("-", 1)[1].split(".")[0]) + 1)
                if side["source"] != str(self.source) and Path(side["source"]).parent != self.source.parent:
                    raise ValueError(f"its last chunk came from {side['source']}")
            except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError) as exc:
                raise InputError(f"{self.state_file}: corrupt collector state ({problem}), and the last chunk's "
                                 f"sidecar {sides[-1].name} cannot rebuild it ({exc}); remove both to start over") from None
        self.warn(f"{self.state_file}: corrupt collector state ({problem}); rebuilt from "
                  f"{sides[-1].name if sides else 'nothing: no chunk written yet'}")
        return state

    def _save(self) -> None:
        _write_atomic(self.state_file, json.dumps(self.state, sort_keys=True).encode())

    def chunk_name(self, seq: int) -> str:
        return f"{self.stem}-{seq:08d}.csv"

    def _recover(self) -> None:
        """Chunks written after the last state save (a kill in between): skip past them."""
        while (self.out / self.chunk_name(self.state["seq"])).exists():
            side_file = self.out / f".{self.chunk_name(self.state['seq'])}.json"
            try:
                side = json.loads(side_file.read_text())
                self.state.update(inode=side["inode"], offset=side["bytes"][1], line=side["lines"][1] + 1,
                                  seq=self.state["seq"] + 1, digest=side.get("digest"), skipping=False)
            except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
                raise InputError(f"{side_file}: corrupt chunk sidecar ({exc}); remove the chunk and its "
                                 f"sidecar to collect those lines again") from None
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

    def _quarantine(self, path: Path, inode: int, start: int, end: int, line: int, head: bytes) -> None:
        folder = self.out / "quarantine"
        folder.mkdir(exist_ok=True)
        record = {"source": str(path), "inode": inode, "bytes": [start, end], "line": line,
                  "head": head[:200].decode("utf-8", "replace"), "max_line": self.max_line}
        target = folder / f"{self.stem}.jsonl"
        text = target.read_text() if target.exists() else ""
        if f'"bytes": [{start}, ' in text and f'"inode": {inode},' in text:
            for known in text.splitlines():  # the same line again after a kill: recorded once
                try:
                    old = json.loads(known)
                except ValueError:
                    continue
                if (old.get("inode"), old.get("bytes", [None])[0], old.get("head")) == (inode, start, record["head"]):
                    return  # (an inode number is reused: the line's first bytes tell two files apart)
        with open(target, "a") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")
        self.warn(f"{path}:{line}: line longer than {self.max_line} bytes (bytes {start}-{end}); quarantined in "
                  f"{folder / (self.stem + '.jsonl')}")

    def _take(self, path: Path, inode: int) -> int:
        """Complete lines of ``path`` from the state's offset -> one chunk; bytes consumed."""
        with _open_regular(path) as handle:
            if os.fstat(handle.fileno()).st_ino != inode:
                return 0
            size = os.fstat(handle.fileno()).st_size
            offset = self.state["offset"]
            if size < offset or (offset and self.state.get("digest") and _digest(handle, offset) != self.state["digest"]):
                self.warn(f"{path}: {'truncated' if size < offset else 'rewritten'} below the collected offset "
                          f"{offset}; read again from its start")
                self.state.update(offset=0, line=1, skipping=False)
                offset = 0
            handle.seek(offset)
            data = handle.read(min(READ_BYTES, max(self.max_line + 1, 1 << 16)))
            if self.state.get("skipping"):  # the rest of a quarantined line
                end = data.find(b"\n")
                consumed = len(data) if end < 0 else end + 1
                if consumed:
                    self.state.update(offset=offset + consumed, skipping=end < 0,
                                      line=self.state["line"] + (end >= 0))
                    self.state["digest"] = _digest(handle, self.state["offset"])
                    self._save()
                return consumed
            end = data.rfind(b"\n")
            if end < 0:
                if len(data) <= self.max_line:
                    return 0  # a line being written
                self._quarantine(path, inode, offset, offset + len(data), self.state["line"], data)
                self.state.update(offset=offset + len(data), skipping=True)
                self.state["digest"] = _digest(handle, self.state["offset"])
                self._save()
                return len(data)
            data = data[:end + 1]
            new_offset = offset + len(data)
            digest = _digest(handle, new_offset)
        lines = data.split(b"\n")[:-1]
        first = self.state["line"]
        rows, position = [], offset
        for k, line in enumerate(lines):
            if len(line) > self.max_line:
                self._quarantine(path, inode, position, position + len(line) + 1, first + k, line)
            elif line.strip() and line.strip().decode("utf-8", "replace") != self.header:
                rows.append(line)
            position += len(line) + 1
        name = self.chunk_name(self.state["seq"])
        side = {"source": str(path), "inode": inode, "bytes": [offset, new_offset],
                "lines": [first, first + len(lines) - 1], "rows": len(rows), "written": time.time(), "digest": digest}
        _write_atomic(self.out / f".{name}.json", json.dumps(side, sort_keys=True).encode())
        _write_atomic(self.out / name, (self.header + "\n").encode() + b"".join(r + b"\n" for r in rows))
        self.state.update(inode=inode, offset=new_offset, line=first + len(lines), seq=self.state["seq"] + 1,
                          digest=digest, skipping=False)
        self._save()
        return len(data)

    def poll(self) -> int:
        """Read what is new; returns the number of source lines put into chunks."""
        line_before = self.state["line"]
        taken = 0
        try:
            current = self.source.stat().st_ino
        except FileNotFoundError:
            current = None  # between a rename and the new file: the old one may still be found
        old = self.state["inode"]
        if old is not None and old != current:
            rotated = self._sibling_with_inode(old)
            if rotated is not None:
                while self._take(rotated, old):
                    pass
                taken += self.state["line"] - line_before
            if current is not None:
                self.state.update(inode=current, offset=0, line=1, digest=None, skipping=False)
                self._save()
        if current is not None:
            if self.state["inode"] is None:
                self.state["inode"] = current
            line_here = self.state["line"]
            while self._take(self.source, current):
                pass
            taken += max(0, self.state["line"] - line_here)
        return taken

    def follow(self, poll_s: float = 1.0, timeout_s: float | None = None) -> None:
        started = time.monotonic()
        while timeout_s is None or time.monotonic() - started < timeout_s:
            self.poll()
            time.sleep(poll_s)
