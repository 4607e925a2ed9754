"""Comparison reports: one self-contained HTML page (all pictures inline SVG) with the same rows
as CSV and JSON beside it; and the before/after page of a re-plan.

The comparison page's first screen holds the verdict, the ranked table (columns equal in every
placement folded into a note) and the recommended placement against the baseline; the rest
(every metric, the trade-off, the top placements in detail, failures, the model's parameters,
the columns' meanings) is folded into ``<details>`` sections (docs/evaluation.md).

The page carries a small script that records script errors and rendered pictures in ``<body>``
attributes (``data-images-loaded``, ``data-script-errors``), so a headless browser can check it.
"""

from __future__ import annotations

import csv
import html
import json
import math
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from streamsched.errors import InputError
from streamsched.evaluation.comparison import Outcome, add_prediction
from streamsched.performance import (SETTING_SETS, ModelParams, describe_params, fitted_set, predict,
                                     read_calibration)
from streamsched.evaluation.pictures import (MAX_PICTURE_TASKS, before_after, metric_bars, moved_tasks, node_view,
                                             svg, traffic_and_load, tradeoff, versus)
from streamsched.evaluation.verdict import fmt
from streamsched.metrics import evaluate
from streamsched.model.cluster import Cluster
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph

#: Columns of the ranked table: (key, heading, format, what it means, with the paper it comes
#: from). The heading is plain words and a unit; the meaning is the heading's tooltip and a footnote.
COLUMNS = (
    ("rank", "#", "{}", "Rank: fewest inter-node tuples first, then most predicted throughput."),
    ("scheduler", "scheduler", "{}", "The scheduler (algorithm) that made the placement."),
    ("status", "status", "{}", "ok: a valid placement; optimal / feasible: the exact solver proved its "
     "placement optimal / found it without a proof; skipped, error, infeasible: no placement."),
    ("inter_node_traffic", "inter-node traffic (tuples/s)", "{:,.0f}",
     "Tuples/s sent between tasks on different nodes: the cost traffic-aware schedulers minimise "
     "(i-scheduler.txt eq. 3)."),
    ("inter_worker_traffic", "inter-worker traffic (tuples/s)", "{:,.0f}",
     "Tuples/s sent between tasks in different workers (JVMs), on one node or not."),
    ("nodes_used", "nodes used", "{}", "Nodes holding at least one task."),
    ("workers_used", "workers used", "{}", "Workers (JVM processes) holding at least one task."),
    ("load_imbalance", "load imbalance", "{:.3f}", "Most loaded node's load over the average node's "
     "(1 = even; loadImba of fischer-metis-scheduler.txt section III)."),
    ("throughput_tps", "predicted throughput (tuples/s)", "{:,.0f}", "Executed tuples/s the performance "
     "model predicts at the largest sustainable input rate (docs/evaluation.md)."),
    ("throughput_per_node", "predicted throughput per node (tuples/s)", "{:,.0f}",
     "Predicted throughput over nodes used (thesis-top-a3-ban-gr-storm.txt eq. 1.2)."),
    ("throughput_io_tps", "throughput, spouts throttled (tuples/s)", "{:,.0f}",
     "Predicted throughput with max spout pending 1 (the I/O-intensive setting of i-scheduler.txt "
     "section 6.1)."),
    ("throughput_cpu_tps", "throughput, spouts unthrottled (tuples/s)", "{:,.0f}",
     "Predicted throughput without spout throttling (the CPU-intensive setting of i-scheduler.txt "
     "section 6.1)."),
    ("latency_ms", "predicted latency (ms)", "{:.4g}", "Predicted end-to-end latency of a tuple at the "
     "model's operating point (docs/evaluation.md)."),
    ("bottleneck", "bottleneck", "{}", "The resource that limits the predicted throughput."),
    ("wall_time_s", "scheduler time (s)", "{:.3g}", "Wall-clock time the scheduler took."),
    ("bound", "proven bound (tuples/s)", "{:,.0f}", "The least inter-node traffic any placement can have, as "
     "the exact solver proved it (its source is in the JSON's bound_source); empty for heuristics."),
    ("gap", "gap to the bound", "{:.1%}", "(traffic - bound) / traffic: 0 when the placement is proven optimal."),
)
#: Columns of the first screen's table (the others are in the folded table of every metric).
TOP_COLUMNS = ("rank", "scheduler", "status", "inter_node_traffic", "inter_worker_traffic", "nodes_used",
               "workers_used", "load_imbalance", "throughput_tps", "latency_ms", "bottleneck", "wall_time_s",
               "bound", "gap")

