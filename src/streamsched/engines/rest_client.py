"""JSON over HTTP for the engines' REST readers and collectors (Storm UI, Flink JobManager).

One layer for every request:

- **deadlines**: a request ends by ``timeout`` seconds after it starts (default
  :data:`REQUEST_TIMEOUT_S`) *and* by its reading's :class:`Deadline` (a whole ``read-engine``
  read, or one poll of a collector: default :data:`READ_TIMEOUT_S`, never past the command's
  own end), whatever the server does (a timer shuts the socket at the deadline, so a server
  trickling one byte a second is cut off as surely as a silent one);
- **retries**: an HTTP 5xx answer, a reset or a connection closed mid-answer is tried again
  after 0.25 s, 0.5 s, 1 s (at most :data:`ATTEMPTS` tries, never past the deadline); a 4xx
  answer is not (the server said what is wrong);
- **size**: an answer above :data:`MAX_BODY` bytes is refused;
- whatever goes wrong is one :class:`~streamsched.errors.InputError` naming the URL.

``http.client`` from the standard library (``urllib`` has per-read timeouts only).
"""

from __future__ import annotations

import http.client
import json
import math
import socket
import threading
import time
from typing import Any, Callable
from urllib.parse import urlsplit

from streamsched.errors import InputError

#: Tries of one request (the first and the retries).
ATTEMPTS = 4
#: Seconds before the first retry; doubled for each further one.
BACKOFF_S = 0.25
#: Largest answer read, bytes.
MAX_BODY = 256 << 20
#: Seconds one request may take by default, its retries included (``--http-timeout``).
REQUEST_TIMEOUT_S = 10.0
#: Seconds one reading may take by default, every request and wait of it included: a whole
#: ``read-engine`` read (``--timeout``) or one poll of a collector (``--read-timeout``).
READ_TIMEOUT_S = 60.0
_RETRIED = (ConnectionResetError, ConnectionAbortedError, BrokenPipeError, http.client.RemoteDisconnected,
            http.client.IncompleteRead)


class HTTPStatusError(InputError):
    """The server answered with an HTTP error status (so it is reachable)."""


class Unreachable(InputError):
    """No answer: the server refused or dropped the connection, or gave no complete answer in
    time (an outage a caller may ride out, unlike an answer it did not expect)."""


class Deadline:
    """The end of a command or of one reading: ``seconds`` from now (None: no end of its own),
    never later than ``within`` (the command's end, for a reading)."""

    def __init__(self, seconds: float | None, option: str = "--timeout", within: Deadline | None = None) -> None:
        if seconds is not None and not (seconds > 0 and math.isfinite(seconds)):
            raise InputError(f"{option}: {seconds!r}; must be a positive number of seconds")
        self.seconds, self.option = seconds, option
        own = math.inf if seconds is None else time.monotonic() + seconds
        self.outer = within if within is not None and within.end < own else None
        self.end = own if self.outer is None else self.outer.end

    def left(self) -> float:
        return self.end - time.monotonic()

    def describe(self) -> str:
        """The option that sets this end (the command's, when it comes first)."""
        return self.outer.describe() if self.outer is not None else f"{self.option} {self.seconds:g} s"


def reading_deadline(seconds: float | None = None, option: str = "--timeout",
                     within: Deadline | None = None) -> Deadline:
    """One reading's end: ``seconds`` from now (None: :data:`READ_TIMEOUT_S`), never past ``within``."""
    return Deadline(READ_TIMEOUT_S if seconds is None else seconds, option, within)


def request_timeout(seconds: float | None = None) -> float:
    """Seconds per request: ``seconds``, or :data:`REQUEST_TIMEOUT_S` for None; checked."""
    seconds = REQUEST_TIMEOUT_S if seconds is None else seconds
    if not (seconds > 0 and math.isfinite(seconds)):
        raise InputError(f"--http-timeout: {seconds!r}; must be a positive number of seconds")
    return seconds


