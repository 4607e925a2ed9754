"""Comparison reports: one self-contained HTML page (table, trade-off overview, bar charts,
per placement a node view, a traffic map and utilisation bars; all inline SVG) with the same
rows as CSV and JSON beside it; and the before/after page of a re-plan.

The page carries a small script that records script errors and rendered pictures in ``<body>``
attributes (``data-images-loaded``, ``data-script-errors``), so a headless browser can check it.
"""

from __future__ import annotations

import csv
import html
import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterable

from streamsched.evaluation.comparison import Outcome, add_prediction
from streamsched.errors import InputError
from streamsched.performance import ModelParams, describe_params, predict
from streamsched.evaluation.pictures import (MAX_PICTURE_TASKS, before_after, metric_bars, moved_tasks, node_view,
                                             svg, traffic_and_load, tradeoff)
from streamsched.metrics import evaluate
from streamsched.model.cluster import Cluster
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph

#: Columns of the table, CSV and JSON, in order: (key, heading, format).
COLUMNS = (
    ("scheduler", "scheduler", "{}"),
    ("status", "status", "{}"),
    ("inter_node_traffic", "inter-node traffic", "{:,.0f}"),
    ("inter_worker_traffic", "inter-worker traffic", "{:,.0f}"),
    ("nodes_used", "nodes used", "{}"),
    ("workers_used", "workers used", "{}"),
    ("load_imbalance", "load imbalance", "{:.3f}"),
    ("throughput_tps", "predicted throughput (tuples/s)", "{:,.0f}"),
    ("throughput_per_node", "throughput per node (eq. 1.2)", "{:,.0f}"),
    ("throughput_io_tps", "throughput, io-bound regime", "{:,.0f}"),
    ("throughput_cpu_tps", "throughput, cpu-bound regime", "{:,.0f}"),
    ("latency_ms", "predicted latency (ms)", "{:.4g}"),
    ("bottleneck", "bottleneck", "{}"),
    ("wall_time_s", "wall time (s)", "{:.3g}"),
    ("bound", "proven bound (solvers)", "{:,.0f}"),
    ("gap", "gap to bound", "{:.1%}"),
)

#: The bar charts: (key, title, unit).
CHARTS = (
    ("inter_node_traffic", "inter-node traffic (i-scheduler.txt eq. 3)", "tuples/s"),
    ("nodes_used", "nodes used", "nodes"),
    ("throughput_tps", "predicted throughput (report's model)", "tuples/s"),
    ("throughput_io_tps", "predicted throughput, io-bound regime", "tuples/s"),
    ("throughput_cpu_tps", "predicted throughput, cpu-bound regime", "tuples/s"),
    ("latency_ms", "predicted end-to-end latency", "ms"),
    ("wall_time_s", "scheduler wall time", "s"),
)


def write_report(path: str | Path, graph: TaskGraph, cluster: Cluster, outcomes: list[Outcome],
                 model: ModelParams | None = None, seed: int = 0, title: str | None = None,
                 verdict: dict[str, Any] | None = None) -> list[Path]:
    """Write ``path`` (HTML) and ``path`` with .csv and .json suffixes; returns the three paths.
    ``verdict`` (:func:`streamsched.evaluation.verdict.verdict`) heads the page and the JSON."""
    path = check_report_path(path)
    model = model or ModelParams()
    rows = [o.row for o in outcomes]
    csv_path, json_path = path.with_suffix(".csv"), path.with_suffix(".json")
    write_csv(csv_path, rows)
    document = {"workload": graph.name, "cluster": cluster.name, "seed": seed, "model": asdict(model),
                "verdict": verdict, "results": rows}
    json_path.write_text(json.dumps(document, indent=1, default=_jsonable))
    path.write_text(render_html(graph, cluster, outcomes, model, seed, title, csv_path.name, json_path.name,
                                verdict), encoding="utf-8")
    return [path, csv_path, json_path]


def check_report_path(path: str | Path) -> Path:
    """The report path, refused early (before any scheduler runs) if it cannot be written."""
    path = Path(path)
    if path.suffix.lower() not in (".html", ".htm"):
        raise InputError(f"--report {path}: the report file must end in .html")
    if not path.parent.is_dir():
        raise InputError(f"--report {path}: directory {path.parent} does not exist")
    return path


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    keys: list[str] = []
    for row in rows:
        keys.extend(k for k in row if k not in keys and k != "violations")
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=keys, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _cell(row.get(k)) for k in keys})


