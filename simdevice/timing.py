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
from dataclasses import dataclass, replace
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from simdevice.isa import (
    DTYPES,
    EXP,
    IN_PSUM,
    IS_ACTIVATION,
    NARROW,
    PARTITIONS,
    TRANSCENDENTAL_OTHER,
    TWO_INPUTS,
    CapacityError,
    Op,
    Program,
    ProgramError,
    Queue,
    contraction_tiles,
)
from simdevice.topology import ChipSpec

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class CoreTiming:
    """Timing constants of one NeuronCore generation; docs/simulator.md lists
    each with its source (`make validate-sim` writes that table)."""

    pe_clock: float  # Hz, the 128x128 systolic array
    # A matmul occupies the array max(min(floor, stationary columns), moving
    # columns) cycles, times the dtype's cycles per column (FP32 takes 4
    # passes); absent dtype = no such matmul on this core.
    matmul_floor_cycles: int
    matmul_cycles_per_column: Mapping[str, float]
    stationary_load_speedup: float  # LoadStationary vs a matmul of the same free size
    engine_clock: Mapping[str, float]  # Hz per engine: vector, scalar, gpsimd
    # elements per partition per cycle
    vector_rate: float  # 32-bit operands
    vector_narrow_rate: float  # every operand BF16/FP16/FP8, all in SBUF
    vector_psum_rate: float  # the narrow rate when an operand is in PSUM
    vector_exp_rate: float  # the fast exponential (0: none, emulated)
    scalar_rate: float  # activations (any function: lookup tables), 32-bit copies
    scalar_narrow_rate: float  # BF16/FP16/FP8 copy and tensor_scalar
    gpsimd_rate: float
    emulated_transcendental_rate: float  # table functions off the scalar engine
    elementwise_floor_cycles: int
    dma_engine_bandwidth: float  # bytes/s per DMA engine
    dma_fixed_latency: float  # seconds per transfer
    dma_half_efficiency_bytes: float  # bytes per partition at which efficiency is 50%
    dma_outstanding: int  # transfers in flight per core

    def peak_flops(self, dtype: str = "bf16", sparsity: str = "dense") -> float:
        """Dense-equivalent peak of one core: 128 x 128 PEs, each doing one
        multiply-add per contraction tile per cycle, at the dtype's column rate."""
        tiles = contraction_tiles(dtype, sparsity)
        macs = PARTITIONS * PARTITIONS * tiles / self.matmul_cycles_per_column[dtype]
        return 2.0 * macs * self.pe_clock


_V4_MATMUL = {"fp32": 4.0, "tf32": 1.0, "bf16": 1.0, "fp16": 1.0, "fp8": 1.0}

_V4 = CoreTiming(
    pe_clock=2.4e9,
    matmul_floor_cycles=64,
    matmul_cycles_per_column=MappingProxyType({**_V4_MATMUL, "mxfp8": 1.0, "mxfp4": 1.0}),
    stationary_load_speedup=4.0,
    engine_clock=MappingProxyType({"vector": 1.2e9, "scalar": 1.2e9, "gpsimd": 1.2e9}),
    vector_rate=2.0,
    vector_narrow_rate=4.0,
    vector_psum_rate=2.0,
    vector_exp_rate=4.0,
    scalar_rate=1.0,
    scalar_narrow_rate=2.0,
    gpsimd_rate=1.0,
    emulated_transcendental_rate=0.25,
    elementwise_floor_cycles=64,
    dma_engine_bandwidth=38.4e9,
    dma_fixed_latency=1.3e-6,
    dma_half_efficiency_bytes=256.0,
    dma_outstanding=16,
)
"""NeuronCore-v4 (Trainium3); v3 differs only where it says so below."""

