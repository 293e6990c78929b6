"""The daemon's HTTP endpoint: /metrics, /healthz (liveness), /readyz (readiness),
and the simulator's controls: /sim/v1/nodes (where each node listens) and
/sim/v1/faults (inject or clear hardware faults)."""

import json
import threading
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from driver.plugin import probes
from driver.plugin.node import SimNode
from simdevice.faults import FAULT_KINDS, Fault, FaultKind

FAULTS_PATH = "/sim/v1/faults"
NODES_PATH = "/sim/v1/nodes"


class StatusServer:
    def __init__(
        self, host: str, port: int, registry: CollectorRegistry, nodes: Sequence[SimNode]
    ) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/metrics":
                    body, ctype, code = generate_latest(registry), CONTENT_TYPE_LATEST, 200
                elif self.path in ("/healthz", "/readyz"):
                    ok, details = probes.report(owner.nodes, self.path == "/readyz")
                    body = json.dumps(details, sort_keys=True).encode()
                    ctype, code = "application/json", 200 if ok else 503
                elif self.path == NODES_PATH:
                    body = json.dumps([n.describe() for n in owner.nodes], sort_keys=True).encode()
                    ctype, code = "application/json", 200
                else:
                    body, ctype, code = b"not found\n", "text/plain", 404
                self._reply(code, ctype, body)

            def do_POST(self) -> None:
                self._fault(inject=True)

            def do_DELETE(self) -> None:
                self._fault(inject=False)

            def _fault(self, inject: bool) -> None:
                if self.path != FAULTS_PATH:
                    self._send(404, {"error": f"{self.path} not found"})
                    return
                length = int(self.headers.get("Content-Length") or 0)
                code, answer = owner.apply_fault(self.rfile.read(length), inject)
                self._send(code, answer)

            def _send(self, code: int, answer: Mapping[str, Any]) -> None:
                self._reply(code, "application/json", json.dumps(answer, sort_keys=True).encode())

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

        self.nodes = nodes
        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.port: int = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def apply_fault(self, body: bytes, inject: bool) -> tuple[int, dict[str, Any]]:
        """Inject (POST) or clear (DELETE) a simulated fault on one node's server."""
        try:
            doc = json.loads(body or b"{}")
            node = next((n for n in self.nodes if n.name == doc.get("node")), None)
            if node is None:
                names = ", ".join(n.name for n in self.nodes)
                return 404, {"error": f"node: {doc.get('node')!r} is not one of {names}"}
            kind = doc.get("kind")
            if kind not in FAULT_KINDS:
                return 422, {"error": f"kind: {kind!r} is not one of {', '.join(FAULT_KINDS)}"}
            fault = Fault(FaultKind(kind), int(doc["chip"]), doc.get("core"))
            (node.sim.inject if inject else node.sim.clear)(fault)
        except KeyError as err:
            return 422, {"error": f"{err.args[0]}: required"}
        except ValueError as err:
            return 422, {"error": str(err)}
        return 200, {
            "node": node.name,
            "health": {str(c): h.state for c, h in node.sim.chip_health().items()},
        }

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5.0)
