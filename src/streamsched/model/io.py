"""Reading structured files into plain Python objects with one-line, located errors.

:func:`read_document` parses a YAML or JSON file within bounds; :func:`validate` checks a
document (read, or about to be written) against its JSON Schema (Draft 2020-12, the package's
``schemas/*.schema.json``) and turns the first error into one line naming the field path. Rules
a schema cannot state (names that must exist elsewhere, acyclic streams) stay with the readers.
"""

from __future__ import annotations

import functools
import json
import math
import stat
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from streamsched.errors import InputError, OutputSchemaError

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


#: Words of the one-line messages, per JSON Schema type.
_TYPE_WORDS = {"string": "a string", "number": "a number", "integer": "an integer", "boolean": "true or false",
               "array": "a list", "object": "a mapping", "null": "null"}
#: Sufficient tests of an item's type, checked over a whole array before jsonschema walks it
#: item by item (some 20 us an item; a placement has one integer per task, up to millions).
_QUICK_TYPES = {"integer": lambda v: type(v) is int, "string": lambda v: type(v) is str,
                "object": lambda v: type(v) is dict,
                "number": lambda v: type(v) is int or type(v) is float and math.isfinite(v)}


@functools.cache
def _validator_class() -> Any:
    """Draft 2020-12 with two changes that accept exactly the same documents: a number is
    finite (YAML's ``.inf``/``.nan`` and Python's ``Infinity`` are no JSON numbers), and
    ``items`` takes a quick pass of :data:`_QUICK_TYPES` first (an array whose items all pass
    is valid; any other goes through the standard keyword, for the exact error). Imported on
    first use: jsonschema takes a noticeable part of a second to import."""
    from jsonschema import Draft202012Validator, validators

    standard_items = Draft202012Validator.VALIDATORS["items"]

    def finite_number(checker, instance) -> bool:
        return Draft202012Validator.TYPE_CHECKER.is_type(instance, "number") and (
            not isinstance(instance, float) or math.isfinite(instance))

    def items(validator, subschema, instance, schema):
        quick = _QUICK_TYPES.get(subschema.get("type")) if isinstance(subschema, dict) and subschema.keys() == {"type"} else None
        if quick is not None and isinstance(instance, list) and all(map(quick, instance[len(schema.get("prefixItems", ())):])):
            return
        yield from standard_items(validator, subschema, instance, schema)

    return validators.extend(Draft202012Validator, validators={"items": items},
                             type_checker=Draft202012Validator.TYPE_CHECKER.redefine("number", finite_number))


@functools.cache
def schema_validator(name: str, package: str = "streamsched.model") -> Any:
    """The validator of ``<package>/schemas/<name>.schema.json`` (package data); the schema is
    checked against the Draft 2020-12 meta-schema as it loads."""
    schema = json.loads(resources.files(package).joinpath(f"schemas/{name}.schema.json").read_text())
    cls = _validator_class()
    cls.check_schema(schema)
    return cls(schema)


def validate(document: Any, name: str, where: str, package: str = "streamsched.model",
             written: bool = False) -> None:
    """Check ``document`` against the schema ``name`` of ``package``; the first error is one line
    naming ``where`` and the field path (:func:`schema_message`). Raises :class:`InputError`, or
    for a document streamsched is about to write (``written``) :class:`OutputSchemaError`."""
    error = next(schema_validator(name, package).iter_errors(document), None)
    if error is None:
        return
    if written:
        raise OutputSchemaError(f"{schema_message(error, where)} (the {name} schema refuses what streamsched "
                                "was about to write: a bug in streamsched, nothing was written)")
    raise InputError(schema_message(error, where))


def present(mapping: dict) -> dict:
    """``mapping`` without its null values: in every schema an optional field given as null
    (YAML's empty ``key:``) is the same as an absent one."""
    return {k: v for k, v in mapping.items() if v is not None}


def schema_message(error: Any, where: str) -> str:
    """One line for a ``jsonschema.ValidationError``: ``<where><path>: <problem>``, the path as
    ``.field`` and ``[index]`` (``c.yaml.nodes[0].capacity: must be >= 0, got -1``)."""
    path = where + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    value, rule, kind = error.instance, error.validator_value, error.validator
    if kind == "type":
        types = [rule] if isinstance(rule, str) else [t for t in rule if t != "null"] or ["null"]
        if value is None and error.absolute_path and isinstance(error.absolute_path[-1], str):
            return f"{path}: missing"  # a required field given as null
        if isinstance(value, float) and not math.isfinite(value) and {"number", "integer"} & set(types):
            return f"{path}: must be a finite number, got {value!r}"
        shown = type(value).__name__ if types[0] in ("array", "object") else repr(value)
        return f"{path}: expected {' or '.join(_TYPE_WORDS.get(t, t) for t in types)}, got {shown}"
    if kind == "required":
        missing = next(key for key in rule if key not in value)
        return f"{path}.{missing}: missing"
    if kind == "additionalProperties":
        known = error.schema.get("properties", {})
        return f"{path}.{min((k for k in value if k not in known), key=str)}: unknown field"
    if kind == "enum":
        return f"{path}: {value!r} is not one of {', '.join(str(v) for v in rule if v is not None)}"
    if kind == "const":
        return f"{path}: expected {rule!r}, got {value!r}"
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        sign = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}[kind]
        return f"{path}: must be {sign} {rule:g}, got {value!r}"
    if kind == "minItems":
        return f"{path}: needs at least {rule} entries, got {len(value)}"
    if kind == "minLength":
        return f"{path}: must not be empty" if rule == 1 else f"{path}: {value!r} is shorter than {rule} characters"
    if kind == "pattern":
        return f"{path}: {value!r} does not match {rule}"
    return f"{path}: {' '.join(error.message.split())}"
