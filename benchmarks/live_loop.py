"""The live loop following a change (issue 36 item 3): ``watch --apply-flink`` on the network lab,
one TaskManager's link slowed mid-run (``--change link``, the default) or the job's hot key
shifted mid-run (``--change shift``), with the loop and without it (the same run in
``--dry-run``: the loop journals what it would do and applies nothing).

The lab: 3 TaskManagers x 2 slots behind 4 Mbit/s links each way (the links, not the shared
CPUs, bind); the example job (datagen(2) -REBALANCE-> Calc(3) -HASH-> GroupAggregate(3) ->
blackhole, 500-byte records, sources back-pressured). Each run first places the job at ``P0`` (tm-1: both sources and two subtasks of
Calc and of the aggregate, tm-2: one of each; tm-3 empty), which the throughput model ranks
best (level with every split of the exchange: the busiest link carries 5/9 of the exchange
either way), so the loop must leave it alone. After ``--before`` windows the link of the
TaskManager holding one subtask of each (tm-2, or its twin after relabelling) drops to
``--slow-mbit`` both ways (``netlab.set_rate``, which also rewrites the lab's cluster file, as a
monitor of link capacity would); the loop's job is to move that TaskManager's work onto the empty one. A run ends
``--after`` windows after the change (SIGTERM to the watch, which stops between steps).

``--change shift``: the example job of kind ``shifting`` (70 % of the records on one key, the
hot key changing at times given at submission: ``local.SHIFT_KEYS``, GroupAggregate subtask 2
before, 0 after) placed at ``P0_SHIFT`` (tm-1: both sources, two subtasks of Calc, aggregate
subtasks 1 and 2 (the hot one); tm-2: the third Calc and aggregate subtask 0; tm-3 empty). The
busiest link is tm-1's out: a third of the records to tm-2's Calc and a tenth of the exchange
to aggregate subtask 0 (the model's optimum, +0.0 % for any other plan). When the hot key moves
to subtask 0, 0.8 of the exchange crosses that link (predicted 2.2x slower); swapping aggregate
subtasks 0 and 2 restores the optimum. The dry run goes first (the hot key shifts at T1 and
back at T2, ``shift_schedule``), then the loop (shift at T3, for good); both from P0_SHIFT,
one submission.

    python benchmarks/live_loop.py --out out/live-loop [--window 15] [--before 5] [--after 7]
    python benchmarks/live_loop.py --change shift --out out/live-shift [--window 15] [--before 5] [--after 7]
    python benchmarks/live_loop.py --table out/live-loop/result.json   # the tables again

prints the per-window table (throughput with and without the loop, decisions) and writes
``OUT/result.json`` and both journals (``streamsched journal OUT/loop/journal.jsonl --html ...``
draws them). Needs root (network namespaces, tc); about 12 minutes on 2 shared cores.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

from streamsched.engines.flink import apply as flink_apply
from streamsched.engines.flink import local, netlab
from streamsched.engines.flink.rest import read
from streamsched.model import Placement
from streamsched.pipeline.live_loop import read_journal, summary
from streamsched.pipeline.store import load_snapshot

REPO = Path(__file__).resolve().parents[1]
STREAMSCHED = str(Path(sys.executable).with_name("streamsched"))
LINK_MBIT = 4.0
#: Where P0 puts each vertex's subtasks (by the vertex name's start).
P0 = {"Source": ["tm-1", "tm-1"], "Calc": ["tm-1", "tm-1", "tm-2"], "GroupAggregate": ["tm-1", "tm-1", "tm-2"]}
#: The shift scenario's start: aggregate subtask 0 (hot after the shift) on tm-2, 2 (hot before) on tm-1.
P0_SHIFT = {"Source": ["tm-1", "tm-1"], "Calc": ["tm-1", "tm-1", "tm-2"], "GroupAggregate": ["tm-2", "tm-1", "tm-1"]}
#: Seconds from the shifting job's submission until it flows at P0_SHIFT (the client JVM, the
#: first records, the placement's two rescales: 57 s here), with time to settle; the first shift
#: comes this long plus a run's lead (``lead``) after the submission.
SETUP_S = 80.0
#: Seconds from a watch's start until its first window's decision is due, less one window (here:
#: its first reading 49 s after the start, its first decision 43 s after that window's end, then
#: 13-15 s after each).
STARTUP_S = 65.0


def start_lab(base: Path) -> local.LocalFlink:
    """3 TaskManagers x 2 slots behind ``LINK_MBIT`` links, the example job submitted and flowing."""
    cluster = local.start(base, taskmanagers=3, slots=2, rest_port=local.free_port(),
                          network=netlab.LabOptions(link_mbit=LINK_MBIT))
    return cluster


def submit(cluster: local.LocalFlink, **options) -> str:
    """The example job (``options``: its kind, ``shift_at``) submitted and flowing."""
    job = local.submit_example(cluster.url, cluster.logs, rate=100_000, record_bytes=500, parallelism=3,
                               source_parallelism=2, **options)
    local.wait_flowing(cluster.url, job, timeout_s=180)
    return job


def cancel(cluster: local.LocalFlink, job: str, timeout_s: float = 60.0) -> None:
    """Cancel ``job`` (REST ``PATCH /jobs/:jid?mode=cancel``) and wait until it is CANCELED."""
    urllib.request.urlopen(urllib.request.Request(f"{cluster.url}/jobs/{job}?mode=cancel", method="PATCH"),
                           timeout=10).close()
    deadline = time.time() + timeout_s
    while flink_apply.FlinkRest(cluster.url).get(f"/jobs/{job}").get("state") != "CANCELED":
        if time.time() > deadline:
            raise RuntimeError(f"job {job} not CANCELED within {timeout_s:g} s")
        time.sleep(0.5)


def lead(window: float, before: int) -> float:
    """Seconds a run's watch needs before its change: its start-up and ``before`` whole windows
    (and one more: the windows lie on a grid)."""
    return STARTUP_S + (before + 1) * window


def shift_schedule(submitted: float, window: float, before: int, after_dry: int) -> list[int]:
    """The shifting job's change times [T1, T2, T3]: the dry run's shift T1 (``SETUP_S`` and a
    lead after the submission), back at T2 (the dry run's ``after_dry`` windows and its stop
    later), the loop run's shift T3 (a lead after T2), for good."""
    t1 = submitted + SETUP_S + lead(window, before)
    t2 = t1 + (after_dry + 1) * window + 20.0
    return [math.ceil(t1), math.ceil(t2), math.ceil(t2 + lead(window, before))]


