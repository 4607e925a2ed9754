"""The live JobManager: REST client, consistent snapshots, live capture and ``read``."""

from __future__ import annotations

import math
import re
import time
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote, urlsplit

from streamsched.engines import arithmetic
from streamsched.engines.flink.capture import load_capture, save_capture
from streamsched.engines.flink.documents import (
    DEFAULT_FETCH_INTERVAL_S,
    METRIC_NAMES,
    Capture,
    FlinkReading,
    Snapshot,
    _get,
)
from streamsched.engines.flink.estimate import read_capture
from streamsched.engines.rest_client import Deadline, HTTPStatusError, get_json, reading_deadline, request_timeout
from streamsched.errors import InputError


class FlinkRest:
    """A JobManager's REST API (``http://host:8081``) through :mod:`~streamsched.engines.rest_client`:
    each request within ``timeout`` seconds (None: ``REQUEST_TIMEOUT_S``) and by ``deadline``
    (None: no end beyond the request's; a reading sets one); an unreachable server or an HTTP
    error is one ``InputError``."""

    def __init__(self, url: str, timeout: float | None = None, deadline: Deadline | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise InputError(f"--url: {url!r} is not an http(s) URL of a Flink JobManager")
        self.url = url.rstrip("/")
        self.timeout = request_timeout(timeout)
        self.deadline = deadline

    def get(self, path: str) -> Any:
        return get_json(f"{self.url}/{path.lstrip('/')}", self.timeout, "Flink JobManager", _flink_error,
                        self.deadline)


def _flink_error(body: Any) -> str:
    """The first line of the first of Flink's ``{"errors": [...]}``."""
    errors = body.get("errors") or []
    return str(errors[0]).splitlines()[0][:200] if errors else ""


def running_job(rest: FlinkRest) -> str:
    """The id of the only RUNNING job (else an error listing the jobs)."""
    jobs = _get(rest.get("/jobs/overview"), "jobs", f"{rest.url}/jobs/overview", list)
    running = [j.get("jid") for j in jobs if isinstance(j, dict) and j.get("state") == "RUNNING"]
    if len(running) != 1:
        listed = ", ".join(f"{j.get('jid')} ({j.get('name')}, {j.get('state')})" for j in jobs if isinstance(j, dict))
        raise InputError(f"{rest.url}: {len(running)} running jobs; give --job-id ({listed or 'no jobs'})")
    return str(running[0])


def _check_job(job: Any, job_id: str, where: str) -> Any:
    """``/jobs/:jid`` must answer for ``job_id``: a JobManager (or a proxy) answering for
    another job is refused."""
    answered = job.get("jid") if isinstance(job, dict) else None
    if answered is not None and str(answered) != job_id:
        raise InputError(f"{where}.jid: the answer is for job {answered!r}, not the job asked for ({job_id!r})")
    return job


#: Seconds per unit label of a Flink duration (Flink 2.3's ``TimeUtils.parseDuration``, checked
#: against the flink-dist jar: a label, or a label + "s" where Flink allows the plural).
DURATION_UNITS = {**dict.fromkeys(("d", "day", "days"), 86400.0), **dict.fromkeys(("h", "hour", "hours"), 3600.0),
                  **dict.fromkeys(("min", "m", "minute", "minutes"), 60.0),
                  **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1.0),
                  **dict.fromkeys(("", "ms", "milli", "millis", "millisecond", "milliseconds"), 1e-3),
                  **dict.fromkeys(("µs", "micro", "micros", "microsecond", "microseconds"), 1e-6),
                  **dict.fromkeys(("ns", "nano", "nanos", "nanosecond", "nanoseconds"), 1e-9)}


def config_seconds(rest: FlinkRest, key: str, default_s: float) -> float:
    """A duration option of the JobManager's configuration (``/jobmanager/config``), seconds:
    digits and a unit label as Flink parses them (:data:`DURATION_UNITS`; none: milliseconds);
    ``default_s`` when it is not set or not readable."""
    try:
        config = rest.get("/jobmanager/config")
    except HTTPStatusError:
        return default_s
    for item in config if isinstance(config, list) else []:
        if isinstance(item, dict) and item.get("key") == key:
            match = re.fullmatch(r"(\d+)\s*(\S*)", str(item.get("value", "")).strip())
            if match and match.group(2).lower() in DURATION_UNITS:
                return int(match.group(1)) * DURATION_UNITS[match.group(2).lower()]
    return default_s


def fetch_interval(rest: FlinkRest) -> float:
    """``metrics.fetcher.update-interval`` of the JobManager, seconds (default 10)."""
    return config_seconds(rest, "metrics.fetcher.update-interval", DEFAULT_FETCH_INTERVAL_S)


#: TaskManager metrics that move with every answer a TaskManager gives the JobManager's metric
#: fetcher (its JVM's CPU time and heap in use): a change is the sign of a fresh answer.
TM_SIGNAL = ("Status.JVM.CPU.Time", "Status.JVM.Memory.Heap.Used")


