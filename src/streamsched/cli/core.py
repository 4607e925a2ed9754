"""Core commands: list, schedule, schedule-many, evaluate, compare."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from streamsched import workloads
from streamsched.cli.app import app, err_console
from streamsched.cli.common import (ClusterOpt, GraphOpt, JsonOpt, ParamOpt, WorkloadOpt, check_output_file, console,
                                    cell, emit, finite_or_null, load_inputs, parse_params, print_compare_table,
                                    read_placement)
from streamsched.cli.summaries import placement_lines
from streamsched.evaluation.comparison import SORT_KEY, resolve_names
from streamsched.performance import regime
from streamsched.evaluation.verdict import PRESET
from streamsched.errors import InfeasibleError, InputError
from streamsched.metrics import evaluate as evaluate_placement
from streamsched.model import Cluster, Placement, TaskGraph
from streamsched.model.paths import safe_name
from streamsched.schedulers import available, get_scheduler, scheduler_class
from streamsched.schedulers.base import schedule_many


def check_isolation_topologies(scheduler: str, params: dict[str, Any], names: list[str]) -> None:
    """``isolation`` with ``machines`` naming a topology that is not being placed: exit 2."""
    if scheduler != "isolation" or not params.get("machines"):
        return
    from streamsched.schedulers.isolation import parse_machines

    unknown = [n for n in parse_machines(str(params["machines"])) if n not in names]
    if unknown:
        raise InputError(f"--param machines: {', '.join(map(repr, unknown))} is not a topology being placed "
                         f"(placing: {', '.join(names)})")


#: Exit code of ``compare`` when some scheduler failed (a row with status ``error``), and of
#: ``schedule-many`` when some topology was not placed; the other rows and files are written.
EXIT_SOME_FAILED = 4


@app.command("list")
def list_(what: str = typer.Argument("all", help="schedulers, workloads, clusters or all"),
          as_json: bool = JsonOpt) -> None:
    """List the registered schedulers, built-in workloads and clusters."""
    if what not in ("all", "schedulers", "workloads", "clusters"):
        raise InputError(f"list: {what!r} is not one of schedulers, workloads, clusters, all")
    listing: dict[str, list[dict[str, Any]]] = {}
    if what in ("all", "schedulers"):
        listing["schedulers"] = []
        for name in available():
            cls = scheduler_class(name)
            listing["schedulers"].append({
                "scheduler": name, "family": cls.family, "objective": cls.objective,
                "tags": [tag for tag in ("exact", "randomised", "needs_edge_nodes") if getattr(cls, tag)],
                "summary": cls.summary, "parameters": [p.describe() for p in cls.params]})
    if what in ("all", "workloads"):
        listing["workloads"] = [dict(zip(("workload", "tasks", "what", "source"), row))
                                for row in workloads.workload_descriptions()]
    if what in ("all", "clusters"):
        listing["clusters"] = [
            {"cluster": name, "what": what_it_is, "source": source,
             "nodes": "H + L" if name == "high-low-H-L" else "N" if name == "fischer-N" else "W" if name == "caps-WxS"
             else str(workloads.cluster(name.replace("-sK", "")).n_nodes)}
            for name, (what_it_is, source) in workloads.CLUSTER_DESCRIPTIONS.items()]
    if as_json:
        console.print_json(data=listing)
        return
    columns = {"schedulers": ("scheduler", "family", "objective", "tags", "summary", "parameters"),
               "workloads": ("workload", "tasks", "what", "source"),
               "clusters": ("cluster", "nodes", "what", "source")}
    for kind, entries in listing.items():
        table = Table(*columns[kind], title=kind)
        for entry in entries:
            table.add_row(*(_list_cell(column, entry[column]) for column in columns[kind]))
        console.print(table)


def _list_cell(column: str, value: Any) -> str:
    """A ``list`` table cell: tags joined by commas (``needs edge nodes``), parameters by ``;``."""
    if column == "tags":
        return ", ".join(tag.replace("_", " ") for tag in value)
    return "; ".join(value) if isinstance(value, list) else str(value)


@app.command()
def schedule(
    workload: Optional[list[str]] = typer.Option(
        None, "--workload", "-w", help="built-in workload name; repeat it to place several topologies in order"),
    graph: Optional[list[Path]] = typer.Option(
        None, "--graph", "-g", help="graph file (see `evaluate --help`); repeat it to place several topologies in order"),
    cluster: str = ClusterOpt,
    scheduler: str = typer.Option("even", "--scheduler", "-s", help="registered scheduler name"),
    param: Optional[list[str]] = ParamOpt,
    seed: int = typer.Option(0, "--seed", min=0, help="seed of every randomised choice"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="write the placement JSON here (several: OUT-<graph>.json)"),
    as_json: bool = JsonOpt,
) -> None:
    """Compute a placement and print its metrics (and write it with --out).

    Several topologies share the cluster: each is placed, in order, on what the earlier ones left."""
    if workload and graph:
        raise InputError("give exactly one of --workload NAME or --graph FILE (repeat it for several topologies)")
    check_output_file(out)
    if len(workload or graph or []) > 1:
        from streamsched import resolve

        _schedule_several([resolve.graph(w) for w in workload or []] + [resolve.graph(path=g) for g in graph or []],
                          resolve.cluster(cluster, (graph or [None])[0]), scheduler, parse_params(param), seed, out,
                          as_json)
        return
    task_graph, nodes = load_inputs((workload or [None])[0], (graph or [None])[0], cluster)
    params = parse_params(param)
    check_isolation_topologies(scheduler, params, [task_graph.name])
    with err_console.status(f"scheduling {task_graph.name} with {scheduler}"):
        placement = get_scheduler(scheduler, **params).schedule(task_graph, nodes, seed=seed)
    if out is not None:
        placement.write(out, task_graph, nodes)
    metrics = evaluate_placement(task_graph, placement, nodes)
    emit({"metadata": dict(placement.metadata), "metrics": metrics}, as_json,
         placement_lines(task_graph, nodes, placement, metrics) + ([f"wrote {out}"] if out is not None else []))


def _schedule_several(graphs: list[TaskGraph], nodes: Cluster, scheduler: str, params: dict[str, Any], seed: int,
                      out: Optional[Path], as_json: bool = False) -> None:
    """``schedule`` with several topologies: :func:`schedule_many`, one result per topology."""
    check_isolation_topologies(scheduler, params, [g.name for g in graphs])
    targets = {}
    if out is not None:
        for k, task_graph in enumerate(graphs):
            name = f"{out.stem}-{safe_name(task_graph.name)}"
            while name in targets.values():
                name = f"{name}-{k}"
            targets[k] = name
    with err_console.status(f"scheduling {len(graphs)} topologies with {scheduler}"):
        placements = schedule_many(get_scheduler(scheduler, **params), graphs, nodes, seed=seed)
    results, lines = [], []
    for k, (task_graph, placement) in enumerate(zip(graphs, placements)):
        metrics = evaluate_placement(task_graph, placement, nodes)
        lines += placement_lines(task_graph, nodes, placement, metrics)
        if out is not None:
            target = out.with_name(f"{targets[k]}{out.suffix or '.json'}")
            placement.write(target, task_graph, nodes)
            lines.append(f"wrote {target}")
        results.append({"graph": task_graph.name, "metadata": dict(placement.metadata), "metrics": metrics})
    emit({"topologies": results}, as_json, lines)


@app.command("schedule-many")
def schedule_many_command(
    nimbus_dir: Optional[Path] = typer.Option(
        None, "--nimbus", help="directory of Nimbus' stored topologies (<id>-stormcode.ser and <id>-stormconf.ser)"),
    graph: Optional[list[Path]] = typer.Option(None, "--graph", "-g", help="graph file; repeat it for each topology"),
    executors: str = typer.Option("hint", "--executors", help="with --nimbus: hint (one executor per parallelism "
                                  "hint, as Storm's TestLargeCluster) or nimbus (min(hint, topology.tasks))"),
    cluster: str = ClusterOpt,
    scheduler: str = typer.Option("storm-ras", "--scheduler", "-s", help="registered scheduler name"),
    param: Optional[list[str]] = ParamOpt,
    order: Optional[str] = typer.Option(
        None, "--order", help="priority: Storm's (topology.priority, then id; --nimbus only, its default); "
                              "given: as listed (the default for --graph)"),
    reschedule: bool = typer.Option(False, "--reschedule", help="then Storm's second phase: each topology in "
                                    "turn removed and scheduled again on what the others hold"),
    seed: int = typer.Option(0, "--seed", min=0, help="seed of every randomised choice"),
    out: Path = typer.Option(..., "--out", "-o", help="directory: one placement file per placed topology and "
                             "summary.json"),
    as_json: bool = JsonOpt,
) -> None:
    """Schedule every topology of a set onto one cluster, each on what the others left, as
    Storm's TestLargeCluster does (``-p strict=true`` for no capacity repair, as Storm), and with
    ``--reschedule`` its second phase. Writes OUTDIR/<topology>.json (the placements at the end)
    and OUTDIR/summary.json (per topology: placed or why not, the second phase's outcome and
    seconds, Storm's network metric). Exit 4 when some topology was not placed (the outputs
    are still written)."""
    from streamsched import resolve
    from streamsched.metrics import traffic_by_distance
    from streamsched.model.paths import staged_directory
    from streamsched.schedulers.base import reschedule_each

    if (nimbus_dir is None) == (not graph):
        raise InputError("give exactly one of --nimbus DIR or --graph FILE (repeat --graph for several topologies)")
    if order not in (None, "priority", "given"):
        raise InputError(f"--order: {order!r} is not one of priority, given")
    if order == "priority" and nimbus_dir is None:
        raise InputError("--order priority needs --nimbus (topology.priority is in the stored confs)")
    if nimbus_dir is not None:
        from streamsched.engines.storm import nimbus

        topologies = [t for t in nimbus.read_dir(nimbus_dir, executors=executors) if not t.empty]
        graphs, ids = [t.graph for t in topologies], [t.topology_id for t in topologies]
        sequence = nimbus.priority_order(topologies) if order in (None, "priority") else None
    else:
        graphs = [resolve.graph(path=g) for g in graph]
        ids, sequence = [g.name for g in graphs], None
    if not graphs:
        raise InputError(f"{nimbus_dir}: no topology with executors")
    nodes = resolve.cluster(cluster, None if nimbus_dir is not None else graph[0])
    params = parse_params(param)
    check_isolation_topologies(scheduler, params, [g.name for g in graphs])
    chosen = get_scheduler(scheduler, **params)
    with err_console.status(f"scheduling {len(graphs)} topologies with {scheduler}"):
        reasons: dict[int, str] = {}
        placements = schedule_many(chosen, graphs, nodes, seed=seed, skip_infeasible=reasons, order=sequence)
        second = reschedule_each(chosen, graphs, nodes, placements, seed=seed) if reschedule else None
    rows, files = [], {}
    final = [p for p, _, _ in second] if second is not None else placements
    for k, (task_graph, placement) in enumerate(zip(graphs, final)):
        row = {"id": ids[k], "name": task_graph.name, "executors": task_graph.n_tasks,
               "placed": placements[k] is not None, "reason": reasons.get(k), "file": None}
        if second is not None:
            row.update(rescheduled=second[k][0] is not None, reschedule_reason=second[k][1],
                       reschedule_s=second[k][2])
        if placement is not None:
            row["repaired"] = bool(placement.metadata.get("repaired", False))
            row["network"] = traffic_by_distance(task_graph, placement, nodes)
            files[k] = f"{safe_name(ids[k])}.json"
            row["file"] = files[k]
        rows.append(row)
    summary = {"cluster": nodes.name, "scheduler": scheduler, "params": chosen.resolved_params(), "seed": seed,
               "order": [ids[k] for k in (sequence or range(len(graphs)))], "reschedule": reschedule,
               "fully_scheduled": sum(r["placed"] for r in rows), "topologies": rows}
    if second is not None:
        summary["rescheduled"] = sum(r["rescheduled"] for r in rows)
    with staged_directory(out) as stage:
        for k, name in files.items():
            final[k].write(stage / name, graphs[k], nodes)
        (stage / "summary.json").write_text(json.dumps(finite_or_null(summary), indent=1))
    lines = [f"{summary['fully_scheduled']}/{len(rows)} topologies placed on {nodes.name} by {scheduler}"]
    if second is not None:
        slowest = max(range(len(rows)), key=lambda k: second[k][2])
        lines.append(f"second phase: {summary['rescheduled']}/{len(rows)} scheduled again; slowest step "
                     f"{rows[slowest]['name']} {second[slowest][2]:.2f} s")
    missing = [r["name"] for r in rows if not r["placed"] or (second is not None and not r["rescheduled"])]
    lines.append(f"placements and summary.json in {out}")
    emit(summary, as_json, lines)
    if missing:
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        err_console.print(f"{len(missing)} of {len(rows)} topologies not scheduled: {shown}", highlight=False)
        raise typer.Exit(EXIT_SOME_FAILED)


@app.command()
def evaluate(
    placement: Path = typer.Argument(..., help="placement JSON written by `schedule --out`"),
    workload: Optional[str] = WorkloadOpt,
    graph: Optional[Path] = GraphOpt,
    cluster: str = ClusterOpt,
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Metrics of a placement file: traffic, nodes used, balance, validity."""
    task_graph, nodes = load_inputs(workload, graph, cluster, units=False)
    loaded = read_placement(placement, task_graph, nodes)
    metrics = evaluate_placement(task_graph, loaded, nodes)
    if as_json:
        console.print_json(data=finite_or_null(metrics))
        return
    table = Table("metric", "value", title=f"{placement.name}")
    for key, value in metrics.items():
        table.add_row(key, cell(value))
    console.print(table)