def sleep_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.time()))


def place(cluster: local.LocalFlink, job: str, where: dict[str, list[str]] = P0, out: Path | None = None) -> dict:
    """Put the job where ``where`` says (``apply flink``'s code, any gain; identical TaskManagers
    are relabelled, so P0 may land on other names); what apply said, and ``light``: the
    TaskManager that holds one subtask of Calc and of the aggregate (the one to slow)."""
    reading = read(url=cluster.url, job_id=job, window_s=4.0)
    names = [n.name for n in reading.cluster.nodes]
    node_of = [0] * reading.graph.n_tasks
    for vertex in reading.report["vertices"]:
        targets = next(tms for prefix, tms in where.items() if vertex["name"].startswith(prefix))
        for i in range(vertex["parallelism"]):
            node_of[vertex["first_task"] + i] = names.index(targets[i])
    path = (out or cluster.base) / "p0.placement.json"
    Placement.build(node_of).write(path, reading.graph, reading.cluster)
    result = flink_apply.apply(cluster.url, path, job, settle_s=0.0, window_s=4.0, before=reading,
                               min_gain=-math.inf)
    now = flink_apply.job_view(flink_apply.FlinkRest(cluster.url), job)
    used = [tm for tms in now.where.values() for tm in tms]
    light = min(set(used), key=used.count)
    return {"applied": result.applied, "reason": result.reason, "moved": len(result.moved),
            "downtime_s": result.downtime_s, "light": light, "where": now.where,
            "by_name": {v["name"]: now.where[v["id"]] for v in now.vertices}}


