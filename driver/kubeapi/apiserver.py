"""Requests to the apiserver over a small pool of kept-alive connections, and
watches, each on a connection of its own.

Every prepare reads its claim, and a rack's reconcile writes megabytes of
slices; through the generic client both spend more CPU in request building,
body encoding and connection pooling than in HTTP itself. This takes host,
TLS and credentials from the same client configuration (the bearer token
through its refresh hook, so rotated in-cluster tokens are picked up) and
does the request with http.client, on bodies that are plain JSON.

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
from collections.abc import Iterator, Mapping
from typing import Any, Final
from urllib.parse import urlencode, urlsplit

from kubernetes import client

JSON_MEDIA: Final = "application/json"
MERGE_PATCH: Final = "application/merge-patch+json"
MAX_IDLE: Final = 8
"""Idle connections kept; more concurrent requests open more, closed after use."""

Query = Mapping[str, str]


class ApiError(RuntimeError):
    """The apiserver answered with an error: `status` is its HTTP status (0 for
    an error event of a watch), `reason` and `body` the rest of its answer."""

    def __init__(self, message: str, status: int = 0, reason: str = "", body: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.body = body


class ApiUnreachableError(ConnectionError):
    """The apiserver could not be reached, or broke off its answer: there is
    no answer to act on, only the request to try again."""


def tls_context(config: client.Configuration) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=config.ssl_ca_cert or None)
    if config.cert_file:
        context.load_cert_chain(config.cert_file, config.key_file or None)
    if not config.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


class Stream:
    """One long-running GET (a watch) on its own connection, its events decoded
    as they arrive. `interrupt` from another thread ends a blocked read; only
    the reading thread closes (on leaving a `with` block, or by `close`)."""

    def __init__(self, conn: http.client.HTTPConnection, response: http.client.HTTPResponse):
        self._conn = conn
        self.response = response

    def events(self) -> Iterator[Any]:
        while line := self.response.readline():
            if line.strip():
                yield json.loads(line)

    def interrupt(self) -> None:
        sock = self._conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed by the server
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class ApiServer:
    """The apiserver of `config`; every request but a watch's waits at most
    `timeout` seconds, and says it comes from `user_agent` (so the apiserver's
    audit log tells the components apart)."""

    def __init__(self, config: client.Configuration, user_agent: str, timeout: float) -> None:
        if config.proxy:
            raise ValueError(
                f"kubeconfig: proxy-url {config.proxy} is not supported by trainium-dra; "
                "let it reach the apiserver directly"
            )
        url = urlsplit(config.host)
        self.config = config
        self.user_agent = user_agent
        self.https = url.scheme == "https"
        self.host = url.hostname or "localhost"
        self.port = url.port or (443 if self.https else 80)
        self.prefix: str = url.path.rstrip("/")
        self.timeout = timeout
        self.context = tls_context(config) if self.https else None
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def _take(self) -> tuple[http.client.HTTPConnection, bool]:
        """The most recently used idle connection, else a new one; and whether it was idle."""
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        return self._connect(self.timeout), False

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

    def headers(self, accept: str, content_type: str | None = None) -> dict[str, str]:
        headers = {"Accept": accept, "User-Agent": self.user_agent}
        if content_type is not None:
            headers["Content-Type"] = content_type
        auth = self.config.auth_settings().get("BearerToken")
        if auth and auth.get("value"):
            headers[auth["key"]] = auth["value"]
        return headers

    def _target(self, path: str, query: Query | None) -> str:
        return self.prefix + path + (f"?{urlencode(query)}" if query else "")

    def call(
        self,
        method: str,
        path: str,
        query: Query | None = None,
        body: Mapping[str, Any] | None = None,
        *,
        content_type: str = JSON_MEDIA,
        accept: str = JSON_MEDIA,
    ) -> Any:
        """`body` sent as JSON, the answer decoded; ApiError when the apiserver
        refuses, ApiUnreachableError when it does not answer."""
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = self.headers(accept, None if data is None else content_type)
        try:
            status, reason, answer = self.exchange(method, self._target(path, query), headers, data)
        except (OSError, http.client.HTTPException) as err:
            raise ApiUnreachableError(f"{method} {path}: {err}") from err
        if not 200 <= status < 300:
            text = answer.decode(errors="replace")
            raise ApiError(f"{method} {path}: HTTP {status}: {text[:300]}", status, reason, text)
        return json.loads(answer)

    def get_json(self, path: str, query: Query | None = None) -> Any:
        """GET `path` as JSON; None on 404, else as `call`."""
        try:
            return self.call("GET", path, query)
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    def exchange(
        self, method: str, target: str, headers: Mapping[str, str], data: bytes | None = None
    ) -> tuple[int, str, bytes]:
        """(HTTP status, reason, body). A failed GET is tried once more on a new
        connection, and so is a write on a kept connection that failed other
        than by timing out: the server had closed that connection while it was
        idle, so the write never reached it."""
        for attempt in (1, 2):
            conn, kept = self._take()
            try:
                conn.request(method, target, body=data, headers=headers)
                response = conn.getresponse()
                answer = response.status, response.reason, response.read()
            except (OSError, http.client.HTTPException) as err:
                conn.close()
                again = method == "GET" or (kept and not isinstance(err, TimeoutError))
                if attempt == 2 or not again:
                    raise
                self._drop_idle()  # kept as long as this one: likely closed by the server too
                continue
            self._give_back(conn)
            return answer
        raise AssertionError("unreachable")

    def stream(self, path: str, query: Query, timeout: float, accept: str = JSON_MEDIA) -> Stream:
        """Open a long-running GET; a read blocks at most `timeout` seconds. An
        answer other than 2xx raises ApiError with its status."""
        conn = self._connect(timeout)
        try:
            conn.request("GET", self._target(path, query), headers=self.headers(accept))
            response = conn.getresponse()
            if 200 <= response.status < 300:
                return Stream(conn, response)
            text = response.read().decode(errors="replace")
        except (OSError, http.client.HTTPException) as err:
            conn.close()
            raise ApiUnreachableError(f"GET {path}: {err}") from err
        conn.close()
        raise ApiError(
            f"watch {path}: HTTP {response.status}: {text[:300]}",
            response.status,
            response.reason,
            text,
        )