def wait_limit(interval_s: float) -> float:
    """Seconds a snapshot waits for every TaskManager's fresh answer (and at most the command's
    deadline): three fetch intervals, at least 30 s (an answer over a saturated link may come a
    whole interval late)."""
    return max(30.0, 3.0 * interval_s)


def take_snapshot(rest: FlinkRest, job_id: str, interval_s: float | None = None, poll_s: float = 0.2,
                  clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
                  wait_s: float | None = None) -> Snapshot:
    """Every document of the job, each TaskManager's subtasks' metrics from one fresh answer of
    that TaskManager to the JobManager's metric fetcher, and when each answer was seen.

    Flink's ``MetricFetcherImpl`` asks every TaskManager's ``MetricQueryService`` for all its
    metrics at most once per ``metrics.fetcher.update-interval`` (when a REST request comes);
    each answer lands in the ``MetricStore`` on its own, as a whole, with no time in it, and
    over a saturated link seconds or a whole interval after another TaskManager's. So the read
    is per TaskManager: it polls the TaskManager's :data:`TM_SIGNAL` every ``poll_s`` until it
    changes (a fresh answer arrived between that poll and the one before), reads the metrics of
    the job's subtasks on it, and polls the signal again (changed: a newer answer, read again).
    A TaskManager whose answer is late is waited for, up to ``wait_s`` (:func:`wait_limit`) and
    the command's deadline (both in real time; ``clock`` stamps the samples); one that gives
    none is named in the error. The job's subtasks
    must run the same attempts on the same TaskManagers before and after (else it reads again,
    at most three times).
    """
    interval_s = fetch_interval(rest) if interval_s is None else interval_s
    wait_s = wait_limit(interval_s) if wait_s is None else wait_s
    for _attempt in range(3):
        documents, hosts = _job_documents(rest, job_id)
        samples = _fresh_answers(rest, hosts, interval_s, poll_s, wait_s, clock, sleep)
        if _where_subtasks_run(rest, documents) == _where_subtasks_run(None, documents):
            times = {}
            for tm, (before, seen, metrics) in samples.items():
                documents.update(metrics)
                times[tm] = (before, seen)
            return Snapshot(max((seen for _, seen in times.values()), default=clock()), documents, rest.url, times)
    raise InputError(f"{rest.url}: the job's subtasks restarted or moved while they were read, three times")


def _job_documents(rest: FlinkRest, job_id: str) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The job's documents but its subtasks' metrics, and the metrics keys of the subtasks on
    each TaskManager that ``/taskmanagers`` lists (a subtask on none has no metrics to read)."""
    key = f"jobs/{job_id}"
    where = f"{rest.url}/{key}"
    job = _check_job(rest.get(f"/{quote(key, safe='/')}"), job_id, where)
    documents: dict[str, Any] = {key: job}
    try:
        documents["overview"] = rest.get("/overview")
    except HTTPStatusError:
        pass
    documents[f"{key}/plan"] = rest.get(f"/{quote(key, safe='/')}/plan")
    documents["taskmanagers"] = rest.get("/taskmanagers")
    listed = _get(documents["taskmanagers"], "taskmanagers", f"{rest.url}/taskmanagers", list)
    known = {tm.get("id") for tm in listed if isinstance(tm, dict)}
    hosts: dict[str, list[str]] = {}
    for k, vertex in enumerate(_get(job, "vertices", where, list)):
        vid = _get(vertex, "id", f"{where}.vertices[{k}]", str)
        vkey = f"{key}/vertices/{vid}"
        details = documents[vkey] = rest.get(f"/{quote(vkey, safe='/')}")
        for m, sub in enumerate(_get(details, "subtasks", f"{rest.url}/{vkey}", list)):
            index = _get(sub, "subtask", f"{rest.url}/{vkey}.subtasks[{m}]", int)
            tm = sub.get("taskmanager-id")
            if isinstance(tm, str) and tm in known:
                hosts.setdefault(tm, []).append(f"{vkey}/subtasks/{index}/metrics")
    return documents, hosts


def _where_subtasks_run(rest: FlinkRest | None, documents: dict[str, Any]) -> list:
    """Each subtask's attempt and TaskManager, from the vertex pages in ``documents`` (``rest``
    None) or read again from the JobManager."""
    out = []
    for vkey in sorted(k for k in documents if re.fullmatch(r"jobs/[^/]+/vertices/[^/]+", k)):
        details = documents[vkey] if rest is None else rest.get(f"/{quote(vkey, safe='/')}")
        subtasks = details.get("subtasks") if isinstance(details, dict) else None
        out.append((vkey, [(s.get("subtask"), s.get("attempt"), s.get("taskmanager-id"))
                           for s in subtasks if isinstance(s, dict)] if isinstance(subtasks, list) else None))
    return out


def _fresh_answers(rest: FlinkRest, hosts: dict[str, list[str]], interval_s: float, poll_s: float, wait_s: float,
                   clock: Callable[[], float], sleep: Callable[[float], None]
                   ) -> dict[str, tuple[float, float, dict[str, Any]]]:
    """Per TaskManager of ``hosts``: the poll before and the poll that saw its fresh answer, and
    its subtasks' metrics from that answer (:func:`take_snapshot`)."""
    query = ",".join(METRIC_NAMES)
    command = getattr(rest, "deadline", None)
    end = time.monotonic() + wait_s  # limits in real time; ``clock`` stamps the samples

    def signal(tm: str) -> tuple[float, float, tuple]:
        asked = clock()
        doc = rest.get(f"/taskmanagers/{quote(tm, safe='')}/metrics?get={','.join(TM_SIGNAL)}")
        values = sorted((str(m.get("id")), str(m.get("value"))) for m in doc if isinstance(m, dict)) \
            if isinstance(doc, list) else []
        return asked, clock(), tuple(values)

    def check_time(pending: list[str]) -> None:
        by_command = command is not None and command.left() < poll_s + 1.0  # a second for the error's way out
        if by_command or time.monotonic() + poll_s > end:
            limit = command.describe() if by_command else f"{wait_s:g} s"
            others = f" (nor {', '.join(repr(tm[:80]) for tm in pending[1:4])}{' ...' if len(pending) > 4 else ''})" \
                if len(pending) > 1 else ""
            raise InputError(f"{rest.url}: the metrics of TaskManager {pending[0][:80]!r}{others} did not move within "
                             f"{limit} (metrics.fetcher.update-interval {interval_s:g} s): its answers to the "
                             f"JobManager's metric fetcher are late or lost")

    last = {}
    for tm in sorted(hosts):
        asked, _, values = signal(tm)
        last[tm] = (asked, values)
    out: dict[str, tuple[float, float, dict[str, Any]]] = {}
    while len(out) < len(hosts):
        check_time([tm for tm in sorted(hosts) if tm not in out])
        sleep(poll_s)
        for tm in sorted(set(hosts) - set(out)):
            asked, seen, values = signal(tm)
            before, old = last[tm]
            if not values or values == old:
                last[tm] = (asked, old)
                continue
            while True:  # a fresh answer came after ``before``: its subtasks, unless a newer one comes meanwhile
                metrics = {key: rest.get(f"/{quote(key, safe='/')}?get={query}") for key in hosts[tm]}
                asked_again, seen_again, again = signal(tm)
                if again == values:
                    break
                check_time([tm])
                before, seen, values = asked, seen_again, again
                asked = asked_again
            out[tm] = (before, seen, metrics)
    return out


