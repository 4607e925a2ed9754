"""Row checks of native metric rows, and the quarantine reasons every source reports.

Plain pyarrow + numpy (no Spark): :func:`.blocks.read_blocks` runs :func:`validate` on each
batch a file gives, and :mod:`.watch` runs :func:`validate_text` on streaming micro-batches.

Row checks, the first failing one is the reason: ``malformed`` (wrong number of fields, broken
JSON) -> ``missing_field`` (an empty timestamp, topology, task or count; a missing byte count is
0, a missing operator is ``task``) -> ``wrong_type`` (not a number: numbers are decimal, with an
optional exponent, ``inf``/``nan``; task ids are integers) -> ``negative_count`` (a count below 0
or not finite) -> ``timestamp_out_of_range``. Two more reasons come from comparing rows with
each other (:func:`.merge.merge_group`): ``unknown_task`` and ``duplicate``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamsched.pipeline.native_reader import fields_of

INTEGERS = ("src_task", "dst_task", "task")
COUNTS = ("tuples", "bytes", "load")

# Quarantine reasons; the row checks run in this order (the first failing one is kept).
MALFORMED = "malformed"            # wrong number of fields, broken JSON, unparsable map
MISSING = "missing_field"          # a required field is empty
WRONG_TYPE = "wrong_type"          # a field that is not a number of its type
NEGATIVE = "negative_count"        # tuples, bytes or load < 0 (or not finite)
OUT_OF_RANGE = "timestamp_out_of_range"
UNKNOWN_TASK = "unknown_task"      # a traffic row naming a task the topology does not declare
DUPLICATE = "duplicate"            # a second row for the same (topology, timestamp, pair/task)
#: Reason of each row code of :class:`Validated` (0 = accepted).
ROW_REASONS = (None, MALFORMED, MISSING, WRONG_TYPE, NEGATIVE, OUT_OF_RANGE)

_FLOAT = r"(?i)^[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|inf|infinity|nan)$"
_INTEGER = r"^[+-]?\d{1,18}$"


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
        plain = pc.ascii_is_decimal(digits)
        if integer:
            plain = pc.and_(plain, pc.less_equal(pc.utf8_length(column), 18))
        plain = pc.fill_null(plain, False).to_numpy(zero_copy_only=False)  # a null field is not plain
        values, missing, ok = np.zeros(n, dtype), np.zeros(n, bool), plain.copy()
        if plain.any():
            values[plain] = pc.cast(column.filter(pa.array(plain)), pa.int64() if integer else pa.float64()).to_numpy(
                zero_copy_only=False)
        rest = np.flatnonzero(~plain)
        if rest.size:
            values[rest], missing[rest], ok[rest] = _parse_text(column.take(pa.array(rest)), integer)
        return values, missing, ~missing & ~ok
    if pa.types.is_integer(column.type) or pa.types.is_floating(column.type):  # Parquet: numpy, no parsing
        missing = pc.is_null(column).to_numpy(zero_copy_only=False)
        values = pc.fill_null(column, 0).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        if not integer:
            return values, missing, np.zeros(n, bool)
        with np.errstate(invalid="ignore"):
            whole = ~missing & np.isfinite(values) & (np.abs(values) < float(1 << 62)) & (np.floor(values) == values)
        return np.where(whole, values, 0.0).astype(np.int64), missing, ~missing & ~whole
    missing = pc.is_null(column).to_numpy(zero_copy_only=False)  # any other type: never a number
    return np.zeros(n, dtype), missing, ~missing


def _text(column: pa.Array | None, n: int, default: str | None) -> tuple[pa.Array, np.ndarray]:
    """(trimmed text, missing) of a text column; ``default`` replaces a missing value."""
    if column is None:
        column = pa.nulls(n, pa.string())
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_dictionary(column.type) and (default is None or not column.null_count):
        return _dictionary_text(column, default)
    text = pc.utf8_trim_whitespace(pc.cast(column, pa.string()))
    missing = pc.fill_null(pc.equal(text, ""), True)
    if default is not None:
        text = pc.if_else(missing, default, text)
    return text, missing.to_numpy(zero_copy_only=False)


def _dictionary_text(column: pa.DictionaryArray, default: str | None) -> tuple[pa.DictionaryArray, np.ndarray]:
    """:func:`_text` of a dictionary column (Parquet's text columns, read by
    :mod:`.native_reader` as dictionaries): each distinct value is trimmed once, not each row;
    values equal once trimmed share one code."""
    words = pc.utf8_trim_whitespace(pc.cast(column.dictionary, pa.string()))
    empty = pc.fill_null(pc.equal(words, ""), True)
    if default is not None:
        words = pc.if_else(empty, default, words)
    unique = pc.dictionary_encode(words)
    text = pa.DictionaryArray.from_arrays(pc.take(unique.indices, column.indices), unique.dictionary)
    return text, pc.fill_null(pc.take(empty, column.indices), True).to_numpy(zero_copy_only=False)


@dataclass
class Validated:
    """Rows of one batch: ``reason`` code per row (0 = accepted, else an index of
    :data:`ROW_REASONS`) and the typed values (``topology``/``operator`` as Arrow strings)."""

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


def raw_json(columns: dict[str, pa.Array], rows: np.ndarray) -> list[str]:
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
    raw[rejected] = raw_json(columns, rejected)
    corrupt_text = corrupt.to_numpy(zero_copy_only=False)
    is_corrupt = checked.reason == 1
    raw[is_corrupt] = corrupt_text[is_corrupt]
    out = {"source": table.column("source"), "kind": pa.array([kind] * table.num_rows, pa.string()),
           "reason": pa.array(np.array(ROW_REASONS, object)[checked.reason], pa.string())}
    out.update({f: checked.values[f] for f in names})
    out["raw"] = pa.array(raw, pa.string())
    return pa.RecordBatch.from_pydict(out)
