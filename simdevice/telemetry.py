"""What a simulated server reports, per core and per chip, as the exporter
publishes it (neuron-monitor style), and the counters it is read from.

`server.py` runs the jobs and tells `ServerCounters` what happened (rates
changed, a job finished, an ECC event, bytes sent over NeuronLink);
`ServerCounters.report` turns that into a `ServerTelemetry`.
"""

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from simdevice.faults import Fault, FaultKind
from simdevice.isa import QUEUE_NAMES
from simdevice.timing import ProgramTiming
from simdevice.topology import RackSpec

LATENCY_SAMPLES = 256  # per core
UTILIZATION_TAU = 1.0  # seconds, the averaging time constant of utilization
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


class ServerCounters:
    """Every counter of one server: per core as arrays (row = core, in
    `places` order), per chip as plain numbers.

    Between events every core runs at constant rates, so the rate counters
    are settled lazily: only when rates change or someone reads them, in a
    few vector operations whatever the number of cores.
    """

    def __init__(self, spec: RackSpec, server: int, since: float) -> None:
        self._server = server
        self._generation = spec.generation
        self._hbm_bytes_total = spec.chip.hbm_bytes
        self._chips = spec.chips_per_server
        self.places = [(c, k) for c in range(self._chips) for k in range(spec.chip.cores)]
        self._row = {place: row for row, place in enumerate(self.places)}
        cores, engines = len(self.places), len(QUEUE_NAMES)
        self.since = since
        self.utilization = np.zeros(cores)
        self.engine_busy = np.zeros((cores, engines))
        self.busy_seconds = np.zeros((cores, engines))
        self.flops = np.zeros(cores)
        self.dma_bytes = np.zeros(cores)
        self._util_rate = np.zeros(cores)  # what utilization tends to
        self._busy_rate = np.zeros((cores, engines))
        self._flops_rate = np.zeros(cores)
        self._dma_rate = np.zeros(cores)
        self._completed = [0] * cores
        self._failed = [0] * cores
        self._latencies: list[deque[float]] = [deque(maxlen=LATENCY_SAMPLES) for _ in range(cores)]
        ecc_kinds = [k.value for k in FaultKind if k.value.startswith("ecc-")]
        self._ecc = [dict.fromkeys(ecc_kinds, 0) for _ in range(self._chips)]
        self._link_bytes = [0.0] * self._chips

    def rows(self, cores: Iterable[tuple[int, int]]) -> npt.NDArray[np.intp]:
        """The counter rows of (local chip, physical core) places."""
        return np.asarray([self._row[p] for p in cores], dtype=np.intp)

    def _settle(self, now: float) -> None:
        dt = now - self.since
        if dt <= 0:
            return
        self.busy_seconds += self._busy_rate * dt
        self.flops += self._flops_rate * dt
        self.dma_bytes += self._dma_rate * dt
        decay = math.exp(-dt / UTILIZATION_TAU)
        self.utilization = self._util_rate + (self.utilization - self._util_rate) * decay
        self.engine_busy = self._busy_rate + (self.engine_busy - self._busy_rate) * decay
        self.since = now

    def set_rates(
        self,
        jobs: list[tuple[npt.NDArray[np.intp], float, ProgramTiming]],
        peak: float,
        now: float,
    ) -> None:
        """From `now` on, each job's core rows run its program at `work` iterations/s."""
        self._settle(now)
        for rate in (self._util_rate, self._busy_rate, self._flops_rate, self._dma_rate):
            rate.fill(0.0)
        for rows, work, compute in jobs:
            self._util_rate[rows] = work * compute.flops / peak
            self._busy_rate[rows] = np.asarray(compute.busy) * work
            self._flops_rate[rows] = work * compute.flops
            self._dma_rate[rows] = work * compute.dma_bytes

    def job_finished(self, cores: Iterable[tuple[int, int]], state: str, latency: float) -> None:
        """A job on `cores` ended in `state`, `latency` seconds after it was submitted."""
        for place in cores:
            row = self._row[place]
            if state == "succeeded":
                self._completed[row] += 1
                self._latencies[row].append(latency)
            elif state == "failed":
                self._failed[row] += 1

    def fault_injected(self, fault: Fault) -> None:
        """Counts an ECC event; other faults show in health only."""
        if fault.ecc:
            self._ecc[fault.chip][fault.kind.value] += 1

    def link_sent(self, chips: Iterable[int], sent: float) -> None:
        """Each of `chips` sent `sent` more bytes over NeuronLink."""
        for c in chips:
            self._link_bytes[c] += sent

    def report(
        self,
        now: float,
        running: Iterable[tuple[Sequence[tuple[int, int]], int, int]],
        jobs: Mapping[tuple[int, int], str | None],
        hung: set[tuple[int, int]],
        health: Sequence[ChipHealth],
    ) -> ServerTelemetry:
        """The server at `now`: `running` holds each running job's cores, the
        HBM bytes each of them keeps and the SBUF bytes each uses; `jobs` the
        job on each core, `hung` the hung cores, `health` each chip's."""
        hbm = [0] * self._chips
        sbuf: dict[tuple[int, int], int] = {}
        for cores, hbm_bytes, sbuf_bytes in running:
            for place in cores:
                hbm[place[0]] += hbm_bytes
                sbuf[place] = sbuf_bytes
        self._settle(now)
        cores_out = tuple(
            CoreTelemetry(
                chip=c,
                core=k,
                utilization=float(self.utilization[row]),
                engine_busy=dict(zip(QUEUE_NAMES, self.engine_busy[row].tolist(), strict=True)),
                busy_seconds=dict(zip(QUEUE_NAMES, self.busy_seconds[row].tolist(), strict=True)),
                flops=float(self.flops[row]),
                sbuf_bytes_used=sbuf.get((c, k), 0),
                dma_bytes=float(self.dma_bytes[row]),
                jobs_completed=self._completed[row],
                jobs_failed=self._failed[row],
                latencies=tuple(self._latencies[row]),
                job=jobs[(c, k)],
                hung=(c, k) in hung,
            )
            for row, (c, k) in enumerate(self.places)
        )
        chips = tuple(
            ChipTelemetry(
                chip=c,
                hbm_bytes_used=min(hbm[c], self._hbm_bytes_total),
                hbm_bytes_total=self._hbm_bytes_total,
                ecc=dict(self._ecc[c]),
                link_bytes=self._link_bytes[c],
                health=health[c],
            )
            for c in range(self._chips)
        )
        return ServerTelemetry(now, self._server, self._generation, cores_out, chips)
