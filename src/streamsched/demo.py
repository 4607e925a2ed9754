"""The whole path in one call: generate -> ingest (Spark) -> aggregate -> snapshot -> schedule.

Used by ``streamsched pipeline-demo`` and ``make demo``. It lives outside :mod:`streamsched.pipeline`
because it schedules: the pipeline produces snapshots and knows no scheduler.

The workload and cluster may also be an experiment's (``fischer-payload-10`` on ``fischer-11``:
:func:`streamsched.evaluation.experiments.registry.build_graph`); the cluster used is written to
``out/cluster.json`` so that ``compare --cluster`` can read it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from streamsched.evaluation.experiments.registry import build_cluster, build_graph
from streamsched.metrics import evaluate
from streamsched.model.cluster import Cluster
from streamsched.pipeline.generate import generate_metrics
from streamsched.pipeline.ingest import Window, ingest
from streamsched.pipeline.store import load_snapshot
from streamsched.schedulers import get_scheduler


def run_demo(spark: Any, workload: str, cluster: Cluster, out: str | Path, scheduler: str = "even",
             rows: int = 20_000, dirty: float = 0.01, seed: int = 0, window_s: float | None = None,
             params: dict[str, Any] | None = None) -> dict[str, Any]:
    """Generate metrics of ``workload`` into ``out/metrics``, ingest them into ``out/store`` on
    ``spark`` (a SparkSession, :func:`streamsched.pipeline.session.spark_session`), load the
    snapshot as a TaskGraph and place it with ``scheduler`` (``out/placement.json``).

    The window defaults to the whole generated span, so the snapshot's rates are the generated
    per-pair rates (up to noise)."""
    out = Path(out)
    graph = build_graph(workload)
    generated = generate_metrics(graph, out / "metrics", rows=rows, dirty=dirty, seed=seed)
    window = Window(seconds=window_s or generated["intervals"] * generated["interval_s"])
    report = ingest(spark, [out / "metrics"], out / "store", window)
    snapshot = report["snapshots"][0]
    measured = load_snapshot(snapshot)
    placement = get_scheduler(scheduler, **(params or {})).schedule(measured, cluster, seed=seed)
    placement.write(out / "placement.json", measured, cluster)
    (out / "cluster.json").write_text(json.dumps(cluster.to_dict(), indent=1) + "\n")
    return {
        "generated": {k: generated[k] for k in ("traffic_rows", "load_rows", "dirty", "files")},
        "ingest": report,
        "snapshot": snapshot,
        "graph": measured.summary(),
        "placement": str(out / "placement.json"),
        "cluster": str(out / "cluster.json"),
        "metrics": evaluate(measured, placement, cluster),
    }


def demo_cluster(spec: str) -> Cluster:
    """A cluster file (YAML/JSON), an experiment's cluster (``fischer-11``) or a built-in one."""
    path = Path(spec)
    if path.suffix.lower() in (".yaml", ".yml", ".json") or path.exists():
        return Cluster.load(path)
    return build_cluster(spec)