def render_html(graph: TaskGraph, cluster: Cluster, outcomes: list[Outcome], model: ModelParams, seed: int,
                title: str | None, csv_name: str, json_name: str, verdict: dict[str, Any] | None = None) -> str:
    rows = [o.row for o in outcomes]
    names = [r["scheduler"] for r in rows]
    title = title or f"{graph.name} on {cluster.name}"
    parts = [_HEAD.format(title=html.escape(title))]
    parts.append(f"<h1>{html.escape(title)}</h1>")
    parts.append(
        f"<p class='note'>Workload <b>{html.escape(graph.name)}</b> ({graph.n_tasks} tasks, {graph.n_edges} edges), "
        f"cluster <b>{html.escape(cluster.name)}</b> ({cluster.n_nodes} nodes), seed {seed}. "
        "Throughput and latency are <b>predicted by the performance model</b> of docs/evaluation.md, "
        f"not measured on a cluster; parameter set {html.escape(describe_params(model))}. Data: "
        f"<a href='{html.escape(csv_name)}'>{html.escape(csv_name)}</a>, "
        f"<a href='{html.escape(json_name)}'>{html.escape(json_name)}</a>.</p>")
    if verdict is not None:
        parts.append(f"<p class='verdict' id='verdict'><b>{html.escape(verdict['text'])}</b><br>"
                     f"<span class='note'>Rows ranked by {html.escape(verdict['sort_key'])}.</span></p>")
    parts.append(_table(rows, verdict["tie"] if verdict else ()))
    parts.append("<h2>Trade-off</h2><p class='note'>Each point is a placement: inter-node traffic against "
                 "predicted throughput; the line joins the placements no other beats on both.</p>")
    parts.append(_figure(svg(tradeoff(rows, prefix="overview-")), "trade-off overview", "overview"))
    failed = [r for r in rows if r.get("error")]
    for row in failed:
        parts.append(f"<p class='error'>{html.escape(row['scheduler'])}: {html.escape(row['error'])}</p>")
    parts.append("<h2>Charts</h2><div class='charts'>")
    columns = [(f"{chart_title} ({unit})", [_number(r.get(key)) for r in rows]) for key, chart_title, unit in CHARTS]
    parts.append(_figure(svg(metric_bars(names, columns, prefix="charts-")), "charts of every metric", "chart"))
    parts.append("</div><h2>Placements</h2><p class='note'>Per placement: the used nodes (boxes in the node's "
                 "colour, headed by the tuples/s the node sends to other nodes) with their workers and tasks, a "
                 "task shaded darker the more tuples/s it sends and receives; the task x task traffic ordered by "
                 "node (traffic outside the diagonal blocks crosses nodes); every node's placed load and "
                 "predicted CPU and network use as a share of its capacity.</p>")
    drawn: dict[tuple[bytes, bytes], str] = {}
    for index, outcome in enumerate(outcomes):
        name = outcome.row["scheduler"]
        parts.append(f"<h3>{html.escape(name)}</h3>")
        if outcome.placement is None or outcome.row.get("prediction_error"):
            why = (f"skipped: {outcome.row['reason']}" if outcome.row.get("status") == "skipped" else
                   f"not drawn: {outcome.row['prediction_error']}" if outcome.placement is not None else "no placement")
            parts.append(f"<p class='error'>{html.escape(why)}</p>")
            continue
        key = (outcome.placement.node_of.tobytes(), outcome.placement.worker_of.tobytes())
        if key in drawn:
            parts.append(f"<p class='note'>The same placement (every task on the same node and worker) as "
                         f"{html.escape(drawn[key])}, drawn above.</p>")
        else:
            drawn[key] = name
            if graph.n_tasks > MAX_PICTURE_TASKS:
                parts.append(f"<p class='note'>{graph.n_tasks} tasks: too many to draw one by one (limit "
                             f"{MAX_PICTURE_TASKS}); the traffic between nodes instead.</p>")
            parts.append(_placement_pictures(graph, cluster, outcome.placement, model, name, f"s{index}-"))
    parts.append("<h2>Model parameters</h2><pre>" + html.escape(json.dumps(asdict(model), indent=1)) + "</pre>")
    parts.append(_SCRIPT + "</body></html>")
    return "\n".join(parts)


def _table(rows: list[dict[str, Any]], tie: Iterable[str] = ()) -> str:
    """The rows; a scheduler in the verdict's ``tie`` (within the model's error of the best) is marked."""
    tie = set(tie)
    head = "".join(f"<th>{html.escape(h)}</th>" for _, h, _ in COLUMNS)
    body = []
    for row in rows:
        cells = []
        for key, _, fmt in COLUMNS:
            value = row.get(key)
            if key == "scheduler" and value in tie:
                value = f"{value} (tie)"
            cells.append(f"<td>{html.escape(_format(value, fmt))}</td>")
        body.append(("<tr class='best'>" if row.get("best") else "<tr>") + "".join(cells) + "</tr>")
    return f"<table id='results'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _placement_pictures(graph: TaskGraph, cluster: Cluster, placement: Placement, model: ModelParams, name: str,
                        prefix: str) -> str:
    prediction = predict(graph, cluster, placement, model)
    picture = traffic_and_load(graph, cluster, placement, prediction.node_cpu_utilisation,
                               prediction.nic_utilisation, prefix)
    views = [_figure(svg(picture), f"traffic and load of {name}", "traffic")]
    if graph.n_tasks <= MAX_PICTURE_TASKS:
        views.insert(0, _figure(svg(node_view(graph, cluster, placement, prefix)), f"nodes of {name}", "nodes"))
    return "<div class='placement'>" + "".join(views) + "</div>"


