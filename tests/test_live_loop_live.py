"""``watch --apply-flink`` on a live Flink 2.3 in the network lab (issue 36 item 3), the scenario of
``benchmarks/live_loop.py`` shortened: 3 TaskManagers x 2 slots behind 4 Mbit/s links, the
example job placed at P0 (the throughput model's optimum: it must be left alone), then the link
of the TaskManager holding one subtask of Calc and of the aggregate slowed to 1 Mbit/s with
``netlab.set_rate``; run twice, in --dry-run and applying. The loop (a ``streamsched watch``
process, stopped by SIGTERM) must apply nothing before the change, move that TaskManager's work
within 3 windows of it, and the job's measured throughput after the move must beat the unchanged
placement's under the same change (the dry run's); the journal has one line per window. About
10 minutes on 2 shared cores.

The second change (``--change shift`` of the benchmark, shortened): the job's hot key shifts
from GroupAggregate subtask 2 to subtask 0 (the example job of kind ``shifting``), placed at
P0_SHIFT (the model's optimum before the shift); the dry run around one shift, the loop around
the next. The same assertions, and the hot subtask measured on the job's own counters."""

from __future__ import annotations

import shutil
import statistics
import sys
from pathlib import Path

import pytest

from conftest import lab_missing

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import live_loop as scenario  # noqa: E402  (benchmarks/live_loop.py)

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(lab_missing() is not None, reason=str(lab_missing())),
              pytest.mark.skipif(shutil.which("java") is None or shutil.which("javac") is None,
                                 reason="Java (JDK 17) is missing: the live Flink tests need java and javac")]
WINDOW = 15.0


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The scenario's lab (3 TaskManagers x 2 slots behind 4 Mbit/s links), shared by the module."""
    from streamsched.engines.flink import local, plugin

    plugin.build()
    base = tmp_path_factory.mktemp("flink-lab3")
    cluster = scenario.start_lab(base)
    try:
        yield cluster
    finally:
        local.stop(base)


@pytest.fixture
def lab3(lab):
    """The example job on the lab, cancelled after the test (the next one's job has the links to itself)."""
    job = scenario.submit(lab)
    try:
        yield lab, job
    finally:
        scenario.cancel(lab, job)


def test_the_loop_follows_a_slowed_link_and_leaves_an_unchanged_job_alone(lab3, tmp_path):
    """Two runs from P0 with the same change: in --dry-run (the unchanged placement measured under
    the change; the loop journals what it would do) and with the loop applying."""
    cluster, job = lab3
    runs = {}
    for name, dry, after in (("without", True, 6), ("loop", False, 7)):
        placed = scenario.place(cluster, job, out=tmp_path)
        light = placed["light"]
        assert sorted(placed["where"][v].count(light) for v in placed["where"]) == [0, 1, 1]
        runs[name] = scenario.run_loop(cluster, job, tmp_path / name, WINDOW, before=3, after=after, slow_mbit=1.0,
                                       dry_run=dry, slowed=light, log=lambda message: None)
        runs[name]["light"] = light
    for name, run in runs.items():
        rows, summary = run["rows"], run["summary"]
        assert summary["complete"] and not summary["duplicates"], (name, summary)
        before = [r for r in rows if r["time"] < run["changed"]]  # decided before the change
        assert len(before) >= 3
        # nothing changed, nothing moved (nor proposed twice in a row)
        assert not [r for r in before if r["decision"] in ("apply", "apply-failed", "would-apply")], \
            [(r["decision"], r["why"]) for r in before]
        for row in rows:  # every line says what a reader needs
            assert {"window", "measured", "decision", "why"} <= set(row)
            if row["decision"] not in ("no-data", "settling"):
                assert {"snapshot", "rows", "current", "proposed", "gain", "threshold"} <= set(row), row
    # the loop re-places within 3 windows of the change (the first window decided after it is 0),
    # moving the slowed TaskManager's work; the dry run proposes the same in as many windows
    for name, decision in (("loop", "apply"), ("without", "would-apply")):
        after = [r for r in runs[name]["rows"] if r["time"] > runs[name]["changed"]]
        first = next(k for k, r in enumerate(after) if r["decision"] == decision)
        assert first <= 2, [(r["decision"], r["why"]) for r in after]
        moved, light = after[first]["moved"], runs[name]["light"]  # off the slowed TaskManager, none onto it
        assert sum(m["from"] == light for m in moved) == 2 and all(m["to"] != light for m in moved), moved
    assert runs["without"]["summary"]["decisions"].get("apply", 0) == 0
    # measured side by side: the moved job's readings (after the apply ended) against the unchanged
    # placement's under the same change (readings starting a window after the change: Flink's
    # buffers in front of the slowed link take that long to fill)
    loop = runs["loop"]
    started, ended = next(r["apply_times"] for r in loop["rows"] if r["decision"] == "apply")
    moved_job = [r["measured"]["throughput"] for r in loop["rows"]
                 if r["measured"]["readings"] and r["measured"]["covers"][0] >= ended]
    without = runs["without"]
    unchanged = [r["measured"]["throughput"] for r in without["rows"] if r["measured"]["readings"]
                 and r["measured"]["covers"][0] >= without["changed"] + WINDOW]
    assert moved_job and unchanged, (loop["rows"], without["rows"])
    assert statistics.fmean(moved_job) > 1.5 * statistics.fmean(unchanged), (moved_job, unchanged)
    assert all(r["since_apply"]["predicted"] for r in loop["rows"] if r["measured"]["covers"][0] >= ended)


