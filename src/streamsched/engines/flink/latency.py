"""Latency of a running Flink job from Flink's latency markers, read over REST.

With ``metrics.latency.interval`` set (ms; the cluster's config, or the job's) every source
subtask emits a marker that often; each operator it reaches records the time since its emission
in a histogram per (source subtask, operator subtask) of the last ``metrics.latency.history-size``
markers (Flink's ``LatencyStats``, granularity ``operator``). The JobManager lists them among
the metrics of the operator's vertex (``/jobs/:jid/vertices/:vid/metrics``, ids ending in
``latency_median``, ``latency_p99``, ...; not in ``/jobs/:jid/metrics``). A marker waits in every
network buffer a record waits in, so under back-pressure it measures the queueing a record sees.
"""

from __future__ import annotations

import math
import statistics
from typing import Any
from urllib.parse import quote

from streamsched.engines.flink.rest import FlinkRest

#: Statistics read per histogram, as Flink's REST names them (``<histogram>_<statistic>``).
STATISTICS = {"p50": "latency_median", "p99": "latency_p99"}
#: Metric ids per request (a long ``?get=`` list makes a long URL).
PER_REQUEST = 20


def sink_vertices(plan: dict[str, Any]) -> list[str]:
    """Ids of the job's last vertices (``/jobs/:jid/plan``: no vertex reads from them)."""
    nodes = plan.get("plan", {}).get("nodes", [])
    inputs = {i.get("id") for n in nodes for i in n.get("inputs", []) or []}
    return [str(n["id"]) for n in nodes if n.get("id") not in inputs]


def sink_latency(rest: FlinkRest, job_id: str) -> dict[str, float]:
    """Latency markers at the job's last vertices, ms: ``p50`` the median of the histograms'
    medians, ``p99`` the largest of their 99th percentiles, ``histograms`` how many reported
    (nan and 0 where none has: no marker reached them yet, or ``metrics.latency.interval`` is 0)."""
    found: dict[str, list[float]] = {q: [] for q in STATISTICS}
    for vertex in sink_vertices(rest.get(f"/jobs/{quote(job_id, safe='')}/plan")):
        where = f"/jobs/{quote(job_id, safe='')}/vertices/{quote(vertex, safe='')}/metrics"
        names = [str(m.get("id", "")) for m in rest.get(where) if isinstance(m, dict)]
        for q, suffix in STATISTICS.items():
            wanted = [n for n in names if n.endswith(suffix) and ".latency." in f".{n}"]
            for start in range(0, len(wanted), PER_REQUEST):
                ids = ",".join(quote(n, safe="") for n in wanted[start:start + PER_REQUEST])
                for metric in rest.get(f"{where}?get={ids}"):
                    try:
                        value = float(metric.get("value"))
                    except (TypeError, ValueError, AttributeError):
                        continue
                    if math.isfinite(value) and value >= 0:
                        found[q].append(value)
    return {"p50": statistics.median(found["p50"]) if found["p50"] else math.nan,
            "p99": max(found["p99"]) if found["p99"] else math.nan, "histograms": len(found["p50"])}
