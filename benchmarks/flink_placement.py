"""What a placement changes on a live Flink 2.3 (issue 26 item 6), and the Flink-fitted model.

The job: ``streamsched flink-local``'s example (datagen(2) -REBALANCE-> Calc(4) -HASH->
GroupAggregate->blackhole(4), 1000-character records) with an unbounded source rate, so the
sources are back-pressured and the job runs at saturation; 3 TaskManagers x 2 slots on this
machine (loopback network, 2 cores shared with other work: serialization and the network
stack's CPU are what a remote exchange costs here).

Placements, per round:

- ``flink-default``: Flink's own (``taskmanager.load-balance.mode`` NONE), on a cluster with
  streamsched's plugin on the JobManager (without a plan it assigns as Flink does, tested);
- ``flink-TASKS``, ``flink-SLOTS``: stock Flink (no plugin), the mode set, a cluster each;
- ``streamsched-optimal``: the ``optimal`` scheduler on the graph read from the running job
  (Flink's slot rule honoured), applied by ``streamsched apply flink``'s code;
- ``bad-control``: the placement with the most inter-TaskManager bytes under the slot rule
  (exhaustive over the 3^10 placements), applied the same way.

Per placement, ``--windows`` windows of ``--window`` s each (two consistent REST snapshots,
:func:`streamsched.engines.flink.read`): inter-TaskManager bytes/s (``numBytesInRemote``),
source and sink records/s, busy, back-pressured and idle ms per second per vertex (Flink's
``accumulate*TimeMs`` counters differenced; a source's busy time is the second's rest, Flink
reports none), beside streamsched's inter-TaskManager bytes of the
graph read under that placement and of the default's graph. Re-planning a running job: the
downtime of ``apply``'s two rescales (resource requirements, restored from the last checkpoint)
and of stop-with-savepoint plus resubmission (client JVM start included).

The results go to ``--json``; with ``--fit`` the Flink throughput model is fitted on them
(:mod:`streamsched.evaluation.engine_models`: leave one placement out) and
``src/streamsched/data/flink_model.json`` and ``flink_measurements.json`` are written.

    PYTHONPATH=src python benchmarks/flink_placement.py [--quick] [--rounds 2] [--json out.json] [--fit]
    PYTHONPATH=src python benchmarks/flink_placement.py --fit-only out.json   # refit saved results
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

from streamsched import metrics
from streamsched.engines import flink
from streamsched.engines.flink import apply as flink_apply
from streamsched.engines.flink import local, plugin
from streamsched.engines.flink.documents import Capture
from streamsched.engines.flink.rest import FlinkRest, fetch_interval, take_snapshot
from streamsched.evaluation import engine_models
from streamsched.model import Placement
from streamsched.schedulers import get_scheduler

TASKMANAGERS, SLOTS, PARALLELISM, SOURCES, RECORD_BYTES, KEYS = 3, 2, 4, 2, 1000, 1000
RATE = 10_000_000  # rows/s per datagen subtask: far above what this machine sustains
PLACEMENTS = ("flink-default", "flink-TASKS", "flink-SLOTS", "streamsched-optimal", "bad-control")
DATA = Path(__file__).resolve().parents[1] / "src" / "streamsched" / "data"
TIME_METRICS = ("accumulateBusyTimeMs", "accumulateBackPressuredTimeMs", "accumulateIdleTimeMs")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def time_counters(rest: FlinkRest, job_id: str) -> dict[str, dict[str, float]]:
    """Per vertex name: the sums over its subtasks of Flink's busy, back-pressured and idle time
    counters (ms) and the subtask count."""
    out = {}
    for v in rest.get(f"/jobs/{job_id}")["vertices"]:
        values = rest.get(f"/jobs/{job_id}/vertices/{v['id']}/subtasks/metrics?get={','.join(TIME_METRICS)}&agg=sum")
        row = {m["id"]: float(m["sum"]) for m in values}
        row["subtasks"] = v["parallelism"]
        out[v["name"]] = row
    return out


def window(rest: FlinkRest, job_id: str, seconds: float, attempts: int = 4) -> tuple[dict, flink.FlinkReading]:
    """One measurement window (:func:`_window`); a window in which some subtask processed
    nothing is taken again: at saturation every subtask works, so its counters were stale (the
    JobManager's metric fetch missed a busy TaskManager's answer, seen under heavy load)."""
    for attempt in range(attempts):
        row, reading = _window(rest, job_id, seconds)
        g = reading.graph
        processed = np.bincount(g.dst, weights=g.rate, minlength=g.n_tasks) + \
            np.bincount(g.src, weights=g.rate, minlength=g.n_tasks)
        idle = [g.task_label(t) for t in np.flatnonzero(processed <= 0)]
        if not idle:
            return row, reading
        log(f"  window discarded (attempt {attempt + 1}): no records counted for {', '.join(idle)}")
    raise RuntimeError(f"job {job_id}: {attempts} windows with subtasks counting no records")


def _window(rest: FlinkRest, job_id: str, seconds: float) -> tuple[dict, flink.FlinkReading]:
    """Two consistent snapshots ``seconds`` apart (with the time counters read right after
    each), and the reading of them (node = TaskManager)."""
    interval = fetch_interval(rest)
    first = take_snapshot(rest, job_id, interval)
    t0 = time_counters(rest, job_id)
    time.sleep(max(0.0, first.time + max(seconds, interval) - time.time()))
    last = take_snapshot(rest, job_id, interval)
    t1 = time_counters(rest, job_id)
    capture = Capture(job_id, (first, last), rest.url, rest.url)
    reading = flink.read_capture(capture)
    dt = last.time - first.time
    report = reading.report
    source = next(v for v in report["vertices"] if not v["inputs"])
    sink = report["vertices"][-1]
    times = {}
    for name, row in t1.items():
        per = {m: (row[m] - t0[name][m]) / dt / row["subtasks"] for m in TIME_METRICS if name in t0}
        busy = per.get("accumulateBusyTimeMs")
        if busy is not None and not np.isfinite(busy):  # Flink gives sources no busy time: the rest of the second
            busy = 1000.0 - per["accumulateIdleTimeMs"] - per["accumulateBackPressuredTimeMs"]
        times[name] = {"busy_ms_per_s": busy,
                       "backpressured_ms_per_s": per.get("accumulateBackPressuredTimeMs"),
                       "idle_ms_per_s": per.get("accumulateIdleTimeMs")}
    measured = report["measured_per_s"]
    row = {"seconds": dt, "source_records_per_s": source["records_out_per_s"],
           "sink_records_per_s": sink["records_in_per_s"], "remote_bytes_per_s": measured["bytes_in_remote"],
           "bytes_in_per_s": measured["bytes_in"], "vertex_times": times,
           "model_remote_bytes_per_s": metrics.inter_node_traffic(reading.graph, reading.placement, weight="bytes")}
    return row, reading


def graph_doc(reading: flink.FlinkReading) -> dict:
    g = reading.graph
    return {"name": g.name, "operators": list(g.operator_names), "task_operator": g.task_operator.tolist(),
            "load": g.load.tolist(), "src": g.src.tolist(), "dst": g.dst.tolist(), "rate": g.rate.tolist(),
            "bytes_rate": g.bytes_rate.tolist()}


def measure(rest: FlinkRest, job_id: str, windows: int, seconds: float, warmup: float) -> dict:
    """``windows`` windows after ``warmup`` s; the last reading's graph and placement."""
    time.sleep(warmup)
    rows, reading = [], None
    for k in range(windows):
        row, reading = window(rest, job_id, seconds)
        rows.append(row)
        log(f"  window {k + 1}/{windows}: {row['source_records_per_s']:.0f} source records/s, "
            f"{row['remote_bytes_per_s'] / 1e6:.1f} MB/s remote (model {row['model_remote_bytes_per_s'] / 1e6:.1f})")
    nodes = [n.name for n in reading.cluster.nodes]
    return {"windows": rows, "taskmanagers": [nodes[k] for k in reading.placement.node_of],
            "graph": graph_doc(reading), "_reading": reading}


