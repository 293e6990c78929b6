"""Workloads users submit (JSON-able specs) and what they cost on a set of cores.

`parse_workload` validates a spec; `workload_timing` turns a workload placed on
n cores of m chips into per-core program timings plus a communication phase.
Work is split evenly over the cores (rows of a GEMM or row-wise op, heads of
attention, data parallel tokens of a training step); every core runs the same
program, so one core's timing stands for all. Timings are pure functions of
their arguments and are cached, so a rack of identical jobs is timed once.
"""

import itertools
import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from simdevice.collectives import time_collective
from simdevice.fabric import first_chips
from simdevice.isa import (
    ACTIVATIONS,
    DTYPE_BYTES,
    DTYPES,
    MOVING_FREE_MAX,
    PARTITIONS,
    SPARSITY,
    Program,
    ProgramError,
    collector_paused,
)
from simdevice.kernels.attention import attention
from simdevice.kernels.gemm import block_rows, gemm, output_dtype
from simdevice.kernels.rowwise import elementwise, layernorm, softmax
from simdevice.players import play
from simdevice.step import StepProgram, layer_programs
from simdevice.timing import ProgramTiming, combine
from simdevice.topology import ChipSpec, RackSpec

KINDS: tuple[str, ...] = (
    "gemm",
    "elementwise",
    "softmax",
    "layernorm",
    "attention",
    "train-step",
    "all-reduce",
    "all-gather",
)
MAX_ITERATIONS = 10**9
MAX_TOKENS = 65536  # per core in a training step (its weight-gradient GEMMs' K)


class WorkloadError(ValueError):
    """A workload spec that cannot run; the message starts with the field."""


@dataclass(frozen=True)
class _Field:
    kind: type
    default: Any  # _REQUIRED when the field must be given
    choices: tuple[Any, ...] = ()
    minimum: int = 1


_REQUIRED = object()
_ITER = _Field(int, 1)
# Run one core's program through the numpy data path and report its error
# against float64 (small shapes only; see simdevice.checks).
_NUMERICS = _Field(bool, False)
FIELDS: dict[str, dict[str, _Field]] = {
    "gemm": {
        "m": _Field(int, _REQUIRED),
        "n": _Field(int, _REQUIRED),
        "k": _Field(int, _REQUIRED),
        "dtype": _Field(str, "bf16", DTYPES),
        "sparsity": _Field(str, "dense", SPARSITY),
        "iterations": _ITER,
        "numerics": _NUMERICS,
    },
    "elementwise": {
        "rows": _Field(int, _REQUIRED),
        "cols": _Field(int, _REQUIRED),
        "dtype": _Field(str, "fp32", ("fp32", "bf16")),
        "func": _Field(str, "gelu", ACTIVATIONS),
        "iterations": _ITER,
        "numerics": _NUMERICS,
    },
    "softmax": {
        "rows": _Field(int, _REQUIRED),
        "cols": _Field(int, _REQUIRED),
        "dtype": _Field(str, "fp32", ("fp32", "bf16")),
        "iterations": _ITER,
        "numerics": _NUMERICS,
    },
    "layernorm": {
        "rows": _Field(int, _REQUIRED),
        "cols": _Field(int, _REQUIRED),
        "dtype": _Field(str, "fp32", ("fp32", "bf16")),
        "iterations": _ITER,
        "numerics": _NUMERICS,
    },
    "attention": {
        "seq": _Field(int, _REQUIRED),
        "head_dim": _Field(int, 128),
        "heads": _Field(int, 1),
        "batch": _Field(int, 1),
        "dtype": _Field(str, "bf16", ("bf16", "fp16")),
        "iterations": _ITER,
        "numerics": _NUMERICS,
    },
    "train-step": {
        "hidden": _Field(int, _REQUIRED),
        "seq": _Field(int, _REQUIRED),
        "batch": _Field(int, 1),
        "layers": _Field(int, 1),
        "heads": _Field(int, 0, minimum=0),  # 0: hidden // 128
        "dtype": _Field(str, "bf16", ("bf16", "fp16")),
        "chips": _Field(int, 0, minimum=0),  # data-parallel chips; 0: the job's chips
        "iterations": _ITER,
    },
    "all-reduce": {
        "bytes": _Field(int, _REQUIRED),
        "chips": _Field(int, 0, minimum=0),
        "iterations": _ITER,
    },
    "all-gather": {
        "bytes": _Field(int, _REQUIRED),
        "chips": _Field(int, 0, minimum=0),
        "iterations": _ITER,
    },
}


