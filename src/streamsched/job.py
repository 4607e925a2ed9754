"""The main job, one library call: monitoring data -> snapshot (ingest on Spark) -> placements
of every scheduler -> comparison ranked, with its verdict -> HTML report -> the recommended
plan in the engine's format. ``streamsched run`` (on a user's data), ``streamsched demo`` and
``make demo`` (on synthetic data of a built-in workload) call it once; ``compare`` runs its
comparison stage alone (:func:`compare`).

Each stage's result is typed (:class:`Ingested`, :class:`Compared`, :class:`JobResult`); the
graph is built once, from the snapshot, and every later stage takes it from there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from streamsched.engines.exports import FORMATS
from streamsched.engines.exports import export as export_plan
from streamsched.errors import InputError, StreamschedError
from streamsched.evaluation.comparison import (SORT_KEY, Outcome, add_prediction, placement_row, rank_outcomes,
                                               run_schedulers)
from streamsched.evaluation.engine_models import CALIBRATED_ENGINES, fitted_model, no_model_text
from streamsched.evaluation.verdict import CURRENT, model_error, verdict
from streamsched.model.cluster import Cluster
from streamsched.model.paths import staged_directory
from streamsched.model.placement import Placement
from streamsched.model.taskgraph import TaskGraph
from streamsched.performance import regime
from streamsched.schedulers.base import check_fits


@dataclass(frozen=True)
class Ingested:
    """The ingest stage: the run report (rows read = accepted + quarantined), the snapshot
    written and the measured graph read back from it."""

    report: dict[str, Any]
    snapshot: Path
    graph: TaskGraph


@dataclass(frozen=True)
class Compared:
    """The comparison stage: ranked outcomes (placement and row per scheduler) and the verdict."""

    outcomes: list[Outcome]
    verdict: dict[str, Any]

    @property
    def rows(self) -> list[dict[str, Any]]:
        return [o.row for o in self.outcomes]

    def recommended(self) -> Outcome | None:
        """The outcome the verdict recommends (None when nothing was placed)."""
        return next((o for o in self.outcomes if o.row.get("scheduler") == self.verdict.get("best")), None)


@dataclass(frozen=True)
class JobResult:
    """Every stage of one run of the main job."""

    ingested: Ingested
    cluster: Cluster
    compared: Compared
    report: list[Path]
    plan: Path | None

    def summary(self) -> dict[str, Any]:
        """A JSON-ready account of the run (``--json``)."""
        return {"ingest": self.ingested.report, "snapshot": str(self.ingested.snapshot),
                "graph": self.ingested.graph.summary(), "cluster": self.cluster.name, "sort_key": SORT_KEY,
                "verdict": self.compared.verdict, "results": self.compared.rows,
                "report": [str(p) for p in self.report], "plan": str(self.plan) if self.plan else None}


def compare(graph: TaskGraph, cluster: Cluster, names: list[str], params: dict[str, Any] | None = None,
            seed: int = 0, model: str = "default", on_start: Callable[[str], None] | None = None,
            current: Placement | None = None) -> Compared:
    """The comparison stage: every scheduler in ``names`` once, rows with the predictions of the
    fitted set ``model``, ranked (:data:`SORT_KEY`), and the verdict with the set's stated error.

    ``current`` (a job's running placement, as read from its engine) is a row of its own and
    the verdict's baseline; a placement read from an engine the calibration was not fitted on
    is predicted by a set fitted on that engine (:mod:`streamsched.evaluation.engine_models`)
    or not at all, and the verdict then says so and judges traffic alone."""
    model_name, params_model, no_model, error_source = model, regime(model), None, None
    engine = current.metadata.get("engine") if current is not None else None
    if isinstance(engine, str) and engine not in CALIBRATED_ENGINES:
        fitted = fitted_model(engine)
        if fitted is None:
            no_model = no_model_text(engine)
        else:
            model_name, params_model, error_source = f"{engine}-fitted", fitted.params, (fitted.error, fitted.source)
    predict_with = None if no_model is not None else params_model
    outcomes = run_schedulers(graph, cluster, names, params, seed, on_start, model=predict_with)
    if current is not None:
        row = placement_row(CURRENT, graph, cluster, current)
        outcomes.append(Outcome(row if predict_with is None else add_prediction(row, graph, cluster, current,
                                                                                 predict_with), current))
    outcomes = rank_outcomes(outcomes)
    error, source = error_source or model_error(model_name)
    return Compared(outcomes, verdict([o.row for o in outcomes], error, model_name, source, no_model=no_model))


def run_job(spark: Any, sources: list[str | Path], out: str | Path, cluster: Cluster, names: list[str],
            params: dict[str, Any] | None = None, seed: int = 0, model: str = "default",
            window_s: float = 60.0, plan_format: str | None = "storm",
            on_start: Callable[[str], None] | None = None) -> JobResult:
    """Ingest ``sources`` into ``out/store`` on ``spark`` (a window of ``window_s`` seconds
    ending at the latest row), compare ``names`` on the snapshot's graph and ``cluster``, write
    ``out/report.html`` (with .csv and .json), ``out/cluster.json``, and the recommended
    placement (``out/placement.json``) with its plan ``out/plan-<format>.json`` in
    ``plan_format`` (None: no plan)."""
    from streamsched.evaluation.report import write_report
    from streamsched.pipeline.ingest import Window, ingest
    from streamsched.pipeline.store import load_snapshot

    if plan_format is not None and plan_format not in FORMATS:
        raise InputError(f"--plan-format {plan_format!r}: not one of {', '.join(FORMATS)}")
    out = Path(out)
    window = Window(seconds=window_s)  # a bad window fails before Spark works
    report = ingest(spark, [Path(s) for s in sources], out / "store", window)
    if not report["snapshots"]:
        raise InputError(f"{', '.join(map(str, sources))}: no snapshot written (no accepted rows)")
    snapshot = Path(report["snapshots"][0])
    graph = load_snapshot(snapshot)
    check_fits(graph, cluster)
    compared = compare(graph, cluster, names, params, seed, model, on_start)
    plan = None
    best = compared.recommended()
    with staged_directory(out) as stage:  # the run's results appear together, or none of them
        written = write_report(stage / "report.html", graph, cluster, compared.outcomes, model=regime(model),
                               seed=seed, verdict=compared.verdict)
        if plan_format is not None and best is not None and best.placement is not None:
            plan = out / f"plan-{plan_format}.json"
            (stage / plan.name).write_text(json.dumps(export_plan(plan_format, graph, cluster, best.placement),
                                                      indent=1) + "\n")
            best.placement.write(stage / "placement.json", graph, cluster)
        (stage / "cluster.json").write_text(json.dumps(cluster.to_dict(), indent=1) + "\n")
        written = [out / path.relative_to(stage) for path in written]
    return JobResult(Ingested(report, snapshot, graph), cluster, compared, written, plan)


def run_demo(spark: Any, workload: str, cluster: Cluster, out: str | Path, names: list[str],
             rows: int = 20_000, dirty: float = 0.01, seed: int = 0, model: str = "default",
             params: dict[str, Any] | None = None, plan_format: str | None = "storm",
             on_start: Callable[[str], None] | None = None) -> tuple[dict[str, Any], JobResult]:
    """Synthetic monitoring data of the built-in ``workload`` (with dirty rows) into
    ``out/metrics``, then :func:`run_job` on it; returns what was generated and the job."""
    from streamsched import workloads
    from streamsched.pipeline.generate import generate_metrics

    truth = workloads.workload(workload, seed)
    check_fits(truth, cluster)
    generated = generate_metrics(truth, Path(out) / "metrics", rows=rows, dirty=dirty, seed=seed)
    window_s = generated["intervals"] * generated["interval_s"]
    result = run_job(spark, [Path(out) / "metrics"], out, cluster, names, params, seed, model, window_s,
                     plan_format, on_start)
    return {k: generated[k] for k in ("traffic_rows", "load_rows", "dirty", "files")}, result


#: The demo's network lab (issue 37): 3 TaskManagers x 2 slots, links of 10, 5 and 5 Mbit/s in
#: each direction, no CPU quota. The example job (3 slots) is then bound by a link wherever Flink
#: puts it: every slot-sharing placement of Flink's default sends as much over a 5 Mbit/s link as
#: over the fast one, while the proven throughput optimum keeps most of the exchange inside tm-1
#: and sends what must leave it over both slower links (+67 % predicted). Rates this low keep the
#: links, not a loaded machine's CPU, the bottleneck.
DEMO_TASKMANAGERS, DEMO_SLOTS = 3, 2
DEMO_LAB = {"tm-1": 10.0, "tm-2": 5.0, "tm-3": 5.0}
#: datagen rows/s on the lab: far above what the links carry (sources back-pressured)
DEMO_LAB_RATE = 200_000
#: Latency markers every 500 ms, each histogram over the last 20 (about the last 10 s).
LATENCY_CONFIG = {"metrics.latency.interval": "500", "metrics.latency.history-size": "20"}


@dataclass(frozen=True)
class LiveLoop:
    """The loop on a live Flink (:func:`run_flink_loop`): the job as read, the Spark snapshot of
    its collected counters, the plan, and what ``apply`` judged, did and measured."""

    job_id: str
    read_dir: Path
    snapshot: Path
    #: records/s exchanged between subtasks: from the Spark snapshot, and read over REST before
    #: and after the plan (None when the job was left alone)
    snapshot_rate: float
    rate_before: float
    rate_after: float | None
    scheduler: str
    plan: Path
    #: ``apply``'s result (:class:`~streamsched.engines.flink.apply.ApplyResult`): whether it
    #: applied the plan and why, the reading it judged on (measured source records/s and remote
    #: bytes, the running placement and the plan predicted), moved subtasks, downtime, the
    #: reading after
    applied: dict[str, Any]
    #: the network lab the cluster ran in: TaskManagers, slots, link Mbit/s per TaskManager, its
    #: cluster file (None: on loopback, ``no_lab`` says why)
    lab: dict[str, Any] | None = None
    no_lab: str | None = None
    #: latency markers at the sink, ms (:func:`~streamsched.engines.flink.latency.sink_latency`):
    #: at the end of the reading before, and of the reading after (None when left alone)
    latency_before: dict[str, float] | None = None
    latency_after: dict[str, float] | None = None

    def summary(self) -> dict[str, Any]:
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in self.__dict__.items()}


def lab_machines(lab: Cluster, path: Path) -> Cluster:
    """The demo lab's TaskManagers as the plan and ``apply`` see them, written to ``path``: the
    lab's cluster file with each TaskManager's CPU the machine's cores. The demo sets no CPU
    quota, so every TaskManager may use every core (the file's equal share is a packing figure),
    and the loads read from Flink are busy time, which on a shared machine counts the wait for a
    core: against a third of the cores they would make the CPU, not the links, bind every
    prediction."""
    from dataclasses import replace

    from streamsched.engines.flink.netlab import machine_cores

    cores = machine_cores()
    machines = replace(lab, nodes=tuple(replace(n, capacity=float(cores), cores=cores) for n in lab.nodes))
    path.write_text(json.dumps(machines.to_dict(), indent=1) + "\n")
    return machines


def run_flink_loop(spark: Any, out: str | Path, scheduler: str = "optimal", window_s: float = 10.0,
                   min_gain: float | None = None, lab: bool = True,
                   log: Callable[[str], None] = lambda _m: None) -> LiveLoop:
    """Issue 26's loop on a local Flink 2.3 with the placement plugin, on the network lab where
    the machine allows (issue 37; :data:`DEMO_LAB`, else on loopback, 2 TaskManagers x 2 slots,
    and ``no_lab`` says why): start the cluster (``out/flink``, latency markers on), run the
    example job (datagen -REBALANCE-> Calc -HASH-> aggregate), read it over REST
    (``out/flink-read``, a read-engine directory), collect its counters twice into chunks and
    ingest them on ``spark`` (``out/flink-store``: the same pair rates as the REST reading, from
    the pipeline), place the read graph with ``scheduler`` under Flink's slot rule on the lab's
    TaskManagers (:func:`lab_machines`; ``optimal`` with ``objective=throughput`` there: link
    capacities known), and
    hand the plan to ``apply``, which leaves the job alone when no subtask would move or the
    predicted gain is below ``min_gain`` (``apply``'s threshold by default), else applies it (two
    rescales, every subtask checked) and measures the job again: source records/s, latency at
    the sink and bytes between TaskManagers before and after, the prediction beside them. The
    cluster is stopped in every case."""
    from streamsched.engines.flink import apply as flink_apply
    from streamsched.engines.flink import local, netlab
    from streamsched.engines.flink.latency import sink_latency
    from streamsched.engines.flink.rest import FlinkRest, read
    from streamsched.pipeline.collect_rest import FlinkCollector
    from streamsched.model.units import CORES
    from streamsched.pipeline.ingest import Window, ingest
    from streamsched.pipeline.sources import Options
    from streamsched.pipeline.store import load_snapshot
    from streamsched.resolve import write_engine_dir
    from streamsched.schedulers import get_scheduler

    out = Path(out)
    min_gain = flink_apply.MIN_GAIN if min_gain is None else min_gain
    get_scheduler(scheduler).resolved_params()
    no_lab = None if lab else "the lab was not asked for"
    if lab:
        try:
            netlab.check_machine(cpu=False)
        except netlab.LabError as exc:
            no_lab = str(exc)
    if no_lab is None:
        taskmanagers, slots, rate, record_bytes = DEMO_TASKMANAGERS, DEMO_SLOTS, DEMO_LAB_RATE, 1000
        network = netlab.LabOptions(links={tm: (mbit, mbit) for tm, mbit in DEMO_LAB.items()})
        links = ", ".join(f"{tm} {mbit:g}" for tm, mbit in DEMO_LAB.items())
        log(f"starting a local Flink in the network lab: {taskmanagers} TaskManagers x {slots} slots, links {links} "
            f"Mbit/s, the placement plugin")
    else:
        taskmanagers, slots, rate, record_bytes, network = 2, 2, 4000, 1000, None
        log(f"starting a local Flink on loopback ({no_lab}): {taskmanagers} TaskManagers x {slots} slots, "
            f"the placement plugin")
    cluster = local.start(out / "flink", taskmanagers=taskmanagers, slots=slots, rest_port=0, network=network,
                          extra=LATENCY_CONFIG)
    try:
        machines = None if cluster.cluster_file is None else lab_machines(Cluster.load(cluster.cluster_file),
                                                                          out / "flink-machines.yaml")
        job_id = local.submit_example(cluster.url, cluster.logs, rate=rate, record_bytes=record_bytes)
        local.wait_flowing(cluster.url, job_id)
        log(f"job {job_id} runs; reading it over {window_s:g} s")
        before = read(url=cluster.url, job_id=job_id, window_s=window_s)
        latency_before = sink_latency(FlinkRest(cluster.url), job_id)
        write_engine_dir(out / "flink-read", before.graph, before.placement, before.cluster)
        log("collecting its counters and ingesting them on Spark")
        collector = FlinkCollector(cluster.url, out / "flink-chunks", job_id)
        collector.poll()  # the base reading; the second one's differences are the chunk
        chunk = collector.poll()
        if chunk is None:
            raise StreamschedError(f"job {job_id}: no chunk from two readings of its counters")
        report = ingest(spark, [out / "flink-chunks"], out / "flink-store", Window(seconds=chunk["seconds"]),
                        Options(load_unit=CORES))
        snapshot = Path(report["snapshots"][0])
        measured = load_snapshot(snapshot)
        on = before if machines is None else flink_apply.with_machines(before, machines, str(cluster.cluster_file))
        params = {"objective": "throughput"} if scheduler == "optimal" and on.cluster.has_links else {}
        label = scheduler + "".join(f" -p {k}={v}" for k, v in params.items())
        log(f"placing the read graph with {label}")
        placement = get_scheduler(scheduler, **params).schedule(on.graph, on.cluster)
        plan = out / "flink-plan.json"
        placement.write(plan, on.graph, on.cluster)
        log(f"judging {label}'s placement against the running one (threshold {100 * min_gain:g} %)")
        applied = flink_apply.apply(cluster.url, plan, job_id=job_id, window_s=window_s, log=log, before=before,
                                    min_gain=min_gain, machines=machines)
        latency_after = sink_latency(FlinkRest(cluster.url), job_id) if applied.applied else None
        if not applied.applied:
            log(f"job left alone: {applied.reason}")
    finally:
        local.stop(cluster.base)
    result = applied.to_dict()
    lab_info = None if machines is None else {
        "taskmanagers": taskmanagers, "slots": slots, "link_mbit": dict(DEMO_LAB), "cluster_file": cluster.cluster_file,
        "machines": str(out / "flink-machines.yaml")}
    return LiveLoop(job_id, out / "flink-read", snapshot, measured.total_rate,
                    result["reading"]["exchanged_records_per_s"],
                    result["after"]["exchanged_records_per_s"] if result["after"] else None, label, plan, result,
                    lab_info, no_lab, latency_before, latency_after)
