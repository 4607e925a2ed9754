"""Native metric files in Arrow: parse, validate, pack into blocks, and merge blocks.

Plain pyarrow + numpy (no Spark in this module): :mod:`.ingest` runs :func:`read_blocks` inside
one Spark task per file (``mapInArrow``) and :func:`merge_group` once per task pair or task
(``applyInArrow``), and :mod:`.watch` runs :func:`validate_text` on streaming micro-batches.

Why blocks: finding duplicates needs every row of a pair side by side, and shuffling 10^8 rows
one by one costs more than reading them. A block holds all the accepted rows of one pair (or
task) from one file as three packed arrays (timestamps, tuples/load, bytes), so the shuffle
moves 8 bytes per value and one row per pair per file.

Row checks, the first failing one is the reason: ``malformed`` (wrong number of fields, broken
JSON) -> ``missing_field`` (an empty timestamp, topology, task or count; a missing byte count is
0, a missing operator is ``task``) -> ``wrong_type`` (not a number: numbers are decimal, with an
optional exponent, ``inf``/``nan``; task ids are integers) -> ``negative_count`` (a count below 0
or not finite) -> ``timestamp_out_of_range``. Then per group (:func:`merge_group`):
``unknown_task`` (a pair naming a task its topology does not declare), ``duplicate`` (a second
row of a pair or task at the same timestamp: the copy with the smallest values is kept).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.json as pjson
import pyarrow.parquet as pq

from streamsched.errors import InputError

TRAFFIC_FIELDS = ("timestamp", "topology", "src_task", "dst_task", "tuples", "bytes")
LOAD_FIELDS = ("timestamp", "topology", "task", "operator", "load")
OPTIONAL = ("bytes", "operator")
INTEGERS = ("src_task", "dst_task", "task")
COUNTS = ("tuples", "bytes", "load")
BATCH_ROWS = 1 << 20
BLOCK_BYTES = 64 << 20
JSON_FAST_BYTES = 512 << 20

# Quarantine reasons; the row checks run in this order (the first failing one is kept).
MALFORMED = "malformed"            # wrong number of fields, broken JSON, unparsable map
MISSING = "missing_field"          # a required field is empty
WRONG_TYPE = "wrong_type"          # a field that is not a number of its type
NEGATIVE = "negative_count"        # tuples, bytes or load < 0 (or not finite)
OUT_OF_RANGE = "timestamp_out_of_range"
UNKNOWN_TASK = "unknown_task"      # a traffic row naming a task the topology does not declare
DUPLICATE = "duplicate"            # a second row for the same (topology, timestamp, pair/task)
_ROW_REASONS = (None, MALFORMED, MISSING, WRONG_TYPE, NEGATIVE, OUT_OF_RANGE)

_FLOAT = r"(?i)^[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|inf|infinity|nan)$"
_INTEGER = r"^[+-]?\d{1,18}$"

#: One row of the pack: a block of accepted rows (part ``block``), a rejected row (``rejected``),
#: a count of records (``count``: reason ``read`` or ``accepted``), a file that could not be read
#: (``error``: the message in ``raw``) or, after merging, a group's summary (``summary``).
#: Groups are keyed by (part, kind, topology, a, b).
BLOCK = pa.schema([
    ("part", pa.string()), ("kind", pa.string()), ("topology", pa.string()),
    ("a", pa.int64()),            # src_task | task | bucket of rejected rows
    ("b", pa.int64()),            # dst_task
    ("operator", pa.string()), ("source", pa.string()),
    ("checked", pa.bool_()),      # still to check for duplicates and unknown tasks
    ("ts", pa.binary()), ("v1", pa.binary()), ("v2", pa.binary()),  # packed doubles: see blobs()
    ("raw", pa.string()), ("reason", pa.string()),
    ("rows", pa.int64()),         # rows in a block / records counted / accepted rows of a summary
    ("last", pa.float64()),       # summary: latest accepted timestamp (up to the window end)
    ("ew1", pa.float64()), ("ew2", pa.float64()), ("ewn", pa.float64()),  # summary: weighted sums
])


@dataclass(frozen=True)
class Checks:
    """What the row checks and the merge need besides the rows."""

    time_range: tuple[float, float]
    window_s: float
    half_life_s: float | None = None
    end: float | None = None


def fields_of(kind: str) -> tuple[str, ...]:
    return TRAFFIC_FIELDS if kind == "traffic" else LOAD_FIELDS


# --------------------------------------------------------------------------- reading
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
    parquet = pq.ParquetFile(path)
    present = [f for f in fields_of(kind) if f in parquet.schema_arrow.names]
    for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=present):
        yield {f: batch.column(f) for f in present}, []


def read_file(path: Path, kind: str) -> Iterator[tuple[dict[str, pa.Array], list[str]]]:
    """(columns, malformed lines) per batch of a native file; columns as stored (text for CSV
    and JSON lines, typed for Parquet)."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return _csv_batches(path, kind)
    if suffix == ".parquet":
        return _parquet_batches(path, kind)
    return _jsonl_batches(path, kind)


