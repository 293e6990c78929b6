"""The small HTTP endpoint behind the daemon's and the controller's /metrics
and probes: routes are plain functions from a request body to a reply.

It runs on uvicorn, the server the node daemon's workload API already uses,
so the project has one HTTP stack.
"""

import asyncio
import json
import socket
import threading
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

Reply = tuple[int, str, bytes]
"""(status code, content type, body)."""
Route = Callable[[bytes], Reply]
Guard = Callable[[Mapping[str, str]], Reply | None]
"""Looks at a request's headers (lower-case names): None lets it through, a reply refuses it."""
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


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
    """Serves `routes`, keyed by (method, path), on HOST:PORT (port 0 picks one)
    or on an already bound `listener` (a unix socket, say).

    The port is bound here, so a taken port fails before anything starts and
    `port` is known at once; `start` serves it from a background thread.
    Routes run in worker threads, so a slow probe does not hold up /metrics.
    A `guard` sees every request's headers first and may refuse it.
    """

    def __init__(
        self,
        host: str,
        port: int,
        routes: Mapping[tuple[str, str], Route],
        *,
        flag: str = "--http-address",
        listener: socket.socket | None = None,
        guard: Guard | None = None,
    ) -> None:
        self._routes = dict(routes)
        self._guard = guard
        if listener is None:
            try:
                listener = _listen(host, port)
            except OSError as err:
                raise SystemExit(
                    f"{flag}: cannot listen on {host}:{port} ({err.strerror}); "
                    "pick a free port, or port 0 for any"
                ) from err
        self._socket = listener
        self.port: int = listener.getsockname()[1] if listener.family != socket.AF_UNIX else 0
        config = uvicorn.Config(
            self._app,
            interface="asgi3",
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            proxy_headers=False,
        )
        self._server = uvicorn.Server(config)
        server, sock = self._server, self._socket
        self._thread = threading.Thread(target=lambda: server.run(sockets=[sock]), daemon=True)

    async def _app(self, scope: Message, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        query = scope["query_string"].decode("latin-1")
        path = scope["raw_path"].decode("latin-1") + (f"?{query}" if query else "")
        route = self._routes.get((scope["method"], path))
        refusal = self._guard(_headers(scope)) if self._guard is not None else None
        if refusal is not None:
            code, ctype, payload = refusal
        elif route is None:
            code, ctype, payload = json_reply(404, {"error": f"{scope['method']} {path} not found"})
        else:
            code, ctype, payload = await asyncio.to_thread(route, body)
        headers = [(b"content-type", ctype.encode()), (b"content-length", b"%d" % len(payload))]
        await send({"type": "http.response.start", "status": code, "headers": headers})
        await send({"type": "http.response.body", "body": payload, "more_body": False})

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)
        self._socket.close()


def _headers(scope: Message) -> dict[str, str]:
    headers: list[tuple[bytes, bytes]] = scope["headers"]
    return {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in headers}


def _listen(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock
