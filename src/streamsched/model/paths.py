"""What reaches the file system: one rule for names, whatever their source (a topology name
in arriving rows, a job or vertex id in an engine's answer, a log's file name), and output
directories that appear only complete.

- :func:`safe_name` *cleans* a name into one file-name component: characters outside
  ``[A-Za-z0-9_-]`` become ``_`` (no dot: the core reader splits file names at the first dot; no
  separator, so no ``..``), at most :data:`MAX_NAME` characters. A name that had to change gets
  ``-`` and 8 hex digits of its SHA-256, so two names that clean to the same text stay apart.
- :func:`inside` *refuses*: a relative path made of server-given parts is joined under a root
  only when every part is a plain name (no ``..``, ``.``, empty part, absolute path, NUL or
  control character), else one ``InputError`` naming the part and where it came from.
- :func:`staged_directory`: a command writes its output directory into a hidden temporary
  directory beside it, moved into place only when the command succeeds.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from streamsched.errors import InputError

MAX_NAME = 100
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_PLAIN_PART = re.compile(r"[^\x00-\x1f\x7f/\\]+")


def safe_name(name: str, default: str = "unnamed") -> str:
    """``name`` as one file-name component (module docstring); unchanged when already clean."""
    name = str(name)
    cleaned = _UNSAFE.sub("_", name)
    if cleaned == name and 0 < len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{cleaned[:MAX_NAME - 9] or default}-{digest}"


def inside(root: str | Path, relative: str, where: str) -> Path:
    """``root / relative`` when every ``/``-separated part of ``relative`` is a plain name of
    at most 255 bytes; else an ``InputError`` naming ``where`` (the answer the parts came from)."""
    parts = relative.split("/")
    for part in parts:
        if (part in ("", ".", "..") or not _PLAIN_PART.fullmatch(part)
                or len(part.encode("utf-8", "surrogatepass")) > 255):
            raise InputError(f"{where}: {part!r} in {relative!r} is not usable as a file name "
                             f"(an id with a path separator, '..' or a control character); refused")
    return Path(root).joinpath(*parts)


@contextmanager
def staged_directory(out: str | Path, option: str = "--out") -> Iterator[Path]:
    """A hidden temporary directory beside ``out`` to write into. When the block ends without
    an exception: a new ``out`` is the directory renamed (atomic); an existing one gets each of
    its entries (an entry of the same name replaced). Else the temporary directory is removed
    and ``out`` is as it was."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"{option} {out}: exists and is not a directory")
    parent = out.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=parent))
    except OSError as exc:
        raise InputError(f"{option} {out}: cannot write there ({exc.strerror or exc})") from None
    try:
        yield stage
        if not out.exists():
            os.replace(stage, out)
            return
        for entry in sorted(stage.iterdir()):
            target = out / entry.name
            if target.is_dir() and not target.is_symlink():
                old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=parent))
                os.replace(target, old / entry.name)
                os.replace(entry, target)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(entry, target)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
