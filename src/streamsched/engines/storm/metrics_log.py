"""Storm ``LoggingMetricsConsumer`` files, line by line (plain Python, no Spark).

What Storm writes (storm-client ``org/apache/storm/metric/LoggingMetricsConsumer.java`` and
``log4j2/worker.xml``): one log4j line per data point, pattern ``%d %-8r %m%n``, in
``<workers-artifacts>/<topology id>/<port>/<logfile.name>.metrics`` (rolled to
``.metrics.<i>.gz``). The message is ``String.format("%d\\t%15s:%-4d\\t%3d:%-11s\\t", timestamp,
host, port, taskId, componentId)``, then the metric name padded with blanks and cut to 23
characters, a tab, and the value's ``toString()``::

    2024-05-01 10:00:01,122 1260     1714557601<TAB>node1.example.com:6700<TAB>  1:__acker    <TAB>__execute-count        <TAB>{split:__ack_ack=40020}

:func:`parse_line` reads such a line, with the log4j prefix or without it (a bare message, as
older configurations and copies write it). What the values mean is
:mod:`.metrics_traffic`'s business.
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

#: LoggingMetricsConsumer pads metric names to, and cuts them at, this many characters.
NAME_WIDTH = 23

# Quarantine reasons: the same strings as streamsched.pipeline.row_checks (engines do not import
# the pipeline; tests/test_storm_metrics.py checks they agree).
MALFORMED = "malformed"
MISSING = "missing_field"
WRONG_TYPE = "wrong_type"
NEGATIVE = "negative_count"
OUT_OF_RANGE = "timestamp_out_of_range"
DUPLICATE = "duplicate"

# log4j's "%d %-8r ": date (ISO8601 by default: 2024-05-01 10:00:01,122), milliseconds since
# the JVM started, padded to 8 characters, then one blank.
_LOG4J_PREFIX = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[,.]\d{1,9})? +\d+ +")
_INTEGER = re.compile(r"[+-]?\d{1,18}")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|NaN|Infinity|inf|nan)")
_ARTIFACTS = re.compile(r"(?:^|/)workers-artifacts/([^/]+)/\d+/[^/]+$")
_METRICS_NAME = re.compile(r".*\.metrics(?:\.\d+(?:\.gz)?)?$|.*metrics.*\.log$")


class LineError(ValueError):
    """A line that is not a Storm metrics line: ``reason`` (a quarantine reason) and ``detail``."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class MetricLine:
    """One data point as LoggingMetricsConsumer logged it. ``name`` is the metric name without
    its padding; ``cut`` says it filled all 23 characters, so it may have been longer."""

    timestamp: float
    host: str
    port: int
    task: int
    component: str
    name: str
    value: str
    cut: bool


def is_metrics_file(name: str) -> bool:
    """Whether a file name is one Storm's METRICS appender writes (``worker.log.metrics``, rolled
    ``worker.log.metrics.3.gz``) or an older metrics log (``metrics.log``, ``*metrics*.log``)."""
    return bool(_METRICS_NAME.fullmatch(name.lower()))


def topology_from_path(path: str | Path) -> str | None:
    """The topology id of ``.../workers-artifacts/<topology id>/<port>/worker.log.metrics``."""
    match = _ARTIFACTS.search(Path(path).as_posix())
    return match.group(1) if match else None


def number(text: str) -> float | None:
    """A number as Java prints a long or a double (``12``, ``0.5``, ``1.0E-4``, ``NaN``,
    ``Infinity``), else None."""
    text = text.strip()
    return float(text) if _NUMBER.fullmatch(text) else None


def is_integer(text: str) -> bool:
    """Printed by a Long or an Integer (a counter), not by a Double (a gauge)."""
    return bool(_INTEGER.fullmatch(text.strip()))


def strip_prefix(text: str) -> str:
    """The message of a line: the log4j prefix ``%d %-8r `` removed when there is one."""
    match = _LOG4J_PREFIX.match(text)
    return text[match.end():] if match else text


def parse_line(text: str) -> MetricLine:
    """One line (log4j prefix optional) -> :class:`MetricLine`, or :class:`LineError`:
    ``malformed`` (not five tab-separated fields, no ``host:port`` or ``task:component``),
    ``missing_field`` (an empty timestamp, host, task, name or value), ``wrong_type`` (timestamp,
    port or task id not a number; task ids are integers)."""
    fields = strip_prefix(text).split("\t", 4)
    if len(fields) != 5:
        raise LineError(MALFORMED, f"{len(fields)} tab-separated field{'s' if len(fields) > 1 else ''}, "
                                   "expected 5 (timestamp, host:port, task:component, metric, value)")
    ts_text, worker, who, name_field, value = fields
    if ":" not in worker:
        raise LineError(MALFORMED, f"worker {worker.strip()!r} is not host:port")
    if ":" not in who:
        raise LineError(MALFORMED, f"{who.strip()!r} is not task:component")
    host, port_text = worker.rsplit(":", 1)
    task_text, component = who.split(":", 1)
    name = name_field.rstrip(" ")
    value = value.strip()
    for label, field in (("timestamp", ts_text), ("host", host), ("task", task_text),
                         ("component", component), ("metric name", name), ("value", value)):
        if not field.strip():
            raise LineError(MISSING, f"empty {label}")
    timestamp = number(ts_text)
    if timestamp is None:
        raise LineError(WRONG_TYPE, f"timestamp {ts_text.strip()!r} is not a number")
    if not is_integer(port_text):
        raise LineError(WRONG_TYPE, f"port {port_text.strip()!r} is not an integer")
    if not is_integer(task_text):
        raise LineError(WRONG_TYPE, f"task id {task_text.strip()!r} is not an integer")
    return MetricLine(timestamp=timestamp, host=host.strip(), port=int(port_text), task=int(task_text),
                      component=component.rstrip(), name=name.strip(), value=value,
                      cut=len(name_field) >= NAME_WIDTH and not name_field.endswith(" "))


def parse_java_map(text: str) -> dict[str, str] | None:
    """``{k1=v1, k2=v2}`` as Java's ``AbstractMap.toString`` prints it -> {k: v} (values as
    text), or None when the text is not such a map."""
    if not (text.startswith("{") and text.endswith("}")):
        return None
    body = text[1:-1].strip()
    out: dict[str, str] = {}
    if not body:
        return out
    for item in body.split(", "):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            return None
        out[key.strip()] = value.strip()
    return out


def read_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(line number from 1, text) of every non-blank line of a metrics file (``.gz`` rolled
    files are decompressed); a line that is not UTF-8 is given with replacement characters (it
    then fails as a line, not the whole file)."""
    path = Path(path)
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as handle:
        for number_, raw in enumerate(handle, start=1):
            text = raw.decode("utf-8", "replace").rstrip("\r\n")
            if text.strip():
                yield number_, text
