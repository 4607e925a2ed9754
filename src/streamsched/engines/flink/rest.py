"""The live JobManager: REST client, consistent snapshots, live capture and ``read``."""

from __future__ import annotations

import math
import re
import time
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote, urlsplit

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
from streamsched.engines.rest_client import Deadline, HTTPStatusError, get_json
from streamsched.errors import InputError


class FlinkRest:
    """A JobManager's REST API (``http://host:8081``): JSON over ``urllib`` with a timeout;
    an unreachable server or an HTTP error is one ``InputError``."""

    def __init__(self, url: str, timeout: float = 10.0, deadline: Deadline | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise InputError(f"--url: {url!r} is not an http(s) URL of a Flink JobManager")
        if not (timeout > 0 and math.isfinite(timeout)):
            raise InputError(f"--timeout: {timeout!r}; must be a positive number of seconds")
        self.url = url.rstrip("/")
        self.timeout = timeout
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


def fetch_interval(rest: FlinkRest) -> float:
    """``metrics.fetcher.update-interval`` of the JobManager, seconds (default 10)."""
    try:
        config = rest.get("/jobmanager/config")
    except HTTPStatusError:
        return DEFAULT_FETCH_INTERVAL_S
    for item in config if isinstance(config, list) else []:
        if isinstance(item, dict) and item.get("key") == "metrics.fetcher.update-interval":
            text = str(item.get("value", "")).strip().lower()
            match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(ms|s|min)?", text)
            if match:
                scale = {"ms": 1e-3, "s": 1.0, "min": 60.0, None: 1e-3}[match.group(2)]
                return float(match.group(1)) * scale
    return DEFAULT_FETCH_INTERVAL_S


def _counters(job: Any) -> tuple:
    """The job's per-vertex IO counters (``/jobs/:jid``), all from the JobManager's cache."""
    out = []
    for vertex in job.get("vertices", []) if isinstance(job, dict) else []:
        metrics = vertex.get("metrics") or {}
        out.append((vertex.get("id"), metrics.get("read-records"), metrics.get("write-records"),
                    metrics.get("read-bytes"), metrics.get("write-bytes")))
    return tuple(out)


def take_snapshot(rest: FlinkRest, job_id: str, interval_s: float | None = None, poll_s: float = 0.2,
                  clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> Snapshot:
    """Every document of the job from one metric fetch of the JobManager, and the fetch time.

    Polls ``/jobs/:jid`` every ``poll_s`` until its counters change (the JobManager fetched
    metrics, asked by the poll before: that poll's time is the sample time; an idle job whose
    counters stay put for ``interval_s`` + 2 s is sampled at the last poll), then reads the
    plan, vertices, every subtask's metrics and the TaskManagers, and checks that the counters
    did not change meanwhile (else it starts over, at most three times).
    """
    interval_s = fetch_interval(rest) if interval_s is None else interval_s
    job_path = f"/jobs/{quote(job_id, safe='')}"
    where = f"{rest.url}{job_path}"
    command = getattr(rest, "deadline", None)
    for _attempt in range(3):
        t_prev = clock()
        seen = _counters(_check_job(rest.get(job_path), job_id, where))
        deadline = t_prev + interval_s + 2.0
        sample = None
        while sample is None:
            if command is not None and command.left() < poll_s:
                raise InputError(f"{rest.url}: the job's counters did not move within {command.describe()} "
                                 f"(metrics.fetcher.update-interval {interval_s:g} s)")
            sleep(poll_s)
            t_now = clock()
            job = _check_job(rest.get(job_path), job_id, where)
            if _counters(job) != seen:
                sample = t_prev
            elif t_now > deadline:
                sample = t_now
            t_prev = t_now
        documents = _read_job(rest, job_id, job)
        if _counters(rest.get(job_path)) == _counters(job):
            return Snapshot(sample, documents, rest.url)
    raise InputError(f"{rest.url}: the job's metrics changed while they were read, three times; "
                     f"is metrics.fetcher.update-interval shorter than a read of the job ({interval_s:g} s)?")


def _read_job(rest: FlinkRest, job_id: str, job: Any) -> dict[str, Any]:
    key = f"jobs/{job_id}"
    documents: dict[str, Any] = {key: job}
    try:
        documents["overview"] = rest.get("/overview")
    except HTTPStatusError:
        pass
    documents[f"{key}/plan"] = rest.get(f"/{quote(key, safe='/')}/plan")
    documents["taskmanagers"] = rest.get("/taskmanagers")
    get = ",".join(METRIC_NAMES)
    where = f"{rest.url}/{key}"
    for k, vertex in enumerate(_get(job, "vertices", where, list)):
        vid = _get(vertex, "id", f"{where}.vertices[{k}]", str)
        vkey = f"{key}/vertices/{vid}"
        details = rest.get(f"/{quote(vkey, safe='/')}")
        documents[vkey] = details
        for m, sub in enumerate(_get(details, "subtasks", f"{rest.url}/{vkey}", list)):
            index = _get(sub, "subtask", f"{rest.url}/{vkey}.subtasks[{m}]", int)
            mkey = f"{vkey}/subtasks/{index}/metrics"
            documents[mkey] = rest.get(f"/{quote(mkey, safe='/')}?get={get}")
    return documents


#: Seconds a whole live read may take by default (``read-engine flink --timeout``): the window,
#: the wait for the JobManager's next metrics fetch (10 s by default) and the documents.
READ_TIMEOUT_S = 60.0


def capture_live(url: str, job_id: str | None = None, window_s: float = 10.0, timeout: float = READ_TIMEOUT_S,
                 poll_s: float = 0.2, save_dir: str | Path | None = None) -> Capture:
    """Snapshots of a running job: one, or two ``window_s`` apart (``window_s`` > 0, the
    default: rates from counter differences). ``job_id`` defaults to the only running job;
    ``save_dir`` keeps the responses (:func:`save_capture`)."""
    if not (window_s >= 0 and math.isfinite(window_s)):
        raise InputError(f"--window: {window_s!r}; must be a number of seconds >= 0")
    if window_s >= timeout:
        raise InputError(f"--window {window_s:g} s does not fit in --timeout {timeout:g} s (the whole read); "
                         f"give a longer --timeout")
    rest = FlinkRest(url, timeout, Deadline(timeout))
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
         window_s: float = 10.0, timeout: float = READ_TIMEOUT_S, node_by: str = "taskmanager",
         save_dir: str | Path | None = None) -> FlinkReading:
    """A live JobManager (``url``, ``job_id`` optional) or a saved capture (``directory``)."""
    if (url is None) == (directory is None):
        raise InputError("give either --url URL [--job-id JID] (a live Flink JobManager) or --dir DIR (saved responses)")
    if directory is not None:
        if job_id is not None:
            raise InputError("--job-id goes with --url; a saved capture names its job")
        capture = load_capture(directory)
    else:
        capture = capture_live(url, job_id, window_s, timeout, save_dir=save_dir)
    return read_capture(capture, node_by=node_by)
