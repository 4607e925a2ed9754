"""The readable summaries commands print without ``--json``: a few lines a person reads at a
glance (numbers with thousands separators, percentages, times as UTC dates, one line per node). ``--json`` prints
the full document instead; files written with ``--out`` are the same either way."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any, Mapping

import numpy as np

from streamsched.model import Cluster, Placement, TaskGraph

#: Nodes listed one per line in a placement summary; the rest are counted.
MAX_NODE_LINES = 12


def num(value: Any, unit: str = "") -> str:
    """``12,345`` for large numbers, 4 significant digits below 1,000, ``-`` for None/NaN."""
    if value is None or isinstance(value, float) and math.isnan(value):
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return f"{value}{unit and ' ' + unit}"
    value = float(value)
    if math.isinf(value):
        text = "inf"
    elif abs(value) >= 1000 or value == int(value):
        text = f"{value:,.0f}"
    else:
        text = f"{value:.4g}"
    return f"{text}{unit and ' ' + unit}"


def when(epoch_s: float | None) -> str:
    """An epoch time (seconds) for people: ``2026-11-25 18:30:05 UTC`` (fractions of a second
    kept to the millisecond when there are any); ``-`` for none."""
    if epoch_s is None or not math.isfinite(epoch_s):
        return "-"
    moment = datetime.fromtimestamp(epoch_s, timezone.utc)
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond // 1000:03d}"
    return text + " UTC"


def pct(part: float, whole: float) -> str:
    return "-" if not whole else f"{100 * part / whole:.1f} %"


def operator_counts(graph: TaskGraph, tasks: np.ndarray) -> str:
    """``spout x2, split x3`` for the task indices ``tasks``, in the graph's operator order."""
    counts = np.bincount(graph.task_operator[tasks], minlength=len(graph.operator_names))
    return ", ".join(f"{graph.operator_names[k]} x{int(c)}" for k, c in enumerate(counts) if c)


def placement_lines(graph: TaskGraph, nodes: Cluster, placement: Placement, metrics: Mapping[str, Any],
                    verb: str = "placed") -> list[str]:
    """Who placed what where, the traffic it cuts, balance and validity, one line per node."""
    meta = placement.metadata
    scheduler = meta.get("scheduler", "the scheduler")
    wall = meta.get("wall_time_s")
    lines = [f"{graph.name} on {nodes.name}: {scheduler} {verb} {graph.n_tasks:,} tasks on "
             f"{metrics['nodes_used']} of {nodes.n_nodes} nodes, {metrics['workers_used']} workers"
             + (f" ({wall:.2f} s)" if isinstance(wall, (int, float)) else "")]
    total = metrics.get("total_traffic", 0.0)
    lines.append(f"  inter-node traffic    {num(metrics['inter_node_traffic'], 'tuples/s')}  "
                 f"({pct(metrics['inter_node_traffic'], total)} of {num(total, 'tuples/s')})")
    lines.append(f"  inter-worker traffic  {num(metrics['inter_worker_traffic'], 'tuples/s')}  "
                 f"({pct(metrics['inter_worker_traffic'], total)})")
    lines.append(f"  load imbalance {num(metrics['load_imbalance'])}, capacity imbalance "
                 f"{num(metrics['capacity_imbalance'])}, busiest node at {pct(metrics['max_utilisation'] or 0.0, 1.0)} "
                 "of its capacity")
    if "status" in meta:
        lines.append(f"  solver: {meta['status']}"
                     + (f", bound {num(meta['bound'])}" if meta.get("bound") is not None else "")
                     + (f", gap {100 * meta['gap']:.1f} %" if isinstance(meta.get("gap"), (int, float))
                        and math.isfinite(meta["gap"]) else ""))
    load = np.bincount(placement.node_of, weights=graph.load, minlength=nodes.n_nodes)
    used = [k for k in range(nodes.n_nodes) if np.any(placement.node_of == k)]
    width = max((len(nodes.nodes[k].name) for k in used[:MAX_NODE_LINES]), default=0)
    lines.append(f"  per node (load / capacity in {graph.load_unit}: tasks per operator):")
    for k in used[:MAX_NODE_LINES]:
        tasks = np.flatnonzero(placement.node_of == k)
        lines.append(f"    {nodes.nodes[k].name:<{width}}  {num(load[k])} / {num(nodes.capacity[k])}  "
                     f"{operator_counts(graph, tasks)}")
    if len(used) > MAX_NODE_LINES:
        lines.append(f"    ... and {len(used) - MAX_NODE_LINES} more nodes (--json lists every task)")
    violations = metrics.get("violations") or []
    lines.append("  valid placement" if metrics.get("valid", not violations)
                 else f"  INVALID: {violations[0]}" + (f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""))
    return lines