def run_loop(cluster: local.LocalFlink, job: str, out: Path, window: float, before: int, after: int,
             slow_mbit: float, dry_run: bool, slowed: str | None, log=print, shift_at: float | None = None,
             end_by: float | None = None) -> dict:
    """``watch --apply-flink`` for ``before`` windows, then ``slowed``'s link slowed, then ``after``
    windows; SIGTERM; the journal's rows, its summary and when the change was made. With
    ``shift_at`` the change is the job's own (its hot key shifts then): nothing is slowed, the
    run ends ``after`` windows after it or at ``end_by`` (the hot key shifting back), whichever
    comes first."""
    out.mkdir(parents=True, exist_ok=True)
    journal = out / "journal.jsonl"
    command = [STREAMSCHED, "watch", str(out / "arriving"), "--store", str(out / "store"), "--cluster",
               str(cluster.cluster_file), "-s", "optimal", "-p", "objective=throughput", "--load-unit", "cores",
               "--window", f"{window:g}", "--poll", "2", "--apply-flink", cluster.url, "--job-id", job,
               "--journal", str(journal), "--out", str(out / "plans"), *(["--dry-run"] if dry_run else [])]
    (out / "arriving").mkdir(parents=True, exist_ok=True)
    log(" ".join(command))
    with open(out / "watch.log", "w") as stderr:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
    started = time.time()
    changed = None
    try:
        deadline = time.time() + (before + after + 12) * window + 180
        while time.time() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"watch ended early ({proc.returncode}): {(out / 'watch.log').read_text()[-2000:]}")
            rows = read_journal(journal) if journal.exists() else []
            if changed is None and shift_at is not None and time.time() >= shift_at:
                changed = shift_at
                log(f"the hot key shifted after {len(rows)} windows")
            elif changed is None and shift_at is None and len(rows) >= before:
                netlab.set_rate(cluster.base, slowed, slow_mbit, slow_mbit, cluster.cluster_file)
                changed = time.time()
                log(f"{slowed}'s link slowed to {slow_mbit:g} Mbit/s after {len(rows)} windows")
            if changed is not None and sum(1 for r in rows if r["window"]["start"] >= changed) >= after:
                break
            if end_by is not None and time.time() >= end_by - 2.0:
                log("the hot key shifts back: the run ends")
                break
            time.sleep(1.0)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if slowed is not None:
            netlab.set_rate(cluster.base, slowed, LINK_MBIT, LINK_MBIT, cluster.cluster_file)
    rows = read_journal(journal)
    return {"dry_run": dry_run, "changed": changed, "exit": proc.returncode, "rows": rows, "summary": summary(rows),
            "journal": str(journal), "started": started}


def per_window(run: dict) -> list[dict]:
    """The run's windows relative to the change, in the order of the intervals their readings
    cover: index 1 for the first reading that ends after the change, 2 for the next (readings with
    index >= 2 saw the change all through), 0, -1, ... for those before it; measured source
    records/s, remote bytes/s, decision, the hot aggregate subtask, an apply's start and end."""
    out = []
    for row in run["rows"]:
        covers = row["measured"].get("covers") or [row["window"]["start"], row["window"]["end"]]
        out.append({"index": None, "end": row["window"]["end"], "covers": covers,
                    "throughput": row["measured"]["throughput"], "remote": row["measured"]["remote_bytes_per_s"],
                    "decision": row.get("decision"), "hot": hot_subtask(row.get("snapshot")),
                    "apply_times": row.get("apply_times")})
    if run["changed"]:
        ordered = sorted(out, key=lambda w: w["covers"][1])
        first = next((k for k, w in enumerate(ordered) if w["covers"][1] > run["changed"]), len(ordered))
        for k, window in enumerate(ordered):
            window["index"] = k - first + 1
    return out


def hot_subtask(snapshot: str | None) -> int | None:
    """The GroupAggregate subtask that receives the most bytes in the window's snapshot (the
    job's per-subtask counters as the watch ingested them), or None without a snapshot."""
    if not snapshot or not Path(snapshot).exists():
        return None
    graph = load_snapshot(snapshot)
    aggregate = next(k for k, name in enumerate(graph.operator_names) if name.startswith("GroupAggregate"))
    tasks = sorted(np.flatnonzero(graph.task_operator == aggregate).tolist(), key=lambda t: graph.task_ids[t])
    received = [graph.bytes_rate[graph.dst == t].sum() for t in tasks]
    return int(np.argmax(received)) if max(received) > 0 else None


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out/live-loop"))
    parser.add_argument("--change", choices=("link", "shift"), default="link",
                        help="link: a TaskManager's link slowed (default); shift: the job's hot key shifts")
    parser.add_argument("--window", type=float, default=15.0)
    parser.add_argument("--before", type=int, default=5)
    parser.add_argument("--after", type=int, default=7)
    parser.add_argument("--slow-mbit", type=float, default=1.0)
    parser.add_argument("--table", type=Path, help="print the tables of an earlier run's result.json, no cluster")
    args = parser.parse_args()
    if args.table:
        print_tables(json.loads(args.table.read_text()))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    base = args.out / "flink"
    cluster = start_lab(base)
    runs = {}
    try:
        if args.change == "shift":
            runs = run_shift(cluster, args.out, args.window, args.before, args.after, args.after)
        else:
            job = submit(cluster)
            for name, dry in (("loop", False), ("without", True)):
                placed = place(cluster, job, out=args.out)
                print(f"{name}: placing the job at P0: {placed}")
                time.sleep(30)  # the first seconds after a rescale are noisy
                runs[name] = run_loop(cluster, job, args.out / name, args.window, args.before, args.after,
                                      args.slow_mbit, dry, placed["light"])
                runs[name]["slowed"] = placed["light"]
    finally:
        local.stop(base)
    tables = {name: per_window(run) for name, run in runs.items()}
    result = {"change": args.change, "window_s": args.window, "link_mbit": LINK_MBIT,
              **({"slow_mbit": args.slow_mbit} if args.change == "link" else {}),
              "runs": {name: {"summary": run["summary"], "windows": tables[name], "exit": run["exit"],
                              "slowed": run.get("slowed"), "changed": run["changed"], "started": run["started"],
                              "times": run.get("times"), "placed": run.get("placed")}
                       for name, run in runs.items()}}
    (args.out / "result.json").write_text(json.dumps(result, indent=1))
    print_tables(result)


