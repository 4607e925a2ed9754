"""Comparison reports: HTML + CSV + JSON, checked in headless Chromium (renders, charts and
placement pictures shown, no script errors, a non-blank screenshot at 1280 px, no label spilling
out of its box or overlapping another as the browser lays them out); the report of every
cluster scheduler on a 30-task instance stays under 2 MB (issue 17, item 4)."""

import csv
import json
import re
import shutil
import subprocess

import numpy as np
import pytest

from streamsched import workloads
from streamsched.cli import main
from streamsched.cli.core import resolve_names
from streamsched.errors import InputError
from streamsched.evaluation.comparison import run_schedulers
from streamsched.evaluation.report import CHARTS, write_report
from streamsched.performance import ModelParams
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
    outcomes = run_schedulers(graph, cluster, names(), model=ModelParams())
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
    assert page.count("<figure class='picture chart'") == 1  # one bar table of every chart's metric
    words = " ".join(re.sub(r"<[^>]+>", " ", page).split())
    assert all(title in words for _, title, _ in CHARTS)
    assert page.count("<div class='placement'>") == len(names())
    assert page.count("<figure class='picture overview'") == 1
    assert "predicted by the performance model" in page
    assert not re.search(r"""(src|href)=['"]?(https?:|//)""", page)  # self-contained: nothing fetched


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
    assert attrs["data-charts"] == "1"
    assert attrs["data-placements"] == str(len(names()))
    # the overview, the bar table, and per placement its node view and traffic map
    assert attrs["data-images-loaded"] == attrs["data-images"] == str(2 + 2 * len(names()))


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


#: Run in the page after it loads: every element whose id names a label is measured as Chromium
#: laid it out; it must sit inside the element named as its box (same id, ``-box-``), inside its
#: picture, clear of every other label and of every box that does not hold it whole.
LABEL_CHECK = """<script>
window.addEventListener('load', function () {
  function inside(o, i) {
    return o.left - 0.5 <= i.left && o.top - 0.5 <= i.top && i.right <= o.right + 0.5 && i.bottom <= o.bottom + 0.5;
  }
  function cross(a, b) { return a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom; }
  var problems = [], count = 0;
  document.querySelectorAll('figure.picture > svg').forEach(function (svg) {
    var frame = svg.getBoundingClientRect();
    var labels = Array.prototype.slice.call(svg.querySelectorAll('[id*="-label-"]'));
    var boxes = Array.prototype.slice.call(svg.querySelectorAll('[id*="-box-"]'));
    var boxRects = boxes.map(function (b) { return b.getBoundingClientRect(); });
    var rects = labels.map(function (l) { return l.getBoundingClientRect(); });
    labels.forEach(function (label, i) {
      var r = rects[i];
      if (r.width === 0) { problems.push(label.id + ' not shown'); return; }
      count++;
      if (!inside(frame, r)) problems.push(label.id + ' outside its picture');
      var own = svg.querySelector('[id="' + label.id.replace('-label-', '-box-') + '"]');
      if (own && !inside(own.getBoundingClientRect(), r)) problems.push(label.id + ' spills');
      for (var j = 0; j < i; j++) if (cross(r, rects[j])) problems.push(label.id + ' overlaps ' + labels[j].id);
      boxes.forEach(function (box, k) {
        if (cross(r, boxRects[k]) && !inside(boxRects[k], r)) problems.push(label.id + ' crosses ' + box.id);
      });
    });
  });
  document.body.setAttribute('data-labels', String(count));
  document.body.setAttribute('data-label-problems', String(problems.length));
  document.body.setAttribute('data-label-examples', problems.slice(0, 5).join('; '));
});
</script>"""


@pytest.fixture(scope="module")
def every_cluster_scheduler(tmp_path_factory):
    """``compare --schedulers all --report`` on a 30-task instance (the demo's size)."""
    graph, cluster = workloads.workload("diamond-30"), workloads.cluster("heterogeneous-10")
    outcomes = run_schedulers(graph, cluster, resolve_names("all", cluster), model=ModelParams())
    out = tmp_path_factory.mktemp("all") / "all.html"
    write_report(out, graph, cluster, outcomes)
    return out, outcomes


def distinct_placements(outcomes):
    return {(o.placement.node_of.tolist(), o.placement.worker_of.tolist()).__repr__()
            for o in outcomes if o.placement is not None}