# --------------------------------------------------------------------------- row checks
def _parse_text(text: pa.Array, integer: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values, missing, ok) of text: trimmed, empty = missing, numbers by regular expression."""
    text = pc.utf8_trim_whitespace(text)
    missing = pc.fill_null(pc.equal(text, ""), True)
    ok = pc.fill_null(pc.match_substring_regex(text, _INTEGER if integer else _FLOAT), False)
    values = pc.cast(pc.if_else(ok, text, pa.scalar(None, pa.string())), pa.int64() if integer else pa.float64())
    return (pc.fill_null(values, 0).to_numpy(zero_copy_only=False), missing.to_numpy(zero_copy_only=False),
            ok.to_numpy(zero_copy_only=False))


def _number(column: pa.Array | None, n: int, integer: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values, missing, wrong type) of a column as text or numbers; absent column = missing.

    Text in the common shape (digits, and for decimals at most one point) is cast directly;
    only the other rows go through :func:`_parse_text`."""
    dtype = np.int64 if integer else np.float64
    if column is None:
        return np.zeros(n, dtype), np.ones(n, bool), np.zeros(n, bool)
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        digits = column if integer else pc.replace_substring(column, ".", "", max_replacements=1)
        plain = pc.fill_null(pc.ascii_is_decimal(digits), False)
        if integer:
            plain = pc.and_(plain, pc.less_equal(pc.utf8_length(column), 18))
        plain = plain.to_numpy(zero_copy_only=False)
        values, missing, ok = np.zeros(n, dtype), np.zeros(n, bool), plain.copy()
        if plain.any():
            values[plain] = pc.cast(column.filter(pa.array(plain)), pa.int64() if integer else pa.float64()).to_numpy(
                zero_copy_only=False)
        rest = np.flatnonzero(~plain)
        if rest.size:
            values[rest], missing[rest], ok[rest] = _parse_text(column.take(pa.array(rest)), integer)
        return values, missing, ~missing & ~ok
    if pa.types.is_integer(column.type) or pa.types.is_floating(column.type):
        missing = pc.is_null(column)
        values = pc.cast(column, pa.float64())
        ok = pc.fill_null(pc.is_finite(values), False) if integer else pc.invert(missing)
        if integer:
            whole = pc.and_(ok, pc.less(pc.abs(values), float(1 << 62)))
            ok = pc.fill_null(pc.and_(whole, pc.equal(pc.floor(values), values)), False)
            values = pc.cast(pc.if_else(ok, values, 0.0), pa.int64())
    else:
        missing = pc.is_null(column)
        ok = pa.array(np.zeros(n, bool))
        values = pa.array(np.zeros(n, dtype))
    missing = missing.to_numpy(zero_copy_only=False)
    ok = ok.to_numpy(zero_copy_only=False)
    values = pc.fill_null(values, 0).to_numpy(zero_copy_only=False).astype(dtype, copy=False)
    return values, missing, ~missing & ~ok


def _text(column: pa.Array | None, n: int, default: str | None) -> tuple[pa.Array, np.ndarray]:
    """(trimmed text, missing) of a text column; ``default`` replaces a missing value."""
    if column is None:
        column = pa.nulls(n, pa.string())
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    text = pc.utf8_trim_whitespace(pc.cast(column, pa.string()))
    missing = pc.fill_null(pc.equal(text, ""), True)
    if default is not None:
        text = pc.if_else(missing, default, text)
    return text, missing.to_numpy(zero_copy_only=False)


