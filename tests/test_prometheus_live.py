"""Flink metrics through a real Prometheus (slow; skipped without Java or the prometheus binary):
a local Flink 2.3 with its Prometheus reporter on every process, Debian's Prometheus scraping
them every second, the example job; a REST reading over one window, then one rescale of Calc.

- ``collect prometheus`` over the REST window gives pair rates within 2 % of the REST reading's,
  and their ingest on Spark gives the same graph (tasks, pairs, rates within 2 %);
- ``collect prometheus --since`` over the whole span meets the rescale's new attempts (counted
  from zero, reported) and writes every interval;
- the loop's metrics endpoint (:class:`streamsched.loop_metrics.LoopMetrics`, fed a real
  re-planning decision) is scraped by that Prometheus, which then answers the decision."""

from __future__ import annotations

import json
import math
import shutil
import time
import urllib.parse
import urllib.request

import numpy as np
import pytest

from streamsched.cli import main
from streamsched.engines import flink
from streamsched.engines.flink import local, plugin, prometheus
from streamsched.engines.flink.apply import rescale
from streamsched.loop_metrics import LoopMetrics

pytestmark = pytest.mark.slow
#: Scrape interval, and the REST window: the example's sources emit in once-a-second bursts, so
#: the readings' sample times (REST: the JobManager's fetch; Prometheus: the last scrape before a
#: grid point, up to SCRAPE_S earlier) can count one burst apart: 1 / WINDOW_S of a subtask's
#: count (1.25 % here).
SCRAPE_S, WINDOW_S = 0.5, 80.0


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if shutil.which("java") is None or shutil.which("prometheus") is None:
        pytest.skip("needs java and prometheus (make system installs both)")
    base = tmp_path_factory.mktemp("flink-prometheus")
    ports = prometheus.free_port_range(3)
    loop_port = prometheus.free_port_range(1, low=ports[-1] + 1)[0]
    prometheus.plugins_dir(plugin.flink_home())  # the reporter's jar is there
    cluster = local.start(base, taskmanagers=2, slots=2, rest_port=0, plugin=False,
                          extra=prometheus.reporter_settings(ports))
    try:
        server = prometheus.start(base, [f"127.0.0.1:{p}" for p in ports], [f"127.0.0.1:{loop_port}"],
                                  scrape_interval_s=SCRAPE_S)
        job = local.submit_example(cluster.url, cluster.logs, rate=2000, record_bytes=200)
        local.wait_flowing(cluster.url, job)
        yield {"cluster": cluster, "prometheus": server, "job": job, "loop_port": loop_port, "base": base}
    finally:
        prometheus.stop(base)
        local.stop(base)


def _pairs(graph):
    return {(int(graph.task_ids[s]), int(graph.task_ids[d])): float(r) for s, d, r in zip(graph.src, graph.dst, graph.rate)}


def _query(server, promql):
    url = f"{server.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)["data"]["result"]


