"""The driver's own metrics: prepare/unprepare counts, errors, latency, prepared
claims, and the collectives each claim timed through the workload API.

The hardware metrics (neuron-monitor names) come from `telemetry.py`; both
register into the daemon's one registry served at /metrics.
"""

import threading

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

        collective_labels = ["node", "namespace", "claim", "operation"]
        self.collectives = Counter(
            "trainium_dra_node_collectives_total",
            "Collective operations a claim timed on its chips (warm-up and measured, each size).",
            collective_labels,
            registry=registry,
        )
        self.collective_bytes = Counter(
            "trainium_dra_node_collective_bytes_total",
            "Bytes of those operations: each one's size (nccom-test's size(B)).",
            collective_labels,
            registry=registry,
        )
        self.collective_seconds = Counter(
            "trainium_dra_node_collective_seconds_total",
            "Simulated seconds those operations take on the claim's fabric.",
            collective_labels,
            registry=registry,
        )
        self._lock = threading.Lock()
        self._claim_series: dict[tuple[str, str], set[tuple[str, str, str, str]]] = {}

    def observe(self, node: str, operation: str, seconds: float, ok: bool) -> None:
        self.requests.labels(node, operation).inc()
        if not ok:
            self.errors.labels(node, operation).inc()
        self.latency.labels(node, operation).observe(seconds)

    def set_prepared(self, node: str, count: int) -> None:
        self.prepared_claims.labels(node).set(count)

    def observe_collectives(
        self,
        node: str,
        claim: tuple[str, str, str],
        operation: str,
        *,
        count: int,
        size_bytes: float,
        seconds: float,
    ) -> None:
        """`count` operations of `claim` (uid, namespace, name), together
        `size_bytes` bytes and `seconds` of simulated time."""
        uid, namespace, name = claim
        labels = (node, namespace, name, operation)
        with self._lock:
            self._claim_series.setdefault((node, uid), set()).add(labels)
        self.collectives.labels(*labels).inc(count)
        self.collective_bytes.labels(*labels).inc(size_bytes)
        self.collective_seconds.labels(*labels).inc(seconds)

    def forget_claim(self, node: str, uid: str) -> None:
        """Drop an unprepared claim's series: a node exports at most its
        prepared claims' (one per core at most) times the six operations."""
        with self._lock:
            series = self._claim_series.pop((node, uid), set())
        for labels in series:
            for counter in (self.collectives, self.collective_bytes, self.collective_seconds):
                counter.remove(*labels)