def submit(cluster: local.LocalFlink) -> str:
    job_id = local.submit_example(cluster.url, cluster.logs, rate=RATE, record_bytes=RECORD_BYTES,
                                  parallelism=PARALLELISM, source_parallelism=SOURCES, keys=KEYS)
    local.wait_flowing(cluster.url, job_id)
    return job_id


def worst_placement(reading: flink.FlinkReading) -> Placement:
    """The placement with the most inter-TaskManager bytes among those obeying Flink's slot rule
    (at most ``slots`` subtasks of a vertex per TaskManager): every one of k^n enumerated."""
    g, k = reading.graph, reading.cluster.n_nodes
    slots = np.array([n.task_slots for n in reading.cluster.nodes])
    assign = np.array(list(itertools.product(range(k), repeat=g.n_tasks)), dtype=np.int8)
    ok = np.ones(len(assign), bool)
    for op in range(len(g.operator_names)):
        tasks = np.flatnonzero(g.task_operator == op)
        for node in range(k):
            ok &= (assign[:, tasks] == node).sum(axis=1) <= slots[node]
    cut = ((assign[:, g.src] != assign[:, g.dst]) * g.bytes_rate).sum(axis=1)
    cut[~ok] = -1
    return Placement.build(assign[int(np.argmax(cut))].astype(np.int64))


