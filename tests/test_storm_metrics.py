"""Storm metrics as Storm writes them: LoggingMetricsConsumer files and the CSV reporter.

The fixtures under tests/fixtures/storm/ were written by Storm's own ``LoggingMetricsConsumer``
(storm-client ``org/apache/storm/metric/LoggingMetricsConsumer.java``) through log4j with the
METRICS appender of Storm's ``log4j2/worker.xml``, and by Dropwizard's ``CsvReporter`` (what
``metrics2/reporters/CsvStormReporter.java`` builds); see the README there. Each test names the
Storm source its facts come from. Every expected number is computed by hand from the driver's
tables (MetricsFixtureDriver.java). The pure parser is tested without Spark; two Spark tests run
the ingest end to end.
"""

from __future__ import annotations

import collections
import shutil
from pathlib import Path

import numpy as np
import pytest

from streamsched import workloads
from streamsched.engines.storm import metrics_log as ML
from streamsched.engines.storm.metrics_csv import parse_metric_name
from streamsched.engines.storm.metrics_log import LineError, parse_line, topology_from_path
from streamsched.engines.storm.metrics_traffic import Record, Topology, interpret, read_topology, topology_of
from streamsched.errors import InputError
from streamsched.pipeline import row_checks
from streamsched.pipeline.generate import _storm_line, generate_metrics

FIXTURES = Path(__file__).parent / "fixtures" / "storm"
RANGE = (946684800.0, 4102444800.0)
V1 = FIXTURES / "storm-1.x-2.2/workers-artifacts/wordcount-1-1714557600/6700/worker.log.metrics"
V1_DIRTY = FIXTURES / "storm-1.x-2.2-dirty/workers-artifacts/wordcount-1-1714557600/6700/worker.log.metrics"
V2 = FIXTURES / "storm-2.3/workers-artifacts/wordfreq-2-1714560000/6700/worker.log.metrics"
V2_AMBIGUOUS = FIXTURES / "storm-2.3-ambiguous/workers-artifacts/filtered-3-1714563600/6700/worker.log.metrics"
CSV_DIR = FIXTURES / "storm-2.3-csv" / "csvmetrics"
T0, T1 = 1714557600, 1714560000


def _read(path: Path, fmt: str = "storm-log", interval: float = 60.0):
    files = [(str(path), fmt)] if path.is_file() else [(str(f), fmt) for f in sorted(path.iterdir())]
    return read_topology(files, topology_of(files[0][0], fmt, None), RANGE, interval)


def _totals(estimate) -> dict[tuple[int, int], float]:
    out: dict[tuple[int, int], float] = collections.defaultdict(float)
    for _, src, dst, tuples in estimate.traffic:
        out[(src, dst)] += tuples
    return dict(out)


def _mean_loads(estimate) -> dict[int, float]:
    samples = collections.defaultdict(list)
    for _, task, _, load in estimate.load:
        samples[task].append(load)
    return {t: pytest.approx(float(np.mean(v))) for t, v in samples.items()}


def test_quarantine_reasons_are_the_pipelines():
    assert (ML.MALFORMED, ML.MISSING, ML.WRONG_TYPE, ML.NEGATIVE, ML.OUT_OF_RANGE, ML.DUPLICATE) == (
        row_checks.MALFORMED, row_checks.MISSING, row_checks.WRONG_TYPE, row_checks.NEGATIVE,
        row_checks.OUT_OF_RANGE, row_checks.DUPLICATE)


def test_line_with_log4j_prefix_and_bare_line():
    # LoggingMetricsConsumer.java: "%d\t%15s:%-4d\t%3d:%-11s\t" + name padded and cut to 23 + "\t" +
    # value; log4j2/worker.xml: "%d %-8r %m%n".
    message = ("1714557601\tnode1.example.com:6700\t  1:__acker    \t__execute-count        \t"
               "{split:__ack_ack=40020}")
    for text in ("2024-05-01 10:00:01,122 1260     " + message, message,
                 "2024-05-01 10:00:01,122 123456789 " + message):  # %-8r is wider after 27 h
        line = parse_line(text)
        assert (line.timestamp, line.host, line.port, line.task, line.component) == (
            1714557601, "node1.example.com", 6700, 1, "__acker")
        assert (line.name, line.value, line.cut) == ("__execute-count", "{split:__ack_ack=40020}", False)
    # __system is task -1 (" -1" in %3d); a 23-character name may have been cut.
    cut = parse_line("1714560060\tnode2.example.com:6701\t -1:__system   \t__execute-count-sentenc\t12")
    assert (cut.task, cut.component, cut.name, cut.cut) == (-1, "__system", "__execute-count-sentenc", True)
    for text, reason in (("1714557601\tnode1:6700\tgarbage", ML.MALFORMED),
                         ("1714557601\tnode1:6700\t  1:spout\t__emit-count\t", ML.MISSING),
                         ("2024-05-01T10:00\tnode1:6700\t  1:spout\t__emit-count\t{}", ML.WRONG_TYPE),
                         ("1714557601\tnode1:6700\tx1:spout\t__emit-count\t{}", ML.WRONG_TYPE)):
        with pytest.raises(LineError) as caught:
            parse_line(text)
        assert caught.value.reason == reason


