"""The sliding window's bounds, by hand: ``E - W < t <= E`` (a row exactly W seconds before the
end is outside, a row at the end inside), in both places that apply it: the merge's summary
(:func:`~streamsched.pipeline.merge.merge_group`, W before the pair's latest row) and the window
rates (:func:`~streamsched.pipeline.ingest.window_rates`, W before the topology's end)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from streamsched.pipeline.blocks import BLOCK, blobs, floats
from streamsched.pipeline.ingest import Window, window_rates
from streamsched.pipeline.merge import MergeWindow, merge_group

T0 = 1_700_000_000.0


def _pair(ts: list[float], tuples: list[float]) -> pa.Table:
    """One checked block of the traffic pair 1 -> 2 of topology ``t``."""
    fields = {"part": ["block"], "kind": ["traffic"], "topology": ["t"], "a": [1], "b": [2], "checked": [True],
              "operator": [None], "source": ["f"], "rows": [len(ts)]}
    columns = {f.name: pa.array(fields.get(f.name, [None]), f.type) for f in BLOCK}
    columns.update(zip(("ts", "v1", "v2"), [blobs(np.asarray(v, float), [0, len(ts)])
                                            for v in (ts, tuples, [0.0] * len(ts))]))
    return pa.Table.from_batches([pa.RecordBatch.from_pydict(columns, schema=BLOCK)])


def test_merge_keeps_the_last_w_seconds_before_the_latest_row():
    # W = 10, latest row T0+20: T0+10 is exactly W before it (out), T0+11 in.
    summary = merge_group(_pair([T0 + 10, T0 + 11, T0 + 20], [1.0, 2.0, 4.0]), MergeWindow(10.0), None)
    summary = summary.filter(pa.compute.equal(summary["part"], "summary"))
    assert sorted(floats(summary["ts"])[0].tolist()) == [T0 + 11, T0 + 20]


def test_window_rates_exclude_the_row_exactly_w_before_the_end():
    # W = 10, explicit end T0+25: the merge keeps T0+11..T0+20 (within 10 s of the latest row);
    # the window (T0+15, T0+25] then holds T0+20 only (T0+15 is exactly W before the end):
    # rate = 4 / 10.
    pair = _pair([T0 + 11, T0 + 15, T0 + 20], [1.0, 2.0, 4.0])
    summaries = merge_group(pair, MergeWindow(10.0, end=T0 + 25), None)
    ends, rates, _ = window_rates(summaries, Window(seconds=10.0, end=T0 + 25))
    assert ends == {"t": T0 + 25}
    assert rates == [{"topology": "t", "src_task": 1, "dst_task": 2, "rate": pytest.approx(0.4), "bytes_rate": 0.0}]
    # Ending at the latest row (T0+20): (T0+10, T0+20] holds all three, (1 + 2 + 4) / 10.
    _, rates, _ = window_rates(merge_group(pair, MergeWindow(10.0), None), Window(seconds=10.0))
    assert rates[0]["rate"] == pytest.approx(0.7)
