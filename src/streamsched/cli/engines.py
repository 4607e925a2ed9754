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
from streamsched.engines.flink.apply import MIN_GAIN
from streamsched.metrics import remote_traffic
from streamsched.engines.rest_client import READ_TIMEOUT_S, REQUEST_TIMEOUT_S
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
    timeout: Optional[float] = typer.Option(
        None, "--timeout", help=f"seconds for the whole read, every request ended by then (default {READ_TIMEOUT_S:g})"),
    http_timeout: Optional[float] = typer.Option(
        None, "--http-timeout", help=f"seconds per request, tries included (default {REQUEST_TIMEOUT_S:g})"),
    as_json: bool = typer.Option(False, "--json", help="print the full report as JSON instead of a summary"),
) -> None:
    """Storm UI REST API: executors, their placement and hosts.

    One graph task per executor (loads in cores, pair rates from the per-input executed
    counts), the current executor placement and the hosts. Live reads keep the responses in
    OUTDIR/storm-ui/ (give it to `export --format storm --storm-ui-dir`)."""
    from streamsched.engines.storm import ui_rest

    with staged_directory(out) as stage, malformed_capture(url or directory):
        data = ui_rest.read(url=url, topology_id=topology_id, directory=directory, window=window,
                            timeout=timeout, http_timeout=http_timeout,
                            save_dir=stage / "storm-ui" if url is not None else None)
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
    timeout: Optional[float] = typer.Option(
        None, "--timeout", help=f"seconds for the whole read, window included (default {READ_TIMEOUT_S:g})"),
    http_timeout: Optional[float] = typer.Option(
        None, "--http-timeout", help=f"seconds per request, tries included (default {REQUEST_TIMEOUT_S:g})"),
    prometheus: Optional[str] = typer.Option(
        None, "--prometheus", help="rates over the last --window seconds from this Prometheus (Flink's reporter); "
        "the topology from --url or --dir"),
    step: float = typer.Option(1.0, "--step", help="with --prometheus: query_range resolution, s"),
    as_json: bool = typer.Option(False, "--json", help="print the full report as JSON instead of a summary"),
) -> None:
    """Flink REST API: one graph task per subtask (loads in busy cores, pair rates per ship
    strategy), the current placement on TaskManagers and the TaskManagers. Live reads keep the
    responses in OUTDIR/flink-rest/ (read them again with --dir). With --prometheus the rates are
    the counters Prometheus kept over the last --window seconds."""
    from streamsched.engines import flink

    keys = ("job_id", "job_name", "flink_version", "rates_from", "window_s", "node_by", "measured_per_s", "edges")
    with staged_directory(out) as stage, malformed_capture(prometheus or url or directory):
        if prometheus is not None:
            from streamsched.engines.flink import from_prometheus

            reading, read = from_prometheus.read(prometheus, window, step, url=url, job_id=job_id,
                                                 directory=str(directory) if directory is not None else None,
                                                 node_by=node_by, timeout=timeout or READ_TIMEOUT_S)
            reading.report["prometheus"] = {"url": prometheus, "series": read.series, "resets": read.resets}
            keys += ("prometheus",)
        else:
            reading = flink.read(url=url, job_id=job_id, directory=directory, window_s=window, timeout=timeout,
                                 node_by=node_by, save_dir=stage / "flink-rest" if url is not None else None,
                                 http_timeout=http_timeout)
        report = write_reading(stage, out, reading.graph, reading.placement, reading.cluster, {
            "engine": "flink", **{k: reading.report[k] for k in keys},
            "flink_rest_dir": str(out / "flink-rest" if url is not None and prometheus is None else directory),
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
    min_gain: float = typer.Option(100 * MIN_GAIN, "--min-gain", help="percent: leave the job alone when the plan's "
                                   "predicted gain over the running placement is smaller"),
    machines: Optional[Path] = typer.Option(None, "--cluster", help="cluster file naming every TaskManager with its "
                                            "CPU and link capacities (e.g. flink-local's lab cluster.yaml): the "
                                            "gain is then in predicted throughput"),
    metrics_port: Optional[int] = typer.Option(
        None, "--metrics-port", help="serve the apply's Prometheus metrics (downtime, moved subtasks) on "
        "127.0.0.1:PORT/metrics (0: a free port; default: not served)"),
    metrics_linger: float = typer.Option(15.0, "--metrics-linger", help="with --metrics-port: seconds to keep "
                                         "serving after the apply, so that a scrape sees its result"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
) -> None:
    """Apply a placement to a running Flink 2.3 job (adaptive scheduler + streamsched's plugin):
    relabel identical TaskManagers so the fewest subtasks move, leave the job alone when none
    would or the predicted gain is below --min-gain, else write the plan, rescale twice through
    resource requirements (state restored from the last checkpoint, same JobID), check every
    subtask's TaskManager and measure the job again. A failed step puts the job back."""
    from streamsched.engines.flink import apply as flink_apply

    _note(flink_apply.CONTROL_NOTE)
    metrics = None
    if metrics_port is not None:
        from streamsched.loop_metrics import LoopMetrics

        if not (metrics_linger >= 0 and metrics_linger < 3600):
            raise InputError(f"--metrics-linger: {metrics_linger!r}; must be 0 .. 3600 s")
        metrics = LoopMetrics()
        _note(f"apply metrics at http://127.0.0.1:{metrics.serve(metrics_port)}/metrics")
    try:
        result = flink_apply.apply(url, placement, job_id=job_id, plan_location=plan_location, settle_s=settle,
                                   window_s=window, timeout_s=timeout, log=_note, min_gain=min_gain / 100,
                                   machines=None if machines is None else Cluster.load(machines))
        if metrics is not None:
            import time

            metrics.record_apply(result.downtime_s, len(result.moved))
            time.sleep(metrics_linger)
    finally:
        if metrics is not None:
            metrics.close()
    if as_json:
        print(json.dumps(finite_or_null(result.to_dict()), indent=1))
        return
    for line in apply_lines(result):
        console.print(line, highlight=False, markup=False, soft_wrap=True)


def _num(value: float | None, digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def apply_lines(result: Any) -> list[str]:
    """``apply flink``'s account: the reading it judged on (every figure before the move is from
    it), the running placement and the plan predicted from it, then what was done and measured."""
    r = result.reading
    lines = [f"job {result.job_id}: reading of {_num(r['window_s'], 1)} s ({r['rates_from']}): running placement "
             f"measured {_num(r['measured_throughput'])} source records/s, {_num(r['measured_remote_bytes_per_s'])} "
             f"bytes/s between TaskManagers (numBytesInRemote)",
             f"  predicted from that reading: running {_num(r['running_predicted_remote_bytes_per_s'])}, plan "
             f"{_num(r['plan_predicted_remote_bytes_per_s'])} bytes/s between TaskManagers; throughput running "
             f"{_num(r['running_predicted_throughput'])}, plan {_num(r['plan_predicted_throughput'])} records/s"
             + (f" (bottlenecks: {r['running_bottleneck']}; {r['plan_bottleneck']})" if r["plan_bottleneck"] else
                " (no link capacities in the cluster read; --cluster gives them)"),
             f"  predicted gain in {result.basis}: {100 * result.gain:+.1f} % (threshold {100 * result.min_gain:g} %)"]
    if result.relabelled:
        lines.append("  identical TaskManagers relabelled to move less: "
                     + ", ".join(f"{a}->{b}" for a, b in result.relabelled.items()))
    if not result.applied:
        return lines + [f"job left alone: {result.reason}"]
    lines += [f"placement applied and verified per subtask (plan {result.plan_file}); moved {len(result.moved)} "
              "subtasks: " + ", ".join(f"{m['vertex']}[{m['subtask']}] {m['from']}->{m['to']}" for m in result.moved),
              f"downtime {result.downtime_s:.2f} s over {len(result.rescales)} rescales ("
              + ", ".join(f"{x['downtime_s']:.2f} s" for x in result.rescales) + ")"]
    after = result.after
    lines.append(f"after, reading of {_num(after['window_s'], 1)} s: {_num(after['measured_throughput'])} source "
                 f"records/s (before {_num(r['measured_throughput'])}, predicted {_num(r['plan_predicted_throughput'])}), "
                 f"{_num(after['measured_remote_bytes_per_s'])} bytes/s between TaskManagers (before "
                 f"{_num(r['measured_remote_bytes_per_s'])}, predicted {_num(r['plan_predicted_remote_bytes_per_s'])})")
    return lines


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
    link_mbit: Optional[float] = typer.Option(None, "--link-mbit", help="network lab: every TaskManager's link, "
                                              "Mbit/s each direction (default: unlimited; needs root; docs/engines.md)"),
    link_mbit_tm: Optional[list[str]] = typer.Option(None, "--link-mbit-tm", help="network lab: tm-K=MBIT or "
                                                     "tm-K=IN/OUT for one TaskManager (repeatable)"),
    delay_ms: float = typer.Option(0.0, "--delay-ms", help="network lab: delay of each link direction (netem)"),
    loss_pct: float = typer.Option(0.0, "--loss-pct", help="network lab: packet loss % of each link direction"),
    cpu_quota: Optional[list[str]] = typer.Option(None, "--cpu-quota", help="network lab: tm-K=CORES, a "
                                                  "TaskManager's CPU quota (cgroup; repeatable)"),
    with_prometheus: bool = typer.Option(False, "--prometheus", help="Flink's Prometheus reporter on every process "
                                         "and a Prometheus scraping them (Debian's prometheus; data in DIR/prometheus)"),
) -> None:
    """Start a JobManager (adaptive scheduler, plugin, plans in DIR/plans) and TaskManagers on 127.0.0.1.

    With any network-lab option each TaskManager runs in a network namespace of its own behind a
    shaped link (and its CPU quota), and DIR/cluster.yaml describes the TaskManagers (CPU, link
    in/out) as a streamsched cluster."""
    from streamsched.engines.flink import local, netlab

    extra = {"taskmanager.load-balance.mode": load_balance} if load_balance else {}
    network = None
    if link_mbit is not None or link_mbit_tm or delay_ms or loss_pct or cpu_quota:
        links = {}
        for name, value in _pairs("--link-mbit-tm", link_mbit_tm).items():
            rate_in, _, rate_out = value.partition("/")
            links[name] = (_number("--link-mbit-tm", name, rate_in), _number("--link-mbit-tm", name, rate_out or rate_in))
        quotas = {name: _number("--cpu-quota", name, value) for name, value in _pairs("--cpu-quota", cpu_quota).items()}
        network = netlab.LabOptions(link_mbit, links, delay_ms, loss_pct, quotas)
    if with_prometheus:
        from streamsched.engines.flink import prometheus

        if network is not None:
            raise InputError("--prometheus: not with the network lab (its TaskManagers' reporters are in namespaces)")
        prometheus.binary()
        reporter_ports = prometheus.free_port_range(taskmanagers + 1)
        extra.update(prometheus.reporter_settings(reporter_ports))
    cluster = local.start(directory, taskmanagers=taskmanagers, slots=slots, rest_port=port, jm_memory=jm_memory,
                          tm_memory=tm_memory, plugin=not no_plugin, extra=extra, network=network)
    print(cluster.url)
    if with_prometheus:
        try:
            server = prometheus.start(directory, [f"127.0.0.1:{p}" for p in reporter_ports])
        except BaseException:
            local.stop(directory)
            raise
        print(server.url)
        _note(f"Prometheus at {server.url} scrapes the reporters on ports {reporter_ports[0]}-{reporter_ports[-1]}")
    lab = f"; network lab, cluster file {cluster.cluster_file}" if cluster.cluster_file else ""
    _note(f"Flink {taskmanagers} TaskManagers x {slots} slots at {cluster.url}; logs {cluster.logs}; plans "
          f"{cluster.plans}{lab}; stop with `streamsched flink-local stop --dir {directory}`")


def _number(option: str, name: str, value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise InputError(f"{option} {name}={value}: {value!r} is not a number") from None


@local_app.command("stop")
def local_stop(directory: Path = DirOpt) -> None:
    """Stop the cluster started in DIR: its own processes and its network lab (namespaces, links,
    qdiscs, cgroups), also what a crashed start left."""
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
    kind: str = typer.Option("example", "--kind", help="example; cpu (a CPU-heavy Calc: the string hashed "
                             "12 times); skewed (70 % of the records carry key 0); shifting (skewed, the hot key "
                             "0 becomes 4 at --shift-at, another aggregate subtask at parallelism 3)"),
    shift_at: Optional[str] = typer.Option(None, "--shift-at", help="shifting: when the hot key changes, Unix "
                                           "seconds or +SECONDS from now; several, comma-separated: it changes "
                                           "back and forth"),
    url: Optional[str] = typer.Option(None, "--url", help="any Flink 2.3 REST URL instead of the cluster in DIR "
                                      "(the client's log then goes to DIR/log)"),
) -> None:
    """Submit the example job (datagen -REBALANCE-> Calc -HASH-> aggregate -> blackhole) to the
    cluster in DIR (with or without a network lab) or at --url; prints its JobID."""
    import time

    from streamsched.engines.flink import local

    now, at = int(time.time()), []
    for part in shift_at.split(",") if shift_at else []:
        part = part.strip()
        try:
            at.append(now + int(part[1:]) if part.startswith("+") else int(part))
        except ValueError:
            raise InputError(f"--shift-at {shift_at!r}: expected Unix seconds or +SECONDS, comma-separated") from None
    logs = directory / "log"
    if url is None:
        cluster = local.load(directory)
        url, logs = cluster.url, cluster.logs
    print(local.submit_example(url, logs, rate=rate, record_bytes=record_bytes, parallelism=parallelism,
                               source_parallelism=source_parallelism, kind=kind, shift_at=at))