@dataclass
class Validated:
    """Rows of one batch: ``reason`` code per row (0 = accepted, else an index of
    :data:`_ROW_REASONS`) and the typed values (``topology``/``operator`` as Arrow strings)."""

    reason: np.ndarray
    values: dict[str, object]


def validate(columns: dict[str, pa.Array], kind: str, time_range: tuple[float, float],
             malformed: np.ndarray | None = None) -> Validated:
    """Row checks of a batch of native rows (module docstring); ``malformed`` marks rows the
    reader could not split into fields."""
    names = fields_of(kind)
    n = len(next(iter(columns.values()))) if columns else 0
    topology, missing = _text(columns.get("topology"), n, None)
    values: dict[str, object] = {"topology": topology}
    wrong = np.zeros(n, bool)
    negative = np.zeros(n, bool)
    for name in names:
        if name == "topology":
            continue
        if name == "operator":
            values[name] = _text(columns.get(name), n, "task")[0]
            continue
        value, is_missing, is_wrong = _number(columns.get(name), n, name in INTEGERS)
        if name == "bytes":
            value = np.where(is_missing, 0.0, value)
        else:
            missing |= is_missing
        wrong |= is_wrong
        if name in COUNTS:
            with np.errstate(invalid="ignore"):
                negative |= ~is_missing & ~is_wrong & ((value < 0) | ~np.isfinite(value))
        values[name] = value
    ts = values["timestamp"]
    low, high = time_range
    with np.errstate(invalid="ignore"):
        outside = ~((ts >= low) & (ts <= high))
    reason = np.zeros(n, np.int8)
    for code, flags in ((5, outside), (4, negative), (3, wrong), (2, missing)):
        reason[flags] = code
    if malformed is not None:
        reason[malformed] = 1
    return Validated(reason, values)


def _raw_json(columns: dict[str, pa.Array], rows: np.ndarray) -> list[str]:
    taken = {f: (c.take(pa.array(rows)).to_pylist()) for f, c in columns.items()}
    return [json.dumps({f: taken[f][k] for f in taken}, default=str) for k in range(len(rows))]


def validate_text(table: pa.Table | pa.RecordBatch, kind: str, time_range: tuple[float, float]) -> pa.RecordBatch:
    """Streaming rows (all-text native columns, ``_corrupt_record``, ``source``) -> rows with
    ``reason``, ``raw`` (rejected rows) and typed values, as :mod:`.watch` reads them."""
    names = fields_of(kind)
    columns = {f: table.column(f) for f in names}
    corrupt = table.column("_corrupt_record")
    checked = validate(columns, kind, time_range, pc.is_valid(corrupt).to_numpy(zero_copy_only=False))
    rejected = np.flatnonzero(checked.reason)
    raw = np.full(table.num_rows, None, object)
    raw[rejected] = _raw_json(columns, rejected)
    corrupt_text = corrupt.to_numpy(zero_copy_only=False)
    is_corrupt = checked.reason == 1
    raw[is_corrupt] = corrupt_text[is_corrupt]
    out = {"source": table.column("source"), "kind": pa.array([kind] * table.num_rows, pa.string()),
           "reason": pa.array(np.array(_ROW_REASONS, object)[checked.reason], pa.string())}
    out.update({f: checked.values[f] for f in names})
    out["raw"] = pa.array(raw, pa.string())
    return pa.RecordBatch.from_pydict(out)