def run_shift(cluster: local.LocalFlink, out: Path, window: float, before: int, after_dry: int, after_loop: int,
              log=print) -> dict:
    """The shift scenario on ``cluster`` (module docstring): the shifting job submitted on
    ``shift_schedule``, placed at P0_SHIFT, the dry run around T1 (ending by T2), the loop
    around T3; the job cancelled at the end. Both runs' ``run_loop`` results (``placed``: what
    the placement said, ``light`` among it)."""
    times = shift_schedule(time.time(), window, before, after_dry)
    job = submit(cluster, kind="shifting", shift_at=times)
    try:
        placed = place(cluster, job, P0_SHIFT, out=out)
        log(f"job {job} placed at P0_SHIFT: {placed}; the hot key shifts at {times} "
            f"(in {times[0] - time.time():.0f} s)")
        if time.time() > times[0] - lead(window, before):
            log(f"late by {time.time() - times[0] + lead(window, before):.0f} s: fewer windows before the shift")
        runs = {}
        sleep_until(times[0] - lead(window, before))
        runs["without"] = run_loop(cluster, job, out / "without", window, before, after_dry, 0.0, True, None, log=log,
                                   shift_at=times[0], end_by=times[1])
        sleep_until(times[1] + 1.0)  # back at P0_SHIFT's optimum
        runs["loop"] = run_loop(cluster, job, out / "loop", window, before, after_loop, 0.0, False, None, log=log,
                                shift_at=times[2])
        for run in runs.values():
            run.update(placed=placed, times=times)
        return runs
    finally:
        cancel(cluster, job)


def print_tables(result: dict) -> None:
    """The per-reading table (with the loop against without it; with the hot aggregate subtask
    where the snapshots show one) and the means."""
    runs = result["runs"]
    hot = any(w.get("hot") is not None for run in runs.values() for w in run["windows"])
    column = " hot aggregate subtask |" if hot else ""
    print(f"| reading (1: the first to end after the change) | with the loop: records/s | decision |{column} "
          f"without: records/s | decision |{column}")
    print("|---|---|---|" + ("---|" if hot else "") + "---|---|" + ("---|" if hot else ""))
    by_index = {name: {w["index"]: w for w in run["windows"]} for name, run in runs.items()}
    for index in sorted(set(by_index["loop"]) | set(by_index["without"])):
        cells = []
        for name in ("loop", "without"):
            w = by_index[name].get(index, {})
            cells += [_number(w.get("throughput")), w.get("decision", "")]
            if hot:
                cells.append("" if w.get("hot") is None else str(w["hot"]))
        print(f"| {index} | " + " | ".join(cells) + " |")
    for name, run in runs.items():
        table = run["windows"]
        before = mean(w["throughput"] for w in table if w["index"] is not None and w["index"] <= 0)
        late = mean(w["throughput"] for w in table if w["index"] is not None and w["index"] >= 5)
        print(f"{name}: mean records/s of the readings before the change {before or 0:,.0f}; from reading 5 on "
              f"{late or 0:,.0f}; decisions {run['summary']['decisions']}")
        applied = [w["apply_times"] for w in table if w.get("decision") == "apply" and w.get("apply_times")]
        if applied:  # the moved job: the readings that began after its (first) apply ended
            moved = [w["throughput"] for w in table if w["throughput"] is not None and w["covers"][0] >= applied[0][1]]
            print(f"{name}: the apply took {applied[0][1] - applied[0][0]:.1f} s; mean records/s of the "
                  f"{len(moved)} readings after it {mean(moved) or 0:,.0f}")
        elif run.get("changed"):  # the unchanged placement: from a window after the change (until it changed back)
            until = (run.get("times") or [None, math.inf])[1]
            width = result["window_s"]
            kept = [w["throughput"] for w in table if w["throughput"] is not None
                    and w["covers"][0] >= run["changed"] + width and w["covers"][1] <= until]
            print(f"{name}: mean records/s of the {len(kept)} readings from a window after the change "
                  f"{mean(kept) or 0:,.0f}")


if __name__ == "__main__":
    main()