def test_prometheus_chunks_match_rest_and_survive_a_rescale(lab, tmp_path, capsys, spark):
    cluster, server, job = lab["cluster"], lab["prometheus"], lab["job"]
    rest = flink.FlinkRest(cluster.url)
    interval = flink.fetch_interval(rest)
    time.sleep(3)  # Prometheus has scraped every subtask's counters a few times
    first = flink.take_snapshot(rest, job, interval)
    time.sleep(WINDOW_S)
    last = flink.take_snapshot(rest, job, interval)
    reading = flink.read_capture(flink.Capture(job, (first, last), cluster.url, cluster.url))
    span = last.time - first.time
    steps = max(1, round(span / SCRAPE_S))  # a grid through both REST sample times (to the ms), about the scrape interval
    step = round(span / steps, 3)
    start, end = round(first.time, 3), round(first.time, 3) + steps * step
    bounds = {v["id"]: 2 if v["name"].startswith("Calc") else v["parallelism"] for v in rest.get(f"/jobs/{job}")["vertices"]}
    rescale(rest, job, bounds, timeout_s=120)
    time.sleep(8)  # the new attempts scraped

    out = tmp_path / "window"
    code = main(["collect", "prometheus", "--prometheus", server.url, "--job", "streamsched-example",
                 "--start", repr(start), "--end", repr(end), "--step", repr(step),
                 "--interval", repr(steps * step), "--flink-url", cluster.url, "--out", str(out)])
    io = capsys.readouterr()
    assert code == 0, io.err
    (chunk,) = sorted(out.glob("traffic-prometheus-*.csv"))
    rows = np.genfromtxt(chunk, delimiter=",", names=True, dtype=None, encoding="utf-8")
    from_prom = {(int(r["src_task"]), int(r["dst_task"])): float(r["tuples"]) / (end - start) for r in np.atleast_1d(rows)}
    from_rest = _pairs(reading.graph)
    assert set(from_prom) == set(from_rest)
    worst = max(abs(from_prom[p] - from_rest[p]) / from_rest[p] for p in from_rest if from_rest[p] > 0)
    print(f"pairs: {len(from_rest)}, worst relative difference {worst:.4f}: "
          + ", ".join(f"{p}: {from_prom[p]:.1f} vs {from_rest[p]:.1f}" for p in sorted(from_rest)))
    assert worst <= 0.02

    # ingest on Spark of that chunk (and its load chunk): the same graph
    from streamsched.pipeline.ingest import Window, ingest
    from streamsched.pipeline.sources import Options
    from streamsched.pipeline.store import load_snapshot

    report = ingest(spark, [out], tmp_path / "store", Window(seconds=end - start, end=end),
                    options=Options(load_unit="cores"))
    (snapshot,) = report["snapshots"]
    ingested = _pairs(load_snapshot(snapshot))
    assert set(ingested) == set(from_rest)
    assert max(abs(ingested[p] - from_rest[p]) / from_rest[p] for p in from_rest if from_rest[p] > 0) <= 0.02

    # the whole span, the rescale in it: every interval written, the new attempts met and said
    since = math.ceil(time.time() - first.time) + 2  # (the ingest took a while)
    capsys.readouterr()
    code = main(["collect", "prometheus", "--prometheus", server.url, "--job", job, "--since", f"{since}s",
                 "--step", "1", "--interval", "10", "--flink-url", cluster.url, "--out", str(tmp_path / "span"),
                 "--json"])
    io = capsys.readouterr()
    assert code == 0, io.err
    summary = json.loads(io.out)
    assert summary["chunks"] == math.ceil(since / 10) and summary["resets"] > 0
    assert "attempt 1 started" in io.err or "attempt 2 started" in io.err


def test_the_loop_metrics_endpoint_is_scraped_with_a_decision(lab):
    from streamsched.schedulers import get_scheduler
    from streamsched.schedulers.replanning import Replanner

    cluster, server = lab["cluster"], lab["prometheus"]
    reading = flink.read(url=cluster.url, window_s=4, timeout=60)
    metrics = LoopMetrics()
    metrics.serve(lab["loop_port"])
    try:
        planner = metrics.observe(Replanner(get_scheduler("metis"), reading.cluster, {"threshold_pct": 1.0},
                                            running=lambda g, c: reading.placement))
        decision = planner.on_graph(reading.graph)
        outcome = "taken" if decision.emitted else "refused"
        deadline = time.time() + 20
        found = []
        while time.time() < deadline and not found:
            time.sleep(1)
            found = _query(server, f'streamsched_decisions_total{{outcome="{outcome}",reason="{decision.why}"}}')
        assert found and float(found[0]["value"][1]) == 1.0
        measured = _query(server, "streamsched_placement_measured")
        assert measured and float(measured[0]["value"][1]) == pytest.approx(decision.measured_before)
    finally:
        metrics.close()
