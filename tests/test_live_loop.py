"""The live loop's decisions and journal (:mod:`streamsched.pipeline.live_loop`) without a JVM: the
example job's graph (datagen(2) -REBALANCE-> Calc(3) -HASH-> aggregate(3), 1,000 source records/s
of 500 bytes) on 3 TaskManagers x 2 slots behind 10 Mbit/s links, the real ``optimal``
scheduler (objective=throughput) re-planning, snapshots written by the store, a stand-in for the
collector and for ``apply flink`` (what the loop asks of them is recorded).

Hand-computed figures: with P0 (tm-1: both sources and two subtasks of each of Calc and the
aggregate; tm-2: one of each), tm-2 receives 1/3 of the sources' 500,000 B/s plus 2/9 of Calc's
output: 277,778 B/s, the busiest direction. At 1.25e6 B/s that is U = 2/9: 4,500 records/s.
tm-2 slowed to 2 Mbit/s (250,000 B/s): U = 10/9, 900 records/s; moving tm-2's two subtasks to
tm-3 gives 4,500 again (+400 %)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

from streamsched.cli import main
from streamsched.engines.flink.documents import FlinkReading
from streamsched.model import Cluster, Placement, TaskGraph
from streamsched.model.cluster import Node
from streamsched.model.units import CORES
from streamsched.pipeline.live_loop import (JOURNAL_FORMAT, ChunkFigures, LiveLoop, read_journal, summary)
from streamsched.pipeline.store import write_snapshot
from streamsched.schedulers import get_scheduler

WINDOW = 15.0
T0 = 1_700_000_010.0
SOURCES, CALCS, AGGS = [0, 1], [2, 3, 4], [5, 6, 7]
P0 = [0, 0, 0, 0, 1, 0, 0, 1]  # node per task: tm-1 = 0, tm-2 = 1, tm-3 = 2


def example_graph() -> TaskGraph:
    src, dst, rate = [], [], []
    for s in SOURCES:
        for c in CALCS:
            src.append(s), dst.append(c), rate.append(500 / 3)
    for c in CALCS:
        for a in AGGS:
            src.append(c), dst.append(a), rate.append(1000 / 9)
    return TaskGraph.build(name="streamsched-example", operator_names=["Source: events", "Calc", "GroupAggregate"],
                           task_operator=[0, 0, 1, 1, 1, 2, 2, 2], load=[0.01] * 8, load_unit=CORES,
                           src=np.array(src), dst=np.array(dst), rate=rate, bytes_rate=[r * 500 for r in rate],
                           task_ids=list(range(8)))


def lab(slow: float | None = None) -> Cluster:
    rate = 10e6 / 8
    nodes = tuple(Node(name=f"tm-{k}", capacity=2 / 3, cores=1, task_slots=2, net_in=rate, net_out=rate)
                  for k in (1, 2, 3))
    if slow is not None:
        nodes = (nodes[0], replace(nodes[1], net_in=slow * 1e6 / 8, net_out=slow * 1e6 / 8), nodes[2])
    return Cluster(name="lab", nodes=nodes, capacity_unit=CORES)


@dataclass
class Collector:
    """What the loop asks of its collector: the latest reading and each window's figures."""

    reading: FlinkReading
    time: float = 0.0
    figures: list = None

    def latest_reading(self):
        return self.time, self.reading

    def figures_between(self, start, end):
        return [f for f in self.figures if start <= f.time < end]


class Apply:
    """Stands in for ``apply flink``: records its calls, answers as apply does when it applied."""

    def __init__(self, during=None):
        self.calls, self.during = [], during

    def __call__(self, url, plan_file, job_id, **kwargs):
        self.calls.append({"plan": json.loads(Path(plan_file).read_text()), **kwargs})
        if self.during:
            self.during()

        @dataclass
        class Result:
            applied: bool = True
            reason: str = "applied and verified per subtask"
            moved: list = None
            downtime_s: float = 1.5
            rescales: list = None

        return Result(moved=[{"vertex": "Calc", "subtask": 2}, {"vertex": "GroupAggregate", "subtask": 2}],
                      rescales=[])


@pytest.fixture
def setting(tmp_path):
    graph = example_graph()
    reading = FlinkReading(graph, Placement.build(np.array(P0)), lab(), {"job_id": "0" * 32})
    collector = Collector(reading, T0, [])
    apply = Apply()
    loop = LiveLoop(get_scheduler("optimal", objective="throughput"), lab(), collector, "http://jm", "0" * 32,
                    tmp_path / "journal.jsonl", WINDOW, tmp_path / "plans", apply_fn=apply)
    return graph, collector, apply, loop, tmp_path


