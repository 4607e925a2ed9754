"""Pipeline commands: gen-metrics, ingest, watch, export, the main job (run, demo), collect.

Spark is imported only inside the commands that run it, so the CLI starts without a JVM.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console

from streamsched.cli.app import app, err_console
from streamsched.cli.common import (ClusterOpt, GraphOpt, JsonOpt, ParamOpt, WorkloadOpt, check_output_file, emit,
                                    load_inputs, parse_params, read_placement)
from streamsched.cli.summaries import (chunk_line, generated_lines, job_lines, live_loop_lines, log_collected_lines,
                                       rest_collected_lines, watch_lines)
from streamsched.engines.rest_client import READ_TIMEOUT_S, REQUEST_TIMEOUT_S
from streamsched.errors import InputError

console = Console()

MasterOpt = typer.Option("local[2]", "--master", help="Spark master: local[N], spark://host:7077, yarn, ...")
StoreOpt = typer.Option(..., "--store", help="snapshot store directory")
# options the collectors (and watch) share
ChunksOutOpt = typer.Option(..., "--out", "-o", help="directory watch reads (chunks, sidecars, state)")
IntervalOpt = typer.Option(60.0, "--interval", help="seconds between readings")
ReadingOnceOpt = typer.Option(False, "--once", help="one reading (a chunk from the second on), then stop")
TimeoutOpt = typer.Option(None, "--timeout", help="stop after this many seconds (default: run until stopped)")
ReadTimeoutOpt = typer.Option(None, "--read-timeout", help=f"seconds one reading may take, all its requests and "
                              f"waits (default {READ_TIMEOUT_S:g}); a reading cut off is retried at the next poll")


def http_timeout_option(server: str) -> Any:
    return typer.Option(None, "--http-timeout", help=f"seconds to wait for the {server}'s answer to one request, "
                                                      f"tries included (default {REQUEST_TIMEOUT_S:g})")


def check_writable(directory: Path, option: str) -> None:
    """``directory`` can be made and written (checked before Spark starts: its failure to
    write is a Java trace)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".write-check-"):
            pass
    except OSError as exc:
        raise InputError(f"{option} {directory}: cannot write there ({exc.strerror or exc})") from None


def _spark(master: str):
    """The session :mod:`.spark_start` started while the command line was read, or a new one."""
    from streamsched.cli import spark_start

    with err_console.status(f"starting Spark ({master})"):
        return spark_start.session(master)


def _progress_line(state: dict) -> None:
    """One line on stderr (stdout stays the report, JSON with ``--json``)."""
    files = f"{state['files_read']}/{state['files']} files read, " if state["files"] else ""
    err_console.print(f"ingest: {state['step']}: {files}{state['rows_read']:,} rows, {state['elapsed_s']:.1f} s",
                      highlight=False, soft_wrap=True)


@app.command("gen-metrics")
def gen_metrics(
    workload: Optional[str] = WorkloadOpt,
    graph: Optional[Path] = GraphOpt,
    out: Path = typer.Option(..., "--out", "-o", help="directory to write metric files into"),
    placement: Optional[list[Path]] = typer.Option(
        None, "--placement", help="placement JSON (hosts of Storm logs; remote tuples of --cpu-per-tuple); repeat it "
        "to change the placement between equal phases of the run"),
    cluster: str = ClusterOpt,
    rows: int = typer.Option(100_000, "--rows", help="traffic rows (rounded up to whole intervals)"),
    fmt: str = typer.Option("csv", "--format", help="csv, jsonl, parquet or storm-log"),
    dirty: float = typer.Option(0.01, "--dirty", help="share of extra dirty rows, in [0, 1)"),
    noise: float = typer.Option(0.1, "--noise", help="lognormal sigma of per-sample noise"),
    skew: float = typer.Option(0.0, "--skew", help="lognormal sigma of the fixed per-pair rate factor"),
    rate_scale: float = typer.Option(1.0, "--rate-scale", help="multiply the graph's declared rates (tuples/s) by this"),
    cpu_per_tuple: Optional[list[str]] = typer.Option(
        None, "--cpu-per-tuple", help="[OPERATOR=]TIME: ground-truth CPU per executed tuple (e.g. 20us; repeatable, a bare "
        "TIME for every operator not named): loads become the busy cores the tuples cost"),
    remote_cpu_per_tuple: Optional[str] = typer.Option(
        None, "--remote-cpu-per-tuple", help="TIME: extra CPU per tuple leaving its worker, half on each end"),
    rows_per_file: int = typer.Option(1_000_000, "--rows-per-file", help="rows per metric file at most"),
    seed: int = typer.Option(0, "--seed", min=0),
    as_json: bool = JsonOpt,
) -> None:
    """Synthetic monitoring data for a workload (and placement), with noise, skew and dirty rows."""
    from streamsched.model.costs import parse_cost_model
    from streamsched.pipeline.generate import generate_metrics

    task_graph, nodes = load_inputs(workload, graph, cluster, units=False)
    costs = parse_cost_model(cpu_per_tuple or [], remote_cpu_per_tuple)
    placed = [read_placement(p, task_graph, nodes) for p in placement or []]
    summary = generate_metrics(task_graph, out, rows=rows, fmt=fmt, placement=placed or None, cluster=nodes, seed=seed,
                               dirty=dirty, noise=noise, skew=skew, rate_scale=rate_scale,
                               rows_per_file=rows_per_file, costs=costs)
    summary.pop("expected_rate")
    for phase in summary["phases"]:
        phase["placement"] = str(placement[phase["placement"]])
    emit(summary, as_json, generated_lines(summary))


