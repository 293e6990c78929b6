"""The small threaded HTTP server behind the daemon's and the controller's
/metrics and probes: routes are plain functions from a request body to a reply."""

import json
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

Reply = tuple[int, str, bytes]
"""(status code, content type, body)."""
Route = Callable[[bytes], Reply]


def split_address(text: str, flag: str) -> tuple[str, int]:
    """`HOST:PORT` of a flag; an empty host means every interface."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise SystemExit(f"{flag}: {text!r} must be HOST:PORT, e.g. 127.0.0.1:8080")
    return host or "0.0.0.0", int(port)


def json_reply(code: int, doc: Any) -> Reply:
    return code, "application/json", json.dumps(doc, sort_keys=True).encode()


def metrics_reply(registry: CollectorRegistry) -> Reply:
    return 200, CONTENT_TYPE_LATEST, generate_latest(registry)


class HTTPEndpoint:
    """Serves `routes`, keyed by (method, path), on HOST:PORT (port 0 picks one)."""

    def __init__(self, host: str, port: int, routes: Mapping[tuple[str, str], Route]) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_DELETE(self) -> None:
                self._serve("DELETE")

            def _serve(self, method: str) -> None:
                route = routes.get((method, self.path))
                if route is None:
                    self._reply(*json_reply(404, {"error": f"{method} {self.path} not found"}))
                    return
                length = int(self.headers.get("Content-Length") or 0)
                self._reply(*route(self.rfile.read(length) if length else b""))

            def _reply(self, code: int, ctype: str, body: bytes) -> None:
                """Answer; a client that hung up (probe timeout) is not an error."""
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def log_message(self, format: str, *args: object) -> None:
                return

        try:
            self.httpd = ThreadingHTTPServer((host, port), Handler)
        except OSError as err:
            raise SystemExit(
                f"--http-address: cannot listen on {host}:{port} ({err.strerror}); "
                "pick a free port, or port 0 for any"
            ) from err
        self.httpd.daemon_threads = True
        self.port: int = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5.0)