def prediction_lines(nodes: Cluster, prediction: Mapping[str, Any], model: str) -> list[str]:
    """The performance model's figures for one placement, bottleneck first."""
    cpu = prediction.get("node_cpu_utilisation") or []
    busiest = sorted(range(len(cpu)), key=lambda k: -cpu[k])[:MAX_NODE_LINES]
    lines = [
        f"predicted by the performance model ({model}; a model, not a measurement: docs/evaluation.md)",
        f"  throughput  {num(prediction['throughput_tps'], 'tuples/s')} executed "
        f"({num(prediction['source_tps'], 'tuples/s')} from the sources; "
        f"{num(prediction['throughput_per_node'], 'tuples/s')} per node on {prediction['nodes_used']} nodes)",
        f"  bottleneck  {prediction['bottleneck']} ({prediction['regime']}-bound)",
        f"  latency     {num(1e3 * prediction['latency_s'], 'ms')} (tuple tree {num(1e3 * prediction['tuple_tree_time_s'], 'ms')})",
        f"  network     {num(prediction['wire_bytes_per_source_tuple'], 'B')} across nodes per source tuple",
    ]
    if busiest:
        lines.append("  node CPU    " + ", ".join(f"{nodes.nodes[k].name} {100 * cpu[k]:.0f} %" for k in busiest
                                                  if k < nodes.n_nodes)
                     + (" ..." if len(cpu) > MAX_NODE_LINES else ""))
    return lines


def replan_lines(graph: TaskGraph, nodes: Cluster, placement: Placement, metrics: Mapping[str, Any],
                 before: Mapping[str, Any]) -> list[str]:
    """The new placement, what it moves and what it saves against the running one."""
    meta = placement.metadata
    moved = meta.get("moved")
    lines = placement_lines(graph, nodes, placement, metrics, verb="re-placed")
    lines.insert(1, f"  moves {num(moved)} of {graph.n_tasks:,} tasks at {num(meta.get('migration_cost'))} each; "
                    f"inter-node traffic {num(before['inter_node_traffic'])} -> {num(metrics['inter_node_traffic'])} "
                    "tuples/s")
    return lines


def generated_lines(summary: Mapping[str, Any]) -> list[str]:
    """What ``gen-metrics`` wrote: rows, span, rate scale, the dirty rows ingest must quarantine."""
    lines = [f"{summary['topology']}: {num(summary['traffic_rows'])} traffic rows and {num(summary['load_rows'])} load "
             f"rows over {summary['intervals']} intervals of {num(summary['interval_s'])} s ({summary['format']}, "
             f"rates x{num(summary.get('rate_scale', 1.0))}, seed {summary['seed']})"]
    dirty = summary.get("dirty") or {}
    if dirty:
        lines.append("  dirty rows added (ingest quarantines them): "
                     + ", ".join(f"{kind} {num(count)}" for kind, count in dirty.items()))
    for phase in summary.get("phases") or []:
        lines.append(f"  placement {phase['placement']}: ingest with --window {phase['window_s']:.15g} "
                     f"--until {phase['until']:.15g} ({when(phase['until'])})")
    files = summary.get("files") or []
    lines.append(f"  wrote {', '.join(map(str, files[:4]))}" + (f" and {len(files) - 4} more" if len(files) > 4 else ""))
    return lines


def job_lines(result: Any, generated: Mapping[str, Any] | None) -> list[str]:
    """``run`` and ``demo``: what was generated (demo), ingested and snapshotted."""
    report = result.ingested.report
    quarantined = report.get("rows_quarantined") or {}
    lines = [f"generated {num(generated['traffic_rows'])} traffic and {num(generated['load_rows'])} load rows "
             f"({sum((generated.get('dirty') or {}).values())} dirty)"] if generated else []
    lines += [f"ingest: {num(report['rows_read'])} rows read = {num(report['rows_accepted'])} accepted + "
              f"{num(sum(quarantined.values()))} quarantined"
              + (f" ({', '.join(f'{k} {v}' for k, v in quarantined.items())})" if quarantined else ""),
              f"snapshot: {result.ingested.snapshot}"]
    return lines


def remote_line(traffic: Mapping[str, float]) -> str:
    """The current placement's traffic over the network: ``14,940 of 22,410 tuples/s cross
    nodes (66.7 %), 14,940 cross workers``."""
    total = traffic["total_traffic"]
    return (f"{num(traffic['inter_node_traffic'])} of {num(total, 'tuples/s')} cross nodes "
            f"({pct(traffic['inter_node_traffic'], total)}), {num(traffic['inter_worker_traffic'])} cross workers")