def test_generated_lines_have_the_bytes_storm_writes():
    # The generator's line for the data of a fixture line (written by Storm's consumer) carries
    # the same message byte for byte (LoggingMetricsConsumer.java's String.format and cut).
    storm = [line for line in V1.read_text().splitlines() if "  5:split" in line and "__execute-count" in line][0]
    message = ML.strip_prefix(storm)
    ours = _storm_line(T0 + 60, "node1.example.com", 6700, 5, "split", "__execute-count",
                       message.split("\t")[-1], T0)
    assert ML.strip_prefix(ours) == message
    assert ML.strip_prefix(ours) != ours  # and it has a log4j prefix
    long_name = _storm_line(T1, "node1.example.com", 6700, 7, "split", "__execute-count-sentences:default", "1", T1)
    assert "\t__execute-count-sentenc\t1" in long_name


def test_maps_fixture_pair_rates_loads_and_system_rows_by_hand():
    # Storm <= 2.2 built-in metrics (daemon/metrics/BuiltinBoltMetrics.java, MultiCountStatAndMetric):
    # per-bucket maps. Two 60 s buckets, the second with twice the first's counts.
    top, estimate, counts = _read(V1)
    assert top.name == "wordcount-1-1714557600"  # from workers-artifacts/<topology id>/<port>/
    # 10 tasks x 2 ticks: spouts 5 lines, splits 7, counts 7 (5 + __emit-count and
    # __transfer-count of only __ack_ack and __metrics: system), __acker 7, consumer 7,
    # __system 7 on each worker: per tick 34 accepted + 32 system = 66.
    assert (counts[str(V1)].read, counts[str(V1)].accepted, counts[str(V1)].system) == (132, 68, 64)
    assert counts[str(V1)].rejected == []
    # No system task in the graph: __acker (1), the consumer (2) and __system (-1) are left out.
    assert estimate.tasks == {3: "count", 4: "count", 5: "split", 6: "split", 7: "spout", 8: "spout"}
    # Senders' shares from __transfer-count default (the __ack_init / __metrics entries dropped):
    # spout 7: 1600 + 3200 = 4800, spout 8: 800 + 1600 = 2400 -> 2/3, 1/3; split 5: 2700 + 5400 =
    # 8100, split 6: 900 + 1800 = 2700 -> 3/4, 1/4. Executed (spout:default; __system:__tick
    # dropped): split 5 and 6: 1200 + 2400 = 3600 each; count 3: 2400 + 4800 = 7200, count 4: 3600.
    # Over a 120 s window: R(7,5) = 3600 * 2/3 / 120 = 20, R(8,5) = 3600 * 1/3 / 120 = 10,
    # R(5,3) = 7200 * 3/4 / 120 = 45, R(6,3) = 15, R(5,4) = 3600 * 3/4 / 120 = 22.5, R(6,4) = 7.5.
    rates = {pair: tuples / 120 for pair, tuples in _totals(estimate).items()}
    assert rates == pytest.approx({(7, 5): 20, (8, 5): 10, (7, 6): 20, (8, 6): 10,
                                   (5, 3): 45, (6, 3): 15, (5, 4): 22.5, (6, 4): 7.5})
    # Load = count * __execute-latency / 1000 / 60 s bucket: split 5: 1200 * 0.5 / 60000 = 0.01,
    # then 0.02 -> mean 0.015; split 6 (1.0 ms): 0.02, 0.04 -> 0.03; count 3 (0.25 ms):
    # 2400 * 0.25 / 60000 = 0.01, 0.02 -> 0.015; count 4 (0.5 ms): 0.01, 0.02 -> 0.015.
    assert _mean_loads(estimate) == {3: 0.015, 4: 0.015, 5: 0.015, 6: 0.03}


