"""The demo's live Flink lines (``cli.summaries.live_loop_lines``) from made-up loops: where the
cluster ran (the network lab with its links, or loopback and why), measured source records/s
with the predicted throughput beside them, latency at the sink before and after, and a job left
alone with its measured figures. Every expected figure is worked out by hand below."""

from __future__ import annotations

import math
from pathlib import Path

from streamsched.cli.summaries import live_loop_lines
from streamsched.job import LiveLoop

JOB = "0123456789abcdef0123456789abcdef"
LAB = {"taskmanagers": 3, "slots": 2, "link_mbit": {"tm-1": 40.0, "tm-2": 20.0, "tm-3": 20.0},
       "cluster_file": "out/demo/flink/cluster.yaml", "machines": "out/demo/flink-machines.yaml"}


def reading(**changes):
    figures = {"window_s": 10.0, "rates_from": "counters", "measured_throughput": 4200.0,
               "exchanged_records_per_s": 9800.0, "measured_remote_bytes_per_s": 5_000_000.0,
               "running_predicted_remote_bytes_per_s": 5_100_000.0, "plan_predicted_remote_bytes_per_s": 2_550_000.0,
               "running_predicted_throughput": 4400.0, "plan_predicted_throughput": 7700.0,
               "running_bottleneck": "link out of tm-2", "plan_bottleneck": "link in of tm-3"}
    return {**figures, **changes}


def loop(applied: bool, r: dict, lab=LAB, no_lab=None, before=None, after=None) -> LiveLoop:
    result = {"applied": applied, "basis": "throughput", "gain": 0.75, "min_gain": 0.05, "reading": r,
              "reason": "applied and verified per subtask" if applied else
              "predicted gain in throughput +1.0 % is below the threshold (5 %, --min-gain); 4 subtasks would move",
              "moved": [{}] * 5 if applied else [], "downtime_s": 1.234, "rescales": [{}, {}] if applied else [],
              "after": {"window_s": 10.0, "measured_throughput": 6300.0, "measured_remote_bytes_per_s": 2_500_000.0,
                        "exchanged_records_per_s": 14_000.0} if applied else None}
    return LiveLoop(JOB, Path("out/demo/flink-read"), Path("snap"), 9700.0, 9800.0, 14_000.0 if applied else None,
                    "optimal -p objective=throughput", Path("out/demo/flink-plan.json"), result, lab, no_lab,
                    before, after)


def test_applied_on_the_lab_prints_throughput_and_latency_before_and_after_with_the_prediction():
    lines = live_loop_lines(loop(True, reading(), before={"p50": 412.4, "p99": 1180.6, "histograms": 18},
                                 after={"p50": 35.5, "p99": 640.0, "histograms": 18}))
    assert lines[0] == ("flink: network lab: 3 TaskManagers x 2 slots, each in its own network namespace behind a "
                        "shaped link (tm-1 40, tm-2 20, tm-3 20 Mbit/s each way), no CPU quota (planned on "
                        "out/demo/flink-machines.yaml)")
    assert lines[2] == ("flink: optimal -p objective=throughput's plan (out/demo/flink-plan.json) against the running "
                        "placement, one reading of 10.0 s: predicted gain in throughput +75.0 % (threshold 5 %)")
    assert lines[3] == ("flink: applied: 5 subtasks moved, downtime 1.23 s over 2 rescales, every subtask checked on "
                        "its planned TaskManager")
    # 6300 / 4200 - 1 = +50.0 %; 7700 / 4400 - 1 = +75.0 %
    assert lines[4] == ("flink: source records/s: 4,200 before, 6,300 after (+50.0 %); predicted 4,400 -> 7,700 "
                        "(+75.0 %) (bottleneck link out of tm-2 -> link in of tm-3)")
    # round(412.4) = 412, round(35.5) = 36 (half to even), round(1180.6) = 1,181
    assert lines[5] == ("flink: latency at the sink (latency markers): p50 412 / p99 1,181 ms before, p50 36 / p99 "
                        "640 ms after (not predicted: the model predicts throughput)")
    # 2.5e6 / 5e6 - 1 = -50.0 %
    assert lines[6] == ("flink: bytes/s between TaskManagers (numBytesInRemote): 5,000,000 before, 2,500,000 after "
                        "(-50.0 %); predicted 5,100,000 -> 2,550,000")
    assert len(lines) == 7


