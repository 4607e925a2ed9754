"""Reading structured files into plain Python objects with one-line, located errors."""

from __future__ import annotations

import json
import math
import stat
from pathlib import Path
from typing import Any

import yaml

from streamsched.errors import InputError

#: Largest document read (topologies, clusters, placements, graph JSON): 256 MiB.
MAX_DOCUMENT_BYTES = 256 * 2**20


class _NoAliasLoader(yaml.SafeLoader):
    """PyYAML's safe loader without aliases: ``*name`` may repeat a node without bound (a
    1.6 kB "billion laughs" file expands to gigabytes), and no streamsched file needs one."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, f"alias *{event.anchor} refused (aliases are not "
                                              "supported: write the value out)", event.start_mark)
        return super().compose_node(parent, index)


def read_document(path: str | Path) -> Any:
    """Parse a YAML or JSON file; a syntax error names the file and line.

    Only regular files up to :data:`MAX_DOCUMENT_BYTES` are read (a named pipe would block,
    a device never end); YAML aliases and nesting past Python's recursion limit are refused."""
    path = Path(path)
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{path}: not a regular file")
        if info.st_size > MAX_DOCUMENT_BYTES:
            raise InputError(f"{path}: {info.st_size:,} bytes, more than the {MAX_DOCUMENT_BYTES:,} a document may have")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read ({exc})") from None
    try:
        if path.suffix.lower() == ".json":
            try:
                return json.loads(text)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from None
        return _yaml(path, text)
    except RecursionError:
        raise InputError(f"{path}: nested too deeply") from None


#: Most YAML nodes (scalars, mappings, sequences) a document may have: counted by libyaml's
#: event stream before anything is built (a topology of 50,000 operators has some 150,000).
MAX_YAML_NODES = 5_000_000
_YAML_NODE_EVENTS = (yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent)


def _yaml(path: Path, text: str) -> Any:
    """libyaml (C) when PyYAML has it: its event stream is read first, bounding the work (at
    most :data:`MAX_YAML_NODES` nodes) and refusing aliases, then the document is built with
    the C loader (the pure-Python one took 50 s for 100,000 operators, issue 27)."""
    try:
        if not yaml.__with_libyaml__:
            return yaml.load(text, Loader=_NoAliasLoader)
        nodes = 0
        for event in yaml.parse(text, Loader=yaml.CSafeLoader):
            if isinstance(event, yaml.AliasEvent):
                raise InputError(f"{path}:{event.start_mark.line + 1}: invalid YAML (alias *{event.anchor} refused "
                                 f"(aliases are not supported: write the value out))")
            if isinstance(event, _YAML_NODE_EVENTS):
                nodes += 1
                if nodes > MAX_YAML_NODES:
                    raise InputError(f"{path}:{event.start_mark.line + 1}: more than {MAX_YAML_NODES:,} YAML nodes; "
                                     f"refused before reading further")
        return yaml.load(text, Loader=yaml.CSafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{path}{where}: invalid YAML ({problem})") from None


class Fields:
    """Typed access to one mapping of a document, naming ``where.field`` in every error."""

    def __init__(self, data: Any, where: str):
        if not isinstance(data, dict):
            raise InputError(f"{where}: expected a mapping, got {type(data).__name__}")
        self.data = data
        self.where = where
        self._used: set[str] = set()

    def _get(self, key: str, default: Any, required: bool) -> Any:
        self._used.add(key)
        if key not in self.data or self.data[key] is None:
            if required:
                raise InputError(f"{self.where}.{key}: missing")
            return default
        return self.data[key]

    def str(self, key: str, default: str | None = None, *, required: bool = False,
            choices: tuple[str, ...] | None = None) -> str:
        value = self._get(key, default, required)
        if value is None:
            return value
        if not isinstance(value, str):
            raise InputError(f"{self.where}.{key}: expected a string, got {value!r}")
        if choices is not None and value not in choices:
            raise InputError(f"{self.where}.{key}: {value!r} is not one of {', '.join(choices)}")
        return value

    def number(self, key: str, default: float | None = None, *, required: bool = False,
               minimum: float | None = None, positive: bool = False) -> float:
        value = self._get(key, default, required)
        if value is None:
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(f"{self.where}.{key}: expected a number, got {value!r}")
        if not math.isfinite(value):
            raise InputError(f"{self.where}.{key}: must be a finite number, got {value!r}")
        if positive and not value > 0:
            raise InputError(f"{self.where}.{key}: must be positive, got {value!r}")
        if minimum is not None and value < minimum:
            raise InputError(f"{self.where}.{key}: must be >= {minimum:g}, got {value!r}")
        return float(value)

    def integer(self, key: str, default: int | None = None, *, required: bool = False,
                minimum: int | None = None) -> int:
        value = self._get(key, default, required)
        if value is None:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"{self.where}.{key}: expected an integer, got {value!r}")
        if minimum is not None and value < minimum:
            raise InputError(f"{self.where}.{key}: must be >= {minimum}, got {value!r}")
        return value

    def list(self, key: str, *, required: bool = False) -> list:
        value = self._get(key, [], required)
        if not isinstance(value, list):
            raise InputError(f"{self.where}.{key}: expected a list, got {type(value).__name__}")
        return value

    def reject_unknown(self) -> None:
        unknown = sorted(set(self.data) - self._used)
        if unknown:
            raise InputError(f"{self.where}.{unknown[0]}: unknown field")
