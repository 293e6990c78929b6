"""The controller's metrics: its own work (reconciles, writes, the Lease) and,
per UltraServer, the figures of the status it last computed.

The rack figures come from the status, not from a second count, so
/metrics and `kubectl get ultraservers` never disagree. Only the replica
holding the Lease reconciles, so only it exports rack series.
"""

import threading
from collections.abc import Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from driver.jsontypes import JSON

RECONCILE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
CORE_STATES = ("total", "allocated", "free", "unhealthy")
CONDITIONS = ("Ready", "Published", "Degraded")


def rack_families(statuses: Mapping[str, JSON]) -> list[Metric]:
    """Gauges of each rack's last computed status, labelled by UltraServer name."""
    cores = GaugeMetricFamily(
        "trainium_dra_ultraserver_cores",
        "NeuronCores of the rack by state: total published, allocated to claims, free, "
        "and on unhealthy devices.",
        labels=["ultraserver", "state"],
    )
    devices = GaugeMetricFamily(
        "trainium_dra_ultraserver_devices",
        "Devices published for the rack, by kind (core, chip, server, ultraserver).",
        labels=["ultraserver", "kind"],
    )
    conditions = GaugeMetricFamily(
        "trainium_dra_ultraserver_condition",
        "1 when the rack's status condition of this type is True, else 0.",
        labels=["ultraserver", "type"],
    )
    pool = GaugeMetricFamily(
        "trainium_dra_ultraserver_pool_generation",
        "Generation of the rack's ResourceSlice pool; it moves when the pool is rewritten.",
        labels=["ultraserver"],
    )
    for rack, status in sorted(statuses.items()):
        for state in CORE_STATES:
            cores.add_metric([rack, state], float(status.get("cores", {}).get(state, 0)))
        for kind, count in sorted((status.get("devices") or {}).items()):
            devices.add_metric([rack, kind], float(count))
        present = {c["type"]: c["status"] for c in status.get("conditions") or []}
        for kind in CONDITIONS:
            conditions.add_metric([rack, kind], 1.0 if present.get(kind) == "True" else 0.0)
        pool.add_metric([rack], float((status.get("pool") or {}).get("generation", 0)))
    return [cores, devices, conditions, pool]


class RackStatuses(Collector):
    """The last status computed for each rack, exported at scrape time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._statuses: dict[str, JSON] = {}

    def record(self, rack: str, status: JSON) -> None:
        with self._lock:
            self._statuses[rack] = status

    def forget(self, rack: str) -> None:
        with self._lock:
            self._statuses.pop(rack, None)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            statuses = dict(self._statuses)
        yield from rack_families(statuses)


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.leader = Gauge(
            "trainium_dra_controller_leader",
            "1 while this replica holds the Lease and reconciles, else 0.",
            registry=registry,
        )
        self.pending_work = Gauge(
            "trainium_dra_controller_pending_work",
            "Racks and claims queued (now or after a delay) or being reconciled; 0 once "
            "the controller has caught up with every change it has seen.",
            registry=registry,
        )
        self.reconciles = Counter(
            "trainium_dra_controller_reconciles_total",
            "Rack reconciles, by result: ok, conflict (retried at once) or error (backed off).",
            ["result"],
            registry=registry,
        )
        self.duration = Histogram(
            "trainium_dra_controller_reconcile_duration_seconds",
            "Time to reconcile one rack: read, compute, write.",
            buckets=RECONCILE_BUCKETS,
            registry=registry,
        )
        self.writes = Counter(
            "trainium_dra_controller_writes_total",
            "Write requests the controller made, by resource and verb; a resync with "
            "nothing changed adds none.",
            ["resource", "verb"],
            registry=registry,
        )
        self.paths = Counter(
            "trainium_dra_controller_reconcile_paths_total",
            "Rack reconciles by path: unchanged (inputs digest and slice versions as last "
            "published: status only) or rebuilt (slices listed, rebuilt and compared).",
            ["path"],
            registry=registry,
        )
        self.slice_lists = Counter(
            "trainium_dra_controller_slice_lists_total",
            "Full LISTs of one rack's ResourceSlices; a resync with nothing changed adds none.",
            registry=registry,
        )
        self.racks = RackStatuses()
        registry.register(self.racks)

    def reconciled(self, result: str, seconds: float) -> None:
        self.reconciles.labels(result).inc()
        self.duration.observe(seconds)

    def wrote(self, resource: str, verb: str) -> None:
        self.writes.labels(resource, verb).inc()
