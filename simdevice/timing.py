"""How long a program takes on one core: a pure function of the program.

Durations come from the instruction descriptors, computed per op with numpy;
then one pass in program order (a topological order, since waits only name
earlier signals) plays the five in-order queues against each other:

    start = max(queue free, every awaited semaphore's signal time)
    compute queues: end = start + duration, the queue is free at end
    Sync/DMA queue: the engines are busy for bytes / (bandwidth x efficiency),
        the transfer completes a fixed latency later, completions stay in
        order, and at most `dma_outstanding` transfers are in flight.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from simdevice.isa import (
    DTYPES,
    PARTITIONS,
    SPARSITY,
    CapacityError,
    Op,
    Program,
    ProgramError,
    Queue,
)
from simdevice.topology import ChipSpec

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class CoreTiming:
    """Timing constants of one NeuronCore generation (docs/simulator.md, Timing rules)."""

    pe_clock: float  # Hz, the 128x128 systolic array
    matmul_floor_cycles: int  # successive matmuls are spaced at least this much
    # moving columns per PE cycle by dtype (BF16 = 1); absent = unsupported
    tensor_rate: Mapping[str, float]
    max_sparse_rate: float  # structured sparsity speeds up to this many columns/cycle
    engine_clock: float  # Hz, vector / scalar / gpsimd
    elementwise_floor_cycles: int
    transcendental_cycles: int  # per element on vector/gpsimd (1 on scalar's LUTs)
    dma_engine_bandwidth: float  # bytes/s per DMA engine
    dma_fixed_latency: float  # seconds per transfer
    dma_half_efficiency_bytes: float  # bytes per partition at which efficiency is 50%
    dma_outstanding: int  # transfers in flight per core

    def peak_flops(self, dtype: str = "bf16") -> float:
        """Dense peak of one core: 128 x 128 MACs x 2 FLOPs x clock x rate."""
        return 2.0 * PARTITIONS * PARTITIONS * self.pe_clock * self.tensor_rate[dtype]


CORE_TIMING: Mapping[str, CoreTiming] = MappingProxyType(
    {
        "neuroncore-v4": CoreTiming(
            pe_clock=2.4e9,
            matmul_floor_cycles=64,
            tensor_rate=MappingProxyType(
                {
                    "fp32": 0.25,
                    "tf32": 1.0,
                    "bf16": 1.0,
                    "fp16": 1.0,
                    "fp8": 2.0,
                    "mxfp8": 4.0,
                    "mxfp4": 4.0,
                }
            ),
            max_sparse_rate=4.0,
            engine_clock=1.2e9,
            elementwise_floor_cycles=64,
            transcendental_cycles=4,
            dma_engine_bandwidth=38.4e9,
            dma_fixed_latency=1.3e-6,
            dma_half_efficiency_bytes=256.0,
            dma_outstanding=16,
        ),
        "neuroncore-v3": CoreTiming(
            pe_clock=2.4e9,
            matmul_floor_cycles=64,
            tensor_rate=MappingProxyType(
                {"fp32": 0.25, "tf32": 1.0, "bf16": 1.0, "fp16": 1.0, "fp8": 2.0}
            ),
            max_sparse_rate=4.0,
            engine_clock=1.2e9,
            elementwise_floor_cycles=64,
            transcendental_cycles=4,
            dma_engine_bandwidth=27.2e9,
            dma_fixed_latency=1.3e-6,
            dma_half_efficiency_bytes=256.0,
            dma_outstanding=16,
        ),
    }
)


def core_timing(chip: ChipSpec) -> CoreTiming:
    if chip.core_version not in CORE_TIMING:
        raise ProgramError(
            f"core_version: no timing model for {chip.core_version!r}; "
            f"known: {', '.join(CORE_TIMING)}"
        )
    return CORE_TIMING[chip.core_version]


def core_dma_bandwidth(chip: ChipSpec) -> float:
    """What a core's own DMA engines can move, before sharing HBM."""
    return chip.dma_engines_per_core * core_timing(chip).dma_engine_bandwidth