@dataclass(frozen=True)
class Workload:
    """A validated workload: its kind and every parameter, defaults filled in."""

    kind: str
    params: tuple[tuple[str, Any], ...]

    def __getitem__(self, name: str) -> Any:
        return dict(self.params)[name]

    @property
    def iterations(self) -> int:
        value: int = self["iterations"]
        return value

    @property
    def communicates(self) -> bool:
        """Does it move data between chips (and so needs the chip's links)?"""
        return self.kind in ("train-step", "all-reduce", "all-gather")

    def spec(self) -> dict[str, Any]:
        return {"kind": self.kind, **dict(self.params)}


def parse_workload(spec: Mapping[str, Any]) -> Workload:
    """Validate a JSON-able spec such as
    {"kind": "gemm", "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16", "iterations": 10}."""
    if not isinstance(spec, Mapping):
        raise WorkloadError(f"spec: must be a mapping, got {type(spec).__name__}")
    kind = spec.get("kind")
    if not isinstance(kind, str) or kind not in FIELDS:  # a list or object is not hashable
        raise WorkloadError(f"kind: {kind!r} is not one of {', '.join(KINDS)}")
    fields = FIELDS[kind]
    unknown = sorted(set(spec) - set(fields) - {"kind"})
    if unknown:
        raise WorkloadError(
            f"{unknown[0]}: not a field of {kind}; valid fields: {', '.join(fields)}"
        )
    params = []
    for name, f in fields.items():
        value = spec.get(name, f.default)
        if value is _REQUIRED:
            raise WorkloadError(f"{name}: required for {kind}")
        if f.kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise WorkloadError(f"{name}: must be an integer, got {value!r}")
            limit = MAX_ITERATIONS if name == "iterations" else 1 << 40
            if not f.minimum <= value <= limit:
                raise WorkloadError(f"{name}: must be in [{f.minimum}, {limit}], got {value}")
        elif f.kind is bool and not isinstance(value, bool):
            raise WorkloadError(f"{name}: must be true or false, got {value!r}")
        elif f.kind is str and not isinstance(value, str):
            raise WorkloadError(f"{name}: must be a string, got {value!r}")
        if f.choices and value not in f.choices:
            raise WorkloadError(f"{name}: {value!r} is not one of {', '.join(f.choices)}")
        params.append((name, value))
    workload = Workload(kind, tuple(params))
    _check_shape(workload)
    return workload


