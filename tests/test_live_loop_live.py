"""``watch --apply-flink`` on a live Flink 2.3 in the network lab (issue 36 item 3), the scenario of
``benchmarks/live_loop.py`` shortened: 3 TaskManagers x 2 slots behind 4 Mbit/s links, the
example job placed at P0 (the throughput model's optimum: it must be left alone), then the link
of the TaskManager holding one subtask of Calc and of the aggregate slowed to 1 Mbit/s with
``netlab.set_rate``. The loop (a ``streamsched watch`` process, stopped by SIGTERM) must apply
nothing before the change, move that TaskManager's work within 3 windows of it, and the job's
measured throughput after the move must beat the unchanged placement's under the change; the
journal has one line per window. About 6 minutes on 2 shared cores."""

from __future__ import annotations

import shutil
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
def lab3(tmp_path_factory):
    from streamsched.engines.flink import local, plugin

    plugin.build()
    base = tmp_path_factory.mktemp("flink-lab3")
    cluster = scenario.start_lab(base)
    try:
        yield cluster, scenario.submit(cluster)
    finally:
        local.stop(base)


def test_the_loop_follows_a_slowed_link_and_leaves_an_unchanged_job_alone(lab3, tmp_path):
    cluster, job = lab3
    placed = scenario.place(cluster, job, out=tmp_path)
    light = placed["light"]
    assert sorted(placed["where"][v].count(light) for v in placed["where"]) == [0, 1, 1]
    run = scenario.run_loop(cluster, job, tmp_path / "loop", WINDOW, before=4, after=7, slow_mbit=1.0,
                            dry_run=False, slowed=light, log=lambda message: None)
    rows, summary = run["rows"], run["summary"]
    assert summary["complete"] and not summary["duplicates"], summary
    before = [r for r in rows if r["window"]["end"] <= run["changed"]]
    after = [r for r in rows if r["window"]["end"] > run["changed"]]
    assert len(before) >= 4 and len(after) >= 5
    # nothing changed, nothing moved
    assert not [r for r in before if r["decision"] in ("apply", "apply-failed", "would-apply")], \
        [(r["decision"], r["why"]) for r in before]
    # the loop re-places within 3 windows of the change (the first window after it is number 0)
    applies = [k for k, r in enumerate(after) if r["decision"] == "apply"]
    assert applies and applies[0] <= 2, [(r["decision"], r["why"]) for r in after]
    moved = after[applies[0]]["moved"]
    assert moved and {m["from"] for m in moved} == {light}, moved
    assert all(m["to"] not in (light,) for m in moved)
    # measured: readings of the unchanged placement under the change (after the change, before the
    # apply began) against readings of the moved job (after the apply ended)
    started, ended = after[applies[0]]["apply_times"]
    covers = [(r["measured"]["covers"], r["measured"]["throughput"]) for r in rows if r["measured"]["readings"]]
    slowed = [v for (a, b), v in covers if a >= run["changed"] and b <= started]
    moved_job = [v for (a, b), v in covers if a >= ended]
    assert slowed and moved_job, [(r["decision"], r["measured"]) for r in after]
    assert min(moved_job) > 1.5 * max(slowed), (slowed, moved_job)
    assert all(r["since_apply"]["predicted"] for r in rows if r["measured"]["covers"][0] >= ended)
    for row in rows:  # every line says what a reader needs
        assert {"window", "measured", "decision", "why"} <= set(row)
        if row["decision"] not in ("no-data", "settling"):
            assert {"snapshot", "rows", "current", "proposed", "gain", "threshold"} <= set(row), row
