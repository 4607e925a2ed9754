"""What the first Python (Arrow) job of a fresh local Spark session costs, against a second one
and a JVM-only CSV aggregation of the same session (issue 15: the part of `ingest`'s start-up
that the bare job does not pay; `ingest` now overlaps it with its planning and shortens it,
docs/benchmarks.md).

    nice .venv/bin/python benchmarks/spark_python_start.py METRICS_DIR

METRICS_DIR: native CSV files, e.g. from `streamsched gen-metrics -w wordcount -c high-low-1-2
--rows 100000 --out METRICS_DIR`. Prints one JSON line of wall times in seconds.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    started = time.perf_counter()
    from streamsched.pipeline.session import spark_session

    spark = spark_session("local[2]")
    times = {"session_s": time.perf_counter() - started}
    frame = spark.range(4).repartition(2)
    for label in ("first_arrow_job_s", "second_arrow_job_s"):
        begun = time.perf_counter()
        frame.mapInArrow(lambda batches: batches, frame.schema).collect()
        times[label] = time.perf_counter() - begun
    begun = time.perf_counter()
    spark.read.csv(sys.argv[1], header=True).groupBy("src_task").count().collect()
    times["csv_groupby_s"] = time.perf_counter() - begun
    times["load_average"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in times.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