def apply_plan(cluster: local.LocalFlink, job_id: str, placement: Placement, reading, work: Path, name: str) -> dict:
    path = work / f"{name}.json"
    placement.write(path, reading.graph, reading.cluster)
    start = time.time()
    result = flink_apply.apply(cluster.url, path, job_id=job_id, settle_s=0, window_s=3, log=lambda m: log(f"  {m}"))
    rescales = result.rescales
    return {"downtime_s": result.downtime_s, "rescale_downtimes_s": [r["downtime_s"] for r in rescales],
            "put_to_running_s": rescales[-1]["running"] - rescales[0]["put"], "wall_s": time.time() - start,
            "moved": len(result.moved)}


def savepoint_resubmit(cluster: local.LocalFlink, job_id: str) -> dict:
    """Stop with a savepoint (no drain) and resubmit the job from it: the times of each part."""
    rest = FlinkRest(cluster.url)
    t_stop = time.time()
    trigger = flink_apply.send(rest, "POST", f"/jobs/{job_id}/stop",
                               {"targetDirectory": str(cluster.base / "savepoints"), "drain": False})["request-id"]
    while True:
        status = rest.get(f"/jobs/{job_id}/savepoints/{trigger}")
        if status["status"]["id"] == "COMPLETED":
            break
        time.sleep(0.05)
    if "failure-cause" in status.get("operation", {}):
        raise RuntimeError(f"stop-with-savepoint failed: {status['operation']['failure-cause']}")
    location = status["operation"]["location"]
    t_saved = time.time()
    client = local.ExampleClient(int(cluster.url.rsplit(":", 1)[1]), cluster.logs, rate=RATE,
                                 record_bytes=RECORD_BYTES, parallelism=PARALLELISM, source_parallelism=SOURCES,
                                 keys=KEYS, extra={"execution.state-recovery.path": location})
    t_client = time.time()
    try:
        new_id = client.submit()
    finally:
        client.close()
    while True:
        view = flink_apply.job_view(rest, new_id)
        if view.state == "RUNNING" and all(s == "RUNNING" for st in view.statuses.values() for s in st):
            break
        time.sleep(0.05)
    up = max(t for ts in view.running_since.values() for t in ts)
    restored = (rest.get(f"/jobs/{new_id}/checkpoints").get("latest") or {}).get("restored")
    return {"stop_to_savepoint_s": t_saved - t_stop, "client_start_s": t_client - t_saved,
            "submit_to_running_s": up - t_client, "downtime_s": up - t_stop,
            "restored_from": (restored or {}).get("external_path"), "job_id": new_id}