def capture_live(url: str, job_id: str | None = None, window_s: float = 10.0, timeout: float | None = None,
                 poll_s: float = 0.2, save_dir: str | Path | None = None,
                 http_timeout: float | None = None) -> Capture:
    """Snapshots of a running job: one, or two ``window_s`` apart (``window_s`` > 0, the
    default: rates from counter differences), all within ``timeout`` seconds (None:
    ``rest_client.READ_TIMEOUT_S``: the window, the waits for the JobManager's next metrics
    fetch, 10 s by default, and the documents), each request within ``http_timeout`` (None:
    ``REQUEST_TIMEOUT_S``). ``job_id`` defaults to the only running job; ``save_dir`` keeps the
    responses (:func:`save_capture`)."""
    if not (window_s >= 0 and math.isfinite(window_s)):
        raise InputError(f"--window: {window_s!r}; must be a number of seconds >= 0")
    deadline = reading_deadline(timeout)
    if window_s >= deadline.seconds:
        raise InputError(f"--window {window_s:g} s does not fit in {deadline.describe()} (the whole read); "
                         f"give a longer --timeout")
    rest = FlinkRest(url, http_timeout, deadline)
    job_id = job_id or running_job(rest)
    interval = fetch_interval(rest)
    first = take_snapshot(rest, job_id, interval, poll_s)
    snapshots = [first]
    if window_s > 0:
        # the next fetch cannot come before ``interval`` after the first: sleep past both
        time.sleep(max(0.0, first.time + max(window_s, interval) - time.time() - poll_s))
        snapshots.append(take_snapshot(rest, job_id, interval, poll_s))
    capture = Capture(job_id, tuple(snapshots), rest.url, rest.url)
    if save_dir is not None:
        save_capture(capture, save_dir)
    return capture


def read(url: str | None = None, job_id: str | None = None, directory: str | Path | None = None,
         window_s: float = 10.0, timeout: float | None = None, node_by: str = "taskmanager",
         save_dir: str | Path | None = None, http_timeout: float | None = None) -> FlinkReading:
    """A live JobManager (``url``, ``job_id`` optional; :func:`capture_live`) or a saved capture
    (``directory``)."""
    if (url is None) == (directory is None):
        raise InputError("give either --url URL [--job-id JID] (a live Flink JobManager) or --dir DIR (saved responses)")
    if directory is not None:
        if job_id is not None:
            raise InputError("--job-id goes with --url; a saved capture names its job")
        capture = load_capture(directory)
    else:
        capture = capture_live(url, job_id, window_s, timeout, save_dir=save_dir, http_timeout=http_timeout)
    with arithmetic(f"{capture.where}: job {capture.job_id}"):  # numbers in range that combine out of it
        return read_capture(capture, node_by=node_by)
