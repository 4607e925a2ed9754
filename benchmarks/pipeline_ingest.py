"""Ingest and watch against a bare Spark job on the same files, in the same run (issue 15).

    nice .venv/bin/python benchmarks/pipeline_ingest.py --rows 10000000 [--format csv] [--dir /tmp/bench]
    nice .venv/bin/python benchmarks/pipeline_ingest.py --mode cli --rows 100000 --repeat 5
    nice .venv/bin/python benchmarks/pipeline_ingest.py --mode watch --rows 100000 --windows 6

Every mode generates ``--rows`` traffic rows of a workload (0.1 % dirty) unless the directory
already holds them, and prints one JSON line with the load average of the machine.

- ``warm`` (throughput): in one Spark session, twice in turn, (1) the bare aggregation: Spark's
  typed read, ``groupBy(topology, src, dst).sum``, collect; (2) ``ingest`` (validation,
  quarantine, duplicates, unknown tasks, windowed rates, snapshot). The better of the two times
  of each is used (the first run of each pays for warming the JVM or the Python workers): rows/s
  of each, the ratio ingest / bare, the peak RSS of the Spark JVM and of Python. Also the bare
  aggregation plus a duplicate search in Spark's own expressions
  (:func:`sql_duplicate_search`), as a ratio to the bare aggregation.
- ``cli`` (what a user waits for, start-up included): ``--repeat`` times in turn, (1) a bare
  job in a fresh Python process (import PySpark, start a local session, read the traffic files,
  groupBy-sum, collect) and (2) ``streamsched ingest DIR --store S --json`` in a fresh process
  (a fresh store each time), each run after the previous one's Spark JVM has exited. Wall
  times of both, the median of the per-turn ratios.
- ``watch`` (latency): ``streamsched watch`` runs on a directory into which a replay writes,
  once a second, the rows of one second of event time (``--rows`` rows per ``--window``
  seconds; files written under a hidden name, then renamed, as a collector does). A window
  closes when the first rows past its end are written; its latency is the time from then until
  its snapshot is in the store. The first window (the query's start-up) is not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

from streamsched import workloads
from streamsched.pipeline.generate import generate_metrics
from streamsched.pipeline.ingest import Window, ingest
from streamsched.pipeline.schema import TRAFFIC
from streamsched.pipeline.session import spark_session


def peak_rss_mb(chosen: Callable[[bytes, dict[str, str]], bool]) -> float:
    """Largest VmHWM (peak resident memory so far) among the live processes ``chosen`` picks by
    command line and /proc status fields."""
    peak = 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                          if ":" in line)
        except OSError:
            continue
        if "VmHWM" in status and chosen(cmdline, status):
            peak = max(peak, float(status["VmHWM"].split()[0]) / 1024)
    return peak


def jvm_peak_rss_mb() -> float:
    """The Spark JVM this process started."""
    return peak_rss_mb(lambda cmd, status: b"java" in cmd and int(status["PPid"]) == os.getpid())


def worker_peak_rss_mb() -> float:
    """The PySpark Python workers still alive (the daemon's forks)."""
    return peak_rss_mb(lambda cmd, status: b"pyspark.daemon" in cmd or b"pyspark.worker" in cmd)


def bare(spark, directory: Path, fmt: str) -> float:
    from pyspark.sql import functions as F

    start = time.perf_counter()
    pattern = str(directory / f"traffic-*.{fmt}")
    reader = spark.read.schema(TRAFFIC)
    df = reader.parquet(pattern) if fmt == "parquet" else reader.option("header", True).csv(pattern)
    df.groupBy("topology", "src_task", "dst_task").agg(F.sum("tuples"), F.sum("bytes")).collect()
    return time.perf_counter() - start


def sql_duplicate_search(spark, directory: Path, fmt: str) -> float:
    """The bare aggregation plus an exact duplicate search written in Spark's own expressions
    (no Python): rows of a pair at the same timestamp counted, which shuffles every row (the
    bare aggregation combines rows before its shuffle). What a duplicate search costs the
    straightforward way, for comparison with ingest's."""
    from pyspark.sql import functions as F

    start = time.perf_counter()
    pattern = str(directory / f"traffic-*.{fmt}")
    reader = spark.read.schema(TRAFFIC)
    df = reader.parquet(pattern) if fmt == "parquet" else reader.option("header", True).csv(pattern)
    df.groupBy("topology", "src_task", "dst_task").agg(F.sum("tuples"), F.sum("bytes")).collect()
    df.groupBy("topology", "src_task", "dst_task", "timestamp").count().filter(F.col("count") > 1).count()
    return time.perf_counter() - start


#: The bare job of ``--mode cli``, in a fresh process: what a user of PySpark would write, with
#: the session settings streamsched uses on one machine (no UI, few shuffle partitions, no
#: adaptive execution, Spark's logs quiet).
BARE_JOB = """
import sys
from pyspark.sql import SparkSession, functions as F
directory, fmt, master, log4j = sys.argv[1:5]
spark = (SparkSession.builder.master(master).config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "4").config("spark.sql.adaptive.enabled", "false")
         .config("spark.driver.extraJavaOptions", "-Dlog4j2.configurationFile=" + log4j).getOrCreate())
schema = "timestamp double, topology string, src_task long, dst_task long, tuples double, bytes double"
reader = spark.read.schema(schema)
pattern = directory + "/traffic-*." + fmt
df = reader.parquet(pattern) if fmt == "parquet" else reader.option("header", True).csv(pattern)
print(len(df.groupBy("topology", "src_task", "dst_task").agg(F.sum("tuples"), F.sum("bytes")).collect()))
"""


def spark_jvms() -> list[int]:
    """Process ids of the Spark JVMs alive (``pyspark-shell`` on their command line)."""
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if b"pyspark-shell" in Path(f"/proc/{pid}/cmdline").read_bytes():
                alive.append(int(pid))
        except OSError:
            continue
    return alive


def timed(command: list[str]) -> tuple[float, str]:
    """Wall time and stdout of ``command``; then waits (up to 30 s) for its Spark JVM to finish
    exiting, which it does after the Python process ends, so the next run does not share the
    machine with it."""
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{command[:3]}... failed ({done.returncode}): {done.stderr[-2000:]}")
    deadline = time.monotonic() + 30
    while spark_jvms() and time.monotonic() < deadline:
        time.sleep(0.1)
    return seconds, done.stdout


def cli_mode(args, data: Path) -> dict:
    from streamsched.pipeline.session import QUIET_LOG4J2

    streamsched = str(Path(sys.executable).with_name("streamsched"))
    bare_runs, ingest_runs = [], []
    for turn in range(args.repeat):
        bare_runs.append(timed([sys.executable, "-c", BARE_JOB, str(data), args.format, args.master,
                                QUIET_LOG4J2.as_uri()])[0])
        store = Path(args.dir) / f"store-cli-{turn}"
        shutil.rmtree(store, ignore_errors=True)
        seconds, out = timed([streamsched, "ingest", str(data), "--store", str(store), "--json", "--master", args.master])
        ingest_runs.append(seconds)
        report = json.loads(out)
        shutil.rmtree(store, ignore_errors=True)
    ratios = [i / b for i, b in zip(ingest_runs, bare_runs)]
    return {"bare_s": [round(t, 2) for t in bare_runs], "ingest_s": [round(t, 2) for t in ingest_runs],
            "bare_median_s": round(statistics.median(bare_runs), 2),
            "ingest_median_s": round(statistics.median(ingest_runs), 2),
            "ratios": [round(r, 2) for r in ratios], "ratio_median": round(statistics.median(ratios), 2),
            "rows_read": report["rows_read"], "rows_quarantined": report["rows_quarantined"]}


def _second_of_rows(graph, second: int, rows: int, rng: np.random.Generator, start: float) -> str:
    """``rows`` traffic rows of event second ``second`` over the graph's pairs (CSV text); the
    timestamps are written from whole microseconds, so none rounds up into the next second."""
    pair = rng.integers(0, len(graph.src), rows)
    micros = np.sort(rng.integers(0, 1_000_000, rows))
    src, dst = np.asarray(graph.task_ids)[graph.src[pair]], np.asarray(graph.task_ids)[graph.dst[pair]]
    tuples = rng.integers(1, 1000, rows)
    whole = int(start) + second
    lines = [f"{whole}.{u:06d},{graph.name},{a},{b},{n},{n * 100}" for u, a, b, n in zip(micros, src, dst, tuples)]
    return "timestamp,topology,src_task,dst_task,tuples,bytes\n" + "\n".join(lines) + "\n"


def watch_mode(args) -> dict:
    """Latency from a window's close to its snapshot (module docstring)."""
    from streamsched.pipeline.store import list_snapshots, read_manifest

    graph = workloads.workload(args.workload)
    root = Path(args.dir) / "watch"
    shutil.rmtree(root, ignore_errors=True)
    arriving, store = root / "arriving", root / "store"
    arriving.mkdir(parents=True)
    streamsched = str(Path(sys.executable).with_name("streamsched"))
    window = args.window
    per_second = args.rows // window
    rng = np.random.default_rng(1)
    start = 1_700_000_000.0  # a multiple of the window: windows end at start + k * window
    start -= start % window
    command = [streamsched, "watch", str(arriving), "--store", str(store), "--cluster", args.cluster,
               "--window", str(window), "--poll", str(args.poll), "--master", args.master,
               "--timeout", str(args.timeout)]
    log = open(root / "watch.log", "w")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    texts = [_second_of_rows(graph, s, per_second, rng, start) for s in range(window * (args.windows + 1) + 1)]
    closed: dict[float, float] = {}
    published: dict[float, float] = {}
    seen: set[Path] = set()

    def look() -> None:
        for snapshot in list_snapshots(store):
            if snapshot not in seen:
                seen.add(snapshot)
                published.setdefault(float(read_manifest(snapshot)["window"]["end"]), time.perf_counter())

    began = time.perf_counter()
    try:
        for second, text in enumerate(texts):
            if second % window == 0 and second:
                closed[start + second] = time.perf_counter()  # the rows past the window's end, now
            tmp = arriving / f".traffic-{second:06d}.csv"
            tmp.write_text(text)
            os.replace(tmp, arriving / f"traffic-{second:06d}.csv")
            if second == 0:  # wait for the query to start (JVM, first micro-batch) before the clock runs
                while not list(store.glob("checkpoints/watch/state.json")) and process.poll() is None:
                    time.sleep(0.2)
                began = time.perf_counter() - 1
            deadline = began + second + 1
            while time.perf_counter() < deadline:
                look()
                time.sleep(0.05)
        wait_until = time.perf_counter() + 120
        while set(closed) - set(published) and time.perf_counter() < wait_until and process.poll() is None:
            look()
            time.sleep(0.05)
    finally:
        process.terminate()
        process.wait()
        log.close()
    ends = sorted(closed)[1:]  # the first window: the query's start-up
    latency = [published[e] - closed[e] for e in ends if e in published]
    return {"rows_per_window": per_second * window, "window_s": window, "poll_s": args.poll,
            "windows_timed": len(ends), "windows_published": len(latency),
            "latency_s": [round(x, 2) for x in latency],
            "latency_median_s": round(statistics.median(latency), 2) if latency else None,
            "latency_max_s": round(max(latency), 2) if latency else None}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="warm", choices=("warm", "cli", "watch"))
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--workload", default="taxi-routes")
    parser.add_argument("--format", default="csv", choices=("csv", "parquet"))
    parser.add_argument("--dir", default="/tmp/streamsched-bench")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--memory", default="4g")
    parser.add_argument("--repeat", type=int, default=5, help="cli: turns of (bare, ingest)")
    parser.add_argument("--window", type=int, default=10, help="watch: tumbling window, s")
    parser.add_argument("--windows", type=int, default=6, help="watch: windows replayed")
    parser.add_argument("--poll", type=float, default=1.0, help="watch: trigger interval, s")
    parser.add_argument("--cluster", default="high-low-4-4", help="watch: the cluster re-planned on")
    parser.add_argument("--timeout", type=float, default=900, help="watch: stop the watch after this, s")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    args = parser.parse_args()
    if args.mode == "watch":
        print(json.dumps({"mode": "watch", "master": args.master, **watch_mode(args),
                          "load_average": os.getloadavg()}))
        return
    data = Path(args.dir) / f"{args.workload}-{args.rows}-{args.format}"
    if not (data / "_generator.json").exists():
        started = time.perf_counter()
        summary = generate_metrics(workloads.workload(args.workload), data, rows=args.rows, fmt=args.format,
                                   dirty=0.001, noise=0.1, seed=1, rate_scale=100)
        generate_s = time.perf_counter() - started
    else:
        summary, generate_s = json.loads((data / "_generator.json").read_text()), None
    if args.mode == "cli":
        print(json.dumps({"mode": "cli", "rows": summary["traffic_rows"] + summary["load_rows"],
                          "traffic_rows": summary["traffic_rows"], "format": args.format, "master": args.master,
                          **cli_mode(args, data), "load_average": os.getloadavg()}))
        if not args.keep:
            shutil.rmtree(data, ignore_errors=True)
        return
    spark = spark_session(args.master, args.memory)
    store = Path(args.dir) / "store"
    shutil.rmtree(store, ignore_errors=True)
    bare_runs, search_runs, ingest_runs = [], [], []
    for _ in range(2):
        bare_runs.append(bare(spark, data, args.format))
        search_runs.append(sql_duplicate_search(spark, data, args.format))
        if not ingest_runs:
            jvm_after_bare = jvm_peak_rss_mb()
        started = time.perf_counter()
        report = ingest(spark, [data], store, Window(seconds=60), force=True)  # not the first run's snapshot again
        ingest_runs.append(time.perf_counter() - started)
    bare_s, ingest_s = min(bare_runs), min(ingest_runs)
    rows = summary["traffic_rows"] + summary["load_rows"]
    print(json.dumps({
        "rows": rows, "traffic_rows": summary["traffic_rows"], "format": args.format, "master": args.master,
        "workload": args.workload, "generate_s": generate_s,
        "bare_s": [round(t, 2) for t in bare_runs], "ingest_s": [round(t, 2) for t in ingest_runs],
        "bare_rows_per_s": round(summary["traffic_rows"] / bare_s), "ingest_rows_per_s": round(rows / ingest_s),
        "ratio_ingest_over_bare": round(ingest_s / bare_s, 2),
        "sql_duplicate_search_s": [round(t, 2) for t in search_runs],
        "ratio_sql_duplicate_search_over_bare": round(min(search_runs) / bare_s, 2),
        "jvm_peak_rss_mb_after_bare": round(jvm_after_bare), "jvm_peak_rss_mb": round(jvm_peak_rss_mb()),
        "python_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "python_worker_peak_rss_mb": round(worker_peak_rss_mb()),
        "rows_quarantined": report["rows_quarantined"], "rows_accepted": report["rows_accepted"],
        "load_average": os.getloadavg(),
    }))
    spark.stop()
    if not args.keep:
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(store, ignore_errors=True)


if __name__ == "__main__":
    main()