def _figure(svg_text: str, alt: str, kind: str) -> str:
    """An SVG document inlined in the page (its XML prolog dropped), labelled for screen readers."""
    body = svg_text[svg_text.index("<svg"):]
    return f"<figure class='picture {kind}' role='img' aria-label='{html.escape(alt)}'>{body}</figure>"


#: The re-plan page names at most this many moved tasks (the picture shows them all).
MAX_NAMED_MOVES = 50


def write_replan_report(path: str | Path, graph: TaskGraph, cluster: Cluster, before: Placement, after: Placement,
                        model: ModelParams | None = None) -> Path:
    """One HTML page: the running and the re-planned placement side by side, moved tasks
    outlined in red, and their metrics and predicted throughput in a table."""
    path = check_report_path(path)
    model = model or ModelParams()
    moved = moved_tasks(before, after)
    rows = []
    for label, placement, status in (("before", before, "running"),
                                     ("after", after, str(after.metadata.get("status", "re-planned")))):
        row = {"scheduler": label, "status": status, **evaluate(graph, placement, cluster)}
        rows.append(add_prediction(row, graph, cluster, placement, model))
    title = f"re-plan of {graph.name} on {cluster.name}"
    names = ", ".join(graph.task_label(t) for t in moved[:MAX_NAMED_MOVES].tolist()) or "none"
    if moved.size > MAX_NAMED_MOVES:
        names += f" and {moved.size - MAX_NAMED_MOVES} more"
    parts = [_HEAD.format(title=html.escape(title)), f"<h1>{html.escape(title)}</h1>",
             f"<p class='note'>{moved.size} of {graph.n_tasks} tasks change node: {html.escape(names)}. "
             "Throughput and latency are <b>predicted by the performance model</b> of docs/evaluation.md, "
             f"parameter set {html.escape(describe_params(model))}.</p>",
             _table(rows)]
    if graph.n_tasks > MAX_PICTURE_TASKS:
        parts.append(f"<p>{graph.n_tasks} tasks: too many to draw (limit {MAX_PICTURE_TASKS}).</p>")
    else:
        parts.append(_figure(svg(before_after(graph, cluster, before, after, prefix="r-")),
                             "placement before and after the re-plan", "replan"))
    parts.append(_SCRIPT + "</body></html>")
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def _format(value: Any, fmt: str) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        if math.isinf(value):
            return "unbounded"
        if math.isnan(value):
            return "n/a"
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return None


def _cell(value: Any) -> Any:
    if isinstance(value, (list, dict)):
        return json.dumps(value, default=_jsonable)
    return value


def _jsonable(value: Any) -> Any:
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return str(value)


_HEAD = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<script>
window.__errors = [];
window.addEventListener('error', function (e) {{ window.__errors.push(String(e.message)); }});
</script>
<style>
body {{ font-family: sans-serif; margin: 1.5em; color: #222; }}
table {{ border-collapse: collapse; font-size: 0.85em; }}
th, td {{ border: 1px solid #bbb; padding: 0.25em 0.5em; text-align: right; }}
th {{ background: #eef; }} td:first-child, td:nth-child(2), td:nth-child(13) {{ text-align: left; }}
figure.picture {{ margin: 0.3em; display: inline-block; vertical-align: top; }}
figure.picture svg {{ max-width: 100%; height: auto; display: block; }}
.placement {{ display: flex; flex-wrap: wrap; gap: 0.5em; align-items: flex-start; border: 1px solid #ddd; }}
.note {{ color: #444; }} .error {{ color: #a00; }} tr.best td {{ background: #e6f4e6; font-weight: bold; }}
</style></head><body>"""

_SCRIPT = """<script>
window.addEventListener('load', function () {
  var pictures = Array.prototype.slice.call(document.querySelectorAll('figure.picture > svg'));
  var shown = pictures.filter(function (p) { var r = p.getBoundingClientRect(); return r.width > 0 && r.height > 0; });
  document.body.setAttribute('data-images', String(pictures.length));
  document.body.setAttribute('data-images-loaded', String(shown.length));
  document.body.setAttribute('data-charts', String(document.querySelectorAll('figure.chart > svg').length));
  document.body.setAttribute('data-placements', String(document.querySelectorAll('div.placement').length));
  document.body.setAttribute('data-script-errors', String(window.__errors.length));
  document.body.setAttribute('data-ready', 'yes');
});
</script>"""
