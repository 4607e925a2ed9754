"""A local HTTP server for the REST readers' and collectors' tests: every GET is answered by
``answer(path parts, query string) -> (status, body bytes)``, one request at a time (under
``lock``, which a test also takes to change what ``answer`` serves). A misbehaving server:
``(status, body, seconds)`` sends the body one byte every ``seconds`` (after the lock is
released); a status of None closes the connection without an answer, after ``seconds`` of
silence when they are given (a server that never answers, while it answers other requests)."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse


class JsonServer:
    def __init__(self, answer):
        self.lock = lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                url = urlparse(self.path)
                with lock:
                    status, body, *trickle = answer([unquote(p) for p in url.path.split("/") if p], url.query)
                if status is None:
                    if trickle:
                        time.sleep(trickle[0])
                    self.close_connection = True
                    return
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
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

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