def dma_efficiency(bytes_per_partition: FloatArray | float, timing: CoreTiming) -> FloatArray:
    """Fraction of the DMA peak a transfer reaches: small rows per partition pay
    per-descriptor overhead (<256 B poor, >=2 KiB near peak)."""
    b = np.asarray(bytes_per_partition, dtype=np.float64)
    result: FloatArray = b / (b + timing.dma_half_efficiency_bytes)
    return result


@dataclass(frozen=True)
class ProgramTiming:
    """What one run of a program costs on one core."""

    duration: float  # seconds, first issue to last completion
    instructions: int
    busy: tuple[float, ...]  # seconds each queue's engine is busy (QUEUE_NAMES order)
    flops: float  # BF16-equivalent FLOPs
    dma_bytes: float
    sbuf_bytes: int  # allocated across all partitions
    psum_bytes: int
    hbm_bytes: int

    @property
    def busy_ratio(self) -> tuple[float, ...]:
        return tuple(b / self.duration if self.duration else 0.0 for b in self.busy)


def check_capacity(program: Program, chip: ChipSpec) -> None:
    """SBUF and PSUM are finite: overflowing them is an error, not a wrap."""
    for memory, need, have in (
        ("sbuf", program.sbuf_bytes_per_partition(), chip.sbuf_bytes_per_core // PARTITIONS),
        ("psum", program.psum_bytes_per_partition(), chip.psum_bytes_per_core // PARTITIONS),
    ):
        if need > have:
            raise CapacityError(
                f"{memory}: {program.name} allocates {need} bytes per partition but a "
                f"{chip.core_version} core has {have}; use smaller or fewer tiles"
            )


def durations(
    program: Program, chip: ChipSpec, dma_bandwidth: float | None = None
) -> tuple[FloatArray, FloatArray]:
    """Per instruction: engine-busy seconds, and the DMA completion latency.

    `dma_bandwidth` is this core's share of HBM bandwidth (bytes/s); by default
    the core's own engines' peak.
    """
    t = core_timing(chip)
    peak_dma = core_dma_bandwidth(chip)
    bandwidth = peak_dma if dma_bandwidth is None else min(peak_dma, dma_bandwidth)
    if bandwidth <= 0:
        raise ProgramError(f"dma_bandwidth: must be > 0, got {dma_bandwidth}")
    cols = program.columns()
    op, a, b = cols.op, cols.a, cols.b
    busy = np.zeros(len(op))
    latency = np.zeros(len(op))

    dma = op <= Op.DMA_ACCUMULATE
    busy[dma] = a[dma] / (bandwidth * dma_efficiency(b[dma], t))
    latency[dma] = t.dma_fixed_latency

    pe = (op == Op.MULTIPLY_MOVING) | (op == Op.TRANSPOSE)
    if pe.any():
        code = b[pe].astype(np.int64)
        rate = np.zeros(len(DTYPES) * 16)
        for dtype, r in t.tensor_rate.items():
            for s, pattern in enumerate(SPARSITY):
                speedup = 1.0
                if pattern != "dense":
                    nonzero, group = (int(x) for x in pattern.split(":"))
                    speedup = group / nonzero
                rate[DTYPES.index(dtype) * 16 + s] = min(r * speedup, max(r, t.max_sparse_rate))
        r = rate[code]
        if (r == 0).any():
            bad = DTYPES[int(code[r == 0][0]) // 16]
            raise ProgramError(
                f"dtype: {chip.core_version} has no {bad} matmul; "
                f"supported: {', '.join(t.tensor_rate)}"
            )
        cycles = np.maximum(a[pe] / r, t.matmul_floor_cycles)
        busy[pe] = cycles / t.pe_clock

    elementwise = op >= Op.TENSOR_TENSOR
    elementwise &= op != Op.NOP
    per_element = np.where(b[elementwise] > 0, t.transcendental_cycles, 1)
    cycles = np.maximum(a[elementwise] * per_element, t.elementwise_floor_cycles)
    busy[elementwise] = cycles / t.engine_clock
    return busy, latency


def simulate(
    program: Program, chip: ChipSpec, dma_bandwidth: float | None = None
) -> tuple[ProgramTiming, FloatArray, FloatArray]:
    """Play the program; returns its timing and every instruction's start/end."""
    check_capacity(program, chip)
    busy_s, latency_s = durations(program, chip, dma_bandwidth)
    n = len(program)
    events: list[float] = []  # completion time of each signal, in program order
    add_event = events.append
    free = [0.0] * len(Queue)
    sync = int(Queue.SYNC)
    sync_last = 0.0  # Sync/DMA completions stay in order
    outstanding = core_timing(chip).dma_outstanding
    in_flight: list[float] = []  # completion times of the Sync queue, in order
    sync_starts: list[float] = []  # other queues start at end - busy
    ends: list[float] = []
    add_end = ends.append
    for q, waits, sig, busy, latency in zip(
        program.queue,
        program.waits,
        program.signal,
        busy_s.tolist(),
        latency_s.tolist(),
        strict=True,
    ):
        s = free[q]
        if waits:
            for event in waits:
                e = events[event]
                if e > s:  # noqa: PLR1730 - the hot loop; a call to max() costs more
                    s = e
        if q == sync:
            if len(in_flight) >= outstanding:
                e = in_flight[-outstanding]
                if e > s:  # noqa: PLR1730
                    s = e
            free[q] = s + busy
            e = free[q] + latency
            if e < sync_last:  # noqa: PLR1730
                e = sync_last
            sync_last = e
            in_flight.append(e)
            sync_starts.append(s)
        else:
            e = s + busy
            free[q] = e
        add_end(e)
        if sig >= 0:
            add_event(e)
    last = [*free[:sync], sync_last]
    duration = max(last) if n else 0.0
    cols = program.columns()
    busy_per_queue = np.bincount(cols.queue, weights=busy_s, minlength=len(Queue))
    timing = ProgramTiming(
        duration=duration,
        instructions=n,
        busy=tuple(float(x) for x in busy_per_queue),
        flops=float(cols.flops.sum()),
        dma_bytes=float(cols.a[cols.op <= Op.DMA_ACCUMULATE].sum()),
        sbuf_bytes=program.sbuf_bytes_per_partition() * PARTITIONS,
        psum_bytes=program.psum_bytes_per_partition() * PARTITIONS,
        hbm_bytes=program.hbm_bytes(),
    )
    end = np.asarray(ends)
    start = end - busy_s
    start[cols.queue == sync] = sync_starts
    return timing, start, end


def time_program(
    program: Program, chip: ChipSpec, dma_bandwidth: float | None = None
) -> ProgramTiming:
    return simulate(program, chip, dma_bandwidth)[0]


def combine(parts: list[tuple[ProgramTiming, float]]) -> ProgramTiming:
    """A linear combination of timings (programs run one after another, or a
    steady-state extrapolation); memory footprints take the largest part."""
    weighted = [(t, w) for t, w in parts if w != 0]
    if not weighted:
        raise ValueError("parts: need at least one timing with a non-zero weight")
    return ProgramTiming(
        duration=sum(t.duration * w for t, w in weighted),
        instructions=round(sum(t.instructions * w for t, w in weighted)),
        busy=tuple(
            sum(t.busy[q] * w for t, w in weighted) for q in range(len(weighted[0][0].busy))
        ),
        flops=sum(t.flops * w for t, w in weighted),
        dma_bytes=sum(t.dma_bytes * w for t, w in weighted),
        sbuf_bytes=max(t.sbuf_bytes for t, _ in weighted),
        psum_bytes=max(t.psum_bytes for t, _ in weighted),
        hbm_bytes=max(t.hbm_bytes for t, _ in weighted),
    )
