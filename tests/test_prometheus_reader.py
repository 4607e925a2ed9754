"""``collect prometheus`` and the Prometheus reader against a scripted HTTP server feeding
query_range answers recorded from the real Prometheus 2.42 (Debian) scraping Flink 2.3's
reporter here (tests/fixtures/prometheus: the example job, step 5 s over 30 s, with the job's
REST topology saved beside it), edited for a counter reset, a restart and a missing series;
and the bad answers a Prometheus can give. Expected counts are computed from the recorded
values by hand-written differences, not by the reader."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from urllib.parse import parse_qs

import pytest

from json_http import JsonServer
from streamsched.cli import main
from streamsched.engines.flink import from_prometheus as fp
from streamsched.loop_metrics import LoopMetrics

FIXTURES = Path(__file__).parent / "fixtures" / "prometheus"
RECORDED = json.loads((FIXTURES / "query_range.json").read_text())
JOB = RECORDED["job_id"]
CALC = "Calc[2]"


def _series_of(answers, counter):
    return answers[f'{fp.PREFIX}{counter}{{job_id="{JOB}"}}']["data"]["result"]


def _serve(answers, status=200, extra=None):
    def answer(parts, query):
        if parts[-1] != "query_range":
            return 404, b"{}"
        if extra is not None:
            return extra
        asked = parse_qs(query)["query"][0]
        if asked not in answers:
            return 400, json.dumps({"status": "error", "errorType": "bad_data", "error": f"unknown {asked}"}).encode()
        return status, json.dumps(answers[asked]).encode()

    return JsonServer(answer)


def _collect(capsys, url, out, *more):
    code = main(["collect", "prometheus", "--prometheus", url, "--job", "streamsched-example", "--start",
                 repr(RECORDED["start"]), "--end", repr(RECORDED["end"]), "--step", "5", "--interval", "30",
                 "--flink-dir", str(FIXTURES / "flink-rest"), "--out", str(out), "--http-timeout", "3", *more])
    return code, capsys.readouterr()


def _calc_ids():
    job = json.loads((FIXTURES / "flink-rest" / "0" / "jobs" / f"{JOB}.json").read_text())
    return [v["id"] for v in job["vertices"] if v["name"] == CALC][0]


def _calc_in(answers):
    """Hand count: records into Calc over the range, by differences of the recorded values."""
    total = 0.0
    for s in _series_of(answers, "numRecordsIn"):
        if s["metric"]["task_id"] == _calc_ids():
            values = [float(v) for _, v in s["values"]]
            total += values[-1] - values[0]
    return total


def _traffic_into_calc(out: Path) -> float:
    import csv

    (chunk,) = sorted(out.glob("traffic-prometheus-*.csv"))
    rows = list(csv.DictReader(chunk.open()))
    # the source's subtasks are tasks 0, 1; Calc's 2, 3, 4
    return sum(float(r["tuples"]) for r in rows if int(r["src_task"]) < 2 and 2 <= int(r["dst_task"]) <= 4)


def test_recorded_answers_give_the_counts_of_the_recorded_values(tmp_path, capsys):
    server = _serve(RECORDED["answers"])
    try:
        code, io = _collect(capsys, server.url, tmp_path / "out")
    finally:
        server.close()
    assert code == 0, io.err
    assert "0 counter resets" in io.out
    assert _traffic_into_calc(tmp_path / "out") == pytest.approx(_calc_in(RECORDED["answers"]), rel=1e-9)
    side = json.loads(next((tmp_path / "out").glob(".traffic-prometheus-*.csv.json")).read_text())
    assert side["source"] == "prometheus" and side["covers"] == [RECORDED["start"], RECORDED["end"]]
    assert side["seconds"] == 30.0 and side["resets"] == []
    running = json.loads(next((tmp_path / "out").glob(".running-prometheus-*.json")).read_text())
    assert running["graph"] == "streamsched-example"


def test_a_reset_and_a_restart_counted_as_prometheus_counts_them(tmp_path, capsys):
    answers = copy.deepcopy(RECORDED["answers"])
    calc = sorted((s for s in _series_of(answers, "numRecordsIn") if s["metric"]["task_id"] == _calc_ids()),
                  key=lambda s: int(s["metric"]["subtask_index"]))
    # Calc[0]: the counter falls to 100 at the 4th point (a reset): from there it counts anew
    first = calc[0]["values"]
    raw = [float(v) for _, v in first]
    drop = raw[3] - 100.0
    for point in first[3:]:
        point[1] = repr(float(point[1]) - drop)
    expected = _calc_in(RECORDED["answers"]) - (raw[-1] - raw[0]) + (raw[2] - raw[0]) + 100.0 + (raw[-1] - raw[3])
    # Calc[1]: attempt 0 ends after the 3rd point, attempt 1 starts at the 5th with 40 records
    second = calc[1]
    raw1 = [float(v) for _, v in second["values"]]
    restarted = copy.deepcopy(second)
    restarted["metric"]["task_attempt_num"] = "1"
    restarted["metric"]["task_attempt_id"] = restarted["metric"]["task_attempt_id"][:-1] + "1"
    restarted["values"] = [[t, repr(40.0 + (float(v) - raw1[4]))] for t, v in second["values"][4:]]
    second["values"] = second["values"][:3]
    _series_of(answers, "numRecordsIn").append(restarted)
    expected += -(raw1[-1] - raw1[0]) + (raw1[2] - raw1[0]) + 40.0 + (raw1[-1] - raw1[4])
    server = _serve(answers)
    try:
        code, io = _collect(capsys, server.url, tmp_path / "out")
    finally:
        server.close()
    assert code == 0, io.err
    assert "2 counter resets or restarts met" in io.out
    assert "Calc[2][0]: numRecordsIn fell (attempt 0)" in io.err and "Calc[2][1]: attempt 1 started" in io.err
    assert _traffic_into_calc(tmp_path / "out") == pytest.approx(expected, rel=1e-9)


def test_a_missing_series_is_unknown_and_said(tmp_path, capsys):
    answers = copy.deepcopy(RECORDED["answers"])
    result = _series_of(answers, "numBytesInRemote")
    gone = [s for s in result if s["metric"]["task_id"] == _calc_ids() and s["metric"]["subtask_index"] == "2"]
    result.remove(gone[0])
    server = _serve(answers)
    try:
        code, io = _collect(capsys, server.url, tmp_path / "out", "--json")
    finally:
        server.close()
    assert code == 0, io.err
    report = json.loads(io.out)
    assert any("Calc[2][2].numBytesInRemote" in w for w in report["warnings"])


def test_read_engine_rates_from_prometheus_are_the_collected_chunk(tmp_path, capsys):
    """``read-engine flink --prometheus`` (library call, the recorded range ending "now"):
    the same records into Calc as ``collect prometheus`` over that range."""
    server = _serve(RECORDED["answers"])
    try:
        reading, read = fp.read(server.url, RECORDED["end"] - RECORDED["start"], 5.0,
                                directory=str(FIXTURES / "flink-rest"), now=RECORDED["end"] + 1.0)
    finally:
        server.close()
    assert read.job_id == JOB and read.resets == 0 and reading.report["rates_from"] == "prometheus"
    calc = [e for e in reading.report["edges"] if e["to"] == CALC][0]
    seconds = RECORDED["end"] - RECORDED["start"]
    assert calc["records_per_s"] == pytest.approx(_calc_in(RECORDED["answers"]) / seconds, rel=1e-9)


def test_cumulative_follows_prometheus_reset_rule_by_hand():
    inf = -float("inf")
    counts, falls, started = fp.cumulative(fp.np.array([10.0, 20.0, inf, 5.0, 9.0]), True)
    assert list(counts) == [0.0, 10.0, 10.0, 15.0, 19.0] and falls == [3] and not started
    counts, falls, started = fp.cumulative(fp.np.array([inf, 7.0, 9.0]), True)
    assert list(counts) == [0.0, 7.0, 9.0] and started
    counts, falls, _ = fp.cumulative(fp.np.array([100.0, 98.0, 130.0]), False)  # a time counter's dip
    assert list(counts) == [0.0, 0.0, 30.0] and falls == []


@pytest.mark.parametrize("case, message", [
    ("down", "unreachable"),
    ("400", "HTTP 400"),
    ("503", "HTTP 503"),
    ("warnings", "partial result"),
    ("series", "more than --max-series 3"),
    ("nothing", "no Flink job 'streamsched-example'"),
    ("two", "2 jobs named 'streamsched-example'"),
])
def test_bad_prometheus_answers_are_one_line_and_write_nothing(tmp_path, capsys, case, message):
    answers = copy.deepcopy(RECORDED["answers"])
    lookup = next(k for k in answers if k.startswith("count by"))
    server, more = None, []
    if case == "down":
        server = _serve(answers)
        server.close()
    elif case == "400":
        server = _serve(answers, extra=(400, b'{"status":"error","errorType":"bad_data","error":"parse error"}'))
    elif case == "503":
        server = _serve(answers, extra=(503, b'{"status":"error","errorType":"unavailable","error":"busy"}'))
    elif case == "warnings":
        for key in answers:
            answers[key]["warnings"] = ["remote read: store unavailable"]
    elif case == "series":
        more = ["--max-series", "3"]
    elif case == "nothing":
        answers[lookup]["data"]["result"] = []
    elif case == "two":
        twin = copy.deepcopy(answers[lookup]["data"]["result"][0])
        twin["metric"]["job_id"] = "0" * 32
        answers[lookup]["data"]["result"].append(twin)
    server = server or _serve(answers)
    try:
        code, io = _collect(capsys, server.url, tmp_path / "out", *more)
    finally:
        server.close()
    assert code == 2
    lines = [line for line in io.err.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in io.err
    assert not (tmp_path / "out").exists()


def test_loop_metrics_are_served_in_prometheus_text():
    import urllib.request

    from streamsched.model.decision import Decision

    metrics = LoopMetrics()
    port = metrics.serve(0)
    try:
        metrics.watch_rows(lambda: {"accepted": 7, "dropped_late": 1, "quarantined": {"malformed": 2}})
        metrics.record_decision(Decision("job", "snapshot", True, "improvement", 100.0, 60.0, 40.0, 3, measured_before=98.0))
        metrics.record_decision(Decision("job", "snapshot", False, "below-threshold", 60.0, 59.0, 1.0, 1))
        metrics.record_apply(1.25, 3)
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    finally:
        metrics.close()
    for line in ('streamsched_decisions_total{outcome="taken",reason="improvement",topology="job"} 1.0',
                 'streamsched_decisions_total{outcome="refused",reason="below-threshold",topology="job"} 1.0',
                 'streamsched_moved_tasks_total{topology="job"} 3.0', 'streamsched_windows_total{topology="job"} 2.0',
                 'streamsched_placement_predicted{topology="job"} 60.0',
                 'streamsched_placement_measured{topology="job"} 98.0', "streamsched_rows_accepted_total 7.0",
                 'streamsched_rows_quarantined_total{reason="malformed"} 2.0', "streamsched_apply_downtime_seconds 1.25"):
        assert line in text, line