#: The bar charts: (key, title, unit).
CHARTS = (
    ("inter_node_traffic", "inter-node traffic", "tuples/s"),
    ("nodes_used", "nodes used", "nodes"),
    ("throughput_tps", "predicted throughput", "tuples/s"),
    ("throughput_io_tps", "predicted throughput, spouts throttled", "tuples/s"),
    ("throughput_cpu_tps", "predicted throughput, spouts unthrottled", "tuples/s"),
    ("latency_ms", "predicted end-to-end latency", "ms"),
    ("wall_time_s", "scheduler time", "s"),
)

#: Placements drawn in detail: the first this many distinct ones of the ranking, and the baseline.
DETAILED_PLACEMENTS = 3

#: The model's parameters for people: field -> (name, unit, scale from the field's unit).
PARAMETERS = {
    "cycles_per_load_unit": ("CPU demand of one unit of task load", "cycles/s", 1.0),
    "serialize_cycles_per_tuple": ("serialisation cost per tuple (each way)", "cycles", 1.0),
    "serialize_cycles_per_byte": ("serialisation cost per byte (each way)", "cycles", 1.0),
    "message_overhead_bytes": ("header and framing per tuple between nodes", "bytes", 1.0),
    "tuple_bytes": ("tuple size override", "bytes", 1.0),
    "network_latency_s": ("latency of a hop between nodes", "ms", 1e3),
    "ipc_latency_s": ("latency of a hop between workers of a node", "ms", 1e3),
    "intra_worker_latency_s": ("latency of a hand-off inside a worker", "ms", 1e3),
    "max_cpu_utilisation": ("usable share of a node's cores", "%", 1e2),
    "acking": ("Storm acking", "", 1.0),
    "ack_bytes": ("size of an ack message", "bytes", 1.0),
    "ack_cycles": ("acker CPU cost per ack", "cycles", 1.0),
    "max_spout_pending": ("max spout pending per source task (0 = unlimited)", "tuples", 1.0),
    "operating_point": ("rate at which latency is reported", "% of the maximum", 1e2),
}