# --------------------------------------------------------------------------- packing
def _batch(rows: dict[str, object], n: int) -> pa.RecordBatch:
    """A RecordBatch of :data:`BLOCK` with the given columns (the rest null)."""
    arrays = []
    for field in BLOCK:
        value = rows.get(field.name)
        if value is None:
            arrays.append(pa.nulls(n, field.type))
        elif isinstance(value, (pa.Array, pa.ChunkedArray)):
            arrays.append(value.combine_chunks() if isinstance(value, pa.ChunkedArray) else value)
        elif isinstance(value, np.ndarray):
            arrays.append(pa.array(value, field.type))
        else:
            arrays.append(pa.array([value] * n, field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=BLOCK)


def blobs(values: np.ndarray, offsets: np.ndarray) -> pa.Array:
    """Float64 ``values`` cut at ``offsets`` -> one binary value (packed little-endian doubles) per
    piece: Spark moves a binary value with one copy, a list of doubles element by element."""
    data = pa.py_buffer(np.ascontiguousarray(values, "<f8").tobytes())
    return pa.Array.from_buffers(pa.binary(), len(offsets) - 1,
                                 [None, pa.py_buffer((np.asarray(offsets) * 8).astype(np.int32)), data])


def floats(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """A column of :func:`blobs` -> (all the doubles, how many each value holds); null = none."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks else pa.array([], column.type)
    n = len(column)
    if n == 0:
        return np.zeros(0), np.zeros(0, np.int64)
    width = np.int64 if pa.types.is_large_binary(column.type) else np.int32
    offsets = np.frombuffer(column.buffers()[1], width, count=n + 1, offset=column.offset * np.dtype(width).itemsize)
    data = column.buffers()[2]
    size = int(offsets[-1] - offsets[0]) // 8
    values = np.frombuffer(data, "<f8", count=size, offset=int(offsets[0])) if size else np.zeros(0)
    return values, np.diff(offsets).astype(np.int64) // 8


def _groups(*keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order, starts): a stable order that puts equal key tuples together, and where each run
    of equal tuples starts in it. One integer sort key when the ranges allow, else lexicographic."""
    n = keys[0].size
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    combined = np.zeros(n, np.int64)
    span = 1
    for key in keys:
        low, high = int(key.min()), int(key.max())
        span *= high - low + 1
        if span >= 1 << 62:
            order = np.lexsort(keys[::-1])
            changed = np.any(np.stack([k[order][1:] != k[order][:-1] for k in keys]), axis=0)
            return order, np.flatnonzero(np.r_[True, changed])
        combined = combined * (high - low + 1) + (key - low)
    # numpy sorts 16-bit integers by radix: about 5x faster when the key tuples fit.
    order = np.argsort(combined.astype(np.uint16) if span <= 1 << 16 else combined, kind="stable")
    ordered = combined[order]
    return order, np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])


def pack(rows: dict[str, object], kind: str, checked: bool = True) -> pa.RecordBatch:
    """Accepted rows -> one block per source and pair (traffic) or task and operator (load).

    ``rows``: ``timestamp``, ``a`` (src_task | task), ``b`` (dst_task) or ``operator``, ``v1``
    (tuples | load), ``v2`` (bytes) as numpy arrays; ``topology``, ``operator`` and ``source``
    as Arrow strings (``source`` may also be one string)."""
    ts, a, v1 = rows["timestamp"], rows["a"], rows["v1"]
    n = len(ts)
    topo = pc.dictionary_encode(rows["topology"])
    source = rows["source"]
    source = pc.dictionary_encode(pc.fill_null(source, "")) if not isinstance(source, str) else None
    codes = [topo.indices.to_numpy(zero_copy_only=False),
             source.indices.to_numpy(zero_copy_only=False) if source is not None else np.zeros(n, np.int64), a]
    if kind == "traffic":
        codes.append(rows["b"])
    else:
        operator = pc.dictionary_encode(rows["operator"])
        codes.append(operator.indices.to_numpy(zero_copy_only=False))
    order, starts = _groups(*codes)
    offsets = np.r_[starts, n]
    first = order[starts]
    names = source.dictionary.take(pa.array(codes[1][first])) if source is not None else rows["source"]
    out: dict[str, object] = {
        "part": "block", "kind": kind, "checked": checked,
        "topology": topo.dictionary.take(pa.array(codes[0][first])),
        "source": pc.if_else(pc.equal(names, ""), pa.scalar(None, pa.string()), names) if source is not None else names,
        "a": a[first], "rows": np.diff(offsets), "ts": blobs(ts[order], offsets), "v1": blobs(v1[order], offsets),
    }
    if kind == "traffic":
        out["b"], out["v2"] = rows["b"][first], blobs(rows["v2"][order], offsets)
    else:
        out["operator"] = operator.dictionary.take(pa.array(codes[3][first]))
    return _batch(out, len(starts))


