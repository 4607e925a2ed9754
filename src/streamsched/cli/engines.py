"""Engine commands: ``streamsched read-engine ENGINE ...`` reads a running engine's topology
into OUTDIR/graph.json (the graph file format ``schedule --graph`` reads), OUTDIR/placement.json
(its current placement) and OUTDIR/cluster.yaml (the machines it was seen on).

Each engine is one sub-command of ``read-engine`` (``storm-ui``, ``storm-nimbus``; more engines add theirs on
:data:`read_app`), and every reader ends in :func:`write_reading`. The readers themselves live
in ``streamsched.engines`` (docs/engines.md).
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

import typer
from rich.console import Console

from streamsched.cli.app import app, err_console
from streamsched.cli.common import finite_or_null
from streamsched.cli.summaries import reading_lines
from streamsched.metrics import remote_traffic
from streamsched.errors import InputError
from streamsched.model import Cluster, Placement, TaskGraph
from streamsched.model.paths import staged_directory

console = Console()
read_app = typer.Typer(no_args_is_help=True,
                       help="Read a running engine: task graph, current placement and observed cluster.")
app.add_typer(read_app, name="read-engine")

OutOpt = typer.Option(..., "--out", "-o", help="directory for graph.json, placement.json and cluster.yaml")


def write_reading(stage: Path, out: Path, graph: TaskGraph, placement: Placement, cluster: Cluster,
                  summary: Mapping[str, Any] | None = None, warnings: Sequence[str] = ()) -> dict[str, Any]:
    """Write graph.json, placement.json and cluster.yaml into ``stage`` (the staged OUTDIR,
    :func:`~streamsched.model.paths.staged_directory`), print what was read (warnings to
    stderr) and return the summary (naming the files in ``out``)."""
    from streamsched.resolve import write_engine_dir

    written = write_engine_dir(stage, graph, placement, cluster)
    files = {key: out / path.relative_to(stage) for key, path in written.items()}
    report = {
        **dict(summary or {}),
        "current": remote_traffic(graph, placement),
        "graph": {**graph.summary(), "file": str(files["graph"])},
        "placement": str(files["placement"]),
        "cluster": {"name": cluster.name, "nodes": [n.name for n in cluster.nodes],
                    "capacity_unit": cluster.capacity_unit, "file": str(files["cluster"])},
    }
    for warning in warnings:
        err_console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False, soft_wrap=True)
    return report


@contextmanager
def malformed_capture(source) -> Iterator[None]:
    """An engine's answer (saved or live) of an unexpected shape: one line naming the source
    (exit 2) instead of the reader's TypeError or KeyError."""
    try:
        yield
    except (TypeError, KeyError, AttributeError, IndexError, ZeroDivisionError, OverflowError) as exc:
        raise InputError(f"{source}: unexpected response shape ({type(exc).__name__}: {exc})") from None
    except ValueError as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"{source}: unexpected value ({exc})") from None


@read_app.command("storm-ui")
def storm_ui(
    url: Optional[str] = typer.Option(None, "--url", help="Storm UI base URL, e.g. http://nimbus:8080"),
    topology_id: Optional[str] = typer.Option(None, "--topology-id", help="with --url: the topology's id"),
    directory: Optional[Path] = typer.Option(None, "--dir", help="saved UI responses instead of a live UI"),
    out: Path = OutOpt,
    window: Optional[str] = typer.Option(
        None, "--window", help="600, 10800, 86400 or :all-time (live default 600; --dir: the saved one)"),
    load: str = typer.Option("busy", "--load", help="executor load: busy (executed x latency) or capacity"),
    spout_load: float = typer.Option(0.1, "--spout-load", help="cores per spout executor (the UI gives none)"),
    host_cores: float = typer.Option(4.0, "--host-cores", help="cores of a host without a supervisor summary"),
    timeout: float = typer.Option(60.0, "--timeout", help="seconds for the whole read (every request ends by then)"),
    as_json: bool = typer.Option(False, "--json", help="print the full report as JSON instead of a summary"),
) -> None:
    """Storm UI REST API: executors, their placement and hosts.

    One graph task per executor (loads in cores, pair rates from the per-input executed
    counts), the current executor placement and the hosts. Live reads keep the responses in
    OUTDIR/storm-ui/ (give it to `export --format storm --storm-ui-dir`)."""
    from streamsched.engines.storm import ui_rest

    with staged_directory(out) as stage, malformed_capture(url or directory):
        data = ui_rest.read(url=url, topology_id=topology_id, directory=directory, window=window,
                            timeout=timeout, save_dir=stage / "storm-ui" if url is not None else None)
        reading = ui_rest.estimate(data, spout_load=spout_load, load=load, host_cores=host_cores)
        report = write_reading(stage, out, reading.graph, reading.placement, reading.cluster, {
            "engine": "storm-ui", "topology_id": data.topology_id, "window": data.window,
            "storm_ui_dir": str(out / "storm-ui" if url is not None else directory),
            "executors": len(reading.layout.executors),
            "system_executors": sum(1 for e in reading.layout.executors if e.system),
        }, reading.warnings)
    if as_json:
        print(json.dumps(finite_or_null(report), indent=1))
    else:
        for line in reading_lines(report):
            console.print(line, highlight=False, markup=False, soft_wrap=True)


