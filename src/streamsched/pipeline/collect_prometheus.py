"""``streamsched collect prometheus``: a Flink job's history from Prometheus as the chunks
``collect flink`` writes (:mod:`.collect_rest`), so that ``ingest`` and ``watch`` take them
unchanged.

The range is read at once (:func:`streamsched.engines.flink.from_prometheus.read_range`) and
cut into intervals of ``--interval`` seconds from its start; each interval gives
``traffic-prometheus-<job id>-<seq>.csv`` and ``load-prometheus-<job id>-<seq>.csv`` (rows as
:func:`.collect_rest.graph_rows` writes them, timestamped at the interval's end) with their
sidecars ``.<chunk>.json`` (``source: prometheus``, the Prometheus URL, ``covers``,
``seconds``, ``resets``, ``warnings``, ``rows``), and ``.running-prometheus-<job id>.json``
the placement at the range's end (what ``watch`` starts from).

Nothing is written unless the whole range was read and checked; chunks are written under
hidden names and renamed, sidecars first. A second run into the same directory continues the
sequence numbers and refuses a range that overlaps what is there (give ``--start`` at the end
of the last chunk).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from streamsched.engines.flink.from_prometheus import PrometheusRead
from streamsched.errors import InputError
from streamsched.metrics import remote_traffic
from streamsched.model.paths import safe_name
from streamsched.pipeline.collect import _write_atomic
from streamsched.pipeline.collect_rest import _csv, graph_rows

SOURCE = "prometheus"


def _existing(out: Path, stem: str) -> tuple[int, float | None]:
    """(next sequence number, end of the last chunk's interval) of ``stem``'s chunks in ``out``."""
    seq, end = 1, None
    pattern = re.compile(rf"\.traffic-{re.escape(stem)}-(\d{{8}})\.csv\.json")
    for path in out.glob(f".traffic-{stem}-*.csv.json") if out.is_dir() else ():
        match = pattern.fullmatch(path.name)
        if not match:
            continue
        try:
            covers = json.loads(path.read_text())["covers"]
            last = float(covers[1])
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            raise InputError(f"{path}: not a chunk sidecar (covers); move it away to collect again") from None
        seq = max(seq, int(match.group(1)) + 1)
        end = last if end is None else max(end, last)
    return seq, end


def write_chunks(read: PrometheusRead, out: str | Path, url: str) -> list[dict[str, Any]]:
    """Write every interval of ``read`` as chunks in ``out``; the traffic sidecars."""
    out = Path(out)
    stem = f"{SOURCE}-{safe_name(read.job_id)}"
    seq, last_end = _existing(out, stem)
    first = read.intervals[0].start
    if last_end is not None and first < last_end:
        raise InputError(f"{out}: chunks of job {read.job_id} already cover up to {last_end:.0f}; the range starts at "
                         f"{first:.0f} (give --start {last_end:.0f} or another --out)")
    staged = []
    for k, interval in enumerate(read.intervals):
        reading = interval.reading
        traffic, load = graph_rows(reading.graph, interval.end, interval.seconds)
        side = {"source": SOURCE, "url": url, "name": reading.graph.name, "covers": [interval.start, interval.end],
                "seconds": interval.seconds, "job_id": read.job_id, "topology_from": read.topology_from,
                "resets": interval.resets, "warnings": list(reading.warnings),
                "current": remote_traffic(reading.graph, reading.placement), "rates_from": SOURCE,
                "load_estimated_tasks": [int(t) for t in reading.report["load_fallback_tasks"]],
                "load_unit": reading.graph.load_unit}
        for kind, rows in (("traffic", traffic), ("load", load)):
            staged.append((f"{kind}-{stem}-{seq + k:08d}.csv", _csv(kind, rows), {**side, "kind": kind, "rows": len(rows)}))
    out.mkdir(parents=True, exist_ok=True)
    for name, text, sidecar in staged:
        _write_atomic(out / f".{name}.json", json.dumps(sidecar, sort_keys=True, default=float).encode())
        _write_atomic(out / name, text.encode())
    final = read.intervals[-1]
    document = {**final.reading.placement.to_dict(final.reading.graph, final.reading.cluster), "time": final.end}
    _write_atomic(out / f".running-{stem}.json", json.dumps(document, default=float).encode())
    return [s for _, _, s in staged if s["kind"] == "traffic"]
