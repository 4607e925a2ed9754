"""JSON over HTTP for the engines' REST readers (Storm UI, Flink JobManager): ``urllib`` with
a timeout; whatever goes wrong is one :class:`~streamsched.errors.InputError` naming the URL."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from typing import Any, Callable

from streamsched.errors import InputError


class HTTPStatusError(InputError):
    """The server answered with an HTTP error status (so it is reachable)."""


def get_json(url: str, timeout: float, service: str, error_detail: Callable[[Any], str]) -> Any:
    """The JSON document at ``url``. ``service`` names the server in errors ("Storm UI");
    ``error_detail`` picks the message out of an error answer's JSON body ("" when none)."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        try:
            detail = error_detail(json.loads(exc.read() or b"{}"))
        except (ValueError, AttributeError, OSError, IndexError, TypeError):
            detail = ""
        raise HTTPStatusError(f"{url}: HTTP {exc.code} {exc.reason}" + (f": {detail}" if detail else "")) from None
    except urllib.error.URLError as exc:
        raise InputError(f"{url}: {service} unreachable ({exc.reason})") from None
    except (socket.timeout, TimeoutError):
        raise InputError(f"{url}: {service} unreachable (no answer within {timeout:g} s)") from None
    except (ValueError, OSError) as exc:
        raise InputError(f"{url}: {service} unreachable ({exc})") from None
    try:
        return json.loads(body)
    except ValueError:
        raise InputError(f"{url}: the answer is not JSON") from None