def _change(then: float | None, now: float | None) -> str:
    return f" ({100.0 * (now - then) / then:+.1f} %)" if then and now is not None else ""


def _latency(latency: Mapping[str, float] | None) -> str:
    if not latency or not latency.get("histograms"):
        return "n/a (no latency marker reported)"
    return f"p50 {num(round(latency['p50']))} / p99 {num(round(latency['p99']))} ms"


def live_loop_lines(loop: Any) -> list[str]:
    """``demo``'s live Flink part: where the cluster ran (the network lab, or loopback and why),
    the job read and ingested, the plan judged against the running placement on that reading,
    applied or left alone, and what it measured: source records/s with the predicted throughput
    beside them, latency at the sink (latency markers), bytes between TaskManagers."""
    applied, r = loop.applied, loop.applied["reading"]
    after = applied["after"]
    predicted_t = r["plan_predicted_throughput"]
    if loop.lab is not None:
        links = ", ".join(f"{tm} {mbit:g}" for tm, mbit in loop.lab["link_mbit"].items())
        where = (f"flink: network lab: {loop.lab['taskmanagers']} TaskManagers x {loop.lab['slots']} slots, each in "
                 f"its own network namespace behind a shaped link ({links} Mbit/s each way), no CPU quota (planned on "
                 f"{loop.lab['machines']})")
    else:
        why = f" ({loop.no_lab})" if loop.no_lab else ""
        where = f"flink: on loopback, not in the network lab{why}: placement moves bytes here, not throughput"
    lines = [
        where,
        f"flink: job {loop.job_id} read over REST ({loop.read_dir}): {num(loop.rate_before)} records/s between "
        f"subtasks; Spark's snapshot of the collector's next window: {num(loop.snapshot_rate)} records/s",
        f"flink: {loop.scheduler}'s plan ({loop.plan}) against the running placement, one reading of "
        f"{r['window_s']:.1f} s: predicted gain in {applied['basis']} {100 * applied['gain']:+.1f} % (threshold "
        f"{100 * applied['min_gain']:g} %)",
    ]
    running = (f" (predicted {num(r['running_predicted_throughput'])}, bottleneck {r['running_bottleneck']})"
               if r["running_predicted_throughput"] is not None else "")
    if not applied["applied"]:
        return lines + [f"flink: job left alone: {applied['reason']}",
                        f"flink: measured {num(r['measured_throughput'])} source records/s{running}; latency at the "
                        f"sink {_latency(loop.latency_before)}; {num(r['measured_remote_bytes_per_s'])} bytes/s "
                        f"between TaskManagers"]
    return lines + [
        f"flink: applied: {len(applied['moved'])} subtasks moved, downtime {applied['downtime_s']:.2f} s over "
        f"{len(applied['rescales'])} rescales, every subtask checked on its planned TaskManager",
        f"flink: source records/s: {num(r['measured_throughput'])} before, {num(after['measured_throughput'])} after"
        f"{_change(r['measured_throughput'], after['measured_throughput'])}; predicted "
        + (f"{num(r['running_predicted_throughput'])} -> {num(predicted_t)}"
           f"{_change(r['running_predicted_throughput'], predicted_t)} (bottleneck {r['running_bottleneck']} -> "
           f"{r['plan_bottleneck']})" if predicted_t is not None else
           "n/a (no link capacities: the job's sources emit at a fixed rate, traffic moves, throughput stays)"),
        f"flink: latency at the sink (latency markers): {_latency(loop.latency_before)} before, "
        f"{_latency(loop.latency_after)} after (not predicted: the model predicts throughput)",
        f"flink: bytes/s between TaskManagers (numBytesInRemote): {num(r['measured_remote_bytes_per_s'])} before, "
        f"{num(after['measured_remote_bytes_per_s'])} after"
        f"{_change(r['measured_remote_bytes_per_s'], after['measured_remote_bytes_per_s'])}; predicted "
        f"{num(r['running_predicted_remote_bytes_per_s'])} -> {num(r['plan_predicted_remote_bytes_per_s'])}",
    ]