@read_app.command("storm-nimbus")
def storm_nimbus(
    directory: Path = typer.Argument(..., help="directory of <id>-stormcode.ser and <id>-stormconf.ser (Nimbus' blob store)"),
    out: Path = typer.Option(..., "--out", "-o", help="directory for one graph file per topology and topologies.json"),
    ackers: bool = typer.Option(False, "--ackers", help="add the __acker executors Nimbus adds as graph tasks"),
    executors: str = typer.Option("nimbus", "--executors",
                                  help="nimbus: min(hint, topology.tasks) per component as Nimbus runs them; "
                                       "hint: one per parallelism hint, as Storm's TestLargeCluster schedules them"),
    as_json: bool = typer.Option(False, "--json", help="print the full report as JSON instead of a summary"),
) -> None:
    """Topologies as Nimbus stores them: one graph per topology (a task per executor, loads in
    cores from the declared CPU %, memory on- plus off-heap, one connection per executor pair
    joined by a stream; each executor's heap and the per-worker heap limit kept), written as
    OUTDIR/<id>.json, and OUTDIR/topologies.json listing them."""
    from streamsched.engines.storm import nimbus
    from streamsched.model.graph_files import write_graph

    topologies = nimbus.read_dir(directory, ackers=ackers, executors=executors)
    rows = []
    out.mkdir(parents=True, exist_ok=True)
    for topology in topologies:
        graph = topology.graph
        row = {"id": topology.topology_id, "name": topology.name, "executors": topology.executors,
               "tasks": graph.n_tasks, "connections": graph.n_edges, "ackers": topology.acker_executors,
               "cpu_cores": graph.total_load, "memory_mb": float(graph.memory_mb.sum()),
               "worker_heap_mb": topology.worker_heap_mb, "file": None}
        if graph.n_tasks:
            row["file"] = str(out / f"{topology.topology_id}.json")
            write_graph(graph, row["file"])
        rows.append(row)
    report = {"engine": "storm-nimbus", "directory": str(directory), "executors_from": executors,
              "topologies": rows}
    (out / "topologies.json").write_text(json.dumps(report, indent=1))
    if as_json:
        print(json.dumps(finite_or_null(report), indent=1))
        return
    empty = [r["id"] for r in rows if r["file"] is None]
    console.print(f"{len(rows)} topologies from {directory}: {sum(r['executors'] for r in rows)} executors, "
                  f"{sum(r['connections'] for r in rows)} connections, {sum(r['cpu_cores'] for r in rows):.6g} cores, "
                  f"{sum(r['memory_mb'] for r in rows):.6g} MB", highlight=False, markup=False, soft_wrap=True)
    if empty:
        console.print(f"without executors (no graph written): {', '.join(empty)}", highlight=False, markup=False)
    console.print(f"graphs and topologies.json in {out}", highlight=False, markup=False, soft_wrap=True)


@read_app.command("flink")
def flink_rest(
    url: Optional[str] = typer.Option(None, "--url", help="JobManager REST URL, e.g. http://jobmanager:8081"),
    job_id: Optional[str] = typer.Option(None, "--job-id", help="with --url: the job's id (default: the only running job)"),
    directory: Optional[Path] = typer.Option(None, "--dir", help="saved REST responses instead of a live JobManager"),
    out: Path = OutOpt,
    window: float = typer.Option(10.0, "--window", help="live: seconds between two snapshots (0: one, Flink's 60 s meters)"),
    node_by: str = typer.Option("taskmanager", "--node-by", help="one node per taskmanager or per host"),
    timeout: float = typer.Option(60.0, "--timeout", help="seconds for the whole read, window included"),
    as_json: bool = typer.Option(False, "--json", help="print the full report as JSON instead of a summary"),
) -> None:
    """Flink REST API: one graph task per subtask (loads in busy cores, pair rates per ship
    strategy), the current placement on TaskManagers and the TaskManagers. Live reads keep the
    responses in OUTDIR/flink-rest/ (read them again with --dir)."""
    from streamsched.engines import flink

    keys = ("job_id", "job_name", "flink_version", "rates_from", "window_s", "node_by", "measured_per_s", "edges")
    with staged_directory(out) as stage, malformed_capture(url or directory):
        reading = flink.read(url=url, job_id=job_id, directory=directory, window_s=window, timeout=timeout,
                             node_by=node_by, save_dir=stage / "flink-rest" if url is not None else None)
        report = write_reading(stage, out, reading.graph, reading.placement, reading.cluster, {
            "engine": "flink", **{k: reading.report[k] for k in keys},
            "flink_rest_dir": str(out / "flink-rest" if url is not None else directory),
        }, reading.warnings)
    if as_json:
        print(json.dumps(finite_or_null(report), indent=1))
    else:
        for line in reading_lines(report):
            console.print(line, highlight=False, markup=False, soft_wrap=True)


