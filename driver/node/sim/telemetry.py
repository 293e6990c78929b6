"""Hardware metrics of every simulated node, mostly under neuron-monitor's names.

Per-engine utilization, device health and SBUF memory are the driver's own
additions (docs/node-daemon.md, Metrics, says which is which).

`node_metrics` is a pure function from one node's `ServerTelemetry` to metric
families; `TelemetryCollector` reads every node at scrape time. Labels: node,
ultraserver, chip, and neuroncore (the node-wide physical core index, chip
major, as neuron-monitor numbers cores).
"""

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from simdevice.telemetry import ServerTelemetry

ECC_EVENT_TYPES = {
    "ecc-corrected-hbm": "mem_ecc_corrected",
    "ecc-uncorrected-hbm": "mem_ecc_uncorrected",
    "ecc-corrected-sram": "sram_ecc_corrected",
    "ecc-uncorrected-sram": "sram_ecc_uncorrected",
}
HEALTH_VALUES = {"healthy": 0.0, "degraded": 1.0, "failed": 2.0}
PERCENTILES = (0, 1, 25, 50, 75, 99, 100)


@dataclass(frozen=True)
class NodeInfo:
    node: str
    ultraserver: str
    generation: str
    chip_name: str
    cores_per_chip: int


class TelemetrySource(Protocol):
    """What the collector needs of a node (SimNode satisfies it)."""

    def info(self) -> NodeInfo: ...

    def telemetry(self) -> ServerTelemetry: ...


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of `values` (non-empty)."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[rank]


def node_metrics(n: NodeInfo, t: ServerTelemetry) -> list[Metric]:
    base = ["node", "ultraserver"]
    ids = [n.node, n.ultraserver]
    cores_per_chip = n.cores_per_chip
    per_core = [*base, "chip", "neuroncore"]
    util = GaugeMetricFamily(
        "neuroncore_utilization_ratio",
        "NeuronCore utilization: BF16-equivalent FLOPs over BF16 peak (AWS definition).",
        labels=per_core,
    )
    engine = GaugeMetricFamily(
        "neuroncore_engine_utilization_ratio",
        "Busy ratio of one engine (tensor, vector, scalar, gpsimd, sync) of a NeuronCore.",
        labels=[*per_core, "engine"],
    )
    memory = GaugeMetricFamily(
        "neuron_runtime_memory_used_bytes",
        "Device memory in use: HBM per chip (neuron_device) and SBUF per chip (sbuf).",
        labels=[*base, "chip", "memory_location"],
    )
    status = CounterMetricFamily(
        "execution_status",
        "Finished executions by status (completed, completed_with_err).",
        labels=[*base, "chip", "status_type"],
    )
    errors = CounterMetricFamily(
        "execution_errors",
        "Failed executions by error type (hardware: a fault stopped them).",
        labels=[*base, "chip", "error_type"],
    )
    latency = GaugeMetricFamily(
        "execution_latency_seconds",
        "Submit-to-finish latency of recent executions on the node, by percentile.",
        labels=[*base, "percentile"],
    )
    ecc = CounterMetricFamily(
        "hardware_ecc_events",
        "ECC events by type (mem_ecc_corrected, mem_ecc_uncorrected, sram_ecc_*).",
        labels=[*base, "chip", "event_type"],
    )
    health = GaugeMetricFamily(
        "neuron_device_health_state",
        "Chip health: 0 healthy, 1 degraded, 2 failed.",
        labels=[*base, "chip"],
    )
    info = GaugeMetricFamily(
        "neuron_hardware_info",
        "Simulated hardware of the node (value is always 1).",
        labels=[
            *base,
            "generation",
            "neuron_device_type",
            "neuron_device_count",
            "neuroncore_per_device_count",
        ],
    )
    info.add_metric([*ids, n.generation, n.chip_name, str(len(t.chips)), str(cores_per_chip)], 1.0)
    done: dict[int, list[float]] = {}
    sbuf: dict[int, int] = {}
    latencies: list[float] = []
    for core in t.cores:
        labels = [*ids, str(core.chip), str(core.chip * cores_per_chip + core.core)]
        util.add_metric(labels, core.utilization)
        for name, busy in sorted(core.engine_busy.items()):
            engine.add_metric([*labels, name], busy)
        counts = done.setdefault(core.chip, [0.0, 0.0])
        counts[0] += core.jobs_completed
        counts[1] += core.jobs_failed
        sbuf[core.chip] = sbuf.get(core.chip, 0) + core.sbuf_bytes_used
        latencies.extend(core.latencies)
    for chip in t.chips:
        chip_ids = [*ids, str(chip.chip)]
        memory.add_metric([*chip_ids, "neuron_device"], chip.hbm_bytes_used)
        memory.add_metric([*chip_ids, "sbuf"], sbuf.get(chip.chip, 0))
        completed, failed = done.get(chip.chip, [0.0, 0.0])
        status.add_metric([*chip_ids, "completed"], completed)
        status.add_metric([*chip_ids, "completed_with_err"], failed)
        errors.add_metric([*chip_ids, "hardware"], failed)
        for kind, event in ECC_EVENT_TYPES.items():
            ecc.add_metric([*chip_ids, event], chip.ecc.get(kind, 0))
        health.add_metric(chip_ids, HEALTH_VALUES.get(chip.health.state, 2.0))
    if latencies:
        for p in PERCENTILES:
            latency.add_metric([*ids, f"p{p}"], percentile(latencies, p))
    return [util, engine, memory, status, errors, latency, ecc, health, info]


class TelemetryCollector(Collector):
    def __init__(self, nodes: Iterable[TelemetrySource]) -> None:
        self.nodes = list(nodes)

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}
        for node in self.nodes:
            for family in node_metrics(node.info(), node.telemetry()):
                merged = families.setdefault(family.name, family)
                if merged is not family:
                    merged.samples.extend(family.samples)
        yield from families.values()