def window(loop, graph, collector, tmp_path, k: int, throughput: float = 4000.0):
    """Window k (end T0 + k W): a reading in it with ``throughput``, its snapshot, the loop's call."""
    end = T0 + k * WINDOW
    collector.figures.append(ChunkFigures(end - 0.8 * WINDOW, WINDOW, throughput, throughput * 500 * 8 / 9))
    collector.time = max(collector.time, end - 0.8 * WINDOW)
    manifest = {"window": {"kind": "tumbling", "seconds": WINDOW, "start": end - WINDOW, "end": end},
                "sources": ["arriving"], "rows": {"read": 32, "accepted": 32, "in_window": 32}}
    snapshot = write_snapshot(tmp_path / "store", graph, manifest)
    return loop.on_graph(graph, str(snapshot))


def test_the_loop_leaves_an_optimal_job_alone_and_moves_it_within_two_windows_of_a_slowed_link(setting):
    graph, collector, apply, loop, tmp_path = setting
    for k in (1, 2, 3):
        window(loop, graph, collector, tmp_path, k)
    rows = read_journal(loop.journal)
    assert [r["decision"] for r in rows] == ["keep"] * 3 and not apply.calls
    assert rows[0]["basis"] == "throughput"
    assert rows[0]["current"]["predicted"] == pytest.approx(4500, rel=1e-6)
    assert rows[0]["current"]["bottleneck"] in ("link out of tm-1", "link in of tm-2")  # the same bytes
    loop.on_cluster(lab(slow=2))
    window(loop, graph, collector, tmp_path, 4, throughput=900)
    window(loop, graph, collector, tmp_path, 5, throughput=900)
    rows = read_journal(loop.journal)
    assert rows[3]["cluster_changed"] and rows[3]["decision"] == "wait"
    assert rows[3]["current"]["predicted"] == pytest.approx(900, rel=1e-6)
    assert rows[3]["proposed"]["predicted"] == pytest.approx(4500, rel=1e-6)
    assert rows[3]["gain"] == pytest.approx(4.0, rel=1e-6)
    assert rows[4]["decision"] == "apply" and len(apply.calls) == 1
    plan = apply.calls[0]["plan"]
    where = {t: plan["nodes"][n] for t, n in zip(plan["tasks"], plan["node"])}
    assert where == {0: "tm-1", 1: "tm-1", 2: "tm-1", 3: "tm-1", 4: "tm-3", 5: "tm-1", 6: "tm-1", 7: "tm-3"}
    assert apply.calls[0]["min_gain"] == -math.inf and apply.calls[0]["machines"].has_links
    assert sorted((m["task"], m["from"], m["to"]) for m in rows[4]["moved"]) == [(4, "tm-2", "tm-3"), (7, "tm-2", "tm-3")]
    assert rows[4]["downtime_s"] == 1.5
    # the apply ran from T0 + 77 to T0 + 78 s (window 6's reading covers T0 + 63 .. 78: it settles);
    # the readings after it are set against 4,500
    loop.applied["started"], loop.applied["ended"] = T0 + 5 * WINDOW + 2, T0 + 5 * WINDOW + 3
    window(loop, graph, collector, tmp_path, 6, throughput=2000)
    collector.reading = replace(collector.reading, placement=Placement.build(np.array([0, 0, 0, 0, 2, 0, 0, 2])))
    window(loop, graph, collector, tmp_path, 7, throughput=4200)
    window(loop, graph, collector, tmp_path, 8, throughput=4300)
    rows = read_journal(loop.journal)
    assert [r["decision"] for r in rows[5:]] == ["settling", "keep", "keep"]
    assert rows[6]["since_apply"]["predicted"] == pytest.approx(4500, rel=1e-6)
    assert rows[6]["since_apply"]["ratio"] == pytest.approx(4200 / 4500)
    assert rows[6]["current"]["predicted"] == pytest.approx(4500, rel=1e-6)
    result = summary(rows)
    assert result["complete"] and result["windows"] == 8
    assert result["decisions"] == {"keep": 5, "wait": 1, "apply": 1, "settling": 1}
    assert result["applies"] == [{"window": T0 + 5 * WINDOW, "moved": 2, "downtime_s": 1.5, "basis": "throughput",
                                  "measured_before": 900, "predicted": pytest.approx(4500),
                                  "measured_after": 4250, "windows_after": 2}]


def test_one_noisy_window_moves_nothing_and_a_dry_run_applies_nothing(setting):
    graph, collector, apply, loop, tmp_path = setting
    loop.on_cluster(lab(slow=2))
    window(loop, graph, collector, tmp_path, 1)
    loop.on_cluster(lab())  # the link recovered before the second window: no apply
    window(loop, graph, collector, tmp_path, 2)
    loop.dry_run = True
    loop.on_cluster(lab(slow=2))
    for k in (3, 4, 5):
        window(loop, graph, collector, tmp_path, k)
    assert [r["decision"] for r in read_journal(loop.journal)] == ["wait", "keep", "wait", "would-apply", "wait"]
    assert not apply.calls