def storm_export_options(storm_ui_dir: Optional[Path], topology_id: Optional[str],
                         supervisors: Optional[list[str]], ackers: Optional[int],
                         executors: Optional[list[str]]) -> dict[str, Any]:
    """``export --format storm`` options as :func:`~streamsched.engines.storm.plan.storm_plan`
    keywords: executors, supervisor ids and ports from saved UI responses, or Nimbus' numbering
    with ``--ackers`` and ``--executors COMPONENT=N`` (parallelism hints)."""
    options: dict[str, Any] = {}
    mapping = _pairs("--supervisor", supervisors)
    if storm_ui_dir is not None:
        from streamsched.engines.storm import ui_rest

        if ackers is not None or executors:
            raise InputError("--ackers and --executors describe a topology not yet submitted; "
                             "with --storm-ui-dir the executors are Storm's own")
        layout = ui_rest.estimate(ui_rest.read_dir(storm_ui_dir)).layout
        if mapping:
            from dataclasses import replace

            layout = replace(layout, supervisors={**layout.supervisors, **mapping})
        options["layout"] = layout
    else:
        if mapping:
            options["supervisors"] = mapping
        if ackers is not None:
            options["ackers"] = ackers
        hints = _pairs("--executors", executors)
        if hints:
            try:
                options["executors"] = {k: int(v) for k, v in hints.items()}
            except ValueError:
                raise InputError(f"--executors: {hints}: counts must be integers") from None
    if topology_id is not None:
        if not topology_id.strip():
            raise InputError("--topology-id: must not be empty")
        options["topology_id"] = topology_id
    return options