def test_dirty_lines_are_quarantined_with_their_reason_and_nothing_else():
    # The duplicate check looks at valid lines only: the wrong-type and negative copies come
    # just before their valid twins (same timestamp, task and metric) and do not push them out.
    top, estimate, counts = _read(V1_DIRTY)
    c = counts[str(V1_DIRTY)]
    assert [(line, reason) for line, reason, _ in c.rejected] == [
        (28, "malformed"),          # count 3's __execute-count cut inside its map
        (62, "wrong_type"),         # split 6: {spout:default=1200x}, before its twin (line 63)
        (122, "negative_count"),    # count 4: {split:default=-2400}, before its twin (line 123)
        (136, "duplicate"),         # split 5's tick-2 __execute-count again
        (137, "malformed"),         # the file ends 40 characters into a line
    ]
    assert (c.read, c.accepted, c.system) == (137, 68, 64)   # the clean file's 132 + 5
    clean = _read(V1)[1]
    assert _totals(estimate) == _totals(clean) and estimate.load == clean.load


def test_v2_cut_names_resolved_counters_differenced_and_a_restart():
    # Storm >= 2.3 (STORM-3673, metrics2/TaskMetrics.java, RateCounter.java): cumulative counters
    # and .m1_rate gauges under one cut name (the counter printed as a long, the gauge as a
    # double); __capacity (STORM-3697) is the busy fraction.
    top, estimate, counts = _read(V2)
    assert top.name == "wordfreq-2-1714560000"
    # Per tick: sentences 9 lines (2 system: __transfer-count-__ack_), split 7 16 (5 system:
    # __ack_ack and __tick), split 8 13 (2), count 9 (2), __acker 12, consumer 9, __system 5 x 2:
    # 50 application + 46 system = 96; four ticks.
    c = counts[str(V2)]
    assert (c.read, c.accepted, c.system, c.rejected) == (384, 200, 184, [])
    assert estimate.tasks == {3: "count", 4: "count", 5: "sentences", 6: "sentences", 7: "split", 8: "split"}
    # Deltas after the baseline tick (k = 0): sentences 5 transfers 1200 per tick, 6: 600 ->
    # shares 2/3, 1/3 ("__transfer-count-defaul" matches the cut stream "d" of
    # "__execute-count-sentenc", resolved to "sentences", the one component starting so).
    # split 7 and 8 execute 900 per tick: task 8 restarts before tick 3 (6300 -> 900: the 900
    # counted since). Split 7 transfers 2700, split 8 900 (900 again after its restart) -> 3/4,
    # 1/4; count 3 executes 2400 per tick, count 4 1200. Window of the 3 ticks, 180 s:
    # R(5,7) = 3 * 900 * 2/3 / 180 = 10, R(6,7) = 5, R(7,3) = 3 * 2400 * 3/4 / 180 = 30,
    # R(8,3) = 10, R(7,4) = 3 * 1200 * 3/4 / 180 = 15, R(8,4) = 5.
    rates = {pair: tuples / 180 for pair, tuples in _totals(estimate).items()}
    assert rates == pytest.approx({(5, 7): 10, (6, 7): 5, (5, 8): 10, (6, 8): 5,
                                   (7, 3): 30, (8, 3): 10, (7, 4): 15, (8, 4): 5})
    after_restart = {(s, d): v for ts, s, d, v in estimate.traffic if ts == T1 + 180 and d == 8}
    assert after_restart == pytest.approx({(5, 8): 600, (6, 8): 300})
    # Loads: __capacity as Storm reports it (executed x latency / 60 s window).
    assert _mean_loads(estimate) == {3: 0.01, 4: 0.01, 7: 0.0075, 8: 0.015}


def test_ambiguous_cut_names_are_one_input_error_naming_them():
    with pytest.raises(InputError) as caught:
        _read(V2_AMBIGUOUS)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{V2_AMBIGUOUS}: line ")
    assert "'__execute-count-sentenc'" in message and "'sentence-filter' or 'sentences'" in message
    assert "metrics reporter" in message and "CsvStormReporter" in message


