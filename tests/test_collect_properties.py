"""Property test of ``collect log`` (issue 27): for random sequences of append, partial line,
truncate, rotate, rewrite-longer, over-long line, poll and restart-with-kill, the rows in the
chunks are exactly the rows an independent model of the log says could be collected: each row
that was complete in the followed log (or in the file it was just rotated to) at some poll,
once; nothing else; over-long rows in the quarantine instead.

The model knows nothing of offsets, inodes or checksums: it keeps the log's rows as lists (the
current file, the rotated one) and, at each poll, marks every complete row in them as due."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamsched.pipeline import collect
from streamsched.pipeline.collect import LogCollector

MAX_LINE = 64
OPS = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 4)),
    st.tuples(st.just("partial"), st.integers(1, 3)),
    st.tuples(st.just("finish"), st.just(0)),
    st.tuples(st.just("truncate"), st.just(0)),
    st.tuples(st.just("rotate"), st.just(0)),
    st.tuples(st.just("rewrite-longer"), st.integers(1, 6)),
    st.tuples(st.just("long-line"), st.integers(MAX_LINE + 1, 3 * MAX_LINE)),
    st.tuples(st.just("poll"), st.just(0)),
    st.tuples(st.just("kill"), st.integers(1, 3)),
), min_size=1, max_size=30)


class Killed(Exception):
    pass


class Log:
    """The real file plus the model: ``current``/``rotated`` rows, ``partial`` text, ``due``."""

    def __init__(self, root: Path):
        self.path = root / "logs" / "traffic.log"
        self.path.parent.mkdir()
        self.path.write_bytes(b"")
        self.rotated_path = self.path.with_name("traffic.log.1")
        self.next = 0
        self.current: list[str] = []
        self.rotated: list[str] = []
        self.partial = ""
        self.due: list[str] = []
        self.long: list[str] = []
        self.rotated_since_poll = False

    def row(self) -> str:
        self.next += 1
        return f"{self.next},t,1,2,{self.next},0"

    def write(self, text: str) -> None:
        with open(self.path, "a") as handle:
            handle.write(text)

    def append(self, k: int) -> None:
        rows = [self.row() for _ in range(k)]
        self.write("".join(r + "\n" for r in rows))
        if self.partial:  # the first row completes the partial one: one longer row
            rows[0] = self.partial + rows[0]
            self.partial = ""
        self.current += rows

    def start_partial(self, k: int) -> None:
        text = self.row()[:k + 2]
        self.write(text)
        self.partial += text

    def finish(self) -> None:
        if self.partial:
            self.write("\n")
            self.current.append(self.partial)
            self.partial = ""

    def truncate(self, rows: int = 0) -> None:
        with open(self.path, "r+") as handle:
            handle.truncate(0)
        self.current, self.partial = [], ""
        if rows:
            self.append(rows)

    def rotate(self) -> None:
        os.replace(self.path, self.rotated_path)
        self.path.write_bytes(b"")
        self.rotated, self.current, self.partial = self.current, [], ""
        self.rotated_since_poll = True

    def long_line(self, length: int) -> None:
        self.finish()
        text = (self.row() + ",") + "x" * length
        self.write(text + "\n")
        self.long.append(text)
        self.current.append(text)

    def polled(self) -> None:
        for row in self.rotated + self.current:
            if row not in self.due:
                self.due.append(row)
        self.rotated, self.rotated_since_poll = [], False


def collected(out: Path) -> tuple[list[str], list[int]]:
    rows = []
    for chunk in sorted(out.glob("traffic-*.csv")):
        rows += chunk.read_text().splitlines()[1:]
    quarantined = []
    qfile = out / "quarantine" / "traffic.jsonl"
    if qfile.exists():
        quarantined = [json.loads(line)["line"] for line in qfile.read_text().splitlines()]
    return rows, quarantined


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_collected_rows_equal_the_model(tmp_path_factory, ops):
    root = tmp_path_factory.mktemp("log")
    log = Log(root)
    out = root / "chunks"
    make = lambda: LogCollector(log.path, out, max_line=MAX_LINE)
    collector = make()
    for op, arg in ops:
        if op == "rotate" and log.rotated_since_poll:
            collector.poll()  # the collector follows one rotation between looks (tail -F)
            log.polled()
        if op == "append":
            log.append(arg)
        elif op == "partial":
            log.start_partial(arg)
        elif op == "finish":
            log.finish()
        elif op == "truncate":
            log.truncate()
        elif op == "rewrite-longer":
            log.truncate(len(log.current) + arg)
        elif op == "rotate":
            log.rotate()
        elif op == "long-line":
            log.long_line(arg)
        elif op == "poll":
            collector.poll()
            log.polled()
        elif op == "kill":  # the process dies after ``arg`` file writes of a poll, and starts again
            real, calls = collect._write_atomic, [0]

            def dying(path, data):
                calls[0] += 1
                if calls[0] > arg:
                    raise Killed
                real(path, data)

            collect._write_atomic = dying
            try:
                collector.poll()
            except Killed:
                pass
            finally:
                collect._write_atomic = real
            collector = make()
            collector.poll()
            log.polled()
    collector.poll()
    log.polled()
    rows, quarantined = collected(out)
    expected = [r for r in log.due if r not in log.long]
    assert sorted(rows) == sorted(expected)  # nothing lost, nothing twice
    assert len(rows) == len(set(rows))
    assert len(quarantined) == len([r for r in log.due if r in log.long])
