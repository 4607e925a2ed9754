"""Merging the blocks of one task pair (or task): duplicates, undeclared tasks, the window.

Plain pyarrow + numpy (no Spark): :mod:`.ingest` sorts each partition of blocks by
:data:`GROUP` and :func:`merge_sorted` runs :func:`merge_group` once per group of blocks
(``mapInArrow``; a Spark ``applyInArrow`` costs several milliseconds per group, seconds for a
few hundred task pairs). Rows are compared with each other here, so the last two quarantine
reasons come from this step: ``unknown_task`` (a pair naming a task its topology does not
declare) and ``duplicate`` (a second row of a pair or task at the same timestamp: the copy with
the smallest values is kept).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamsched.pipeline.blocks import BLOCK, block_batch, blobs, floats
from streamsched.pipeline.row_checks import DUPLICATE, UNKNOWN_TASK


@dataclass(frozen=True)
class MergeWindow:
    """The window the merge summarises: ``window_s`` seconds before the latest row (or, with
    ``half_life_s``, exponential weights), counting rows up to ``end`` (None: every row)."""

    window_s: float
    half_life_s: float | None = None
    end: float | None = None


_UNKNOWN, _DUPLICATE = 1, 2

#: The columns that make a group of blocks: one task pair (traffic) or task (load) of a topology.
GROUP = ("part", "kind", "topology", "a", "b")


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


def merge_group(table: pa.Table, window: MergeWindow, declared: dict[str, set[int]] | None) -> pa.Table:
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
    keep = accepted & (ts <= window.end) if window.end is not None else accepted
    summary: dict[str, object] = {"part": "summary", "kind": kind, "topology": topology, "a": a, "b": b,
                                  "rows": np.array([np.count_nonzero(accepted & checked)])}
    if kind == "load":
        used = np.unique(block_of[accepted])
        summary["operator"] = min(operators[k] for k in used) if used.size else None
    if keep.any():
        last = float(ts[keep].max())
        summary["last"] = last
        if window.half_life_s is None:
            tail = keep & (ts > last - window.window_s)
            cut = np.array([0, np.count_nonzero(tail)])
            summary.update(ts=blobs(ts[tail], cut), v1=blobs(v1[tail], cut), v2=blobs(v2[tail], cut))
        else:
            w = np.exp2(-(last - ts[keep]) / window.half_life_s)
            summary.update(ew1=float(v1[keep] @ w), ew2=float(v2[keep] @ w), ewn=float(w.sum()))
    out = [block_batch(summary, 1)]
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
        out.append(block_batch({"part": "rejected", "kind": kind, "raw": pa.array(raw, pa.string()),
                           "source": pa.array([sources[block_of[k]] for k in bad], pa.string()),
                           "reason": pa.array([(UNKNOWN_TASK, DUPLICATE)[reason[k] - 1] for k in bad], pa.string())},
                          bad.size))
    return pa.Table.from_batches(out, schema=BLOCK)


def merge_sorted(batches: Iterator[pa.RecordBatch], window: MergeWindow,
                 declared: dict[str, set[int]] | None) -> Iterator[pa.RecordBatch]:
    """One partition of :data:`.blocks.BLOCK` rows sorted by :data:`GROUP` -> :func:`merge_group`
    of every group of blocks; rejected, count and error rows pass through. A group cut by the
    end of a batch is carried over to the next one."""
    carry: pa.Table | None = None
    for batch in batches:
        table = pa.Table.from_batches([batch])
        is_block = pc.equal(table.column("part"), "block")
        others = table.filter(pc.invert(is_block))
        if others.num_rows:
            yield from others.to_batches()
        blocks = table.filter(is_block)
        if carry is not None:
            blocks = pa.concat_tables([carry, blocks])
        if not blocks.num_rows:
            continue
        keys = list(zip(*(blocks.column(c).to_pylist() for c in GROUP[1:])))
        starts = [0] + [k for k in range(1, len(keys)) if keys[k] != keys[k - 1]]
        for start, end in zip(starts, starts[1:]):
            yield from merge_group(blocks.slice(start, end - start), window, declared).to_batches()
        carry = blocks.slice(starts[-1])
    if carry is not None and carry.num_rows:
        yield from merge_group(carry, window, declared).to_batches()
