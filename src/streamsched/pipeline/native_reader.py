"""Native metric files (CSV, JSON lines, Parquet) -> Arrow columns, batch by batch.

Plain pyarrow (no Spark): :func:`.blocks.read_blocks` reads a file with :func:`read_file`
inside one Spark task; :mod:`.row_checks` then types and checks the columns. Traffic rows have
the fields :data:`TRAFFIC_FIELDS`, load samples :data:`LOAD_FIELDS`; a missing byte count is 0
and a missing operator is ``task`` (:data:`OPTIONAL`), every other field is required.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.json as pjson
import pyarrow.parquet as pq

from streamsched.errors import InputError

TRAFFIC_FIELDS = ("timestamp", "topology", "src_task", "dst_task", "tuples", "bytes")
LOAD_FIELDS = ("timestamp", "topology", "task", "operator", "load")
OPTIONAL = ("bytes", "operator")
BATCH_ROWS = 1 << 20
BLOCK_BYTES = 64 << 20
JSON_FAST_BYTES = 512 << 20


def fields_of(kind: str) -> tuple[str, ...]:
    return TRAFFIC_FIELDS if kind == "traffic" else LOAD_FIELDS


def _csv_header(path: Path) -> list[str]:
    with open(path, "rb") as handle:
        first = handle.readline().decode("utf-8", "replace").rstrip("\r\n")
    return [c.strip().strip('"') for c in first.split(",")] if first else []


def check_header(path: Path, kind: str) -> None:
    """Raise InputError when a CSV header or a Parquet schema lacks a required column."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        have = _csv_header(path)
        where = f"{path}: line 1"
    elif suffix == ".parquet":
        try:
            have = pq.read_schema(path).names
        except (OSError, pa.ArrowException) as exc:
            raise InputError(f"{path}: not a Parquet file ({exc})") from None
        where = str(path)
    else:
        return
    missing = [f for f in fields_of(kind) if f not in OPTIONAL and f not in have]
    if missing:
        raise InputError(f"{where}: missing column {missing[0]!r} (have {', '.join(have) or 'nothing'})")


def _csv_batches(path: Path, kind: str) -> Iterator[tuple[dict[str, pa.Array], list[str]]]:
    malformed: list[str] = []

    def keep(row) -> str:
        malformed.append(row.text)
        return "skip"

    header = _csv_header(path)
    present = [f for f in fields_of(kind) if f in header]
    reader = pcsv.open_csv(
        path, read_options=pcsv.ReadOptions(block_size=BLOCK_BYTES),
        parse_options=pcsv.ParseOptions(invalid_row_handler=keep),
        convert_options=pcsv.ConvertOptions(column_types={c: pa.string() for c in header},
                                            include_columns=present, strings_can_be_null=False))
    start = 0  # the handler may run on reader threads: only append, slice up to a snapshot
    for batch in reader:
        end = len(malformed)
        yield {f: batch.column(f) for f in present}, malformed[start:end]
        start = end
    if len(malformed) > start:
        yield {f: pa.array([], pa.string()) for f in present}, malformed[start:]


def _json_text(value) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool) or isinstance(value, (dict, list)):
        return json.dumps(value)
    return repr(value)


def _json_column(values: list) -> pa.Array:
    """Values of one field: typed when Arrow takes them as they are (all numbers, all text),
    else each as text (numbers as written, anything else as JSON) for the row checks."""
    try:
        column = pa.array(values)
        if pa.types.is_integer(column.type) or pa.types.is_floating(column.type) or pa.types.is_string(column.type):
            return column
    except (pa.ArrowException, OverflowError):
        pass
    return pa.array([_json_text(v) for v in values], pa.string())


def _jsonl_batches(path: Path, kind: str) -> Iterator[tuple[dict[str, pa.Array], list[str]]]:
    """JSON lines: Arrow's reader when the whole file is well formed with one type per field
    (files up to JSON_FAST_BYTES), else line by line in Python, broken lines kept as malformed."""
    names = fields_of(kind)
    if path.stat().st_size <= JSON_FAST_BYTES:
        try:
            table = pjson.read_json(path)
        except pa.ArrowException:
            table = None
        simple = (pa.types.is_integer, pa.types.is_floating, pa.types.is_string, pa.types.is_null)
        if table is not None and all(any(t(c.type) for t in simple) for c in table.columns):
            yield {f: table.column(f).combine_chunks() for f in names if f in table.column_names}, []
            return
    with open(path, encoding="utf-8") as handle:
        lines = [text for text in (line.strip() for line in handle) if text]
    for start in range(0, max(len(lines), 1), BATCH_ROWS):
        records: list[dict] = []
        malformed: list[str] = []
        _parse_lines(lines[start:start + BATCH_ROWS], records, malformed)
        yield {f: _json_column([r.get(f) for r in records]) for f in names}, malformed


def _parse_lines(lines: list[str], records: list[dict], malformed: list[str]) -> None:
    """JSON objects, one per line, appended to ``records``; other lines to ``malformed``.
    Lines are parsed 4,096 at a time as one JSON array (one call of the parser instead of one
    per line); a chunk that fails is halved until the broken lines are alone."""
    if len(lines) > 4096:
        for start in range(0, len(lines), 4096):
            _parse_lines(lines[start:start + 4096], records, malformed)
        return
    try:
        parsed = json.loads("[" + ",".join(lines) + "]")
    except ValueError:
        parsed = None
    if parsed is not None and len(parsed) == len(lines):
        for text, value in zip(lines, parsed):
            (records if isinstance(value, dict) else malformed).append(value if isinstance(value, dict) else text)
    elif len(lines) == 1:
        malformed.append(lines[0])
    elif lines:
        half = len(lines) // 2
        _parse_lines(lines[:half], records, malformed)
        _parse_lines(lines[half:], records, malformed)


def _parquet_batches(path: Path, kind: str) -> Iterator[tuple[dict[str, pa.Array], list[str]]]:
    schema = pq.read_schema(path)
    present = [f for f in fields_of(kind) if f in schema.names]
    # Text columns as dictionaries: the row checks and the packing then work on the few
    # distinct values (topologies, operators) instead of a string per row.
    text = [f for f in present if pa.types.is_string(schema.field(f).type)]
    parquet = pq.ParquetFile(path, read_dictionary=text)
    for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=present):
        yield {f: batch.column(f) for f in present}, []


def read_file(path: Path, kind: str) -> Iterator[tuple[dict[str, pa.Array], list[str]]]:
    """(columns, malformed lines) per batch of a native file; columns as stored (text for CSV
    and JSON lines, typed for Parquet, its text columns as dictionaries)."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return _csv_batches(path, kind)
    if suffix == ".parquet":
        return _parquet_batches(path, kind)
    return _jsonl_batches(path, kind)