def pack_checked(validated: Validated, kind: str, source: str) -> pa.RecordBatch:
    """The accepted rows of a checked native batch -> :func:`pack`."""
    good = np.flatnonzero(validated.reason == 0)
    v = validated.values
    taken = pa.array(good)
    if kind == "traffic":
        rows = {"a": v["src_task"][good], "b": v["dst_task"][good], "v1": v["tuples"][good], "v2": v["bytes"][good]}
    else:
        rows = {"a": v["task"][good], "operator": v["operator"].take(taken), "v1": v["load"][good]}
    rows.update(timestamp=v["timestamp"][good], topology=v["topology"].take(taken), source=source)
    return pack(rows, kind)


def pack_frame(batch: pa.RecordBatch, kind: str, checked: bool) -> pa.RecordBatch:
    """Accepted rows from a Spark source (columns timestamp, topology, a, b | operator, v1, v2,
    source) -> :func:`pack`."""
    rows: dict[str, object] = {c: batch.column(c) for c in ("topology", "source")}
    for c in ("timestamp", "a", "b", "v1", "v2"):
        if c in batch.schema.names:
            rows[c] = batch.column(c).to_numpy(zero_copy_only=False)
    if kind == "load":
        rows["operator"] = batch.column("operator")
    return pack(rows, kind, checked)


def _rejected(kind: str, source: str, raw: list[str], reasons: list[str], bucket: int) -> pa.RecordBatch:
    n = len(raw)
    return _batch({"part": "rejected", "kind": kind, "source": source, "topology": source, "a": bucket,
                   "raw": pa.array(raw, pa.string()), "reason": pa.array(reasons, pa.string())}, n)


def _count(kind: str, source: str, reason: str, rows: int) -> pa.RecordBatch:
    return _batch({"part": "count", "kind": kind, "source": source, "topology": source, "reason": reason,
                   "rows": np.array([rows])}, 1)


def read_blocks(path: str, kind: str, time_range: tuple[float, float]) -> Iterator[pa.RecordBatch]:
    """One native file -> blocks of accepted rows, its rejected rows and its count of records.
    A file that cannot be read (gone, not UTF-8, not Parquet, a column Arrow cannot take as
    text) gives one ``error`` row instead (the driver raises it as an InputError; raised here,
    Spark would log a stack trace)."""
    try:
        yield from _file_blocks(Path(path), kind, time_range)
    except (OSError, UnicodeDecodeError, pa.ArrowException) as exc:
        yield _batch({"part": "error", "kind": kind, "source": path, "topology": path,
                      "raw": f"{path}: {str(exc).splitlines()[0]}"}, 1)


def _file_blocks(path: Path, kind: str, time_range: tuple[float, float]) -> Iterator[pa.RecordBatch]:
    read = 0
    for number, (columns, malformed) in enumerate(read_file(path, kind)):
        checked = validate(columns, kind, time_range)
        bad = np.flatnonzero(checked.reason)
        read += len(checked.reason) + len(malformed)
        if len(checked.reason) > len(bad):
            yield pack_checked(checked, kind, str(path))
        if bad.size or malformed:
            raw = malformed + _raw_json(columns, bad)
            reasons = [MALFORMED] * len(malformed) + [_ROW_REASONS[c] for c in checked.reason[bad]]
            yield _rejected(kind, str(path), raw, reasons, number)
    yield _count(kind, str(path), "read", read)


# --------------------------------------------------------------------------- merging
_UNKNOWN, _DUPLICATE = 1, 2


def _duplicates(ts: np.ndarray, v1: np.ndarray, v2: np.ndarray, op: np.ndarray | None,
                rows: np.ndarray) -> np.ndarray:
    """Of ``rows``, the ones repeating an (operator, timestamp) of another (``op`` None: one
    operator): all but the copy with the smallest (v1, v2). Sorted by time first; only tied
    rows are sorted by value."""
    order = rows[np.argsort(ts[rows], kind="stable")] if op is None else rows[np.lexsort((ts[rows], op[rows]))]
    op = np.zeros(ts.size, np.int64) if op is None else op
    tie = (ts[order][1:] == ts[order][:-1]) & (op[order][1:] == op[order][:-1])
    if not tie.any():
        return np.zeros(0, np.int64)
    tied = np.unique(np.r_[order[1:][tie], order[:-1][tie]])
    order = tied[np.lexsort((v2[tied], v1[tied], ts[tied], op[tied]))]
    same = (ts[order][1:] == ts[order][:-1]) & (op[order][1:] == op[order][:-1])
    return order[1:][same]


