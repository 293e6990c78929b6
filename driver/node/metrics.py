"""The driver's own metrics: prepare/unprepare counts, errors, latency, prepared claims.

The hardware metrics (neuron-monitor names) come from `telemetry.py`; both
register into the daemon's one registry served at /metrics.
"""

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LATENCY_BUCKETS = (
    *(
        ms / 1e3
        for ms in (0.5, 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10, 12.5, 15, 20, 25, 30, 40, 50, 75)
    ),
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
)
"""Fine below 100 ms, where a prepare lands: a p99 read from the histogram must
tell a 2 ms call from a 3 ms one, or two plugins cannot be compared by it."""


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