def test_csv_reporter_full_names_give_the_same_rates():
    # metrics2/reporters/CsvStormReporter.java -> Dropwizard CsvReporter: one file per metric,
    # "t,count" / "t,value" then "<epoch s>,<value>"; names from StormMetricRegistry.java.
    name = parse_metric_name("storm.worker.wordfreq-2-1714560000.node2_example_com.split.default.8.6701-"
                             "__execute-count-sentences:default.m1_rate.csv")
    assert (name.topology, name.host, name.component, name.stream, name.task, name.port, name.name) == (
        "wordfreq-2-1714560000", "node2_example_com", "split", "default", 8, 6701,
        "__execute-count-sentences:default.m1_rate")
    system = parse_metric_name("storm.topology.wordfreq-2-1714560000.node1_example_com.__system.-1.6700-"
                               "GC.PS-Scavenge.count.csv")
    assert (system.component, system.stream, system.task) == ("__system", None, -1)
    top, estimate, counts = _read(CSV_DIR, "storm-csv")
    assert top.name == "wordfreq-2-1714560000"
    # 96 files (one per metric of the log's 96 lines per tick) x 4 reports: the same 200
    # application and 184 system rows as the cut-name log, and the same rates and loads.
    assert sum(c.read for c in counts.values()) == 384
    assert (sum(c.accepted for c in counts.values()), sum(c.system for c in counts.values())) == (200, 184)
    assert not any(c.rejected for c in counts.values())
    assert _totals(estimate) == pytest.approx(_totals(_read(V2)[1]))
    assert _mean_loads(estimate) == {3: 0.01, 4: 0.01, 7: 0.0075, 8: 0.015}


def test_counter_and_gauge_sharing_a_cut_name_and_the_latency_fallback():
    # Without __capacity (Storm < 2.3 with v2 metrics), load = delta count x latency gauge /
    # 1000 / seconds between the samples: 600 tuples x 2.0 ms / 1000 / 60 s = 0.02.
    def line(ts, task, component, name, value):
        return f"{ts}\tnode1:6700\t{task:>3}:{component:<11}\t{(name + ' ' * 23)[:23]}\t{value}"

    top = Topology("t", RANGE)
    texts = []
    for k, (up, down, latency) in enumerate(((1000, 3000, 2.0), (1600, 3600, 2.0))):
        ts = T1 + 60 * k
        texts += [line(ts, 1, "spout", "__transfer-count-default", up),
                  line(ts, 1, "spout", "__transfer-count-default.m1_rate", 10.0),
                  line(ts, 2, "bolt", "__execute-count-spout:default", down),
                  line(ts, 2, "bolt", "__execute-count-spout:default.m1_rate", 10.0),   # same cut name
                  line(ts, 2, "bolt", "__execute-latency-spout:default", latency)]
    for number, text in enumerate(texts, 1):
        parsed = parse_line(text)
        record = Record(source="f", line=number, raw=text, timestamp=parsed.timestamp, task=parsed.task,
                        component=parsed.component, name=parsed.name, value=parsed.value, cut=parsed.cut)
        top.add(interpret(record, RANGE))
    estimate = top.estimate()
    assert [r.kind for r in top.records[2:4]] == ["counter", "gauge"]
    assert not any(r.reason for r in top.records)
    assert estimate.traffic == [(T1 + 60, 1, 2, 600.0)]
    assert estimate.load == [(T1 + 60, 2, "bolt", pytest.approx(0.02))]
    # One sample per counter: nothing to difference, and the estimate says so.
    single = Topology("t", RANGE)
    for r in top.records[:5]:
        single.add(r)
    assert single.estimate().notes == ["cumulative __execute-count counters need two samples of a task; each had one"]


def test_topology_id_and_file_names():
    assert topology_from_path("/var/storm/logs/workers-artifacts/wc-1-1714557600/6701/worker.log.metrics") == \
        "wc-1-1714557600"
    assert topology_from_path("metrics/worker.log.metrics") is None
    assert topology_of("x/workers-artifacts/a-1-2/6700/worker.log.metrics", "storm-log", "given") == "given"
    for name, ok in (("worker.log.metrics", True), ("worker.log.metrics.3.gz", True), ("metrics.log", True),
                     ("worker-6700-metrics.log", True), ("worker.log", False), ("worker.log.out", False)):
        assert ML.is_metrics_file(name) is ok, name


