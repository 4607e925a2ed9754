"""``collect log`` without Spark: half lines wait, rotation and restarts lose and repeat nothing."""

from __future__ import annotations

import csv
import json
import os

from streamsched.pipeline.collect import LogCollector

HEADER = "timestamp,topology,src_task,dst_task,tuples,bytes"


def _rows(out) -> list[list[str]]:
    rows = []
    for chunk in sorted(out.glob("traffic-*.csv")):
        with open(chunk) as handle:
            got = list(csv.reader(handle))
        assert got[0] == HEADER.split(",")
        rows += got[1:]
    return rows


def _line(k: int) -> str:
    return f"{1700000000 + k},app,0,1,{k},10\n"


def test_half_lines_rotation_and_restart(tmp_path):
    logs, out = tmp_path / "logs", tmp_path / "out"
    logs.mkdir()
    log = logs / "traffic-app.log"
    with open(log, "w") as handle:
        handle.write(HEADER + "\n" + _line(0) + _line(1)[:10])
    collector = LogCollector(log, out)
    assert collector.poll() == 2  # header + one line; the half line waits
    assert [r[4] for r in _rows(out)] == ["0"]
    with open(log, "a") as handle:
        handle.write(_line(1)[10:] + _line(2))
    assert collector.poll() == 2
    # Rotation: the writer finishes a line in the old file after the rename, then a new file.
    os.rename(log, logs / "traffic-app.log.1")
    with open(logs / "traffic-app.log.1", "a") as handle:
        handle.write(_line(3))
    with open(log, "w") as handle:
        handle.write(_line(4) + _line(5)[:5])
    # A restart (new process) between the rotation and the next poll.
    collector = LogCollector(log, out)
    assert collector.poll() == 2
    with open(log, "a") as handle:
        handle.write(_line(5)[5:])
    LogCollector(log, out).poll()
    assert [r[4] for r in _rows(out)] == ["0", "1", "2", "3", "4", "5"]
    # Every chunk says where its lines came from.
    sides = [json.loads((out / f".{c.name}.json").read_text()) for c in sorted(out.glob("traffic-*.csv"))]
    assert [s["lines"] for s in sides] == [[1, 2], [3, 4], [5, 5], [1, 1], [2, 2]]
    assert sides[2]["source"].endswith("traffic-app.log.1")
    # Nothing new: no chunk, no repeat.
    assert LogCollector(log, out).poll() == 0
    assert len(list(out.glob("traffic-*.csv"))) == 5


def test_a_kill_between_chunk_and_state_repeats_nothing(tmp_path):
    log, out = tmp_path / "traffic-x.log", tmp_path / "out"
    log.write_text(_line(0))
    collector = LogCollector(log, out)
    state = collector.state_file.read_bytes() if collector.state_file.exists() else None
    collector.poll()
    # As if the process died after renaming the chunk, before saving its state.
    if state is None:
        collector.state_file.unlink()
    else:
        collector.state_file.write_bytes(state)
    with open(log, "a") as handle:
        handle.write(_line(1))
    LogCollector(log, out).poll()
    assert [r[4] for r in _rows(out)] == ["0", "1"]
