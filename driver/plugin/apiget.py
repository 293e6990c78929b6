"""GET requests to the apiserver over a small pool of kept-alive connections,
and watches, each on a connection of its own.

Every prepare reads its claim; through the generic client that read spends
more CPU in request building and connection pooling than in HTTP itself. This
takes host, TLS and credentials from the same client configuration (the
bearer token through its refresh hook, so rotated in-cluster tokens are
picked up) and does the request with http.client.

Connections are shared by all threads, not kept one per thread: a node's
gRPC worker threads live for the whole process, and a TLS connection held by
each of them (of every node a process hosts) grew the daemon's memory with
every burst that woke another worker.
"""

import contextlib
import http.client
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from typing import Any, Final
from urllib.parse import urlencode, urlsplit

from kubernetes import client


def tls_context(config: client.Configuration) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=config.ssl_ca_cert or None)
    if config.cert_file:
        context.load_cert_chain(config.cert_file, config.key_file or None)
    if not config.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


MAX_IDLE = 8
"""Idle connections kept; more concurrent GETs open more, closed after use."""

USER_AGENT: Final = "trainium-dra-node"
"""Sent with every request, so the apiserver's audit log tells the daemon's reads apart."""


class ApiError(RuntimeError):
    """The apiserver refused a read, or could not be reached."""


class Stream:
    """One long-running GET (a watch) on its own connection: its status, then its
    lines as they arrive. `interrupt` from another thread ends a blocked read;
    only the reading thread closes."""

    def __init__(self, conn: http.client.HTTPConnection, response: http.client.HTTPResponse):
        self._conn = conn
        self.response = response
        self.status = response.status

    def lines(self) -> Iterator[bytes]:
        while line := self.response.readline():
            if line.strip():
                yield line

    def interrupt(self) -> None:
        sock = self._conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed by the server
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._conn.close()


class ApiGetter:
    def __init__(self, config: client.Configuration, timeout: float = 30.0) -> None:
        if config.proxy:
            raise ValueError(
                f"kubeconfig: proxy-url {config.proxy} is not supported by the node daemon; "
                "let it reach the apiserver directly"
            )
        url = urlsplit(config.host)
        self.config = config
        self.https = url.scheme == "https"
        self.host = url.hostname or "localhost"
        self.port = url.port or (443 if self.https else 80)
        self.prefix: str = url.path.rstrip("/")
        self.timeout = timeout
        self.context = tls_context(config) if self.https else None
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def _take(self) -> http.client.HTTPConnection:
        """The most recently used idle connection, else a new one."""
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return self._connect(self.timeout)

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        if self.context is not None:
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=timeout, context=self.context
            )
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()

    def _drop_idle(self) -> None:
        with self._lock:
            dropped, self._idle = self._idle, []
        for conn in dropped:
            conn.close()

    def idle(self) -> int:
        """Connections kept open for the next request."""
        with self._lock:
            return len(self._idle)

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        auth = self.config.auth_settings().get("BearerToken")
        if auth and auth.get("value"):
            headers[auth["key"]] = auth["value"]
        return headers

    def _target(self, path: str, query: list[tuple[str, str]] | None) -> str:
        return self.prefix + path + (f"?{urlencode(query)}" if query else "")

    def get_json(self, path: str, query: list[tuple[str, str]] | None = None) -> Any:
        """GET `path` as JSON; None on 404, ApiError on any other failure."""
        try:
            status, body = self.get(path, query)
        except (OSError, http.client.HTTPException) as err:
            raise ApiError(f"GET {path}: {err}") from err
        if status == 404:
            return None
        if status >= 400:
            raise ApiError(f"GET {path}: HTTP {status}: {body[:300]!r}")
        return json.loads(body)

    def stream(self, path: str, query: list[tuple[str, str]], timeout: float) -> Stream:
        """Open a long-running GET; a read blocks at most `timeout` seconds."""
        conn = self._connect(timeout)
        try:
            conn.request("GET", self._target(path, query), headers=self.headers())
            return Stream(conn, conn.getresponse())
        except (OSError, http.client.HTTPException) as err:
            conn.close()
            raise ApiError(f"GET {path}: {err}") from err

    def get(self, path: str, query: list[tuple[str, str]] | None = None) -> tuple[int, bytes]:
        """(HTTP status, body); a connection the server closed is reopened once."""
        target = self._target(path, query)
        for attempt in (1, 2):
            conn = self._take()
            try:
                conn.request("GET", target, headers=self.headers())
                response = conn.getresponse()
                answer = response.status, response.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                if attempt == 2:
                    raise
                self._drop_idle()  # kept as long as this one: likely closed by the server too
                continue
            self._give_back(conn)
            return answer
        raise AssertionError("unreachable")
