"""Comparison reports: HTML + CSV + JSON, checked in headless Chromium (renders, charts and
placement pictures load, no script errors, a non-blank screenshot)."""

import csv
import json
import re
import shutil
import subprocess

import numpy as np
import pytest

from streamsched import workloads
from streamsched.cli import main
from streamsched.errors import InputError
from streamsched.evaluation.report import CHARTS, run_schedulers, write_report
from streamsched.metrics import evaluate
from streamsched.schedulers import available

CHROMIUM = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium not installed (apt-get install -y chromium)")


def names():
    return ["even"] + [n for n in ("metis", "t3") if n in available()]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "cmp.html"
    graph, cluster = workloads.workload("diamond-16"), workloads.cluster("heterogeneous-10")
    outcomes = run_schedulers(graph, cluster, names())
    paths = write_report(out, graph, cluster, outcomes)
    return out, paths, graph, cluster, outcomes


def test_report_writes_html_csv_json_with_one_row_per_scheduler(report):
    out, paths, graph, cluster, outcomes = report
    assert [p.name for p in paths] == ["cmp.html", "cmp.csv", "cmp.json"]
    document = json.loads(paths[2].read_text())
    assert [r["scheduler"] for r in document["results"]] == names()
    with paths[1].open() as handle:
        rows = list(csv.DictReader(handle))
    assert [r["scheduler"] for r in rows] == names()
    # the figures are the shared metrics of each placement, not a re-definition
    for outcome, row in zip(outcomes, document["results"]):
        expected = evaluate(graph, outcome.placement, cluster)
        assert row["inter_node_traffic"] == pytest.approx(expected["inter_node_traffic"])
        assert row["nodes_used"] == expected["nodes_used"]
        assert row["throughput_tps"] > 0 and row["latency_ms"] > 0
    page = out.read_text()
    assert page.count("<img class='chart'") == len(CHARTS)
    assert page.count("<img class='placement'") == len(names())
    assert "predicted by the performance model" in page
    assert "http://" not in page and "https://" not in page  # self-contained


def test_report_path_is_checked_before_anything_runs(tmp_path):
    graph, cluster = workloads.workload("linear-10"), workloads.cluster("homogeneous-10")
    with pytest.raises(InputError, match="must end in .html"):
        write_report(tmp_path / "r.pdf", graph, cluster, [])
    code = main(["compare", "-w", "linear-10", "--schedulers", "even", "--report", str(tmp_path / "no" / "r.html")])
    assert code == 2


def test_cli_compare_report(tmp_path):
    out = tmp_path / "r.html"
    assert main(["compare", "-w", "star-12", "-c", "homogeneous-10", "--schedulers", "even",
                 "--report", str(out)]) == 0
    assert out.exists() and out.with_suffix(".csv").exists() and out.with_suffix(".json").exists()


def chromium(*args, cwd):
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               f"--user-data-dir={cwd / 'profile'}", "--virtual-time-budget=10000", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=cwd)


def body_attributes(dom: str) -> dict[str, str]:
    body = re.search(r"<body([^>]*)>", dom)
    assert body, dom[:500]
    return dict(re.findall(r'(data-[\w-]+)="([^"]*)"', body.group(1)))


@needs_chromium
def test_report_renders_in_headless_chromium_with_charts_and_no_script_errors(report, tmp_path):
    out, *_ = report
    result = chromium("--dump-dom", out.as_uri(), cwd=tmp_path)
    attrs = body_attributes(result.stdout)
    assert attrs["data-ready"] == "yes"
    assert attrs["data-script-errors"] == "0"
    assert attrs["data-charts"] == str(len(CHARTS))
    assert attrs["data-placements"] == str(len(names()))
    assert attrs["data-images-loaded"] == attrs["data-images"] == str(len(CHARTS) + len(names()))


@needs_chromium
def test_screenshot_of_the_report_is_not_blank(report, tmp_path):
    import matplotlib.image as mpimg

    out, *_ = report
    shot = tmp_path / "shot.png"
    chromium(f"--screenshot={shot}", "--window-size=1280,2400", out.as_uri(), cwd=tmp_path)
    pixels = mpimg.imread(shot)
    assert pixels.shape[0] == 2400 and pixels.shape[1] == 1280
    grey = pixels[..., :3].mean(axis=2)
    assert (grey < 0.9).mean() > 0.02  # text, bars and pictures, not an empty page
    assert np.unique((grey * 255).astype(int)).size > 50  # coloured charts, not one flat colour


@needs_chromium
def test_the_check_detects_a_script_error(report, tmp_path):
    # the attributes are honest: a page with a failing script reports it
    out, *_ = report
    broken = tmp_path / "broken.html"
    broken.write_text(out.read_text().replace("</body>", "<script>undefinedFunction();</script></body>"))
    attrs = body_attributes(chromium("--dump-dom", broken.as_uri(), cwd=tmp_path).stdout)
    assert attrs["data-script-errors"] == "1"