def reading_lines(report: Mapping[str, Any]) -> list[str]:
    """``read-engine``: what was read from the engine, first what its current placement sends
    between nodes, and the three files written."""
    graph, cluster = report["graph"], report["cluster"]
    lines = [f"{report.get('engine', 'engine')}: {graph['name']}, {num(graph['tasks'])} tasks of "
             f"{graph['operators']} operators, {num(graph['edges'])} edges, {num(graph['total_rate'], 'tuples/s')}, "
             f"load {num(graph['total_load'])} {graph['load_unit']}",
             f"  current placement: {remote_line(report['current'])}",
             f"  on {len(cluster['nodes'])} nodes ({cluster['capacity_unit']}): "
             + ", ".join(cluster["nodes"][:MAX_NODE_LINES]) + (" ..." if len(cluster["nodes"]) > MAX_NODE_LINES else ""),
             f"  wrote {graph['file']}, {report['placement']}, {cluster['file']}"]
    return lines


def watch_lines(report: Mapping[str, Any]) -> list[str]:
    """``watch``: the run's accounting (read = accepted + quarantined + dropped late), one line
    per window closed in this run, and what the re-planning emitted."""
    quarantined = {**report["rows_quarantined"]}
    lines = [f"read {num(report['rows_read'])} rows = {num(report['rows_accepted'])} accepted + "
             f"{num(sum(quarantined.values()))} quarantined"
             + (f" ({', '.join(f'{k} {num(v)}' for k, v in quarantined.items())})" if quarantined else "")
             + f" + {num(report['rows_dropped_late'])} dropped late"]
    for window in report["windows"]:
        lines.append(f"  window ending {when(window['end'])}: {num(window['read'])} read, "
                     f"{num(window['accepted'])} accepted, {num(sum(window['quarantined'].values()))} quarantined, "
                     f"{num(window['dropped_late'])} late; "
                     + (f"snapshot {', '.join(window['snapshots'])}" if window["snapshots"] else "no snapshot yet"))
    for decision in report["decisions"]:
        change = "" if decision["improvement_pct"] is None else f", {decision['improvement_pct']:.1f} % less traffic"
        lines.append(f"  {decision['topology']}: {decision['why']}, {num(decision['moved'])} tasks moved{change}"
                     + (f": emitted {decision['assignment']}" if decision["emitted"] else ": not emitted"))
    lines.append(f"{num(report['assignments_emitted'])} assignments emitted; "
                 f"{num(report['windows_open'])} windows still open (watermark {when(report['watermark'])})")
    return lines


def log_collected_lines(lines_taken: int, state: Mapping[str, Any]) -> list[str]:
    """``collect log --once``: the lines put into chunks, and where the next reading starts."""
    return [f"{num(lines_taken)} lines into chunks from {state['source']}; next: line {num(state['line'])} "
            f"at byte {num(state['offset'])}, chunk {num(state['seq'])}"]


def rest_collected_lines(chunk: Mapping[str, Any] | None, next_seq: int) -> list[str]:
    """``collect storm-ui|flink --once``: the chunk the reading wrote (none for the first: it is
    the base the next reading is differenced against)."""
    if chunk is None:
        return [f"first reading kept as the base; the next reading writes chunk {num(next_seq)}"]
    return [chunk_line(chunk) + f"; next chunk {num(next_seq)}"]


def chunk_line(chunk: Mapping[str, Any]) -> str:
    """One collector chunk: its pairs, the interval, what the current placement sent between
    nodes in it and the counter resets."""
    return (f"chunk of {num(chunk['rows'])} pairs over {chunk['seconds']:.1f} s: current placement "
            f"{remote_line(chunk['current'])} ({len(chunk['resets'])} counter resets)")


def journal_lines(result: Mapping[str, Any]) -> list[str]:
    """``journal``: the windows (complete or where not), decisions by kind, each apply with the
    measured value before and after beside the prediction."""
    lines = [f"{num(result['windows'])} windows from {when(result['first_end'])} to {when(result['last_end'])}: "
             + ("complete (one line per window)" if result["complete"] else
                f"NOT complete (gaps before {', '.join(when(g) for g in result['gaps'])}; "
                f"twice: {', '.join(when(d) for d in result['duplicates']) or 'none'})"),
             "decisions: " + ", ".join(f"{k} {num(v)}" for k, v in sorted(result["decisions"].items()))]
    for a in result["applies"]:
        unit = "records/s" if a["basis"] == "throughput" else "remote bytes/s"
        lines.append(f"  apply in the window ending {when(a['window'])}: {num(a['moved'])} subtasks moved, downtime "
                     f"{num(a['downtime_s'])} s; {unit} measured {num(a['measured_before'])} before, predicted "
                     f"{num(a['predicted'])}, measured {num(a['measured_after'])} after "
                     f"({num(a['windows_after'])} windows)")
    if result.get("html"):
        lines.append(f"page: {result['html']}")
    return lines