def write_report(path: str | Path, graph: TaskGraph, cluster: Cluster, outcomes: list[Outcome],
                 model: ModelParams | None = None, seed: int = 0, title: str | None = None,
                 verdict: dict[str, Any] | None = None) -> list[Path]:
    """Write ``path`` (HTML) and ``path`` with .csv and .json suffixes; returns the three paths.
    ``verdict`` (:func:`streamsched.evaluation.verdict.verdict`) heads the page and the JSON."""
    path = check_report_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
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
    """The report path, refused early (before any scheduler runs) if it cannot be written: not
    ending in .html, a directory, or under a file. A missing directory is made when writing."""
    path = Path(path)
    if path.suffix.lower() not in (".html", ".htm"):
        raise InputError(f"--report {path}: the report file must end in .html")
    if path.is_dir():
        raise InputError(f"--report {path}: is a directory")
    for ancestor in path.parents:
        if ancestor.exists():
            if not ancestor.is_dir():
                raise InputError(f"--report {path}: {ancestor} is a file, not a directory")
            break
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
    """The page: on the first screen the verdict, the ranked table (columns equal in every row
    folded into a note) and the recommended placement against the baseline; below, folded
    sections (``<details>``) a reader opens: every metric, the trade-off, the top placements and
    the baseline in detail (a placement several schedulers made, once), failures, the model's
    parameters and what each column means."""
    rows = [o.row for o in outcomes]
    title = title or f"{graph.name} on {cluster.name}"
    best, base = _recommended_and_baseline(outcomes, verdict)
    parts = [_HEAD.format(title=html.escape(title)), f"<h1>{html.escape(title)}</h1>"]
    parts.append(
        f"<p class='note'>{graph.n_tasks} tasks, {graph.n_edges} edges on {cluster.n_nodes} nodes, seed {seed}. "
        "Throughput and latency are <b>predicted by the performance model</b> (docs/evaluation.md), "
        f"not measured: {html.escape(describe_params(model))}. Data: "
        f"<a href='{html.escape(csv_name)}'>{html.escape(csv_name)}</a>, "
        f"<a href='{html.escape(json_name)}'>{html.escape(json_name)}</a>.</p>")
    if verdict is not None:
        text = verdict["text"].removeprefix("verdict: ")
        parts.append(f"<p class='verdict' id='verdict'><b>Verdict:</b> {html.escape(text)}</p>")
    shown, folded = _fold_columns(rows)
    parts.append("<div class='top'><div id='ranking'>")
    tie = verdict.get("tie", ()) if verdict else ()
    parts.append(_table(rows, shown, best, base, "results", tie))
    if folded:
        parts.append("<p class='note' id='same'>" + html.escape("; ".join(folded)) + ".</p>")
    if verdict is not None:
        parts.append(f"<p class='note'>Ranked by {html.escape(verdict['sort_key'])}.</p>")
    parts.append("</div>")
    parts.append(_headline(graph, cluster, model, best, base))
    parts.append("</div>")
    parts.append(_section("metrics", "Every metric, as a table and as bars",
                          _table(rows, [c[0] for c in COLUMNS], best, base, "every-metric", tie)
                          + _figure(svg(metric_bars([r["scheduler"] for r in rows],
                                                    [(f"{t} ({u})", [_number(r.get(k)) for r in rows])
                                                     for k, t, u in CHARTS], prefix="charts-")),
                                    "every metric as bars", "chart")))
    parts.append(_section("tradeoff", "Traffic against predicted throughput",
                          "<p class='note'>Each point is a placement; the red line joins the placements that "
                          "no other beats on both less traffic and more throughput.</p>"
                          + _figure(svg(tradeoff(rows, prefix="overview-")), "trade-off overview", "overview")))
    parts.append(_placements(graph, cluster, outcomes, model, base))
    failed = [r for r in rows if r.get("error") or r.get("status") == "skipped" or r.get("prediction_error")]
    if failed:
        items = "".join(f"<li><b>{html.escape(r['scheduler'])}</b>: {html.escape(_why(r))}</li>" for r in failed)
        parts.append(_section("failures", f"Schedulers without a placement or a prediction ({len(failed)})",
                              f"<ul>{items}</ul>"))
    parts.append(_section("model", "Model parameters", _parameters(model)))
    notes = "".join(f"<dt>{html.escape(heading)}</dt><dd>{html.escape(meaning)}</dd>"
                    for _, heading, _, meaning in COLUMNS)
    parts.append(_section("columns", "What the columns mean (and the papers they come from)",
                          f"<dl>{notes}</dl><p class='note'>The papers: README.md, section Papers.</p>"))
    parts.append(_SCRIPT + "</body></html>")
    return "\n".join(parts)


def _why(row: dict[str, Any]) -> str:
    """Why a row has no placement (skipped, error) or no picture (the model cannot predict it)."""
    if row.get("prediction_error") and not row.get("error"):
        return f"placed, not drawn: {row['prediction_error']}"
    return str(row.get("error") or row.get("reason") or row.get("status"))


def _section(name: str, summary: str, body: str) -> str:
    return f"<details id='{name}'><summary>{html.escape(summary)}</summary>{body}</details>"


def _recommended_and_baseline(outcomes: list[Outcome], verdict: dict[str, Any] | None
                              ) -> tuple[Outcome | None, Outcome | None]:
    """The verdict's recommended and baseline placements (without a verdict: the row marked
    best, else the first placed one, and Storm's ``even``)."""
    placed = [o for o in outcomes if o.placement is not None]
    by_name = {o.row["scheduler"]: o for o in placed}
    if verdict is not None:
        return by_name.get(verdict.get("recommended") or verdict.get("best")), by_name.get(verdict.get("baseline"))
    best = next((o for o in placed if o.row.get("best")), placed[0] if placed else None)
    return best, by_name.get("even")


def _placed(row: dict[str, Any]) -> bool:
    return "inter_node_traffic" in row


#: Columns folded into a note when they equal another column in every placed row.
SAME_AS = {"inter_worker_traffic": "inter_node_traffic", "workers_used": "nodes_used"}