CORE_TIMING: Mapping[str, CoreTiming] = MappingProxyType(
    {
        "neuroncore-v4": _V4,
        "neuroncore-v3": replace(
            _V4,
            matmul_cycles_per_column=MappingProxyType(_V4_MATMUL),
            engine_clock=MappingProxyType({"vector": 0.96e9, "scalar": 1.2e9, "gpsimd": 1.2e9}),
            vector_exp_rate=0.0,
            scalar_narrow_rate=1.0,
            dma_engine_bandwidth=27.2e9,
        ),
        # Trainium4 from announced ratios to Trainium3 only: at least 3x FP8,
        # 6x FP4 and 4x the memory bandwidth (its DMA engines keep up with it).
        "neuroncore-trn4-whatif": replace(
            _V4,
            matmul_cycles_per_column=MappingProxyType(
                {**_V4_MATMUL, "fp8": 1.0 / 3, "mxfp8": 1.0 / 3, "mxfp4": 1.0 / 6}
            ),
            dma_engine_bandwidth=4 * _V4.dma_engine_bandwidth,
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
    op, a, b, c = cols.op, cols.a, cols.b, cols.c
    busy = np.zeros(len(op))
    latency = np.zeros(len(op))

    dma = op <= Op.DMA_ACCUMULATE
    busy[dma] = a[dma] / (bandwidth * dma_efficiency(b[dma], t))
    latency[dma] = t.dma_fixed_latency

    matmul = op == Op.MULTIPLY_MOVING
    if matmul.any():
        dtype_code = (b[matmul] // 16).astype(np.int64)
        per_column = np.zeros(len(DTYPES))
        for dtype, cycles in t.matmul_cycles_per_column.items():
            per_column[DTYPES.index(dtype)] = cycles
        cost = per_column[dtype_code]
        if (cost == 0).any():
            bad = DTYPES[int(dtype_code[cost == 0][0])]
            raise ProgramError(
                f"dtype: {chip.core_version} has no {bad} matmul; "
                f"supported: {', '.join(t.matmul_cycles_per_column)}"
            )
        floor = np.minimum(t.matmul_floor_cycles, c[matmul])
        busy[matmul] = cost * np.maximum(a[matmul], floor) / t.pe_clock
    transpose = op == Op.TRANSPOSE
    busy[transpose] = (
        np.maximum(a[transpose], np.minimum(t.matmul_floor_cycles, c[transpose])) / t.pe_clock
    )
    pe = matmul | transpose
    # the result leaves the array once the data has crossed its rows and the
    # stationary's columns (fill and drain)
    latency[pe] = (PARTITIONS + c[pe]) / t.pe_clock
    stationary = op == Op.LOAD_STATIONARY
    busy[stationary] = c[stationary] / t.stationary_load_speedup / t.pe_clock

    elementwise = op >= Op.TENSOR_TENSOR
    elementwise &= op != Op.NOP
    if elementwise.any():
        busy[elementwise] = _elementwise_seconds(
            t, cols.queue[elementwise], a[elementwise], b[elementwise].astype(np.int64)
        )
    return busy, latency


def _elementwise_seconds(
    t: CoreTiming, queue: npt.NDArray[np.int64], free: FloatArray, cost: npt.NDArray[np.int64]
) -> FloatArray:
    """Vector/scalar/gpsimd busy time: elements read over elements per cycle,
    at least the instruction floor, at the engine's clock."""
    function = cost & (EXP | TRANSCENDENTAL_OTHER)
    narrow = (cost & NARROW) > 0
    on_vector, on_scalar = queue == Queue.VECTOR, queue == Queue.SCALAR
    vector = np.where(narrow, t.vector_narrow_rate, t.vector_rate)
    vector = np.where((cost & IN_PSUM) > 0, np.minimum(vector, t.vector_psum_rate), vector)
    fast_exp = t.vector_exp_rate or t.emulated_transcendental_rate
    vector = np.where(function == EXP, fast_exp, vector)
    scalar_fast = narrow & ((cost & IS_ACTIVATION) == 0)
    scalar = np.where(scalar_fast, t.scalar_narrow_rate, t.scalar_rate)
    rate = np.where(on_vector, vector, np.where(on_scalar, scalar, t.gpsimd_rate))
    emulated = (function == TRANSCENDENTAL_OTHER) & ~on_scalar
    emulated |= (function == EXP) & (queue == Queue.GPSIMD)
    rate = np.where(emulated, t.emulated_transcendental_rate, rate)
    elements = free * np.where((cost & TWO_INPUTS) > 0, 2.0, 1.0)
    cycles = np.maximum(elements / rate, t.elementwise_floor_cycles)
    clock = np.where(
        on_vector,
        t.engine_clock["vector"],
        np.where(on_scalar, t.engine_clock["scalar"], t.engine_clock["gpsimd"]),
    )
    seconds: FloatArray = cycles / clock
    return seconds


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
    tensor = int(Queue.TENSOR)
    sync_last = 0.0  # Sync/DMA completions stay in order
    tensor_start = 0.0  # a LoadStationary runs in the background of this matmul
    outstanding = core_timing(chip).dma_outstanding
    in_flight: list[float] = []  # completion times of the Sync queue, in order
    starts: list[float] = []
    ends: list[float] = []
    add_start, add_end = starts.append, ends.append
    background = (program.columns().op == Op.LOAD_STATIONARY).tolist()
    for q, waits, sig, busy, latency, behind in zip(
        program.queue,
        program.waits,
        program.signal,
        busy_s.tolist(),
        latency_s.tolist(),
        background,
        strict=True,
    ):
        s = tensor_start if behind else free[q]
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
        else:
            e = s + busy
            if not behind or e > free[q]:
                free[q] = e
            if q == tensor and not behind:
                tensor_start = s
            e += latency
        add_start(s)
        add_end(e)
        if sig >= 0:
            add_event(e)
    duration = max(ends + free) if n else 0.0
    cols = program.columns()
    # a LoadStationary overlaps the matmul before it: not extra engine time
    foreground = np.where(cols.op == Op.LOAD_STATIONARY, 0.0, busy_s)
    busy_per_queue = np.bincount(cols.queue, weights=foreground, minlength=len(Queue))
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
    return timing, np.asarray(starts), np.asarray(ends)


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