def test_left_alone_on_the_lab_prints_what_was_measured_and_predicted():
    lines = live_loop_lines(loop(False, reading(plan_predicted_throughput=4444.0),
                                 before={"p50": 90.0, "p99": 700.0, "histograms": 6}))
    assert lines[-2] == ("flink: job left alone: predicted gain in throughput +1.0 % is below the threshold (5 %, "
                         "--min-gain); 4 subtasks would move")
    assert lines[-1] == ("flink: measured 4,200 source records/s (predicted 4,400, bottleneck link out of tm-2); "
                         "latency at the sink p50 90 / p99 700 ms; 5,000,000 bytes/s between TaskManagers")


def test_on_loopback_it_says_why_and_predicts_no_throughput():
    r = reading(running_predicted_throughput=None, plan_predicted_throughput=None, running_bottleneck=None,
                plan_bottleneck=None)
    reason = "network lab: needs root (network namespaces, veth links, tc qdiscs)"
    lines = live_loop_lines(loop(True, r, lab=None, no_lab=reason, before={"p50": math.nan, "p99": math.nan,
                                                                            "histograms": 0}, after=None))
    assert lines[0] == (f"flink: on loopback, not in the network lab ({reason}): placement moves bytes here, not "
                        f"throughput")
    assert lines[4] == ("flink: source records/s: 4,200 before, 6,300 after (+50.0 %); predicted n/a (no link "
                        "capacities: the job's sources emit at a fixed rate, traffic moves, throughput stays)")
    assert lines[5] == ("flink: latency at the sink (latency markers): n/a (no latency marker reported) before, n/a "
                        "(no latency marker reported) after (not predicted: the model predicts throughput)")
    left = live_loop_lines(loop(False, r, lab=None, no_lab=reason))
    assert left[-1] == ("flink: measured 4,200 source records/s; latency at the sink n/a (no latency marker "
                        "reported); 5,000,000 bytes/s between TaskManagers")


def test_sink_latency_reads_the_last_vertex_histograms_as_flink_2_3_lists_them():
    """Recorded answers of a real Flink 2.3 (the demo's lab job, ``metrics.latency.interval``
    500 ms): the last vertex (GroupAggregate -> sink) holds histograms of two operators, ids
    ``<subtask>.latency.source_id.S.operator_id.O.operator_subtask_index.N.latency_<stat>``; Calc's
    own histograms are left out. p50 = median of the medians, p99 = the largest p99."""
    import json
    import re

    from json_http import JsonServer
    from streamsched.engines.flink.latency import sink_latency
    from streamsched.engines.flink.rest import FlinkRest

    recorded = json.loads((Path(__file__).parent / "fixtures" / "flink" / "latency-answers.json").read_text())
    answers, job = recorded["answers"], recorded["job_id"]

    def answer(parts, query):
        body = answers.get("/" + "/".join(parts) + (f"?{query}" if query else ""))
        return (404, b"{}") if body is None else (200, json.dumps(body).encode())

    sink = "e70bbd798b564e0a50e10e343f1ac56b"  # GroupAggregate[4] -> sink[5]: Writer in the recorded plan
    values = {"median": [], "p99": []}
    for path, body in answers.items():
        if f"/vertices/{sink}/metrics?get=" in path:
            for m in body:
                stat = re.fullmatch(r"\d+\.latency\.source_id\.\w+\.operator_id\.\w+\.operator_subtask_index\.\d+"
                                    r"\.latency_(median|p99)", m["id"])
                if stat:
                    values[stat[1]].append(float(m["value"]))
    assert len(values["median"]) == len(values["p99"]) == 6  # 2 operators x 3 subtasks
    server = JsonServer(answer)
    try:
        got = sink_latency(FlinkRest(server.url), job)
    finally:
        server.close()
    ordered = sorted(values["median"])
    assert got == {"p50": (ordered[2] + ordered[3]) / 2, "p99": max(values["p99"]), "histograms": 6}