def test_generated_storm_log_is_read_back_exactly(tmp_path):
    # gen-metrics --format storm-log: the generator's expected rates are what the estimate can
    # recover (per-stream sender shares); its dirty lines are quarantined, its system lines counted.
    graph = workloads.workload("diamond-12")
    summary = generate_metrics(graph, tmp_path, rows=320, fmt="storm-log", dirty=0.25, skew=0.5, seed=4)
    path = Path(summary["files"][0])
    assert path.relative_to(tmp_path).parts[:2] == ("workers-artifacts", summary["topology"])
    assert path.name == "worker.log.metrics"
    assert ML.strip_prefix(path.read_text().splitlines()[0]) != path.read_text().splitlines()[0]
    top, estimate, counts = read_topology([(str(path), "storm-log")], topology_of(path, "storm-log", None), RANGE,
                                          summary["storm_interval_s"])
    c = counts[str(path)]
    assert dict(collections.Counter(reason for _, reason, _ in c.rejected)) == summary["expected_quarantine"]
    assert c.system == summary["system_rows"] and c.read == summary["traffic_rows"]
    span = summary["intervals"] * summary["interval_s"]
    expected = {(s, d): r for s, d, r in zip(*summary["expected_rate"].values())}
    assert {k: v / span for k, v in _totals(estimate).items()} == pytest.approx(expected)
    assert set(estimate.tasks) == set(graph.task_ids.tolist())
    # Latencies written so that each bolt's busy fraction is its graph load (1 here).
    assert _mean_loads(estimate) == {int(t): 1.0 for t in graph.task_ids[np.unique(graph.dst)]}


# --------------------------------------------------------------------------- Spark
@pytest.mark.spark
def test_ingest_storm_files_end_to_end(spark, tmp_path):
    from streamsched.pipeline.ingest import Window, ingest
    from streamsched.pipeline.store import load_snapshot, read_manifest

    shutil.copytree(FIXTURES / "storm-1.x-2.2-dirty", tmp_path / "in" / "v1")
    shutil.copytree(FIXTURES / "storm-2.3", tmp_path / "in" / "v2")
    (tmp_path / "in/v1/workers-artifacts/wordcount-1-1714557600/6700/worker.log").write_text("INFO not metrics\n")
    summary = generate_metrics(workloads.workload("diamond-12"), tmp_path / "in" / "gen", rows=64,
                               fmt="storm-log", dirty=0.2, seed=2)
    report = ingest(spark, [tmp_path / "in"], tmp_path / "store", Window(seconds=180))
    # Rows: 137 (v1 dirty) + 384 (v2) + the generated file; worker.log is skipped (a worker
    # artifact without metrics). read = accepted + quarantined + system.
    gen_read, gen_system = summary["traffic_rows"], summary["system_rows"]
    assert report["rows_read"] == 137 + 384 + gen_read
    assert report["rows_system"] == 64 + 184 + gen_system
    quarantined = collections.Counter({"malformed": 2, "wrong_type": 1, "negative_count": 1, "duplicate": 1})
    quarantined.update(summary["expected_quarantine"])
    assert report["rows_quarantined"] == dict(quarantined)
    assert report["rows_read"] == report["rows_accepted"] + sum(quarantined.values()) + report["rows_system"]
    graphs = {read_manifest(p)["topology"]: load_snapshot(p) for p in report["snapshots"]}
    assert sorted(graphs) == ["diamond-12-1-1700000000", "wordcount-1-1714557600", "wordfreq-2-1714560000"]

    def rates(graph):
        ids = graph.task_ids
        return {(int(ids[s]), int(ids[d])): float(r) for s, d, r in zip(graph.src, graph.dst, graph.rate)}

    # The hand totals of the pure tests over a 180 s window: v1 (ticks at T0+60, T0+120, both in
    # (T0-60, T0+120]): R(7,5) = 3600 * 2/3 / 180, ...; v2: the 180 s of its three deltas.
    assert rates(graphs["wordcount-1-1714557600"]) == pytest.approx(
        {(7, 5): 2400 / 180, (8, 5): 1200 / 180, (7, 6): 2400 / 180, (8, 6): 1200 / 180,
         (5, 3): 5400 / 180, (6, 3): 1800 / 180, (5, 4): 2700 / 180, (6, 4): 900 / 180})
    assert rates(graphs["wordfreq-2-1714560000"]) == pytest.approx(
        {(5, 7): 10, (6, 7): 5, (5, 8): 10, (6, 8): 5, (7, 3): 30, (8, 3): 10, (7, 4): 15, (8, 4): 5})
    assert -1 not in graphs["wordcount-1-1714557600"].task_ids and 1 not in graphs["wordfreq-2-1714560000"].task_ids
    wordcount = graphs["wordcount-1-1714557600"]
    loads = {int(t): float(l) for t, l in zip(wordcount.task_ids, wordcount.load)}
    # Busy cores; the spouts (7, 8) report no busy time and get the median measured load, 0.015.
    assert loads == pytest.approx({3: 0.015, 4: 0.015, 5: 0.015, 6: 0.03, 7: 0.015, 8: 0.015})
    assert {g.load_unit for g in graphs.values()} == {"cores"}
    span = summary["intervals"] * summary["interval_s"]
    expected = {(s, d): r * span / 180 for s, d, r in zip(*summary["expected_rate"].values())}
    assert rates(graphs["diamond-12-1-1700000000"]) == pytest.approx(expected)
    manifest = read_manifest(report["snapshots"][0])
    assert manifest["rows"]["system"] == report["rows_system"]