@app.command()
def compare(
    workload: Optional[str] = WorkloadOpt,
    graph: Optional[Path] = GraphOpt,
    cluster: str = ClusterOpt,
    schedulers: str = typer.Option(
        "all", "--schedulers",
        help="comma-separated names, a family (cluster, edge), or all: the cluster family, plus the edge "
             "strategies when the cluster has edge nodes (an edge strategy named on a cluster without any is skipped)"),
    param: Optional[list[str]] = ParamOpt,
    seed: int = typer.Option(0, "--seed", min=0),
    as_json: bool = typer.Option(False, "--json", help="print {\"sort_key\", \"verdict\", \"results\": [...]} as JSON"),
    report: Optional[Path] = typer.Option(None, "--report", help="also write an HTML report (charts, placement pictures, predicted throughput) with .csv/.json beside it"),
    model: str = typer.Option(PRESET, "--model", help="fitted parameter set of the predictions and the verdict: "
                              "the one fitted on the hardware nearest the cluster's (docs/evaluation.md, Calibration)"),
    current: Optional[Path] = typer.Option(
        None, "--current", help="the job's running placement (placement.json of read-engine; found there by itself "
                                "when --graph is a read-engine output): a row 'current' and the verdict's baseline"),
) -> None:
    """Run several schedulers on one workload and cluster and compare them: rows ranked by
    inter-node traffic (then predicted throughput), the best marked, and a verdict against even
    on the model's fitted set ``--model`` (docs/evaluation.md, "compare: ranking and verdict").

    A scheduler that crashes, runs out of memory or times out gets a row with status ``error``
    and its reason; the other rows are printed and the exit code is 4. When no scheduler
    places the graph (every row infeasible or skipped) the exit code is 3.
    """
    task_graph, nodes = load_inputs(workload, graph, cluster)
    names = resolve_names(schedulers, nodes)
    params = parse_params(param)
    if "isolation" in names:
        check_isolation_topologies("isolation", params, [task_graph.name])
    for key in params:
        if not any(key in {p.name for p in scheduler_class(n).params} for n in names):
            raise InputError(f"--param {key}: no selected scheduler declares it")
    regime(model)  # an unknown set fails before any scheduler runs
    running = _running_placement(current, graph, task_graph, nodes)
    if report is not None:
        from streamsched.evaluation.report import check_report_path, write_report

        check_report_path(report)
    with err_console.status("comparing") as status:
        on_start = lambda n: status.update(f"running {n} on {task_graph.name}")  # noqa: E731
        from streamsched import job  # matplotlib and the experiments load with the first comparison

        compared = job.compare(task_graph, nodes, names, params, seed, model, on_start, current=running)
        rows, decision = compared.rows, compared.verdict
        if report is not None:
            status.update(f"writing {report}")
            written = write_report(report, task_graph, nodes, compared.outcomes, model=regime(model), seed=seed,
                                   verdict=decision)
            err_console.print("report: " + ", ".join(str(p) for p in written), highlight=False)
    placed_none = bool(rows) and all(row.get("status") in ("infeasible", "skipped") for row in rows) \
        and any(row.get("status") == "infeasible" for row in rows)
    if as_json:
        document = {"workload": task_graph.name, "cluster": nodes.name, "seed": seed, "sort_key": SORT_KEY,
                    "verdict": decision, "results": rows}
        console.print_json(data=finite_or_null(document))
    elif not placed_none:
        print_compare_table(task_graph, nodes, seed, rows, decision)
    failed = [row["scheduler"] for row in rows if row.get("status") == "error"]
    if failed:
        err_console.print(f"{len(failed)} of {len(rows)} schedulers failed: {', '.join(failed)}", highlight=False)
        raise typer.Exit(EXIT_SOME_FAILED)
    if placed_none:
        reason = next(row["error"] for row in rows if row.get("status") == "infeasible")
        raise InfeasibleError(f"no scheduler placed {task_graph.name} on {nodes.name}, every one found it "
                              f"infeasible (first reason: {reason})")


def _running_placement(current: Optional[Path], graph: Optional[Path], task_graph: TaskGraph,
                       nodes: Cluster) -> Optional[Placement]:
    """The job's running placement: ``--current``, else the ``placement.json`` a read-engine
    output directory holds beside ``--graph`` when it says ``current`` and was made for this
    cluster (a note on stderr says it is the baseline)."""
    if current is not None:
        return read_placement(current, task_graph, nodes)
    if graph is None:
        return None
    beside = (graph if graph.is_dir() else graph.parent) / "placement.json"
    if not beside.is_file() or (not graph.is_dir() and graph.name != "graph.json"):
        return None
    try:
        found = read_placement(beside, task_graph, nodes)
    except InputError as exc:
        err_console.print(f"note: {beside} not used as the running placement: {exc}", highlight=False)
        return None
    if not found.metadata.get("current"):
        return None
    err_console.print(f"baseline: the running placement {beside} (row 'current')", highlight=False)
    return found
