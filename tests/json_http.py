"""A local HTTP server for the REST readers' and collectors' tests: every GET is answered by
``answer(path parts, query string) -> (status, body bytes)``, one request at a time (under
``lock``, which a test also takes to change what ``answer`` serves). A misbehaving server:
``(status, body, seconds)`` sends the body one byte every ``seconds`` (after the lock is
released); a status of None closes the connection without an answer, after ``seconds`` of
silence when they are given (a server that never answers, while it answers other requests).
With ``write``, PUT, POST and PATCH are answered by ``write(method, path parts, query, body
bytes, headers) -> (status, body bytes)`` (``headers`` with ``path``: the path as sent); a
status of None closes the connection, after ``body`` seconds when that is a number."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse


def _close_or_send(handler: BaseHTTPRequestHandler, status, body, wait: float | None = None) -> bool:
    """Close without an answer (status None, after ``wait`` seconds) or send the headers of a
    JSON answer; True when the body is to be written."""
    if status is None:
        if wait:
            time.sleep(wait)
        handler.close_connection = True
        return False
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    return True


class JsonServer:
    def __init__(self, answer, write=None):
        self.lock = lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                url = urlparse(self.path)
                with lock:
                    status, body, *trickle = answer([unquote(p) for p in url.path.split("/") if p], url.query)
                if not _close_or_send(self, status, body, trickle[0] if trickle else None):
                    return
                if not trickle:
                    self.wfile.write(body)
                    return
                for k in range(len(body)):
                    try:
                        self.wfile.write(body[k:k + 1])
                        self.wfile.flush()
                    except OSError:
                        return
                    time.sleep(trickle[0])

            def do_write(self):
                url = urlparse(self.path)
                sent = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    status, body = write(self.command, [unquote(p) for p in url.path.split("/") if p], url.query,
                                         sent, {**self.headers, "path": self.requestline.split()[1]})
                if _close_or_send(self, status, body, body if isinstance(body, float) else None):
                    self.wfile.write(body)

            if write is not None:
                do_PUT = do_POST = do_PATCH = do_write  # noqa: N815 (http.server's names)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