def test_the_loop_follows_a_shifted_hot_key_and_leaves_an_unchanged_job_alone(lab, tmp_path):
    """The shifting job at P0_SHIFT: the dry run around the first shift of its hot key (and back),
    the loop around the next one."""
    runs = scenario.run_shift(lab, tmp_path, WINDOW, before=3, after_dry=4, after_loop=7, log=lambda message: None)
    light = runs["loop"]["placed"]["light"]
    where = runs["loop"]["placed"]["by_name"]
    heavy = next(tms[0] for vertex, tms in where.items() if vertex.startswith("Source"))
    assert heavy != light and sorted(tms.count(light) for tms in where.values()) == [0, 1, 1], where
    for name, run in runs.items():
        rows, summary = run["rows"], run["summary"]
        assert summary["complete"] and not summary["duplicates"], (name, summary)
        # the windows read before the shift (the time is the job's own: a watch slow to decide
        # still decides on them)
        before = [r for r in rows if r["measured"]["covers"][1] <= run["changed"]]
        assert len(before) >= 3, (name, len(before))
        assert not [r for r in before if r["decision"] in ("apply", "apply-failed", "would-apply")], \
            [(r["decision"], r["why"]) for r in before]
        for row in rows:
            assert {"window", "measured", "decision", "why"} <= set(row)
            if row["decision"] not in ("no-data", "settling"):
                assert {"snapshot", "rows", "current", "proposed", "gain", "threshold"} <= set(row), row
        # the shift is the job's own, measured on its counters: the hot aggregate subtask is 2
        # in the windows read before it, 0 in those read a window after it (SHIFT_KEYS)
        hot = [(scenario.hot_subtask(r.get("snapshot")), r["measured"]["covers"]) for r in rows
               if r["decision"] not in ("settling", "no-data")]  # an apply's rescales change the parallelism
        assert {h for h, covers in hot if covers[1] < run["changed"]} == {2}, (name, hot)
        assert {h for h, covers in hot if covers[0] >= run["changed"] + WINDOW} == {0}, (name, hot)
    # within 3 windows of the shift: the loop applies, the dry run proposes; aggregate subtask 0
    # (hot now) leaves the light TaskManager for the one holding the sources
    for name, decision in (("loop", "apply"), ("without", "would-apply")):
        after = [r for r in runs[name]["rows"] if r["measured"]["covers"][1] > runs[name]["changed"]]
        first = next(k for k, r in enumerate(after) if r["decision"] == decision)
        assert first <= 2, [(r["decision"], r["why"]) for r in after]
        moved = after[first]["moved"]
        aggregate = sorted(m["task"] for m in moved if m["operator"].startswith("GroupAggregate"))
        assert {"task": min(aggregate), "from": light, "to": heavy} in \
            [{k: m[k] for k in ("task", "from", "to")} for m in moved], moved
    assert runs["without"]["summary"]["decisions"].get("apply", 0) == 0
    # measured side by side: the moved job after its apply against the unchanged placement under
    # the same shift (the dry run's readings from a window after the shift until it shifted back)
    loop, without = runs["loop"], runs["without"]
    started, ended = next(r["apply_times"] for r in loop["rows"] if r["decision"] == "apply")
    moved_job = [r["measured"]["throughput"] for r in loop["rows"]
                 if r["measured"]["readings"] and r["measured"]["covers"][0] >= ended]
    unchanged = [r["measured"]["throughput"] for r in without["rows"] if r["measured"]["readings"]
                 and r["measured"]["covers"][0] >= without["changed"] + WINDOW
                 and r["measured"]["covers"][1] <= without["times"][1]]
    assert moved_job and unchanged, (loop["rows"], without["rows"])
    assert statistics.fmean(moved_job) > 1.3 * statistics.fmean(unchanged), (moved_job, unchanged)
    assert all(r["since_apply"]["predicted"] for r in loop["rows"] if r["measured"]["covers"][0] >= ended)
