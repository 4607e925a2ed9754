"""``watch --apply-flink`` on a live Flink 2.3 in the network lab (issue 36 item 3), the scenario of
``benchmarks/live_loop.py`` shortened: 3 TaskManagers x 2 slots behind 4 Mbit/s links, the
example job placed at P0 (the throughput model's optimum: it must be left alone), then the link
of the TaskManager holding one subtask of Calc and of the aggregate slowed to 1 Mbit/s with
``netlab.set_rate``. The loop (a ``streamsched watch`` process, stopped by SIGTERM) runs
:data:`QUIET` windows (3 minutes) with nothing changed and must move nothing, then must move
that TaskManager's work within 3 windows of the change; the same change in a --dry-run run
(one window before it) measures the unchanged placement under it, and the moved job must beat
it; each journal has one line per window. About 8 minutes on 2 shared cores.

The second change of issue 36 (a job whose hot key shifts, ``--change shift`` of the benchmark)
is measured by the benchmark (docs/benchmarks.md) and its scenario checked on the model by
tests/test_example_shifting.py; a live run of it takes as long again as this one."""

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
#: Windows decided before the change in the applying run: 3 minutes with nothing changed.
QUIET = 12


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
    the change; the loop journals what it would do) and with the loop applying, after 3 minutes
    with nothing changed."""
    cluster, job = lab3
    runs = {}
    for name, dry, before, after in (("without", True, 1, 5), ("loop", False, QUIET, 6)):
        placed = scenario.place(cluster, job, out=tmp_path)
        light = placed["light"]
        assert sorted(placed["where"][v].count(light) for v in placed["where"]) == [0, 1, 1]
        runs[name] = scenario.run_loop(cluster, job, tmp_path / name, WINDOW, before=before, after=after,
                                       slow_mbit=1.0, dry_run=dry, slowed=light, log=lambda message: None)
        runs[name]["light"] = light
    for name, run in runs.items():
        rows, summary = run["rows"], run["summary"]
        assert summary["complete"] and not summary["duplicates"], (name, summary)
        before = [r for r in rows if r["time"] < run["changed"]]  # decided before the change
        assert len(before) >= (QUIET if name == "loop" else 1), (name, len(before))
        if name == "loop":  # 3 minutes of windows
            assert before[-1]["window"]["end"] - before[0]["window"]["start"] >= QUIET * WINDOW
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