@app.command()
def ingest(
    paths: list[Path] = typer.Argument(..., help="metric files or directories"),
    store: Path = StoreOpt,
    window: float = typer.Option(60.0, "--window", help="sliding window W in seconds"),
    half_life: Optional[float] = typer.Option(None, "--half-life", help="exponential weighting with this half-life in seconds instead of the window (default: none)"),
    until: Optional[float] = typer.Option(None, "--until", help="window end, epoch s (default: latest row)"),
    fmt: Optional[str] = typer.Option(None, "--format", help="force one source format for every file"),
    topology: Optional[str] = typer.Option(
        None, "--topology", help="topology of the rows (default: Storm files' own id, else 'topology')"),
    storm_interval: float = typer.Option(60.0, "--storm-interval", help="Storm metrics bucket, s"),
    rate_interval: float = typer.Option(60.0, "--rate-interval", help="period of an Aniello rate, s"),
    load_unit: Optional[str] = typer.Option(
        None, "--load-unit", help="unit of the loads: tasks or cores (default: cores for Storm metrics, else tasks)"),
    master: str = MasterOpt,
    as_json: bool = typer.Option(False, "--json", help="print the run report as JSON"),
    force: bool = typer.Option(False, "--force", help="ingest again files already ingested (same contents, window)"),
    progress_every: float = typer.Option(
        5.0, "--progress-every", help="a progress line on stderr every this many seconds (0: none)"),
) -> None:
    """Batch ingest: validate (quarantine, nothing lost), aggregate rates, write snapshots."""
    from streamsched.pipeline import ingest as pipeline_ingest
    from streamsched.pipeline.session import resolve_path
    from streamsched.pipeline.sources import Options

    window_spec = pipeline_ingest.Window(seconds=window, half_life_s=half_life, end=until)
    options = Options(topology=topology, storm_interval_s=storm_interval, rate_interval_s=rate_interval,
                      load_unit=load_unit)
    for p in paths:
        if not p.exists():
            raise InputError(f"{p}: no such file or directory")
    paths, store = [resolve_path(p, master) for p in paths], resolve_path(store, master)
    earlier = None if force else pipeline_ingest.already_ingested(paths, store, window_spec, options, fmt)
    if earlier is not None:
        report = {**earlier, "reused": True}
    else:
        report = pipeline_ingest.ingest(_spark(master), paths, store, window_spec, options, fmt, force=force,
                                        progress=_progress_line if progress_every > 0 else None,
                                        progress_every_s=progress_every or 5.0)
    if report.get("reused"):
        err_console.print(f"already ingested (run {report['run_id']}, same file contents and window): "
                          f"reusing its snapshot; --force ingests again")
    if as_json:
        print(json.dumps(report, indent=1))
        return
    console.print(f"read {report['rows_read']} rows: {report['rows_accepted']} accepted, "
                  f"{sum(report['rows_quarantined'].values())} quarantined {report['rows_quarantined']}"
                  + (f", {report['rows_system']} Storm system" if report.get("rows_system") else ""))
    for path in report["snapshots"]:
        console.print(f"snapshot {path}")


