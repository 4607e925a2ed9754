"""Ingest throughput against a bare Spark read + groupBy-sum of the same files, same session.

    nice .venv/bin/python benchmarks/pipeline_ingest.py --rows 10000000 [--format csv] [--dir /tmp/bench]

Generates ``--rows`` traffic rows of a workload (0.1 % dirty) unless the directory already holds
them, then times, twice in turn, (1) the bare aggregation: Spark's typed CSV read,
``groupBy(topology, src, dst).sum``, collect; (2) ``ingest`` (validation, quarantine,
duplicates, unknown tasks, windowed rates, snapshot). The better of the two times of each is
used (the first run of each pays for warming the JVM or the Python workers). Prints one JSON
line: rows/s of each, the ratio ingest / bare, and the peak RSS of the Spark JVM and of Python.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import time
from pathlib import Path
from typing import Callable

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--workload", default="taxi-routes")
    parser.add_argument("--format", default="csv", choices=("csv", "parquet"))
    parser.add_argument("--dir", default="/tmp/streamsched-bench")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--memory", default="4g")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    args = parser.parse_args()
    data = Path(args.dir) / f"{args.workload}-{args.rows}-{args.format}"
    if not (data / "_generator.json").exists():
        started = time.perf_counter()
        summary = generate_metrics(workloads.workload(args.workload), data, rows=args.rows, fmt=args.format,
                                   dirty=0.001, noise=0.1, seed=1, rate_scale=100)
        generate_s = time.perf_counter() - started
    else:
        summary, generate_s = json.loads((data / "_generator.json").read_text()), None
    spark = spark_session(args.master, args.memory)
    store = Path(args.dir) / "store"
    shutil.rmtree(store, ignore_errors=True)
    bare_runs, ingest_runs = [], []
    for _ in range(2):
        bare_runs.append(bare(spark, data, args.format))
        if not ingest_runs:
            jvm_after_bare = jvm_peak_rss_mb()
        started = time.perf_counter()
        report = ingest(spark, [data], store, Window(seconds=60))
        ingest_runs.append(time.perf_counter() - started)
    bare_s, ingest_s = min(bare_runs), min(ingest_runs)
    rows = summary["traffic_rows"] + summary["load_rows"]
    print(json.dumps({
        "rows": rows, "traffic_rows": summary["traffic_rows"], "format": args.format, "master": args.master,
        "workload": args.workload, "generate_s": generate_s,
        "bare_s": [round(t, 2) for t in bare_runs], "ingest_s": [round(t, 2) for t in ingest_runs],
        "bare_rows_per_s": round(summary["traffic_rows"] / bare_s), "ingest_rows_per_s": round(rows / ingest_s),
        "ratio_ingest_over_bare": round(ingest_s / bare_s, 2),
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
