"""The same ``compare`` and ``schedule`` output on a quiet machine and under a CPU hog (issue 27).

For every cluster scheduler but ``optimal`` (its ``time_limit`` is a wall-clock budget, handled
under its own issue) on the 72 micro-benchmark instances (linear/diamond/star with 10..32 tasks
on homogeneous-10 and heterogeneous-10), runs in-process, twice: once as is ("quiet") and once
with ``--hogs`` busy processes beside it ("hog", default 2: as many as the machine's 2 cores):

- ``compare -w W -c C --schedulers S --seed 1 --json`` (the JSON without its wall times);
- ``schedule`` of each scheduler with seed 1: the node and worker of every task.

and counts the instances whose outputs differ. Exit status 1 when any differs.

    nice .venv/bin/python benchmarks/determinism_under_load.py --json /tmp/determinism.json
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import time

from streamsched import workloads
from streamsched.cli import main
from streamsched.schedulers import available, get_scheduler, scheduler_class

SHAPES = ("linear", "diamond", "star")
SIZES = tuple(range(10, 33, 2))
CLUSTERS = ("homogeneous-10", "heterogeneous-10")
SEED = 1


def schedulers() -> list[str]:
    return [n for n in available() if scheduler_class(n).family == "cluster" and n != "optimal"]


def _strip(value):
    """The compare JSON without what measures time (the wall times, and the verdict's "it was
    the fastest (0.0003 s)"; which scheduler the verdict recommends is kept)."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in ("wall_time_s", "time_s", "elapsed_s")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    if isinstance(value, str):
        return re.sub(r"fastest \([0-9.e+-]+ s\)", "fastest (T s)", value)
    return value


def _recommended(compare: dict):
    return (compare.get("verdict") or {}).get("recommended", compare.get("recommended"))


def run_all(names: list[str]) -> dict:
    out = {}
    for shape in SHAPES:
        for n in SIZES:
            for cluster_name in CLUSTERS:
                workload = f"{shape}-{n}"
                graph, cluster = workloads.workload(workload), workloads.cluster(cluster_name)
                placements = {}
                for name in names:
                    p = get_scheduler(name).schedule(graph, cluster, seed=SEED)
                    placements[name] = [p.node_of.tolist(), p.worker_of.tolist(), p.metadata["cost"]]
                text = io.StringIO()
                with contextlib.redirect_stdout(text):
                    code = main(["compare", "-w", workload, "-c", cluster_name, "--schedulers", ",".join(names),
                                 "--seed", str(SEED), "--json"])
                out[f"{workload}/{cluster_name}"] = {"schedule": placements, "compare_exit": code,
                                                     "compare": _strip(json.loads(text.getvalue()))}
    return out


def main_(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hogs", type=int, default=2, help="busy processes during the second run")
    parser.add_argument("--json", help="write both runs and the differences here")
    args = parser.parse_args(argv)
    names = schedulers()
    started = time.perf_counter()
    quiet = run_all(names)
    quiet_s = time.perf_counter() - started
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hogs)]
    try:
        time.sleep(1.0)
        load_before = os.getloadavg()[0]
        started = time.perf_counter()
        busy = run_all(names)
        busy_s = time.perf_counter() - started
        load_after = os.getloadavg()[0]
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    differ = {}
    for key in quiet:
        sched = [n for n in names if quiet[key]["schedule"][n] != busy[key]["schedule"][n]]
        comp = quiet[key]["compare"] != busy[key]["compare"]
        if sched or comp:
            differ[key] = {"schedule": sched, "compare": comp,
                           "recommended": [_recommended(quiet[key]["compare"]), _recommended(busy[key]["compare"])]}
    per_scheduler = {n: sum(1 for d in differ.values() if n in d["schedule"]) for n in names}
    summary = {"schedulers": names, "instances": len(quiet), "hogs": args.hogs,
               "quiet_s": round(quiet_s, 1), "hog_s": round(busy_s, 1), "hog_over_quiet": round(busy_s / quiet_s, 2),
               "load_average_1min": [round(load_before, 1), round(load_after, 1)],
               "instances_differing": len(differ), "differing_per_scheduler": per_scheduler,
               "compare_differing": sum(1 for d in differ.values() if d["compare"]),
               "recommended_differing": sum(1 for d in differ.values() if d["recommended"][0] != d["recommended"][1]),
               "differ": differ}
    print(json.dumps({k: v for k, v in summary.items() if k != "differ"}, indent=1))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({**summary, "quiet": quiet, "hog": busy}, handle)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main_())