def test_windows_without_a_reading_get_a_line_and_a_replayed_window_none(setting):
    graph, collector, apply, loop, tmp_path = setting
    window(loop, graph, collector, tmp_path, 1)
    window(loop, graph, collector, tmp_path, 4)  # windows 2 and 3 had no reading
    again = LiveLoop(loop.scheduler, lab(), collector, "http://jm", "0" * 32, loop.journal, WINDOW, tmp_path / "plans")
    assert window(again, graph, collector, tmp_path, 4) is None  # a restarted watch replays window 4
    rows = read_journal(loop.journal)
    assert [(r["window"]["end"] - T0) / WINDOW for r in rows] == [1, 2, 3, 4]
    assert [r["decision"] for r in rows] == ["keep", "no-data", "no-data", "keep"]
    assert summary(rows)["complete"]
    doubled = summary(rows + rows[-1:])
    assert not doubled["complete"] and doubled["duplicates"] == [T0 + 4 * WINDOW]


def test_a_stop_during_an_apply_waits_for_its_journal_line(setting):
    graph, collector, apply, loop, tmp_path = setting
    answers = []
    apply.during = lambda: answers.append((loop.request_stop(), loop.stopped.is_set()))
    loop.on_cluster(lab(slow=2))
    window(loop, graph, collector, tmp_path, 1)
    window(loop, graph, collector, tmp_path, 2)  # applies; the stop asked meanwhile comes after its line
    assert answers == [(False, False)]  # during the apply: not now, and the watch goes on
    assert loop.stopped.is_set()  # once its line is written
    assert [r["decision"] for r in read_journal(loop.journal)] == ["wait", "apply"]
    assert loop.request_stop() and loop.stopped.is_set()  # no apply in progress: stop at once
    window(loop, graph, collector, tmp_path, 3)
    assert len(apply.calls) == 1  # no apply starts once a stop was asked


def test_journal_command_summary_page_and_bad_lines(setting, capsys):
    graph, collector, apply, loop, tmp_path = setting
    loop.on_cluster(lab(slow=2))
    for k in (1, 2, 3):
        window(loop, graph, collector, tmp_path, k)
    page = tmp_path / "page.html"
    assert main(["journal", str(loop.journal), "--html", str(page)]) == 0
    out = capsys.readouterr().out
    assert "3 windows" in out and "complete" in out and "apply in the window ending" in out
    text = page.read_text()
    assert "<svg" in text and "l-loop-timeline" in text and "applies" in text
    with open(loop.journal, "a") as handle:
        handle.write("{broken\n")
    assert main(["journal", str(loop.journal)]) == 2
    err = capsys.readouterr().err
    assert f"journal.jsonl:4: not JSON" in err and "Traceback" not in err
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"format": "x"}) + "\n")
    assert main(["journal", str(other)]) == 2
    assert f"other.jsonl:1: not a line of a live-loop journal ({JOURNAL_FORMAT})" in capsys.readouterr().err


@pytest.mark.slow  # a network lab and two 2 s streams
@pytest.mark.measures  # CI's parallel step read 7.1 Mbit/s of 8 beside two busy workers
def test_set_rate_changes_a_running_link_and_the_lab_cluster_file(tmp_path):
    """``netlab.set_rate`` on a built lab: a TCP stream from the slowed TaskManager measures within
    10 % of the new rate (the shaped rate counts Ethernet frames: payload is ~95 % of it), the
    other direction too, and the cluster file's node carries the new capacities."""
    from conftest import lab_missing
    from streamsched.engines.flink import netlab

    if lab_missing():
        pytest.skip(lab_missing())
    import yaml

    lab_ = netlab.create(tmp_path, 2, netlab.LabOptions(link_mbit=20))
    try:
        cluster_file = tmp_path / "cluster.yaml"
        cluster_file.write_text(yaml.safe_dump(netlab.cluster_of(lab_, 2, 1280).to_dict(), sort_keys=False))
        netlab.set_rate(tmp_path, "tm-2", 8, 4, cluster_file)
        for source, target, mbit in (("tm-2", "tm-1", 4), ("tm-1", "tm-2", 8)):
            rate = netlab.measure(lab_, source, target, seconds=2.0, warm_s=0.5) * 8 / 1e6
            assert abs(rate - mbit) <= 0.1 * mbit, (source, target, rate)
        node = Cluster.load(cluster_file).nodes[1]
        assert (node.name, node.net_in, node.net_out, node.bandwidth_mbps) == ("tm-2", 1e6, 5e5, 4.0)
        assert (netlab.load(tmp_path).tm("tm-2").in_mbit, netlab.load(tmp_path).tm("tm-2").out_mbit) == (8, 4)
        with pytest.raises(Exception, match="must be in"):
            netlab.set_rate(tmp_path, "tm-2", 0, 4)
    finally:
        netlab.teardown(tmp_path)
