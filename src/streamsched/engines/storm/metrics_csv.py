"""Storm 2 metrics reporter output with full names: the CSV reporter (plain Python, no Spark).

``storm-client/.../metrics2/reporters/CsvStormReporter.java`` hands the worker's metric registry
to Dropwizard's ``CsvReporter``, which writes one file per metric, ``<csv.log.dir>/<metric
name>.csv`` (``csv.log.dir`` defaults to ``<storm.local.dir>/csvmetrics``): a header ``t,count``
(counter), ``t,value`` (gauge) or the meter / histogram / timer columns, then one row per report,
``<epoch seconds>,<values>``. Storm names a task's metrics
(``metrics2/StormMetricRegistry.java``, ``workerMetricName``)::

    storm.worker.<topology id>.<host>.<component>.<stream>.<task>.<port>-<name>
    storm.worker.<topology id>.<host>.<component>.<task>.<port>-<name>        (no stream)
    storm.topology.<topology id>.<host>.<component>.<task>.<port>-<name>      (metric sets)

with dots in host, component and stream replaced by ``_`` (topology ids have none), and
``<name>`` the full TaskMetrics name (``__execute-count-split:default``, with ``.m1_rate`` for
the rate gauge): nothing is cut, so nothing needs resolving.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from streamsched.errors import InputError

_WITH_STREAM = re.compile(r"storm\.worker\.([^.]+)\.([^.]+)\.([^.]+)\.([^.]+)\.(-?\d+)\.(\d+)-(.+)")
_NO_STREAM = re.compile(r"storm\.(?:worker|topology)\.([^.]+)\.([^.]+)\.([^.]+)\.(-?\d+)\.(\d+)-(.+)")
#: Header -> what the metric is.
KINDS = {"t,count": "counter", "t,value": "gauge"}


@dataclass(frozen=True, slots=True)
class MetricName:
    topology: str
    host: str
    component: str
    stream: str | None
    task: int
    port: int
    name: str


def is_reporter_file(name: str) -> bool:
    return name.startswith(("storm.worker.", "storm.topology.")) and name.endswith(".csv")


def parse_metric_name(file_name: str) -> MetricName:
    """A CSV reporter file name -> its dimensions (ValueError when it is not Storm's layout)."""
    stem = file_name[:-4] if file_name.endswith(".csv") else file_name
    match = _WITH_STREAM.fullmatch(stem) if stem.startswith("storm.worker.") else None
    if match:
        topo, host, component, stream, task, port, name = match.groups()
        return MetricName(topo, host, component, stream, int(task), int(port), name)
    match = _NO_STREAM.fullmatch(stem)
    if match:
        topo, host, component, task, port, name = match.groups()
        return MetricName(topo, host, component, None, int(task), int(port), name)
    raise ValueError(f"{file_name}: not a Storm metric name (storm.worker.<topology>.<host>.<component>"
                     "[.<stream>].<task>.<port>-<metric>.csv)")


def read_rows(path: str | Path) -> tuple[MetricName, str, Iterator[tuple[int, str]]]:
    """(the file's metric, its kind: counter | gauge | other, its rows as (line number, text)).
    A file whose name or header is not the reporter's is an InputError naming it."""
    path = Path(path)
    try:
        metric = parse_metric_name(path.name)
    except ValueError as exc:
        raise InputError(f"{path}: {exc}".replace(f"{path.name}: ", "", 1)) from None
    with open(path, "rb") as handle:
        lines = [raw.decode("utf-8", "replace").rstrip("\r\n") for raw in handle]
    header = lines[0].strip() if lines else ""
    if not header.startswith("t,"):
        raise InputError(f"{path}: line 1: expected the CSV reporter's header t,<columns>, got {header[:60]!r}")
    rows = ((k, text) for k, text in enumerate(lines[1:], start=2) if text.strip())
    return metric, KINDS.get(header, "other"), rows