def _check_shape(w: Workload) -> None:
    if w.kind == "attention" and w["head_dim"] > 128:
        raise WorkloadError(f"head_dim: at most 128, got {w['head_dim']}")
    if w.kind == "train-step":
        heads = w["heads"] or max(1, w["hidden"] // 128)
        if w["hidden"] % heads:
            raise WorkloadError(f"heads: {heads} does not divide hidden={w['hidden']}")
        if w["hidden"] // heads > 128:
            raise WorkloadError(f"heads: head size {w['hidden'] // heads} > 128; use more heads")
        if w["hidden"] > 8192:
            raise WorkloadError(f"hidden: at most 8192 per core, got {w['hidden']}")
        if w["seq"] * w["batch"] > MAX_TOKENS:
            raise WorkloadError(
                f"seq: seq * batch = {w['seq'] * w['batch']} tokens per core; at most {MAX_TOKENS}"
            )


@dataclass(frozen=True)
class WorkloadTiming:
    """What a workload does on its cores and when: one iteration on each core
    (compute), then between chips (comm), `iterations` times."""

    compute: ProgramTiming
    comm: float  # seconds of inter-chip communication per iteration
    comm_bytes: float  # bytes each chip sends per iteration
    iterations: int
    hbm_bytes: int = 0  # what each core keeps in HBM (see hbm_footprint)

    @property
    def iteration_time(self) -> float:
        return self.compute.duration + self.comm

    @property
    def duration(self) -> float:
        return self.iterations * self.iteration_time


_IDLE = ProgramTiming(0.0, 0, (0.0,) * 5, 0.0, 0.0, 0, 0, 0)


@dataclass
class TimingWork:
    """What timing workloads has played through the event-driven model since
    `clear_caches` (a cached timing counts once)."""

    programs: int = 0
    instructions: int = 0


TIMED = TimingWork()


@lru_cache(maxsize=4096)
def _timed(
    builder: Callable[..., Program],
    args: tuple[Any, ...],
    chip: ChipSpec,
    dma_bandwidth: float | None,
) -> ProgramTiming:
    with collector_paused():
        timing = play(builder, args, chip, dma_bandwidth)
    TIMED.programs += 1
    TIMED.instructions += timing.instructions
    return timing


# Along one loop dimension a kernel's cost settles into a repeating pattern
# after a few steps, but the pattern may span several steps (the GEMM
# alternates two sets of PSUM banks, so its step costs alternate). Up to
# EXACT_STEPS steps the whole program is timed; beyond, programs of 1, 2, ...
# steps are timed until the step costs repeat with a period of at most
# MAX_PERIOD, and whole periods are extrapolated.
EXACT_STEPS = 16
FIRST_SAMPLES = 6
MAX_SAMPLES = 16
MAX_PERIOD = 4
SAME = 1e-9  # relative: step costs this close are the same


def steady_state(duration: Callable[[int], float]) -> tuple[int, int]:
    """(start, period) of a cost sequence: from `start` steps on, every
    `period` further steps cost the same. The period is the smallest one the
    last samples confirm on every phase (plus one more step); `start` walks
    back as far as it holds. If no period shows within MAX_SAMPLES steps, the
    longest period is taken over the last samples (an average, not exact)."""
    samples = [duration(j) for j in range(1, FIRST_SAMPLES + 1)]
    while True:
        step = [b - a for a, b in itertools.pairwise(samples)]
        same = [
            [abs(step[i] - step[i + p]) <= SAME * samples[-1] for i in range(len(step) - p)]
            for p in range(MAX_PERIOD + 1)
        ]
        for p in range(1, MAX_PERIOD + 1):
            first = len(step) - 2 * p - 1
            if first >= 0 and all(same[p][first:]):
                while first > 0 and same[p][first - 1]:
                    first -= 1
                return first + 1, p
        if len(samples) == MAX_SAMPLES:
            return MAX_SAMPLES - MAX_PERIOD, MAX_PERIOD
        samples.append(duration(len(samples) + 1))


def _extrapolated(total: int, unit: int, timed: Callable[[int], ProgramTiming]) -> ProgramTiming:
    """Timing of `total` along one loop dimension of `unit`-sized steps: the
    whole program up to EXACT_STEPS steps, else the program of `base` steps
    (same phase of the period as the full count) plus the whole periods
    between them, each costing what one period costs in the steady state."""
    full, rest = divmod(total, unit)
    if full <= EXACT_STEPS:
        return timed(total)
    start, period = steady_state(lambda j: timed(j * unit).duration)
    base = start + (full - start) % period
    cycles = (full - base) // period
    one = timed(start * unit)
    later = timed((start + period) * unit)
    return combine([(timed(base * unit + rest), 1.0), (later, cycles), (one, -cycles)])


def gemm_timing(
    m: int,
    n: int,
    k: int,
    *,
    dtype: str,
    sparsity: str,
    chip: ChipSpec,
    dma_bandwidth: float | None = None,
) -> ProgramTiming:
    """GEMM timing from small programs: extrapolated over row blocks and over
    512-column tiles, so timing a large GEMM stays cheap."""

    def rows(mm: int) -> ProgramTiming:
        return _extrapolated(
            n,
            MOVING_FREE_MAX,
            lambda nn: _timed(gemm, (mm, nn, k, dtype, sparsity), chip, dma_bandwidth),
        )

    return _extrapolated(m, block_rows(k, dtype), rows)


def attention_timing(
    seq: int,
    head_dim: int,
    heads: int,
    *,
    dtype: str,
    chip: ChipSpec,
    dma_bandwidth: float | None = None,
) -> ProgramTiming:
    """`heads` attention heads run as one program (the next head loads and
    starts while the last one finishes), extrapolated over heads."""
    return _extrapolated(
        heads, 1, lambda h: _timed(attention, (seq, head_dim, dtype, h), chip, dma_bandwidth)
    )


ROWWISE: dict[str, Callable[..., Program]] = {
    "elementwise": elementwise,
    "softmax": softmax,
    "layernorm": layernorm,
}


def rowwise_timing(
    builder: Callable[..., Program],
    rows: int,
    cols: int,
    *args: Any,
    chip: ChipSpec,
    dma_bandwidth: float | None = None,
) -> ProgramTiming:
    """Row-wise kernel timing, extrapolated over 128-row tiles."""
    return _extrapolated(
        rows, PARTITIONS, lambda r: _timed(builder, (r, cols, *args), chip, dma_bandwidth)
    )


def _share(total: int, parts: int) -> int:
    return max(1, math.ceil(total / parts))


def core_shape(workload: Workload, cores: int) -> dict[str, int]:
    """The problem one of `cores` cores works on (the work is split evenly)."""
    w = workload
    if w.kind == "gemm":
        return {"m": _share(w["m"], cores), "n": w["n"], "k": w["k"]}
    if w.kind in ("elementwise", "softmax", "layernorm"):
        return {"rows": _share(w["rows"], cores), "cols": w["cols"]}
    if w.kind == "attention":
        heads = _share(w["heads"] * w["batch"], cores)
        return {"seq": w["seq"], "head_dim": w["head_dim"], "heads": heads}
    raise WorkloadError(f"kind: {w.kind} has no single-core shape")


def hbm_footprint(workload: Workload, cores: int) -> tuple[int, str]:
    """Bytes one core keeps in HBM, and the spec field that sizes it. A training
    step keeps its weights and gradients (12 h^2 values per layer each) and
    its activations (about 16 h values per token per layer)."""
    w = workload
    if w.kind == "gemm":
        s = core_shape(w, cores)
        size = DTYPE_BYTES[w["dtype"]]
        out = DTYPE_BYTES[output_dtype(w["dtype"])]
        return math.ceil((s["m"] * s["k"] + s["k"] * s["n"]) * size + s["m"] * s["n"] * out), "m"
    if w.kind in ("elementwise", "softmax", "layernorm"):
        s = core_shape(w, cores)
        return math.ceil(2 * s["rows"] * s["cols"] * DTYPE_BYTES[w["dtype"]]), "rows"
    if w.kind == "attention":
        s = core_shape(w, cores)
        return s["heads"] * 4 * w["seq"] * w["head_dim"] * 2, "seq"
    if w.kind == "train-step":
        h, layers = w["hidden"], w["layers"]
        tokens = w["seq"] * w["batch"]
        return layers * (2 * 12 * h * h + 16 * h * tokens) * 2, "hidden"
    return w["bytes"], "bytes"


_TIMING_LOCK = threading.Lock()
"""Timing a workload is CPU-bound Python, so threads gain nothing by timing at
once; one at a time, the many servers of a rack that submit the same job at
the same moment time it once and read the rest from the cache."""


def workload_timing(
    workload: Workload, spec: RackSpec, cores: int, chips: int, dma_bandwidth: float | None = None
) -> WorkloadTiming:
    """What `workload` costs on `cores` cores spread over `chips` chips, each core
    drawing at most `dma_bandwidth` bytes/s from HBM."""
    with _TIMING_LOCK:
        return _cached_workload_timing(workload, spec, cores, chips, dma_bandwidth)


@lru_cache(maxsize=1024)
def _cached_workload_timing(
    workload: Workload, spec: RackSpec, cores: int, chips: int, dma_bandwidth: float | None
) -> WorkloadTiming:
    if cores < 1 or chips < 1:
        raise WorkloadError(f"cores: need at least one core on one chip, got {cores} on {chips}")
    footprint, field_name = hbm_footprint(workload, cores)
    per_chip = footprint * math.ceil(cores / chips)
    if per_chip > spec.chip.hbm_bytes:
        raise WorkloadError(
            f"{field_name}: the job keeps {per_chip / 2**30:.1f} GiB in the HBM of a chip, "
            f"which has {spec.chip.hbm_bytes / 2**30:.0f} GiB; use a smaller problem or more chips"
        )
    timing = _timing_by_kind(workload, spec, cores, chips, dma_bandwidth)
    return replace(timing, hbm_bytes=footprint)


def _timing_by_kind(
    workload: Workload, spec: RackSpec, cores: int, chips: int, dma_bandwidth: float | None
) -> WorkloadTiming:
    w, chip = workload, spec.chip
    try:
        if w.kind == "gemm":
            shape = core_shape(w, cores)
            compute = gemm_timing(
                shape["m"],
                shape["n"],
                shape["k"],
                dtype=w["dtype"],
                sparsity=w["sparsity"],
                chip=chip,
                dma_bandwidth=dma_bandwidth,
            )
        elif w.kind in ("elementwise", "softmax", "layernorm"):
            shape = core_shape(w, cores)
            extra = (w["func"],) if w.kind == "elementwise" else ()
            compute = rowwise_timing(
                ROWWISE[w.kind],
                shape["rows"],
                shape["cols"],
                w["dtype"],
                *extra,
                chip=chip,
                dma_bandwidth=dma_bandwidth,
            )
        elif w.kind == "attention":
            compute = attention_timing(
                w["seq"],
                w["head_dim"],
                core_shape(w, cores)["heads"],
                dtype=w["dtype"],
                chip=chip,
                dma_bandwidth=dma_bandwidth,
            )
        elif w.kind == "train-step":
            return _train_step_timing(w, spec, cores, chips, dma_bandwidth)
        else:
            participants = w["chips"] or chips
            coll = _collective(w.kind, spec, participants, w["bytes"])
            return WorkloadTiming(_IDLE, coll[0], coll[1], w.iterations)
    except ProgramError as err:
        raise WorkloadError(str(err)) from err
    return WorkloadTiming(compute, 0.0, 0.0, w.iterations)


def _collective(kind: str, spec: RackSpec, chips: int, nbytes: float) -> tuple[float, float]:
    """A collective over the rack's first `chips` chips (a job names how many
    chips take part, not which)."""
    try:
        t = time_collective(kind, spec, first_chips(spec, chips), nbytes)
    except ValueError as err:
        raise WorkloadError(str(err)) from err
    return t.duration, t.bytes_per_chip


def _fast_timing(p: StepProgram, chip: ChipSpec, dma_bandwidth: float | None) -> ProgramTiming:
    """A step program's timing by the fast path of its kernel."""
    if p.builder is gemm:
        m, n, k, dtype, sparsity = p.args
        return gemm_timing(
            m, n, k, dtype=dtype, sparsity=sparsity, chip=chip, dma_bandwidth=dma_bandwidth
        )
    if p.builder is attention:
        seq, head_dim, dtype, heads = p.args
        return attention_timing(
            seq, head_dim, heads, dtype=dtype, chip=chip, dma_bandwidth=dma_bandwidth
        )
    return rowwise_timing(p.builder, *p.args, chip=chip, dma_bandwidth=dma_bandwidth)


def train_step_programs(w: Workload) -> list[StepProgram]:
    """The programs of one layer of a train-step workload (see simdevice.step)."""
    heads = w["heads"] or max(1, w["hidden"] // 128)
    return layer_programs(w["hidden"], w["seq"], w["batch"], heads, w["dtype"])


def _train_step_timing(
    w: Workload, spec: RackSpec, cores: int, chips: int, dma_bandwidth: float | None
) -> WorkloadTiming:
    """Data parallel: every core runs the whole layer stack on its own tokens.
    Gradients (12 h^2 BF16 values per layer) are all-reduced over the
    data-parallel chips after the step."""
    layer = combine(
        [(_fast_timing(p, spec.chip, dma_bandwidth), p.runs) for p in train_step_programs(w)]
    )
    compute = combine([(layer, float(w["layers"]))])
    comm, sent = train_step_comm(w, spec, chips)
    return WorkloadTiming(compute, comm, sent, w.iterations)


def train_step_comm(w: Workload, spec: RackSpec, chips: int) -> tuple[float, float]:
    """Seconds and bytes per chip of a step's gradient all-reduce."""
    grad_bytes = 12.0 * w["hidden"] * w["hidden"] * 2 * w["layers"]
    return _collective("all-reduce", spec, w["chips"] or chips, grad_bytes)


def clear_caches() -> None:
    """Forget every cached program and workload timing (benchmarks measure cold
    timing)."""
    _cached_workload_timing.cache_clear()
    _timed.cache_clear()
    TIMED.programs = TIMED.instructions = 0