def merge_group(table: pa.Table, checks: Checks, declared: dict[str, set[int]] | None) -> pa.Table:
    """All blocks of one pair (traffic) or task (load) -> its summary and its rejected rows
    (``unknown_task``, ``duplicate``); rejected and count rows pass through.

    Summary: ``rows`` = accepted rows that were still to check (the others were counted by
    their reader); ``last`` = the latest accepted timestamp up to the window end; the accepted
    rows of the last ``window_s`` before ``last`` (sliding window: the window ending at the
    topology's end >= ``last`` holds no earlier row), or with a half-life h the sums
    ``ew1 = sum v1 * 2^-(last - t)/h``, ``ew2`` (bytes), ``ewn = sum 2^-(last - t)/h``, which
    the end rescales by ``2^-(end - last)/h`` (:func:`.ingest.window_rates`)."""
    if table.column("part")[0].as_py() != "block":
        return table
    kind = table.column("kind")[0].as_py()
    topology = table.column("topology")[0].as_py()
    a, b = table.column("a")[0].as_py(), table.column("b")[0].as_py()
    ts, lengths = floats(table.column("ts"))
    v1 = floats(table.column("v1"))[0]
    v2 = floats(table.column("v2"))[0] if kind == "traffic" else np.zeros(ts.size)
    block_of = np.repeat(np.arange(table.num_rows), lengths)
    checked = table.column("checked").to_numpy(zero_copy_only=False)[block_of]
    operators = table.column("operator").to_pylist()
    op = np.unique([str(o) for o in operators], return_inverse=True)[1][block_of] if kind == "load" else None
    reason = np.zeros(ts.size, np.int8)
    known = declared.get(topology) if declared else None
    if kind == "traffic" and known is not None and (a not in known or b not in known):
        reason[checked] = _UNKNOWN
    candidates = np.flatnonzero(checked & (reason == 0))
    if candidates.size > 1:
        reason[_duplicates(ts, v1, v2, op, candidates)] = _DUPLICATE
    accepted = reason == 0
    keep = accepted & (ts <= checks.end) if checks.end is not None else accepted
    summary: dict[str, object] = {"part": "summary", "kind": kind, "topology": topology, "a": a, "b": b,
                                  "rows": np.array([np.count_nonzero(accepted & checked)])}
    if kind == "load":
        used = np.unique(block_of[accepted])
        summary["operator"] = min(operators[k] for k in used) if used.size else None
    if keep.any():
        last = float(ts[keep].max())
        summary["last"] = last
        if checks.half_life_s is None:
            tail = keep & (ts > last - checks.window_s)
            cut = np.array([0, np.count_nonzero(tail)])
            summary.update(ts=blobs(ts[tail], cut), v1=blobs(v1[tail], cut), v2=blobs(v2[tail], cut))
        else:
            w = np.exp2(-(last - ts[keep]) / checks.half_life_s)
            summary.update(ew1=float(v1[keep] @ w), ew2=float(v2[keep] @ w), ewn=float(w.sum()))
    out = [_batch(summary, 1)]
    bad = np.flatnonzero(~accepted)
    if bad.size:
        sources = table.column("source").to_pylist()
        raw = []
        for k in bad:
            if kind == "traffic":
                record = {"timestamp": float(ts[k]), "topology": topology, "src_task": a, "dst_task": b,
                          "tuples": float(v1[k]), "bytes": float(v2[k])}
            else:
                record = {"timestamp": float(ts[k]), "topology": topology, "task": a,
                          "operator": operators[block_of[k]], "load": float(v1[k])}
            raw.append(json.dumps(record))
        out.append(_batch({"part": "rejected", "kind": kind, "raw": pa.array(raw, pa.string()),
                           "source": pa.array([sources[block_of[k]] for k in bad], pa.string()),
                           "reason": pa.array([(UNKNOWN_TASK, DUPLICATE)[reason[k] - 1] for k in bad], pa.string())},
                          bad.size))
    return pa.Table.from_batches(out, schema=BLOCK)
