"""The daemon's HTTP endpoint: /metrics, /healthz (liveness) and /readyz (readiness).

Read-only on purpose: the chart exposes this port to Prometheus. The
simulator's controls, which can fail chips, listen elsewhere (simcontrol.py).
"""

from collections.abc import Sequence

from prometheus_client import CollectorRegistry

from driver.httpendpoint import HTTPEndpoint, Reply, json_reply, metrics_reply
from driver.node import probes
from driver.node.simnode import SimNode


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
            },
        )

    def probe(self, ready: bool) -> Reply:
        ok, details = probes.report(self.nodes, ready)
        return json_reply(200 if ok else 503, details)