def get_json(url: str, timeout: float | None, service: str, error_detail: Callable[[Any], str],
             deadline: Deadline | None = None) -> Any:
    """The JSON document at ``url`` (module docstring), within ``timeout`` seconds (None:
    :data:`REQUEST_TIMEOUT_S`) and by ``deadline``. ``service`` names the server in errors
    ("Storm UI"); ``error_detail`` picks the message out of an error answer's JSON body."""
    timeout = request_timeout(timeout)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"{url}: not an http(s) URL")
    end = min(time.monotonic() + timeout, deadline.end if deadline is not None else math.inf)
    limit = (f"{timeout:g} s per request" if deadline is None or time.monotonic() + timeout <= deadline.end
             else deadline.describe())
    for attempt in range(ATTEMPTS):
        last = attempt == ATTEMPTS - 1
        try:
            status, reason, body = _get_once(parts, end)
        except _RETRIED as exc:
            if last or not _pause(attempt, end):
                raise Unreachable(f"{url}: {service} closed the connection ({type(exc).__name__}), "
                                  f"{attempt + 1} tries") from None
            continue
        except (socket.timeout, TimeoutError, _Expired):
            raise Unreachable(f"{url}: {service} gave no complete answer within {limit}") from None
        except OSError as exc:
            if time.monotonic() >= end:
                raise Unreachable(f"{url}: {service} gave no complete answer within {limit}") from None
            raise Unreachable(f"{url}: {service} unreachable ({exc.strerror or exc})") from None
        except (http.client.HTTPException, ValueError) as exc:
            raise InputError(f"{url}: {service} answered something that is not HTTP ({type(exc).__name__})") from None
        if status >= 500 and not last and _pause(attempt, end):
            continue
        if status >= 300:
            try:
                detail = error_detail(json.loads(body or b"{}"))
            except (ValueError, AttributeError, IndexError, TypeError):
                detail = ""
            tries = f" ({attempt + 1} tries)" if status >= 500 else ""
            raise HTTPStatusError(f"{url}: HTTP {status} {reason}{tries}" + (f": {detail}" if detail else ""))
        try:
            return json.loads(body)
        except ValueError:
            raise InputError(f"{url}: the answer is not JSON") from None
    raise AssertionError("unreachable")  # the last attempt returns or raises


class _Expired(Exception):
    """The deadline passed while the answer was read."""


def _pause(attempt: int, end: float) -> bool:
    """Sleep before retry ``attempt + 1``; False when that would pass the deadline."""
    wait = BACKOFF_S * (2 ** attempt)
    if time.monotonic() + wait >= end:
        return False
    time.sleep(wait)
    return True


def _get_once(parts, end: float) -> tuple[int, str, bytes]:
    left = end - time.monotonic()
    if left <= 0:
        raise _Expired
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname, parts.port, timeout=left)
    expired = threading.Event()
    sockets: list[socket.socket] = []  # the connection drops its socket once the answer starts

    def cut() -> None:
        expired.set()
        for sock in sockets + [conn.sock]:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except (OSError, AttributeError):
                pass

    timer = threading.Timer(left, cut)
    timer.daemon = True
    timer.start()
    try:
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn.connect()
        sockets.append(conn.sock)
        if expired.is_set():
            raise _Expired
        conn.request("GET", path, headers={"Accept": "application/json", "Connection": "close"})
        response = conn.getresponse()
        chunks, size = [], 0
        while chunk := response.read(1 << 16):
            size += len(chunk)
            if size > MAX_BODY:
                raise InputError(f"{parts.geturl()}: answer larger than {MAX_BODY >> 20} MiB; refused")
            chunks.append(chunk)
        if expired.is_set():
            raise _Expired
        return response.status, response.reason, b"".join(chunks)
    except (OSError, http.client.HTTPException):
        if expired.is_set() or time.monotonic() >= end:
            raise _Expired from None
        raise
    finally:
        timer.cancel()
        conn.close()