@app.command()
def watch(
    directory: Path = typer.Argument(..., help="directory where traffic*/load*.csv files arrive"),
    store: Path = StoreOpt,
    cluster: str = ClusterOpt,
    scheduler: str = typer.Option("ols", "--scheduler", "-s", help="scheduler that re-plans"),
    param: Optional[list[str]] = ParamOpt,
    threshold: Optional[float] = typer.Option(
        None, "--threshold", help="adopt a fresh plan only if inter-node traffic drops >= this % (default 1)"),
    migration_cost: Optional[float] = typer.Option(
        None, "--migration-cost", help="optimal only: re-plan exactly, pricing each moved task (default 1)"),
    window: float = typer.Option(60.0, "--window", help="tumbling window, s"),
    lateness: float = typer.Option(0.0, "--lateness", help="watermark delay, s"),
    poll: float = typer.Option(5.0, "--poll", help="trigger interval, s"),
    once: bool = typer.Option(False, "--once", help="process the files present, then stop"),
    timeout: Optional[float] = TimeoutOpt,
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="assignments directory (default STORE/assignments)"),
    seed: int = typer.Option(0, "--seed"),
    load_unit: str = typer.Option(
        "tasks", "--load-unit", help="unit of the load rows: tasks, or cores (what collect storm-ui/flink write)"),
    metrics_port: Optional[int] = typer.Option(
        None, "--metrics-port", help="serve the loop's Prometheus metrics on 127.0.0.1:PORT/metrics "
        "(0: a free port; default: not served)"),
    apply_flink: Optional[str] = typer.Option(
        None, "--apply-flink", help="Flink JobManager URL: read the job into DIRECTORY once per window, re-plan it "
        "from its running placement and apply plans (docs/pipeline.md, 'The live loop')"),
    job_id: Optional[str] = typer.Option(None, "--job-id", help="--apply-flink: the job (default: the only running one)"),
    confirm_windows: int = typer.Option(
        2, "--confirm-windows", help="--apply-flink: consecutive windows the predicted gain must hold before an apply"),
    min_gain: float = typer.Option(
        10.0, "--min-gain", help="--apply-flink: least predicted gain, % (throughput where the cluster gives link "
        "capacities, else remote bytes)"),
    payback: float = typer.Option(
        20.0, "--payback", help="--apply-flink: windows in which a move must win back what its downtime costs"),
    dry_run: bool = typer.Option(False, "--dry-run", help="--apply-flink: journal what would be applied, apply nothing"),
    journal: Optional[Path] = typer.Option(
        None, "--journal", help="--apply-flink: the decision journal, JSON lines (default OUT/journal.jsonl)"),
    master: str = MasterOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Structured Streaming: a snapshot per window; re-plan (the scheduler's ``replan``), emit
    an assignment when a task moves. With --apply-flink URL: collect the Flink job into
    DIRECTORY, re-plan it each window from its running placement and apply the plan when its
    predicted gain holds for --confirm-windows windows; one journal line per window."""
    from streamsched import resolve
    from streamsched.model.units import check_unit
    from streamsched.pipeline.session import resolve_path
    from streamsched.pipeline.sources import Options
    from streamsched.pipeline.watch import Watch
    from streamsched.schedulers import get_scheduler
    from streamsched.schedulers.replanning import Replanner

    for flag, value, least in (("--window", window, 0.0), ("--poll", poll, 0.0), ("--lateness", lateness, None)):
        if not math.isfinite(value) or (value <= least if least is not None else value < 0):
            raise InputError(f"{flag}: {value!r}; must be a finite number of seconds "
                             + (f"> {least:g}" if least is not None else ">= 0"))
    if not directory.is_dir():
        raise InputError(f"{directory}: not a directory")
    check_unit(load_unit, "--load-unit")
    planner_scheduler = get_scheduler(scheduler, **parse_params(param))
    declared = {option.name for option in planner_scheduler.replan_options}
    options = {}
    for flag, key, value in (("--threshold", "threshold_pct", threshold), ("--migration-cost", "migration_cost", migration_cost)):
        if value is None:
            continue
        if key not in declared:
            raise InputError(f"{flag}: scheduler {scheduler!r} does not re-plan with it (it takes: "
                             f"{', '.join(sorted(declared)) or 'nothing'})")
        options[key] = value
    planner_scheduler.replan_settings(options)  # a bad value fails now, naming the option
    cluster_file = Path(cluster) if cluster is not None and Path(cluster).exists() else None
    if apply_flink is not None:
        from streamsched.cli import live

        planner = live.make_loop(apply_flink, job_id, directory, planner_scheduler, resolve.cluster(cluster), options,
                                 seed, window, out or store / "assignments", journal, min_gain, confirm_windows, payback,
                                 dry_run, load_unit)
    else:
        planner = Replanner(planner_scheduler, resolve.cluster(cluster), options, seed, out or store / "assignments",
                            running=_running_reader(directory))
    if planner.cluster.capacity_unit != load_unit:
        raise InputError(f"--load-unit: {load_unit!r}, but cluster {planner.cluster.name!r} has capacities in "
                         f"{planner.cluster.capacity_unit!r}")
    if apply_flink is None:
        _resume(planner)
    check_writable(store, "--store")
    check_writable(out or store / "assignments", "--out")
    metrics = None
    if metrics_port is not None:
        from streamsched.loop_metrics import LoopMetrics

        metrics = LoopMetrics()
        if apply_flink is not None:
            planner.record_apply = metrics.record_apply
        served = metrics.serve(metrics_port)
        err_console.print(f"loop metrics at http://127.0.0.1:{served}/metrics", highlight=False)
    spark = _spark(master)
    runner = Watch(spark, resolve_path(directory, master), resolve_path(store, master),
                   planner if metrics is None else metrics.observe(planner), window_s=window,
                   lateness_s=lateness, cluster_file=cluster_file, options=Options(load_unit=load_unit))
    if metrics is not None:
        metrics.watch_rows(lambda: runner.run_counts)
    try:
        if apply_flink is None:
            report = runner.run(available_now=once, poll_s=poll, timeout_s=timeout)
        else:
            with live.running(planner, window):
                report = runner.run(available_now=once, poll_s=poll, timeout_s=timeout, stop=planner.stopped)
    finally:
        if metrics is not None:
            metrics.close()
    if report["files_changed_after_read"]:
        err_console.print(f"changed after they were read (not read again; write new files instead): "
                          f"{', '.join(report['files_changed_after_read'])}")
    if report["files_ignored"]:
        err_console.print(f"ignored (neither traffic*.csv nor load*.csv): {', '.join(report['files_ignored'])}")
    emit(report, as_json, watch_lines(report))


def _running_reader(directory: Path):
    """``Replanner.running``: the engine's placement a collector (``collect flink``) keeps in
    ``directory``; a file that does not fit the window's graph or the cluster is noted once and
    not used."""
    from streamsched.pipeline.collect_rest import running_placement

    noted: set[str] = set()

    def running(graph, cluster):
        try:
            return running_placement(directory, graph, cluster)
        except InputError as exc:
            if str(exc) not in noted:
                noted.add(str(exc))
                err_console.print(f"note: the running placement is not used: {exc}", highlight=False)
            return None

    return running


def _resume(planner) -> None:
    """A restarted watch takes up, per topology, the last assignment its ``decisions.jsonl``
    emitted, on the graph of the last snapshot decided (so the next window is weighed against
    the running placement, not planned afresh)."""
    from streamsched.pipeline.store import load_snapshot

    log = planner.out_dir / "decisions.jsonl"
    if not log.is_file():
        return
    assignment: dict[str, str] = {}
    snapshot: dict[str, str] = {}
    for number, line in enumerate(log.read_text().splitlines(), 1):
        try:
            decision = json.loads(line)
            topology = decision["topology"]
        except (ValueError, KeyError, TypeError):
            raise InputError(f"{log}:{number}: not a decision (JSON with a topology)") from None
        if decision.get("emitted") and decision.get("assignment"):
            assignment[topology] = decision["assignment"]
        if decision.get("snapshot"):
            snapshot[topology] = decision["snapshot"]
    for topology, path in sorted(assignment.items()):
        if topology in snapshot and Path(path).is_file() and Path(snapshot[topology]).is_dir():
            planner.resume(load_snapshot(snapshot[topology]), json.loads(Path(path).read_text()))
            err_console.print(f"resumed {topology!r} from {path}", highlight=False)


#: The formats each ``export`` option applies to (another format refuses it).
EXPORT_OPTION_FORMATS = {
    "--per": ("kubernetes",), "--image": ("kubernetes",), "--kind": ("kubernetes",), "--yaml": ("kubernetes",),
    "--cpu-per-load": ("heron", "kubernetes"), "--topology-id": ("storm", "heron"),
    "--storm-ui-dir": ("storm",), "--supervisor": ("storm",), "--ackers": ("storm",), "--executors": ("storm",),
}


@app.command()
def export(
    placement: Path = typer.Argument(..., help="placement JSON"),
    workload: Optional[str] = WorkloadOpt,
    graph: Optional[Path] = GraphOpt,
    cluster: str = ClusterOpt,
    fmt: str = typer.Option(..., "--format", help="storm, heron or kubernetes"),
    per: Optional[str] = typer.Option(None, "--per", help="kubernetes: one Deployment per worker (default) or per task"),
    image: Optional[str] = typer.Option(
        None, "--image", help="kubernetes: the worker container image (default: a placeholder, streamsched/worker:latest)"),
    kind: Optional[str] = typer.Option(None, "--kind", help="kubernetes: deployment (default) or statefulset"),
    as_yaml: bool = typer.Option(False, "--yaml", help="kubernetes: multi-document YAML instead of a JSON List"),
    cpu_per_load: Optional[float] = typer.Option(
        None, "--cpu-per-load", help="heron, kubernetes: cores per unit of a graph's load in tasks (heron default 1)"),
    topology_id: Optional[str] = typer.Option(
        None, "--topology-id", help="storm: the topology's id (default: Storm UI data's, else null); heron: the plan's id (default: graph name)"),
    storm_ui_dir: Optional[Path] = typer.Option(
        None, "--storm-ui-dir", help="storm: saved Storm UI responses (read-engine's OUTDIR/storm-ui): executors, supervisor ids, ports"),
    supervisor: Optional[list[str]] = typer.Option(
        None, "--supervisor", help="storm: NODE=SUPERVISOR_ID (repeatable; default: the node name)"),
    ackers: Optional[int] = typer.Option(None, "--ackers", help="storm, without UI data: __acker tasks (default 1)"),
    executors: Optional[list[str]] = typer.Option(
        None, "--executors", help="storm, without UI data: COMPONENT=N parallelism hint (repeatable; default one per task)"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="write here instead of stdout"),
) -> None:
    """Turn a placement into what an engine applies (Storm slots, Heron packing plan, Kubernetes
    Deployments pinned by node affinity; docs/engines.md)."""
    from streamsched.engines.exports import FORMATS, export as export_placement

    if fmt not in FORMATS:
        raise InputError(f"--format {fmt!r}: not one of {', '.join(FORMATS)}")
    options = {"--per": per, "--image": image, "--kind": kind, "--yaml": as_yaml or None,
               "--cpu-per-load": cpu_per_load, "--topology-id": topology_id, "--storm-ui-dir": storm_ui_dir,
               "--supervisor": supervisor or None, "--ackers": ackers, "--executors": executors or None}
    for option, value in options.items():
        if value is not None and fmt not in EXPORT_OPTION_FORMATS[option]:
            raise InputError(f"{option}: only for --format {' or '.join(EXPORT_OPTION_FORMATS[option])}, "
                             f"not {fmt}")
    per, kind = per or "worker", kind or "deployment"
    check_output_file(out)
    task_graph, nodes = load_inputs(workload, graph, cluster, units=False)
    kinds = {"deployment": "Deployment", "statefulset": "StatefulSet"}
    if kind.lower() not in kinds:
        raise InputError(f"--kind: {kind!r} is not one of {', '.join(kinds)}")
    given = lambda **options: {k: v for k, v in options.items() if v is not None}  # noqa: E731
    storm = None
    if fmt == "storm":
        from streamsched.cli.engines import storm_export_options

        storm = storm_export_options(storm_ui_dir, topology_id, supervisor, ackers, executors)
    document = export_placement(
        fmt, task_graph, nodes, read_placement(placement, task_graph, nodes), per=per, storm=storm,
        heron=given(cpu_per_load=cpu_per_load, topology_id=topology_id),
        kubernetes=given(image=image, kind=kinds[kind.lower()], cpu_per_load=cpu_per_load))
    if as_yaml:
        from streamsched.engines.kubernetes import manifests_yaml

        text = manifests_yaml(document).rstrip("\n")
    else:
        text = json.dumps(document, indent=1)
    if out is None:
        print(text)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")


SchedulersOpt = typer.Option("all", "--schedulers", help="comma-separated names, a family (cluster, edge) or all")
ModelOpt = typer.Option("default", "--model", help="fitted parameter set of the predictions and the verdict "
                        "(docs/evaluation.md, Calibration)")
PlanFormatOpt = typer.Option("storm", "--plan-format", help="the recommended placement's plan: storm, heron or "
                             "kubernetes")


def _job_checks(schedulers: str, param: Optional[list[str]], model: str, nodes, plan_format: str):
    """Scheduler names, parameters, the model set and the plan format, checked before Spark
    starts (exit 2)."""
    from streamsched.engines.exports import FORMATS
    from streamsched.evaluation.comparison import resolve_names
    from streamsched.performance import regime
    from streamsched.schedulers import scheduler_class

    names, params = resolve_names(schedulers, nodes), parse_params(param)
    for key in params:
        if not any(key in {p.name for p in scheduler_class(n).params} for n in names):
            raise InputError(f"--param {key}: no selected scheduler declares it")
    for name in names:
        scheduler_class(name)(**{k: v for k, v in params.items()
                                 if k in {p.name for p in scheduler_class(name).params}}).resolved_params()
    regime(model)
    if plan_format not in FORMATS:
        raise InputError(f"--plan-format {plan_format!r}: not one of {', '.join(FORMATS)}")
    return names, params


def _show_job(result, generated, as_json: bool) -> None:
    """The job's account: ingest, snapshot, the ranked comparison with its verdict, what was written."""
    from streamsched.cli.common import print_compare_table

    if as_json:
        emit({"generated": generated, **result.summary()} if generated else result.summary(), True, [])
        return
    emit({}, False, job_lines(result, generated))
    print_compare_table(result.ingested.graph, result.cluster, 0, result.compared.rows, result.compared.verdict)
    written = [str(p) for p in result.report] + ([str(result.plan)] if result.plan else [])
    err_console.print("wrote " + ", ".join(written), highlight=False, soft_wrap=True)


@app.command("run")
def run_main_job(
    paths: list[Path] = typer.Argument(..., help="monitoring data: metric files or directories (as ingest reads)"),
    cluster: Optional[str] = ClusterOpt,
    out: Path = typer.Option(..., "--out", "-o", help="directory for the store, report, placement and plan"),
    schedulers: str = SchedulersOpt,
    param: Optional[list[str]] = ParamOpt,
    window: float = typer.Option(60.0, "--window", help="seconds of data ending at the latest row"),
    model: str = ModelOpt,
    plan_format: str = PlanFormatOpt,
    seed: int = typer.Option(0, "--seed", min=0),
    master: str = MasterOpt,
    as_json: bool = JsonOpt,
) -> None:
    """The main job on your monitoring data: ingest on Spark -> snapshot -> every scheduler ->
    ranked comparison with verdict -> OUT/report.html -> the recommended plan."""
    from streamsched import job, resolve

    nodes = resolve.cluster(cluster)
    names, params = _job_checks(schedulers, param, model, nodes, plan_format)
    with err_console.status("running the main job") as status:
        result = job.run_job(_spark(master), paths, out, nodes, names, params, seed, model, window, plan_format,
                             on_start=lambda n: status.update(f"running {n}"))
    _show_job(result, None, as_json)


@app.command("demo")
def demo(
    workload: str = typer.Option("fischer-payload-10", "--workload", "-w",
                                 help="built-in workload whose monitoring data is generated (see `list workloads`)"),
    cluster: str = typer.Option("fischer-11", "--cluster", "-c", help="built-in cluster or cluster file"),
    schedulers: str = SchedulersOpt,
    param: Optional[list[str]] = ParamOpt,
    rows: int = typer.Option(20_000, "--rows", help="generated traffic rows"),
    dirty: float = typer.Option(0.01, "--dirty", help="share of extra dirty rows, in [0, 1)"),
    model: str = typer.Option("fischer-imac", "--model", help="fitted parameter set (fischer-imac: Fischer's iMacs, "
                              "the demo cluster's hardware)"),
    plan_format: str = PlanFormatOpt,
    flink: bool = typer.Option(True, "--flink/--no-flink", help="then the loop on a live local Flink: start it, "
                               "run a job, read it, ingest its counters on Spark, place, apply, measure"),
    flink_scheduler: str = typer.Option("optimal", "--flink-scheduler", help="scheduler of the live Flink job's plan"),
    out: Path = typer.Option(Path("out/demo"), "--out", "-o"),
    seed: int = typer.Option(0, "--seed", min=0),
    master: str = MasterOpt,
    as_json: bool = JsonOpt,
) -> None:
    """The main job on synthetic monitoring data of a built-in workload (with dirty rows):
    generate -> ingest on Spark -> snapshot -> every scheduler -> verdict -> report -> plan;
    then (unless --no-flink) the same loop closed on a live local Flink 2.3 with streamsched's
    placement plugin: the job's plan applied and its traffic measured before and after."""
    from streamsched import job, resolve, workloads
    from streamsched.schedulers.base import check_fits

    nodes = resolve.cluster(cluster)
    names, params = _job_checks(schedulers, param, model, nodes, plan_format)
    check_fits(workloads.workload(workload, seed), nodes)  # exit 3 before Spark when it cannot fit
    if flink:
        from streamsched.schedulers import get_scheduler

        get_scheduler(flink_scheduler).resolved_params()
    spark = _spark(master)
    with err_console.status("running the demo") as status:
        generated, result = job.run_demo(spark, workload, nodes, out, names, rows, dirty, seed, model,
                                         params, plan_format, on_start=lambda n: status.update(f"running {n}"))
    loop = None
    if flink:
        with err_console.status("the loop on a live Flink") as status:
            loop = job.run_flink_loop(spark, out, flink_scheduler, log=lambda m: status.update(m))
    if as_json:
        emit({"generated": generated, **result.summary(), "flink": loop.summary() if loop else None}, True, [])
        return
    _show_job(result, generated, False)
    if loop is not None:
        emit({}, False, live_loop_lines(loop))


collect_app = typer.Typer(help="Collectors: follow a source, write immutable chunk files for watch.",
                          no_args_is_help=True)
app.add_typer(collect_app, name="collect")


@collect_app.command("log")
def collect_log(
    file: Path = typer.Argument(..., help="a growing log of native CSV rows (traffic or load)"),
    out: Path = ChunksOutOpt,
    kind: Optional[str] = typer.Option(None, "--kind", help="traffic or load (default: from the file name)"),
    poll: float = typer.Option(1.0, "--poll", help="seconds between looks"),
    once: bool = typer.Option(False, "--once", help="take what is complete now, then stop"),
    timeout: Optional[float] = TimeoutOpt,
    max_line: int = typer.Option(1 << 20, "--max-line", help="longest line, bytes; a longer one is quarantined"),
    as_json: bool = JsonOpt,
) -> None:
    """Follow FILE across rotation (tail -F): complete lines into chunks <kind>-<name>-<seq>.csv,
    each with a sidecar .<chunk>.json (source, inode, byte and line range); a restart continues
    from the offsets kept in OUT. A truncated or rewritten log is read again from its start, a
    line longer than --max-line goes to OUT/quarantine/ (each said on stderr)."""
    from streamsched.pipeline.collect import LogCollector

    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise InputError(f"--timeout: {timeout!r}; must be a positive number of seconds")
    if not (math.isfinite(poll) and poll > 0):
        raise InputError(f"--poll: {poll!r}; must be a positive number of seconds")
    collector = LogCollector(file, out, kind, max_line,
                             warn=lambda message: err_console.print(f"warning: {message}", highlight=False,
                                                                    markup=False, soft_wrap=True))
    if once:
        taken = collector.poll()
        emit({"lines": taken, **collector.state}, as_json, log_collected_lines(taken, collector.state))
        return
    try:
        collector.follow(poll, timeout)
    except KeyboardInterrupt:
        pass


def _follow_rest(make_collector, interval: float, once: bool, timeout: Optional[float], as_json: bool) -> None:
    """Poll the collector ``make_collector(deadline)`` builds (``deadline``: the command's
    ``--timeout``; each reading has its own, ``--read-timeout``); every chunk and counter reset on stderr."""
    from streamsched.engines.rest_client import Deadline

    if not (math.isfinite(interval) and interval > 0):
        raise InputError(f"--interval: {interval!r}; must be a finite number of seconds > 0")
    deadline = Deadline(timeout)  # every request ends by then too
    collector = make_collector(deadline)
    warned: set[str] = set()

    def report(side, with_chunk: bool = True) -> None:
        if with_chunk:
            err_console.print(chunk_line(side), highlight=False, soft_wrap=True)
        for reset in side["resets"]:
            where = reset.get("executor") or reset.get("subtask")
            err_console.print(f"counter reset: {where}: {reset['reason']}; counted {reset['counted']}", highlight=False)
        for warning in side["warnings"]:  # each reading repeats the job's warnings: say each once per run
            if warning not in warned:
                warned.add(warning)
                err_console.print(f"warning: {warning}", highlight=False, soft_wrap=True)

    if once:  # a reading (the first one is the base of the next difference), then stop
        side = collector.poll()
        if side is not None:
            report(side, with_chunk=False)  # the chunk's line is the summary on stdout
        emit({"chunk": side, "next_seq": collector.state["seq"]}, as_json,
             rest_collected_lines(side, collector.state["seq"]))
        return
    try:
        collector.follow(interval, timeout, report,
                         lambda message: err_console.print(f"reading failed, trying again: {message}", highlight=False,
                                                           soft_wrap=True))
    except KeyboardInterrupt:
        pass


@collect_app.command("storm-ui")
def collect_storm_ui(
    url: str = typer.Option(..., "--url", help="Storm UI, e.g. http://nimbus:8080"),
    topology_id: str = typer.Option(..., "--topology-id", help="the id Storm gave the topology"),
    out: Path = ChunksOutOpt,
    interval: float = IntervalOpt,
    once: bool = ReadingOnceOpt,
    timeout: Optional[float] = TimeoutOpt,
    read_timeout: Optional[float] = ReadTimeoutOpt,
    http_timeout: Optional[float] = http_timeout_option("UI"),
    as_json: bool = JsonOpt,
) -> None:
    """Poll the Storm UI REST API (window :all-time) every INTERVAL: each interval's tuples
    per executor pair and busy cores into chunks traffic-/load-storm-<id>-<seq>.csv; counter
    resets (a restarted worker) counted from zero and reported; a restart continues from OUT."""
    from streamsched.pipeline.collect_rest import StormUICollector

    _follow_rest(lambda deadline: StormUICollector(url, topology_id, out, http_timeout, deadline=deadline,
                                                   read_timeout=read_timeout),
                 interval, once, timeout, as_json)


@collect_app.command("flink")
def collect_flink(
    url: str = typer.Option(..., "--url", help="Flink JobManager, e.g. http://jobmanager:8081"),
    job_id: Optional[str] = typer.Option(None, "--job-id", help="default: the only running job"),
    out: Path = ChunksOutOpt,
    interval: float = IntervalOpt,
    once: bool = ReadingOnceOpt,
    timeout: Optional[float] = TimeoutOpt,
    read_timeout: Optional[float] = ReadTimeoutOpt,
    http_timeout: Optional[float] = http_timeout_option("JobManager"),
    as_json: bool = JsonOpt,
) -> None:
    """Poll a Flink job's REST API every INTERVAL (one consistent metrics fetch per reading):
    each interval's records and bytes per subtask pair and busy cores into chunks
    traffic-/load-flink-<job id>-<seq>.csv; restarted subtasks counted from zero and reported;
    a restart continues from OUT."""
    from streamsched.pipeline.collect_rest import FlinkCollector

    _follow_rest(lambda deadline: FlinkCollector(url, out, job_id, http_timeout, deadline=deadline,
                                                 read_timeout=read_timeout),
                 interval, once, timeout, as_json)


@collect_app.command("prometheus")
def collect_prometheus(
    prometheus: str = typer.Option(..., "--prometheus", help="Prometheus server, e.g. http://prometheus:9090"),
    job: str = typer.Option(..., "--job", help="the Flink job's id or name"),
    out: Path = ChunksOutOpt,
    since: Optional[str] = typer.Option(None, "--since", help="the range: the last DURATION (90s, 15m, 2h, 7d)"),
    start: Optional[str] = typer.Option(None, "--start", help="the range's start: unix seconds or ISO 8601"),
    end: Optional[str] = typer.Option(None, "--end", help="the range's end (default: now)"),
    step: float = typer.Option(15.0, "--step", help="query_range resolution, s (at least the scrape interval)"),
    interval: Optional[float] = typer.Option(
        None, "--interval", help="seconds per chunk, a multiple of --step (default: 60 or the whole range if shorter)"),
    flink_url: Optional[str] = typer.Option(
        None, "--flink-url", help="JobManager or HistoryServer REST URL: the job's topology (vertices, ship strategies)"),
    flink_dir: Optional[Path] = typer.Option(None, "--flink-dir", help="a saved read-engine flink-rest/ instead"),
    max_series: int = typer.Option(5000, "--max-series", help="refuse a job with more series than this per counter"),
    http_timeout: float = typer.Option(30.0, "--http-timeout", help="seconds to wait for each answer"),
    as_json: bool = JsonOpt,
) -> None:
    """A Flink job's per-subtask counters (Flink's Prometheus reporter) over a past range, from
    Prometheus' query_range: the chunks collect flink writes (traffic-/load-prometheus-<job
    id>-<seq>.csv, one per --interval), for ingest and watch. Counter resets (restarts,
    rescales) are counted as Prometheus' rate() counts them and reported."""
    import time as _time

    from streamsched.engines.flink import from_prometheus as fp
    from streamsched.pipeline.collect_prometheus import write_chunks

    grid = _prometheus_range(since, start, end, step, _time.time())
    if interval is None:
        interval = min(60.0, grid.end - grid.start)
        interval = max(step, math.floor(interval / step) * step)
    api = fp.PrometheusApi(prometheus, http_timeout, max_series=max_series)
    read = fp.read_range(api, job, grid, interval, flink_url=flink_url,
                         flink_dir=str(flink_dir) if flink_dir is not None else None, timeout=http_timeout)
    sides = write_chunks(read, out, api.url)
    for side in sides:
        for reset in side["resets"]:
            err_console.print(f"counter reset: {reset['subtask']}: {reset['reason']}; counted {reset['counted']}",
                              highlight=False, soft_wrap=True)
    report = {"job_id": read.job_id, "job_name": read.job_name, "chunks": len(sides), "series": read.series,
              "resets": read.resets, "range": [grid.start, grid.end], "step": grid.step, "out": str(out),
              "warnings": sorted({w for side in sides for w in side["warnings"]})}
    emit(report, as_json, [f"job {read.job_id} ({read.job_name}): {len(sides)} chunks of {interval:g} s from "
                           f"{grid.start:.0f} to {grid.end:.0f} into {out}; {read.series} series, "
                           f"{read.resets} counter resets or restarts met"])


def _prometheus_range(since: Optional[str], start: Optional[str], end: Optional[str], step: float, now: float):
    """The query grid of ``--since`` or ``--start``/``--end`` (end default: now), aligned to ``--step``."""
    from streamsched.engines.flink import from_prometheus as fp

    if (since is None) == (start is None):
        raise InputError("give the range as --since DURATION or as --start TIME [--end TIME]")
    if not (math.isfinite(step) and step > 0):
        raise InputError(f"--step: {step!r}; must be a positive number of seconds")
    stop = fp.parse_time(end, "--end") if end is not None else math.floor(now / step) * step
    begin = stop - fp.parse_duration(since, "--since") if since is not None else fp.parse_time(start, "--start")
    return fp.TimeRange(begin, stop, step)
