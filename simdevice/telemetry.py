"""What a simulated server reports: per core and per chip, as the exporter
publishes it (neuron-monitor style)."""

from collections.abc import Mapping
from dataclasses import dataclass

HEALTH_STATES: tuple[str, ...] = ("healthy", "degraded", "failed")


@dataclass(frozen=True)
class ChipHealth:
    state: str  # one of HEALTH_STATES
    reason: str  # empty when healthy


@dataclass(frozen=True)
class CoreTelemetry:
    chip: int  # local chip index
    core: int  # physical core on the chip
    # BF16-equivalent FLOPs over BF16 peak (AWS's definition), averaged with a
    # 1 s time constant so short jobs show up between scrapes.
    utilization: float
    engine_busy: Mapping[str, float]  # busy ratio per engine, same averaging
    busy_seconds: Mapping[str, float]  # cumulative busy seconds per engine
    flops: float  # cumulative BF16-equivalent FLOPs
    sbuf_bytes_used: int
    dma_bytes: float  # cumulative bytes moved by the core's DMA
    jobs_completed: int
    jobs_failed: int
    latencies: tuple[float, ...]  # seconds from submit to finish of recent jobs, oldest first
    job: str | None  # the running job
    hung: bool


@dataclass(frozen=True)
class ChipTelemetry:
    chip: int
    hbm_bytes_used: int
    hbm_bytes_total: int
    ecc: Mapping[str, int]  # event counts by fault kind (ecc-* only)
    link_bytes: float  # cumulative bytes sent over NeuronLink
    health: ChipHealth


@dataclass(frozen=True)
class ServerTelemetry:
    time: float  # simulated time (the clock's units) the figures are for
    server: int
    generation: str
    cores: tuple[CoreTelemetry, ...]
    chips: tuple[ChipTelemetry, ...]