def run_round(base: Path, windows: int, seconds: float, warmup: float, replan: bool) -> dict:
    out: dict = {"placements": {}}
    work = base / "plans-made"
    work.mkdir(parents=True, exist_ok=True)
    for mode, with_plugin in (("NONE", True), ("TASKS", False), ("SLOTS", False)):
        directory = base / f"cluster-{mode}"
        extra = {} if mode == "NONE" else {"taskmanager.load-balance.mode": mode}
        log(f"cluster {mode}: starting {TASKMANAGERS} TaskManagers x {SLOTS} slots")
        cluster = local.start(directory, taskmanagers=TASKMANAGERS, slots=SLOTS, rest_port=0, plugin=with_plugin,
                              extra=extra)
        try:
            rest = FlinkRest(cluster.url)
            job_id = submit(cluster)
            name = "flink-default" if mode == "NONE" else f"flink-{mode}"
            log(f"{name}: job {job_id}")
            out["placements"][name] = measure(rest, job_id, windows, seconds, warmup)
            if mode != "NONE":
                continue
            reading = out["placements"][name]["_reading"]
            best = get_scheduler("optimal").schedule(reading.graph, reading.cluster)
            for plan_name, placement in (("streamsched-optimal", best), ("bad-control", worst_placement(reading))):
                log(f"{plan_name}: applying")
                applied = apply_plan(cluster, job_id, placement, reading, work, plan_name)
                out.setdefault("replan", {}).setdefault("rescale", []).append(applied)
                out["placements"][plan_name] = measure(rest, job_id, windows, seconds, warmup)
                out["placements"][plan_name]["applied"] = applied
            if replan:
                log("stop-with-savepoint and resubmit")
                out.setdefault("replan", {})["savepoint"] = savepoint_resubmit(cluster, job_id)
        finally:
            local.stop(directory)
    return out


def summarise(rounds: list[dict]) -> list[dict]:
    """One row per placement: medians and ranges over every window of every round."""
    reference = {r: rnd["placements"]["flink-default"] for r, rnd in enumerate(rounds)}
    rows = []
    for name in PLACEMENTS:
        wins, shares, tms_used = [], [], set()
        for r, rnd in enumerate(rounds):
            entry = rnd["placements"].get(name)
            if entry is None:
                continue
            wins += entry["windows"]
            tms_used.add(len(set(entry["taskmanagers"])))
            ref = reference[r]
            g = engine_models.graph_of(ref["graph"], "flink-default")
            nodes = sorted(set(entry["taskmanagers"]) | set(ref["taskmanagers"]))
            p = Placement.build(np.array([nodes.index(t) for t in entry["taskmanagers"]]))
            shares.append(metrics.inter_node_traffic(g, p, weight="bytes") / g.bytes_rate.sum())
        if not wins:
            continue
        col = lambda key: [w[key] for w in wins]
        rows.append({"placement": name, "windows": len(wins), "taskmanagers_used": sorted(tms_used),
                     "source_records_per_s": col("source_records_per_s"), "remote_bytes_per_s": col("remote_bytes_per_s"),
                     "model_remote_bytes_per_s": col("model_remote_bytes_per_s"),
                     "remote_share": [w["remote_bytes_per_s"] / w["bytes_in_per_s"] for w in wins],
                     "model_remote_share_from_default": shares,
                     "vertex_times": {v: {k: [w["vertex_times"][v][k] for w in wins if v in w["vertex_times"]]
                                          for k in ("busy_ms_per_s", "backpressured_ms_per_s", "idle_ms_per_s")}
                                      for v in wins[0]["vertex_times"]}})
    return rows


