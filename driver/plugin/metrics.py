"""The driver's own metrics: prepare/unprepare counts, errors, latency, prepared claims.

The hardware metrics (neuron-monitor names) come from `telemetry.py`; both
register into the daemon's one registry served at /metrics.
"""

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class DriverMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "trainium_dra_node_requests_total",
            "Claims the kubelet asked to prepare or unprepare, by operation.",
            ["node", "operation"],
            registry=registry,
        )
        self.errors = Counter(
            "trainium_dra_node_request_errors_total",
            "Claims whose prepare or unprepare returned an error, by operation.",
            ["node", "operation"],
            registry=registry,
        )
        self.latency = Histogram(
            "trainium_dra_node_request_duration_seconds",
            "Time to prepare or unprepare one claim, including apiserver reads.",
            ["node", "operation"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.prepared_claims = Gauge(
            "trainium_dra_node_prepared_claims",
            "Claims recorded in the node's checkpoint (prepared or being prepared).",
            ["node"],
            registry=registry,
        )

    def observe(self, node: str, operation: str, seconds: float, ok: bool) -> None:
        self.requests.labels(node, operation).inc()
        if not ok:
            self.errors.labels(node, operation).inc()
        self.latency.labels(node, operation).observe(seconds)

    def set_prepared(self, node: str, count: int) -> None:
        self.prepared_claims.labels(node).set(count)
