"""GET requests to the apiserver over kept-alive connections, one per thread.

Every prepare reads its claim; through the generic client that read spends
more CPU in request building and connection pooling than in HTTP itself. This
takes host, TLS and credentials from the same client configuration (the
bearer token through its refresh hook, so rotated in-cluster tokens are
picked up) and does the request with http.client.
"""

import http.client
import ssl
import threading
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
        self.prefix = url.path.rstrip("/")
        self.timeout = timeout
        self.context = tls_context(config) if self.https else None
        self._local = threading.local()

    def _connection(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self.context is not None:
                conn = http.client.HTTPSConnection(
                    self.host, self.port, timeout=self.timeout, context=self.context
                )
            else:
                conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            self._local.conn = conn
        return conn

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        auth = self.config.auth_settings().get("BearerToken")
        if auth and auth.get("value"):
            headers[auth["key"]] = auth["value"]
        return headers

    def get(self, path: str, query: list[tuple[str, str]] | None = None) -> tuple[int, bytes]:
        """(HTTP status, body); a connection the server closed is reopened once."""
        target = self.prefix + path + (f"?{urlencode(query)}" if query else "")
        for attempt in (1, 2):
            conn = self._connection()
            try:
                conn.request("GET", target, headers=self.headers())
                response = conn.getresponse()
                return response.status, response.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")