def _m(values, scale=1.0, digits=0) -> str:
    values = [v / scale for v in values if v is not None]
    if not values:
        return "n/a"
    med = statistics.median(values)
    if len(values) == 1:
        return f"{med:.{digits}f}"
    return f"{med:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def table(rows: list[dict], held: list[dict] | None) -> str:
    base = statistics.median(rows[0]["source_records_per_s"])
    predicted = {}
    for h in held or []:
        predicted.setdefault(h["placement"], []).append(h["predicted"])
    lines = ["| placement | TMs used | source records/s, median (range) | vs default | predicted records/s "
             "(held out) | remote MB/s measured | remote MB/s model (own graph) | remote share measured | "
             "remote share model (default's graph) | busy ms/s Source / Calc / Agg | back-pressured ms/s "
             "Source / Calc / Agg |", "|" + "---|" * 11]
    for r in rows:
        times = r["vertex_times"]
        busy = " / ".join(_m(t["busy_ms_per_s"]) for t in times.values())
        bp = " / ".join(_m(t["backpressured_ms_per_s"]) for t in times.values())
        pred = predicted.get(r["placement"])
        lines.append(
            f"| {r['placement']} | {'/'.join(map(str, r['taskmanagers_used']))} | {_m(r['source_records_per_s'])} | "
            f"{statistics.median(r['source_records_per_s']) / base:.2f} | {_m(pred) if pred else 'none'} | "
            f"{_m(r['remote_bytes_per_s'], 1e6, 1)} | {_m(r['model_remote_bytes_per_s'], 1e6, 1)} | "
            f"{_m(r['remote_share'], 0.01)} % | {_m(r['model_remote_share_from_default'], 0.01)} % | {busy} | {bp} |")
    return "\n".join(lines)


def replan_table(rounds: list[dict]) -> str:
    rescale = [a for rnd in rounds for a in rnd.get("replan", {}).get("rescale", [])]
    save = [rnd["replan"]["savepoint"] for rnd in rounds if "savepoint" in rnd.get("replan", {})]
    lines = ["| re-plan path | downtime s, median (range) | detail |", "|---|---|---|"]
    if rescale:
        lines.append(f"| two rescales (resource requirements, `apply`) | {_m([a['downtime_s'] for a in rescale], 1, 2)} | "
                     f"first PUT to all RUNNING {_m([a['put_to_running_s'] for a in rescale], 1, 1)} s "
                     f"(reduced parallelism between the rescales); n={len(rescale)} |")
    if save:
        lines.append(f"| stop-with-savepoint + resubmit | {_m([s['downtime_s'] for s in save], 1, 2)} | "
                     f"stop {_m([s['stop_to_savepoint_s'] for s in save], 1, 2)} s, client JVM "
                     f"{_m([s['client_start_s'] for s in save], 1, 2)} s, submit to RUNNING "
                     f"{_m([s['submit_to_running_s'] for s in save], 1, 2)} s; restored: "
                     f"{all(s['restored_from'] for s in save)}; n={len(save)} |")
    return "\n".join(lines)


def measurements_doc(rounds: list[dict], command: str) -> dict:
    return {"format": engine_models.MEASUREMENTS_FORMAT, "command": command, "machine": machine(),
            "date": datetime.date.today().isoformat(), "host_cores": os.cpu_count(), "reference": "flink-default",
            "rounds": [{"placements": {name: {"taskmanagers": e["taskmanagers"], "graph": e["graph"],
                                              "windows": [{k: w[k] for k in ("source_records_per_s", "remote_bytes_per_s")}
                                                          for w in e["windows"]]}
                                       for name, e in rnd["placements"].items()}} for rnd in rounds]}


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores shared with other work, {platform.system()} {platform.release()}"


