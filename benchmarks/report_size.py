"""Size and writing time of the comparison report (issue 17, item 4), against the PNG report it
replaced, in the same run.

For each instance: every scheduler of ``compare --schedulers all`` runs once; then the report
is written ``--repeat`` times (median wall and CPU time, size of the HTML page), and the baseline, the
previous writer's pictures (one matplotlib PNG per placement and per chart, base64-inlined, as
at commit ``--baseline-commit``, read with ``git show``), is drawn for the same placements.

    nice .venv/bin/python benchmarks/report_size.py --repeat 3

Instances: `make demo`'s size (Fischer's Payload, 80 tasks, on 11 iMacs: the synthetic graph
the demo measures, on its cluster), a 30-task one (diamond-30 on heterogeneous-10, the size the
2 MB test uses) and the 18-scheduler case docs/benchmarks.md recorded before (diamond-tp on
high-low-2-4, every registered scheduler).
"""

from __future__ import annotations

import argparse
import base64
import statistics
import subprocess
import tempfile
import time
import types
from pathlib import Path

from streamsched import workloads
from streamsched.cli.core import resolve_names
from streamsched.workloads import fischer_cluster
from streamsched.evaluation.report import CHARTS, run_schedulers, write_report
from streamsched.schedulers import available

ROOT = Path(__file__).resolve().parent.parent
PICTURES = "src/streamsched/evaluation/pictures.py"


def previous_pictures(commit: str, repo: Path) -> types.ModuleType:
    """The pictures module as it was at ``commit`` of ``repo`` (PNG placement pictures)."""
    source = subprocess.run(["git", "show", f"{commit}:{PICTURES}"], cwd=repo, check=True, capture_output=True,
                            text=True).stdout
    module = types.ModuleType("previous_pictures")
    exec(compile(source, f"{commit}:{PICTURES}", "exec"), module.__dict__)
    return module


def baseline(old, graph, cluster, outcomes) -> tuple[float, float, int]:
    """Wall and CPU seconds and bytes of the previous report's pictures (base64 PNG, as it
    inlined them)."""
    start, cpu, size = time.perf_counter(), time.process_time(), 0
    rows = [o.row for o in outcomes]
    names = [r["scheduler"] for r in rows]
    for key, title, unit in CHARTS:
        values = [r.get(key) if isinstance(r.get(key), (int, float)) else None for r in rows]
        size += len(base64.b64encode(old.bar_chart(title, names, values, unit)))
    for outcome in outcomes:
        if outcome.placement is not None:
            picture = old.placement_picture(graph, cluster, outcome.placement, outcome.row["scheduler"])
            size += len(base64.b64encode(picture))
    return time.perf_counter() - start, time.process_time() - cpu, size


def measure(label: str, graph, cluster, names: list[str], repeat: int, old) -> None:
    start = time.perf_counter()
    outcomes = run_schedulers(graph, cluster, names)
    schedule_s = time.perf_counter() - start
    placed = [o.placement for o in outcomes if o.placement is not None]
    drawn = len({(p.node_of.tobytes(), p.worker_of.tobytes()) for p in placed})  # a shared one is drawn once
    times, cpus = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeat):
            start, cpu = time.perf_counter(), time.process_time()
            paths = write_report(Path(tmp) / "r.html", graph, cluster, outcomes)
            times.append(time.perf_counter() - start)
            cpus.append(time.process_time() - cpu)
        size = paths[0].stat().st_size
    old_s, old_cpu, old_bytes = baseline(old, graph, cluster, outcomes)
    report_s, report_cpu = statistics.median(times), statistics.median(cpus)
    print(f"{label}: {len(names)} schedulers, {len(placed)} placements ({drawn} distinct, drawn), "
          f"schedulers {schedule_s:.1f} s; "
          f"report {report_s:.2f} s wall (runs {', '.join(f'{t:.2f}' for t in times)}), {report_cpu:.2f} s CPU, "
          f"{size / 1e6:.2f} MB; previous pictures alone {old_s:.1f} s wall, {old_cpu:.1f} s CPU, "
          f"{old_bytes / 1e6:.2f} MB; ratio wall {report_s / old_s:.2f}, CPU {report_cpu / old_cpu:.2f}, "
          f"size {size / old_bytes:.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline-commit", default="83dbd42")
    parser.add_argument("--repo", type=Path, default=ROOT, help="git checkout holding the baseline commit")
    args = parser.parse_args()
    old = previous_pictures(args.baseline_commit, args.repo)
    demo_cluster = fischer_cluster("fischer-11")
    measure("payload / fischer-11 (the demo), compare --schedulers all", workloads.workload("payload"), demo_cluster,
            resolve_names("all", demo_cluster), args.repeat, old)
    small_cluster = workloads.cluster("heterogeneous-10")
    measure("diamond-30 / heterogeneous-10, compare --schedulers all", workloads.workload("diamond-30"),
            small_cluster, resolve_names("all", small_cluster), args.repeat, old)
    measure("diamond-tp / high-low-2-4, every registered scheduler", workloads.workload("diamond-tp"),
            workloads.cluster("high-low-2-4"), available(), args.repeat, old)


if __name__ == "__main__":
    main()