def _pairs(option: str, values: Optional[list[str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values or []:
        key, sep, item = value.partition("=")
        if not sep or not key.strip() or not item.strip():
            raise InputError(f"{option} {value!r}: expected NAME=VALUE")
        out[key.strip()] = item.strip()
    return out


# ------------------------------------------------------------------- Flink: apply and local
apply_app = typer.Typer(no_args_is_help=True, help="Make a running engine's job run where a placement says.")
app.add_typer(apply_app, name="apply")
plugin_app = typer.Typer(no_args_is_help=True, help="streamsched's placement plugin for Flink 2.3 (a jar for the JobManager).")
app.add_typer(plugin_app, name="flink-plugin")
local_app = typer.Typer(no_args_is_help=True,
                        help="A local Flink 2.3 session cluster from the PyPI jars, with the placement plugin.")
app.add_typer(local_app, name="flink-local")


def _note(text: str) -> None:
    err_console.print(f"[dim]{text}[/dim]", highlight=False, soft_wrap=True)


@apply_app.command("flink")
def apply_flink(
    url: str = typer.Option(..., "--url", help="JobManager REST URL, e.g. http://127.0.0.1:8081"),
    placement: Path = typer.Option(..., "--placement", help="streamsched placement.json over the job's graph "
                                   "(from `read-engine flink` then `schedule`)"),
    job_id: Optional[str] = typer.Option(None, "--job-id", help="the job's id (default: the only running job)"),
    plan_location: Optional[str] = typer.Option(
        None, "--plan-location", help="directory the plugin reads plans from (default: the JobManager's "
        "-Dstreamsched.flink.placement)"),
    settle: float = typer.Option(10.0, "--settle", help="seconds to wait after the job runs again before measuring"),
    window: float = typer.Option(10.0, "--window", help="seconds between the two snapshots of each measurement"),
    timeout: float = typer.Option(180.0, "--timeout", help="seconds to wait for each rescale"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
) -> None:
    """Apply a placement to a running Flink 2.3 job (adaptive scheduler + streamsched's plugin):
    write the plan, rescale twice through resource requirements (state restored from the last
    checkpoint, same JobID), check every subtask's TaskManager, measure the remote bytes."""
    from streamsched.engines.flink import apply as flink_apply

    _note(flink_apply.CONTROL_NOTE)
    result = flink_apply.apply(url, placement, job_id=job_id, plan_location=plan_location, settle_s=settle,
                               window_s=window, timeout_s=timeout, log=_note)
    if as_json:
        print(json.dumps(finite_or_null(result.to_dict()), indent=1))
        return
    console.print(f"job {result.job_id}: placement applied and verified per subtask (plan {result.plan_file})",
                  highlight=False, markup=False)
    console.print(f"moved {len(result.moved)} subtasks: " + ", ".join(
        f"{m['vertex']}[{m['subtask']}] {m['from']}->{m['to']}" for m in result.moved), highlight=False, markup=False,
        soft_wrap=True)
    console.print(f"downtime {result.downtime_s:.2f} s over {len(result.rescales)} rescales "
                  "(" + ", ".join(f"{r['downtime_s']:.2f} s" for r in result.rescales) + ")", highlight=False, markup=False)
    before = "n/a" if result.before_remote_bytes_per_s is None else f"{result.before_remote_bytes_per_s:,.0f}"
    after = "n/a" if result.measured_remote_bytes_per_s is None else f"{result.measured_remote_bytes_per_s:,.0f}"
    console.print(f"inter-TaskManager bytes/s: before {before} measured; plan {result.predicted_remote_bytes_per_s:,.0f} "
                  f"predicted, {after} measured (numBytesInRemote)", highlight=False, markup=False)


@plugin_app.command("path")
def plugin_path() -> None:
    """Print the plugin jar's path (put it in the JobManager's lib/; it must come before flink-dist)."""
    from streamsched.engines.flink import plugin

    print(plugin.installed_jar())
    _note(f"JobManager: copy it into Flink's lib/, set jobmanager.scheduler: adaptive and "
          f"env.java.opts.jobmanager: -D{plugin.PLAN_PROPERTY}=/a/plan/dir (or {plugin.PLAN_ENVIRONMENT})")


@plugin_app.command("build")
def plugin_build(force: bool = typer.Option(False, "--force", help="rebuild even if the jar is up to date")) -> None:
    """Compile the plugin with javac against the installed apache-flink-libraries jars."""
    from streamsched.engines.flink import plugin

    print(plugin.build(force=force))


DirOpt = typer.Option(Path("out/flink-local"), "--dir", help="the cluster's directory (conf, logs, plans, checkpoints)")


@local_app.command("start")
def local_start(
    directory: Path = DirOpt,
    taskmanagers: int = typer.Option(2, "--taskmanagers", help="number of TaskManagers (resource ids tm-1, tm-2, ...)"),
    slots: int = typer.Option(2, "--slots", help="slots per TaskManager"),
    port: int = typer.Option(8081, "--port", help="REST port (0: a free one)"),
    jm_memory: str = typer.Option("1024m", "--jm-memory", help="JobManager process memory"),
    tm_memory: str = typer.Option("1280m", "--tm-memory", help="TaskManager process memory"),
    load_balance: Optional[str] = typer.Option(None, "--load-balance", help="taskmanager.load-balance.mode "
                                               "(NONE, SLOTS, MIN_RESOURCES, TASKS; used without a plan)"),
    no_plugin: bool = typer.Option(False, "--no-plugin", help="without streamsched's placement plugin"),
) -> None:
    """Start a JobManager (adaptive scheduler, plugin, plans in DIR/plans) and TaskManagers on 127.0.0.1."""
    from streamsched.engines.flink import local

    extra = {"taskmanager.load-balance.mode": load_balance} if load_balance else {}
    cluster = local.start(directory, taskmanagers=taskmanagers, slots=slots, rest_port=port, jm_memory=jm_memory,
                          tm_memory=tm_memory, plugin=not no_plugin, extra=extra)
    print(cluster.url)
    _note(f"Flink {taskmanagers} TaskManagers x {slots} slots at {cluster.url}; logs {cluster.logs}; plans "
          f"{cluster.plans}; stop with `streamsched flink-local stop --dir {directory}`")


@local_app.command("stop")
def local_stop(directory: Path = DirOpt) -> None:
    """Stop the cluster started in DIR (only its own processes)."""
    from streamsched.engines.flink import local

    stopped = local.stop(directory)
    print(f"stopped: {', '.join(stopped) or 'nothing was running'}")


@local_app.command("submit-example")
def local_submit(
    directory: Path = DirOpt,
    rate: int = typer.Option(2000, "--rate", help="records per second of the whole source"),
    record_bytes: int = typer.Option(500, "--record-bytes", help="characters of each record's string (100..)"),
    parallelism: int = typer.Option(3, "--parallelism", help="Calc and aggregate parallelism"),
    source_parallelism: int = typer.Option(2, "--source-parallelism", help="source parallelism"),
) -> None:
    """Submit the example job (datagen -REBALANCE-> Calc -HASH-> aggregate -> blackhole) to the
    cluster in DIR; prints its JobID."""
    from streamsched.engines.flink import local

    cluster = local.load(directory)
    print(local.submit_example(cluster.url, cluster.logs, rate=rate, record_bytes=record_bytes,
                               parallelism=parallelism, source_parallelism=source_parallelism))