def _fold_columns(rows: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The first screen's columns and notes on those left out: a column equal in every placed
    row (status: in every row) says nothing about the ranking; a column equal to another in
    every placed row repeats it. With fewer than two placed rows nothing is folded."""
    spec = {key: (heading, fmt) for key, heading, fmt, _ in COLUMNS}
    placed = [r for r in rows if _placed(r)]
    shown, notes = [], []
    for key in TOP_COLUMNS:
        heading, fmt = spec[key]
        scope = rows if key == "status" else placed
        values = [_format(r.get(key), fmt) for r in scope]
        if len(placed) >= 2 and key not in ("rank", "scheduler") and len(set(values)) == 1:
            notes.append(f"{heading}: {values[0]} in every {'row' if key == 'status' else 'placement'}")
            continue
        twin = SAME_AS.get(key)
        if (len(placed) >= 2 and twin in shown
                and values == [_format(r.get(twin), spec[twin][1]) for r in placed]):
            notes.append(f"{heading} equals {spec[twin][0]} in every placement")
            continue
        shown.append(key)
    if len(placed) < 2 or all(r.get("rank") is None for r in rows):
        shown = [k for k in shown if k != "rank"]
    return shown, notes


def _table(rows: list[dict[str, Any]], keys: list[str], best: Outcome | None, base: Outcome | None,
           table_id: str, tie: Iterable[str] = ()) -> str:
    """The rows under ``keys``; the recommended row marked, the baseline tagged, and a scheduler in
    the verdict's ``tie`` (within the model's error of the recommended one) marked (tie)."""
    tie = set(tie)
    spec = {key: (heading, fmt, meaning) for key, heading, fmt, meaning in COLUMNS}
    head = "".join(f"<th title='{html.escape(spec[k][2])}'>{html.escape(spec[k][0])}</th>" for k in keys)
    body = []
    for row in rows:
        cells = []
        for key in keys:
            text = "" if key == "rank" and row.get(key) is None else html.escape(_format(row.get(key), spec[key][1]))
            if key == "scheduler" and base is not None and row is base.row:
                text += " <span class='tag'>baseline</span>"
            if key == "scheduler" and row.get("scheduler") in tie:
                text += " (tie)"
            if key == "status" and (row.get("reason") or row.get("error")):
                text = f"<span title='{html.escape(str(row.get('reason') or row.get('error')))}'>{text}</span>"
            cells.append(f"<td class='{key}'>{text}</td>")
        marked = (best is not None and row is best.row) or (best is None and row.get("best"))
        body.append(("<tr class='best'>" if marked else "<tr>") + "".join(cells) + "</tr>")
    return f"<table id='{table_id}'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _headline(graph: TaskGraph, cluster: Cluster, model: ModelParams, best: Outcome | None,
              base: Outcome | None) -> str:
    """The picture of the first screen: the recommended placement against the baseline."""
    if best is None:
        return "<p class='error' id='headline'>No placement to show.</p>"
    sides = [(best.row["scheduler"], best.placement)]
    if base is not None and not base.row.get("prediction_error") and not _same(best.placement, base.placement):
        sides.append((f"{base.row['scheduler']} (baseline)", base.placement))
    if best.row.get("prediction_error"):
        return f"<p class='error' id='headline'>{html.escape(_why(best.row))}</p>"
    drawn = [(name, placement, predict(graph, cluster, placement, model).node_cpu_utilisation)
             for name, placement in sides]
    what = " against ".join(name for name, _ in sides)
    if len(sides) == 1:
        what += " (the baseline places every task alike)" if base is not None else " (no baseline row)"
    return (f"<div id='headline'><p class='caption'>Where the traffic crosses nodes: {html.escape(what)}</p>"
            + _figure(svg(versus(graph, cluster, drawn, prefix="vs-")), f"{what}, node by node", "versus")
            + "</div>")


def _same(a: Placement, b: Placement) -> bool:
    return bool(np.array_equal(a.node_of, b.node_of) and np.array_equal(a.worker_of, b.worker_of))


def _placements(graph: TaskGraph, cluster: Cluster, outcomes: list[Outcome], model: ModelParams,
                base: Outcome | None) -> str:
    """The folded section of placement pictures: each distinct placement once (named by every
    scheduler that made it), only the first :data:`DETAILED_PLACEMENTS` of the ranking and the
    baseline's."""
    groups: list[list[Outcome]] = []
    for outcome in outcomes:
        if outcome.placement is None or outcome.row.get("prediction_error"):  # the model cannot draw it
            continue
        twin = next((g for g in groups if _same(g[0].placement, outcome.placement)), None)
        if twin is None:
            groups.append([outcome])
        else:
            twin.append(outcome)
    detailed = groups[:DETAILED_PLACEMENTS]
    if base is not None:
        detailed += [g for g in groups[DETAILED_PLACEMENTS:] if base in g]
    body = ["<p class='note'>Per placement: the used nodes (boxes in the node's colour, headed by the tuples/s "
            "the node sends to other nodes) with their workers and tasks, a task shaded darker the more tuples/s "
            "it sends and receives; the task x task traffic ordered by node (traffic outside the diagonal blocks "
            "crosses nodes); every node's placed load and predicted CPU and network use as a share of its "
            "capacity.</p>"]
    if graph.n_tasks > MAX_PICTURE_TASKS:
        body.append(f"<p class='note'>{graph.n_tasks} tasks: too many to draw one by one (limit "
                    f"{MAX_PICTURE_TASKS}); the traffic between nodes instead.</p>")
    for index, group in enumerate(detailed):
        names = [o.row["scheduler"] for o in group]
        heading = ", ".join(names)
        if base is not None and base in group:
            heading += " (baseline)"
        body.append(f"<h3>{html.escape(heading)}</h3>")
        if len(group) > 1:
            body.append(f"<p class='note'>The same placement (every task on the same node and worker) from "
                        f"{html.escape(', '.join(names))}.</p>")
        body.append(_placement_pictures(graph, cluster, group[0].placement, model, names[0], f"s{index}-"))
    rest = [o.row["scheduler"] for g in groups if g not in detailed for o in g]
    if rest:
        body.append(f"<p class='note'>Not drawn (ranked lower): {html.escape(', '.join(rest))}. "
                    "<code>streamsched compare --schedulers NAME --report FILE</code> draws one.</p>")
    summary = "Placements in detail: " + "; ".join(", ".join(o.row["scheduler"] for o in g) for g in detailed)
    return _section("placements", summary, "".join(body))


