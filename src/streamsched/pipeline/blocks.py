"""Blocks: the accepted rows of one task pair (or task) from one file, packed in three arrays.

Plain pyarrow + numpy (no Spark): :mod:`.ingest` runs :func:`read_blocks` inside one Spark task
per file (``mapInArrow``) and :func:`pack_frame` on the rows of the other sources; the blocks
of a pair then meet in :func:`.merge.merge_group`.

Why blocks: finding duplicates needs every row of a pair side by side, and shuffling 10^8 rows
one by one costs more than reading them. A block holds all the accepted rows of one pair (or
task) from one file as three packed arrays (timestamps, tuples/load, bytes), so the shuffle
moves 8 bytes per value and one row per pair per file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamsched.pipeline.native_reader import read_file
from streamsched.pipeline.row_checks import MALFORMED, ROW_REASONS, Validated, raw_json, validate

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


def block_batch(rows: dict[str, object], n: int) -> pa.RecordBatch:
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
    data = pa.py_buffer(np.ascontiguousarray(values, "<f8"))  # no copy: the buffer keeps the array
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
        if low == high:  # one value (e.g. the file's only source): nothing to tell apart
            continue
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
    return block_batch(out, len(starts))


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
    return block_batch({"part": "rejected", "kind": kind, "source": source, "topology": source, "a": bucket,
                   "raw": pa.array(raw, pa.string()), "reason": pa.array(reasons, pa.string())}, n)


def _count(kind: str, source: str, reason: str, rows: int) -> pa.RecordBatch:
    return block_batch({"part": "count", "kind": kind, "source": source, "topology": source, "reason": reason,
                   "rows": np.array([rows])}, 1)


def read_blocks(path: str, kind: str, time_range: tuple[float, float]) -> Iterator[pa.RecordBatch]:
    """One native file -> blocks of accepted rows, its rejected rows and its count of records.
    A file that cannot be read (gone, not UTF-8, not Parquet, a column Arrow cannot take as
    text) gives one ``error`` row instead (the driver raises it as an InputError; raised here,
    Spark would log a stack trace)."""
    try:
        yield from _file_blocks(Path(path), kind, time_range)
    except (OSError, UnicodeDecodeError, pa.ArrowException) as exc:
        yield block_batch({"part": "error", "kind": kind, "source": path, "topology": path,
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
            raw = malformed + raw_json(columns, bad)
            reasons = [MALFORMED] * len(malformed) + [ROW_REASONS[c] for c in checked.reason[bad]]
            yield _rejected(kind, str(path), raw, reasons, number)
    yield _count(kind, str(path), "read", read)