@pytest.mark.spark
def test_ingest_refuses_storm_files_that_give_nothing(spark, tmp_path):
    from streamsched.pipeline.ingest import ingest

    # Every line rejected (the first field is not a number): exit 2 naming file, lines, reason.
    broken = tmp_path / "a" / "worker.log.metrics"
    broken.parent.mkdir()
    broken.write_text("".join(f"12:00:0{k}\tnode1:6700\t  3:count      \t__execute-count        \t{{split:default=1}}\n"
                              for k in range(3)))
    with pytest.raises(InputError, match=r"^\S*worker.log.metrics: no line accepted: 3 of 3 lines rejected "
                                         r"\(lines 1-3; first: line 1: wrong_type: timestamp '12:00:00'"):
        ingest(spark, [broken], tmp_path / "store")
    # One tick of v2 counters: valid lines, but no deltas, so no traffic.
    one_tick = tmp_path / "b" / "worker.log.metrics"
    one_tick.parent.mkdir()
    one_tick.write_text("".join(line + "\n" for line in V2.read_text().splitlines()
                                if f" {T1}\t" in line))
    with pytest.raises(InputError, match=r"no traffic between tasks .*need two samples"):
        ingest(spark, [one_tick], tmp_path / "store")
    # Ambiguous cut names: one InputError from inside the Spark task, no stack trace.
    with pytest.raises(InputError, match=r"cut metric names are ambiguous"):
        ingest(spark, [FIXTURES / "storm-2.3-ambiguous"], tmp_path / "store")


def test_values_above_2_63_are_quarantined_not_summed(tmp_path):
    """Issue 34: a count of 1e308 (and a latency of 1e308 ms) is no Java long: the line is
    quarantined (negative_count: negative, not finite or above 2^63) naming the value, and the
    estimate holds only finite numbers (1e308 summed with its peers was inf before)."""
    lines = V1.read_text().splitlines(keepends=True)
    assert lines[27].endswith("__execute-count        \t{split:default=2400}\n")
    assert lines[25].endswith("__execute-latency      \t{split:default=0.25}\n")
    lines[27] = lines[27].replace("=2400}", "=1e308}")
    lines[25] = lines[25].replace("=0.25}", "=1E308}")
    poisoned = tmp_path / "workers-artifacts" / "wordcount-1-1714557600" / "6700" / "worker.log.metrics"
    poisoned.parent.mkdir(parents=True)
    poisoned.write_text("".join(lines))
    _, estimate, counts = _read(poisoned)
    rejected = counts[str(poisoned)].rejected
    assert [(line, reason) for line, reason, _ in rejected] == [(26, "negative_count"), (28, "negative_count")]
    assert "'1E308' is negative, not finite or above 2^63" in rejected[0][2]
    assert "'1e308' is negative, not finite or above 2^63" in rejected[1][2]
    values = [v for *_, v in estimate.traffic] + [v for *_, v in estimate.load]
    assert values and all(0 <= v <= 1e15 for v in values)
    # a count of 2^63 itself is still a count (Long.MAX_VALUE + 1 rounds to it as a double)
    lines[27] = lines[27].replace("=1e308}", "=9223372036854775808}")
    poisoned.write_text("".join(lines))
    assert [line for line, _, _ in _read(poisoned)[2][str(poisoned)].rejected] == [26]