def _parameters(model: ModelParams) -> str:
    """The model's parameters as a table: readable name, value in a readable unit, source."""
    sources = _parameter_sources(model)
    defaults = ModelParams()
    rows = []
    for field in fields(model):
        name, unit, scale = PARAMETERS.get(field.name, (field.name, "", 1.0))
        value = getattr(model, field.name)
        if isinstance(value, bool):
            text = "on" if value else "off"
        elif value is None:
            text, unit = "each edge's own (bytes/s over tuples/s)", ""
        else:
            text = fmt(value * scale)
        source = sources.get(field.name) or ("prior (Storm 1.x on the papers' 2.7 GHz, 1 Gbps machines)"
                                             if value == getattr(defaults, field.name) else "given")
        rows.append(f"<tr><td class='name' title='{html.escape(field.name)}'>{html.escape(name)}</td>"
                    f"<td>{html.escape(text)}</td><td class='unit'>{html.escape(unit)}</td>"
                    f"<td class='source'>{html.escape(source)}</td></tr>")
    return ("<table id='parameters'><thead><tr><th>parameter</th><th>value</th><th>unit</th><th>source</th></tr>"
            f"</thead><tbody>{''.join(rows)}</tbody></table>")


def _parameter_sources(model: ModelParams) -> dict[str, str]:
    """Field -> where its value comes from, for the fields a fitted set fits or sets."""
    name = fitted_set(model)
    if name is None:
        return {}
    document = read_calibration()
    fitted = document["default"] if name in ("default", *SETTING_SETS) else name
    entry = document["sets"][fitted]
    sources = {f: f"fitted on {', '.join(entry['papers'])} (set {fitted!r})" for f in entry["params"]}
    for f in {**entry.get("setting", {}), **SETTING_SETS.get(name, {})}:
        sources[f] = f"setting of the set {name!r}"
    return sources


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
    path.parent.mkdir(parents=True, exist_ok=True)
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
             _table(rows, [k for k in TOP_COLUMNS if k != "rank"], None, None, "results")]
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
body {{ font-family: sans-serif; margin: 1em 1.5em; color: #222; font-size: 15px; }}
h1 {{ font-size: 1.4em; margin: 0 0 0.2em; }}
p {{ margin: 0.3em 0; }}
.verdict {{ font-size: 1.05em; background: #f3f7fb; border-left: 4px solid #2b7bba; padding: 0.4em 0.7em;
  margin: 0.5em 0; }}
.top {{ display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; }}
#ranking {{ flex: 1 1 0; min-width: 0; overflow-x: auto; }} #headline {{ flex: 0 0 auto; }}
#ranking th {{ max-width: 7.5em; }} #headline .caption {{ font-weight: bold; font-size: 0.9em; }}
table {{ border-collapse: collapse; font-size: 0.82em; }}
th, td {{ border: 1px solid #bbb; padding: 0.2em 0.45em; text-align: right; }}
th {{ background: #eef; font-weight: 600; cursor: help; }}
td.scheduler, td.status, td.bottleneck, td.name, td.unit, td.source {{ text-align: left; white-space: nowrap; }}
.tag {{ font-size: 0.8em; color: #555; border: 1px solid #999; border-radius: 3px; padding: 0 0.2em; }}
details {{ margin: 0.6em 0; border-top: 1px solid #ddd; padding-top: 0.3em; }}
summary {{ font-size: 1.1em; font-weight: bold; cursor: pointer; }}
figure.picture {{ margin: 0.3em; display: inline-block; vertical-align: top; }}
figure.picture svg {{ max-width: 100%; height: auto; display: block; }}
.placement {{ display: flex; flex-wrap: wrap; gap: 0.5em; align-items: flex-start; border: 1px solid #ddd; }}
dt {{ font-weight: bold; }} dd {{ margin: 0 0 0.4em 1.5em; }}
.note {{ color: #444; font-size: 0.9em; }} .error {{ color: #a00; }}
tr.best td {{ background: #e6f4e6; font-weight: bold; }}
</style></head><body>"""

#: Records in ``<body>`` attributes, for a headless browser: how many pictures there are and how
#: many render (measured with every folded section opened, then closed again), script errors.
_SCRIPT = """<script>
window.addEventListener('load', function () {
  var closed = Array.prototype.slice.call(document.querySelectorAll('details:not([open])'));
  closed.forEach(function (d) { d.open = true; });
  var pictures = Array.prototype.slice.call(document.querySelectorAll('figure.picture > svg'));
  var shown = pictures.filter(function (p) { var r = p.getBoundingClientRect(); return r.width > 0 && r.height > 0; });
  closed.forEach(function (d) { d.open = false; });
  document.body.setAttribute('data-images', String(pictures.length));
  document.body.setAttribute('data-images-loaded', String(shown.length));
  document.body.setAttribute('data-charts', String(document.querySelectorAll('figure.chart > svg').length));
  document.body.setAttribute('data-placements', String(document.querySelectorAll('div.placement').length));
  document.body.setAttribute('data-script-errors', String(window.__errors.length));
  document.body.setAttribute('data-ready', 'yes');
});
</script>"""


def write_loop_report(path: str | Path, rows: list[dict[str, Any]], summary: dict[str, Any], title: str) -> Path:
    """One HTML page of the live loop's journal: its timeline (:func:`loop_timeline`) and a
    table of the applies (moved subtasks, downtime, measured before and after, predicted)."""
    from streamsched.evaluation.pictures import loop_timeline

    path = check_report_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    counts = ", ".join(f"{k} {v}" for k, v in sorted(summary["decisions"].items()))
    parts = [_HEAD.format(title=html.escape(title)), f"<h1>{html.escape(title)}</h1>",
             f"<p class='note'>{summary['windows']} windows ("
             + ("complete" if summary["complete"] else "<b>not complete</b>") + f"); decisions: {html.escape(counts)}."
             " Measured values are the collector's readings over each window; predictions are the throughput "
             "model's (T1-T5) on the window's snapshot.</p>"]
    if rows:
        parts.append(_figure(svg(loop_timeline(rows, prefix="l-")), "measured throughput and remote bytes per "
                             "window, decisions marked", "timeline"))
    table = [{"window end": apply["window"], "moved subtasks": apply["moved"], "downtime s": apply["downtime_s"],
              "basis": apply["basis"], "measured before": apply["measured_before"], "predicted": apply["predicted"],
              "measured after": apply["measured_after"], "windows after": apply["windows_after"]}
             for apply in summary["applies"]]
    if table:
        head = "".join(f"<th>{html.escape(k)}</th>" for k in table[0])
        body = "".join("<tr>" + "".join(f"<td>{html.escape(_format(v, '{:.4g}'))}"
                                        f"</td>" for v in row.values()) + "</tr>" for row in table)
        parts.append(f"<table id='applies'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    parts.append(_SCRIPT + "</body></html>")
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