def fit(measurements: dict) -> tuple[dict, list[dict]]:
    cases, cores, reference = engine_models.read_measurements(measurements, "measurements")
    held = engine_models.held_out(cases, cores, reference)
    refs = {c.round: c for c in cases if c.placement == reference}
    params = engine_models.fit_params([c for c in cases if c.round in refs], refs, cores)
    errors = [100 * h["error"] for h in held]
    # the no-effect baseline: every placement predicted to run as fast as the reference did
    baseline = statistics.median(100 * abs(refs[c.round].measured - c.measured) / c.measured for c in cases)
    quality = ("poor: worse than predicting that placement changes nothing" if statistics.median(errors) > baseline
               else "better than predicting that placement changes nothing")
    model = {"format": engine_models.FORMAT, "engine": "flink",
             "fitted_on": (f"benchmarks/flink_placement.py ({measurements['command']}) on {measurements['machine']}, "
                           f"{measurements['date']}: {len({c.placement for c in cases})} placements x "
                           f"{len({c.round for c in cases})} rounds of the example job at saturation, 3 TaskManagers "
                           f"on one host (loopback); raw measurements in flink_measurements.json"),
             "measurements": len(cases),
             "params": {k: getattr(params, k) for k in (*engine_models.FITTED_PARAMS, *engine_models.FIXED_PARAMS)},
             "held_out_error_pct": {"median": statistics.median(errors), "max": max(errors), "n": len(errors),
                                    "method": "leave one placement out; each predicted from the job's reading under "
                                              f"{reference} (another placement's when {reference} is left out)",
                                    "no_effect_baseline_median": baseline,
                                    "verdict": f"{quality} (median {baseline:.1f} %)" + (
                                        ": on this machine the measured throughput did not depend on "
                                        "inter-TaskManager bytes beyond the noise of a contended host"
                                        if quality.startswith("poor") else "")}}
    return model, held


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 round, 2 windows of 6 s (about 5 min)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--windows", type=int, default=4)
    ap.add_argument("--window", type=float, default=8.0)
    ap.add_argument("--warmup", type=float, default=10.0)
    ap.add_argument("--json", type=Path, help="write every measurement here")
    ap.add_argument("--fit", action="store_true", help="fit the model, write data/flink_model.json and flink_measurements.json")
    ap.add_argument("--fit-only", type=Path, help="refit from a --json file of an earlier run (no cluster)")
    args = ap.parse_args(argv)
    command = "python benchmarks/flink_placement.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.fit_only:
        saved = json.loads(args.fit_only.read_text())
        rounds, measurements = saved["rounds"], saved["measurements"]
    else:
        if args.quick:
            args.rounds, args.windows, args.window, args.warmup = 1, 2, 6.0, 6.0
        plugin.build()
        base = Path(tempfile.mkdtemp(prefix="flinkbench-"))
        rounds = []
        try:
            for r in range(args.rounds):
                log(f"round {r + 1}/{args.rounds}")
                rnd = run_round(base / f"round-{r}", args.windows, args.window, args.warmup, replan=True)
                for e in rnd["placements"].values():
                    e.pop("_reading", None)
                rounds.append(rnd)
        finally:
            shutil.rmtree(base, ignore_errors=True)
        measurements = measurements_doc(rounds, command)
        if args.json:
            args.json.write_text(json.dumps({"rounds": rounds, "measurements": measurements}, indent=1))
    rows = summarise(rounds)
    held = None
    if args.fit or args.fit_only:
        model, held = fit(measurements)
        (DATA / "flink_measurements.json").write_text(json.dumps(measurements, indent=1) + "\n")
        (DATA / "flink_model.json").write_text(json.dumps(model, indent=1) + "\n")
        print(f"fitted: {model['params']}; held-out error median {model['held_out_error_pct']['median']:.1f} %, "
              f"max {model['held_out_error_pct']['max']:.1f} % over {model['held_out_error_pct']['n']}")
    print(table(rows, held))
    print()
    print(replan_table(rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
