"""The daemon's HTTP endpoint: /metrics, /healthz (liveness), /readyz (readiness),
and the simulator's controls: /sim/v1/nodes (where each node listens) and
/sim/v1/faults (inject or clear hardware faults)."""

import json
from collections.abc import Sequence

from prometheus_client import CollectorRegistry

from driver.httpendpoint import HTTPEndpoint, Reply, json_reply, metrics_reply
from driver.plugin import probes
from driver.plugin.node import SimNode
from simdevice.faults import FAULT_KINDS, Fault, FaultKind

FAULTS_PATH = "/sim/v1/faults"
NODES_PATH = "/sim/v1/nodes"


class StatusServer(HTTPEndpoint):
    def __init__(
        self, host: str, port: int, registry: CollectorRegistry, nodes: Sequence[SimNode]
    ) -> None:
        self.nodes = nodes
        super().__init__(
            host,
            port,
            {
                ("GET", "/metrics"): lambda _: metrics_reply(registry),
                ("GET", "/healthz"): lambda _: self.probe(ready=False),
                ("GET", "/readyz"): lambda _: self.probe(ready=True),
                ("GET", NODES_PATH): lambda _: json_reply(200, [n.describe() for n in self.nodes]),
                ("POST", FAULTS_PATH): lambda body: self.apply_fault(body, inject=True),
                ("DELETE", FAULTS_PATH): lambda body: self.apply_fault(body, inject=False),
            },
        )

    def probe(self, ready: bool) -> Reply:
        ok, details = probes.report(self.nodes, ready)
        return json_reply(200 if ok else 503, details)

    def apply_fault(self, body: bytes, inject: bool) -> Reply:
        """Inject (POST) or clear (DELETE) a simulated fault on one node's server."""
        try:
            doc = json.loads(body or b"{}")
            node = next((n for n in self.nodes if n.name == doc.get("node")), None)
            if node is None:
                names = ", ".join(n.name for n in self.nodes)
                problem = f"node: {doc.get('node')!r} is not one of {names}"
                return json_reply(404, {"error": problem})
            kind = doc.get("kind")
            if kind not in FAULT_KINDS:
                return json_reply(
                    422, {"error": f"kind: {kind!r} is not one of {', '.join(FAULT_KINDS)}"}
                )
            fault = Fault(FaultKind(kind), int(doc["chip"]), doc.get("core"))
            (node.sim.inject if inject else node.sim.clear)(fault)
        except KeyError as err:
            return json_reply(422, {"error": f"{err.args[0]}: required"})
        except ValueError as err:
            return json_reply(422, {"error": str(err)})
        return json_reply(
            200,
            {
                "node": node.name,
                "health": {str(c): h.state for c, h in node.sim.chip_health().items()},
            },
        )