def test_report_of_every_cluster_scheduler_on_30_tasks_is_under_2_mb(every_cluster_scheduler):
    out, outcomes = every_cluster_scheduler
    assert sum(o.placement is not None for o in outcomes) >= 10
    # each distinct placement drawn once; a repeated one refers to the first scheduler that made it
    page = out.read_text()
    assert page.count("<div class='placement'>") == len(distinct_placements(outcomes)) >= 8
    assert page.count("The same placement") == sum(o.placement is not None for o in outcomes) - len(
        distinct_placements(outcomes))
    assert out.stat().st_size < 2_000_000


def check_labels_at_1280(page, tmp_path):
    checked = tmp_path / "checked.html"
    checked.write_text(page.read_text().replace("</body>", LABEL_CHECK + "</body>"))
    attrs = body_attributes(chromium("--dump-dom", "--window-size=1280,1000", checked.as_uri(), cwd=tmp_path).stdout)
    return attrs


@needs_chromium
def test_every_scheduler_report_at_1280_px_has_no_spilling_or_overlapping_label(every_cluster_scheduler, tmp_path):
    import matplotlib.image as mpimg

    out, outcomes = every_cluster_scheduler
    attrs = check_labels_at_1280(out, tmp_path)
    assert attrs["data-script-errors"] == "0"
    assert attrs["data-label-problems"] == "0", attrs["data-label-examples"]
    graph = workloads.workload("diamond-30")
    drawn = len(distinct_placements(outcomes))
    assert int(attrs["data-labels"]) >= drawn * graph.n_tasks  # every task label was measured
    shot = tmp_path / "shot.png"
    chromium(f"--screenshot={shot}", "--window-size=1280,4000", out.as_uri(), cwd=tmp_path)
    pixels = mpimg.imread(shot)
    assert pixels.shape[:2] == (4000, 1280)
    grey = pixels[..., :3].mean(axis=2)
    assert (grey < 0.9).mean() > 0.02 and np.unique((grey * 255).astype(int)).size > 50


@needs_chromium
def test_the_browser_label_check_detects_an_overlap(report, tmp_path):
    # not vacuous: a task label moved onto its neighbour's box is reported
    out, *_ = report
    broken = tmp_path / "broken.html"
    page = out.read_text()
    moved = '<g id="s0-task-label-0" transform="translate(0 30)">'
    broken.write_text(page.replace('<g id="s0-task-label-0">', moved, 1))
    assert '<g id="s0-task-label-0" transform' in broken.read_text()
    attrs = check_labels_at_1280(broken, tmp_path)
    assert int(attrs["data-label-problems"]) > 0 and "s0-task-label-0" in attrs["data-label-examples"]


@needs_chromium
def test_replan_report_at_1280_px_has_no_spilling_or_overlapping_label(tmp_path):
    from streamsched.evaluation.report import write_replan_report
    from streamsched.model import Placement

    graph, cluster = workloads.workload("wordcount"), workloads.cluster("heterogeneous-10")
    rng = np.random.default_rng(0)
    before = Placement.build(rng.integers(0, 10, graph.n_tasks), rng.integers(0, 3, graph.n_tasks))
    after = Placement.build(np.roll(before.node_of, 1), before.worker_of)
    page = write_replan_report(tmp_path / "replan.html", graph, cluster, before, after)
    attrs = check_labels_at_1280(page, tmp_path)
    assert attrs["data-script-errors"] == "0" and attrs["data-images-loaded"] == "1"
    assert attrs["data-label-problems"] == "0", attrs["data-label-examples"]
    assert int(attrs["data-labels"]) >= 2 * graph.n_tasks


def test_a_placement_two_schedulers_share_is_drawn_once(tmp_path):
    graph, cluster = workloads.workload("diamond-16"), workloads.cluster("heterogeneous-10")
    (even,) = run_schedulers(graph, cluster, ["even"], model=ModelParams())
    twin = type(even)({**even.row, "scheduler": "twin"}, even.placement)
    one_worker = type(even.placement).build(even.placement.node_of, np.zeros(graph.n_tasks, int))
    assert not np.array_equal(one_worker.worker_of, even.placement.worker_of)
    moved = type(even)({**even.row, "scheduler": "moved"}, one_worker)
    page = write_report(tmp_path / "r.html", graph, cluster, [even, twin, moved])[0].read_text()
    assert page.count("<div class='placement'>") == 2  # even and moved (other workers, same nodes)
    assert "The same placement (every task on the same node and worker) as even, drawn above." in page
