"""The example job's ``shifting`` kind (issue 36 item 3): its hot key as SQL, bad schedules
refused in one line, and the live loop's shift scenario as the throughput model sees it. The live behaviour (the hot GroupAggregate subtask 2 before a shift, 0
after, on the job's own counters) is tests/test_live_loop_live.py's."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

from streamsched.cli import main
from streamsched.engines.flink import local
from streamsched.errors import InputError
from streamsched.model.cluster import Cluster, Node
from streamsched.model.colocation import CoLocationRule
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.model.throughput import predict_throughput
from streamsched.schedulers import get_scheduler


def test_the_hot_key_alternates_at_the_given_times():
    assert local.SHIFT_KEYS == (0, 4)
    assert local.shift_sql([100]) == "CASE WHEN UNIX_TIMESTAMP() < 100 THEN 0 ELSE 4 END"
    assert local.shift_sql([100, 250, 400]) == ("CASE WHEN UNIX_TIMESTAMP() < 100 THEN 0 WHEN UNIX_TIMESTAMP() < 250 "
                                                "THEN 4 WHEN UNIX_TIMESTAMP() < 400 THEN 0 ELSE 4 END")
    source, sink, insert = local.example_sql(100, 100, 2, 10, "shifting", shift_at=[100, 250])
    assert "'fields.k.max' = '9'" in source and "blackhole" in sink
    assert ("SELECT CASE WHEN MOD(ABS(v), 1000) < 700 THEN CASE WHEN UNIX_TIMESTAMP() < 100 THEN 0 "
            "WHEN UNIX_TIMESTAMP() < 250 THEN 4 ELSE 0 END ELSE k END AS k") in insert
    # the other kinds are as they were
    assert local.example_sql(100, 100, 2, 10, "skewed")[2] == local.example_sql(100, 100, 2, 10, "skewed", shift_at=())[2]


@pytest.mark.parametrize("kind, times, message", [
    ("shifting", [], "kind shifting needs --shift-at, increasing Unix seconds >= 0 (got [])"),
    ("shifting", [200, 100], "increasing Unix seconds >= 0 (got [200, 100])"),
    ("shifting", [100, 100], "(got [100, 100])"),
    ("shifting", [-5], "(got [-5])"),
    ("skewed", [100], "--shift-at is for kind shifting only"),
])
def test_bad_schedules_are_refused(kind, times, message):
    with pytest.raises(InputError) as error:
        local.example_sql(100, 100, 2, 10, kind, shift_at=times)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_bad_shift_time_exits_2_in_one_line(tmp_path, capsys):
    code = main(["flink-local", "submit-example", "--dir", str(tmp_path), "--kind", "shifting", "--shift-at", "+10,x"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == "error: --shift-at '+10,x': expected Unix seconds or +SECONDS, comma-separated"
    assert list(tmp_path.iterdir()) == []


def _job(hot: int) -> TaskGraph:
    """The example job as the lab reads it (datagen(2) -REBALANCE-> Calc(3) -HASH-> GroupAggregate(3),
    540 bytes a record over both exchanges, 1,800 records/s), ``SKEW`` of the exchange on aggregate
    subtask ``hot``."""
    share = np.full(3, (1 - local.SKEW) / 3)
    share[hot] += local.SKEW
    src = [0, 0, 0, 1, 1, 1] + [c for c in (2, 3, 4) for _ in range(3)]
    dst = [2, 3, 4, 2, 3, 4] + [5, 6, 7] * 3
    rate = np.array([300.0] * 6 + [600.0 * s for _ in range(3) for s in share])
    return TaskGraph.build("job", ["Source", "Calc", "GroupAggregate"], [0, 0, 1, 1, 1, 2, 2, 2], [0.02] * 8, src,
                           dst, rate, bytes_rate=rate * 540.0, load_unit="cores")


def test_the_shift_scenario_is_what_the_model_says():
    """benchmarks/live_loop.py's P0_SHIFT on its lab (3 TaskManagers of 2 slots behind 4 Mbit/s
    links): the throughput optimum while aggregate subtask 2 is hot (brute force over every
    slot-feasible placement), 2.2x below it once subtask 0 is; ``optimal`` (objective=throughput)
    then swaps the two aggregate subtasks, and leaves P0_SHIFT alone before."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import live_loop

    names = ["tm-1", "tm-2", "tm-3"]
    cluster = Cluster("lab", tuple(Node(n, 2 / 3, slots=1, cores=1, task_slots=2, net_in=live_loop.LINK_MBIT * 1e6 / 8,
                                        net_out=live_loop.LINK_MBIT * 1e6 / 8) for n in names), capacity_unit="cores")
    p0 = np.array([names.index(tm) for vertex in ("Source", "Calc", "GroupAggregate")
                   for tm in live_loop.P0_SHIFT[vertex]])
    assert p0.tolist() == [0, 0, 0, 0, 1, 1, 0, 0]
    scheduler = get_scheduler("optimal", objective="throughput")
    before, after = _job(hot=2), _job(hot=0)
    rule = CoLocationRule.of(before, cluster)
    # the TaskManagers are identical: every placement is one with source 0 on tm-1, relabelled
    best = max(predict_throughput(before, cluster, np.array(p)).throughput
               for p in itertools.product([0], *[range(3)] * 7) if not rule.violations(np.array(p)))
    # the busiest link (tm-1 out) carries a third of the records and a tenth of the exchange
    assert predict_throughput(before, cluster, p0).throughput == pytest.approx(best) == pytest.approx(500_000 / (0.4 * 540))
    assert scheduler.replan(before, cluster, Placement.build(p0)).node_of.tolist() == p0.tolist()
    shifted = predict_throughput(after, cluster, p0).throughput
    assert shifted == pytest.approx(500_000 / ((1 / 3 + 2 / 3 * 0.8) * 540))  # 0.8 of the exchange to subtask 0
    plan = scheduler.replan(after, cluster, Placement.build(p0)).node_of
    assert plan.tolist() == [0, 0, 0, 0, 1, 0, 0, 1]  # aggregate subtasks 0 and 2 change places
    assert predict_throughput(after, cluster, plan).throughput == pytest.approx(best) and best / shifted > 2.1
