"""`make validate-sim`: run every validation case of the execution model and
write the figures into docs/simulator.md (between the validation and
constants markers) and benchmarks/results/sim-validation.json.

Every figure is computed here from simdevice; nothing in those tables is
typed by hand. The output is deterministic: a second run rewrites the same
bytes.
"""

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from simdevice.checks import MAX_ATTENTION_SEQ, MAX_ELEMENTS, MAX_GEMM_MACS, check
from simdevice.collectives import time_collective
from simdevice.fabric import first_chips
from simdevice.isa import (
    BF16_EQUIVALENT,
    MAX_CONTRACTION_TILES,
    MOVING_FREE_MAX,
    PARTITIONS,
    PSUM_BANK_BYTES,
    PSUM_BANKS,
    ProgramBuilder,
    contraction_tiles,
)
from simdevice.kernels.attention import attention
from simdevice.kernels.gemm import BLOCK_ROWS, block_rows, gemm
from simdevice.kernels.rowwise import elementwise
from simdevice.telemetry import UTILIZATION_TAU
from simdevice.timing import (
    CORE_TIMING,
    core_dma_bandwidth,
    core_timing,
    dma_efficiency,
    time_program,
)
from simdevice.topology import GENERATIONS, GiB, MiB, RackSpec, rack_spec
from simdevice.workloads import EXACT_STEPS, MAX_PERIOD, attention_timing, gemm_timing

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "simulator.md"
RESULTS = ROOT / "benchmarks" / "results" / "sim-validation.json"
TRN3 = rack_spec("trn3-gen2").chip
TRN2 = rack_spec("trn2").chip
LOW, HIGH = 64, 32768
MAX_INSTRUCTIONS = 120_000  # per exact run of a drawn GEMM shape
# The argument order of kernels.gemm.gemm(m, n, k): small K, wide N.
REPORTED = [(4096, 4096, 128), (512, 4096, 128), (512, 32768, 128), (256, 16384, 256)]
SWEEP = 150  # drawn shapes checked here (the tests check 50)
# Multi-head attention: the exact run of one program holding every head
# against one head's time multiplied by the number of heads.
ATTENTION_SEQS = (128, 512, 2048)
ATTENTION_HEADS = (2, 4, 8)
ATTENTION_HEAD_DIM = 128
# The fast path (attention_timing) against the exact run, for head counts it
# extrapolates (more than EXACT_STEPS), on both core generations.
ATTENTION_FAST_SEQS = (100, 128, 384, 512, 1000)
ATTENTION_FAST_HEADS = (EXACT_STEPS + 1, 2 * EXACT_STEPS - 2, 2 * EXACT_STEPS + 1)
ATTENTION_FAST_DIMS = (64, 128)
ATTENTION_FAST_BOUND = 1e-6  # relative

NKI3 = "NKI Trainium3 Architecture Guide"
NKI2 = "NKI Trainium2 Architecture Guide"
NKI1 = "NKI Trainium/Inferentia2 Architecture Guide"
TRN3_PAGE = "Neuron docs, Trainium3 Architecture page"
TRN2_PAGE = "Neuron docs, Trainium2 Architecture page"
TRN3_EC2 = "Neuron docs, Amazon EC2 Trn3 Architecture page"
TRN2_EC2 = "Neuron docs, Amazon EC2 Trn2 Architecture page"
NO_AWS = "no AWS figure (the simulator's assumption)"
# (constant, value of neuroncore-v4, source)
CONSTANTS: list[tuple[str, str, str]] = [
    (
        "PE array clock",
        "{pe_clock}",
        f"{NKI3}, Compute Engine Specifications table (Tensor 2.4 GHz)",
    ),
    (
        "matmul cycles",
        "max(min({floor}, stationary columns), moving columns)",
        "nki.isa.nc_matmul docstring, Estimated instruction cost; "
        f"{NKI1}, Tensor Engine performance (MM initiation interval 64)",
    ),
    ("FP32 matmul passes", "{fp32} x", "nki.isa.nc_matmul docstring (FP32 costs 4x)"),
    (
        "contraction tiles per matmul",
        "BF16 1, FP8 {fp8_tiles}, MXFP8/MXFP4 {mx_tiles}, k:m sparse m/k (at most 4)",
        f"{NKI3}, Quad-MXFP8/MXFP4 Matmul Performance (K = 512); "
        f"{NKI2}, Double FP8 Matmul Performance (K = 256)",
    ),
    (
        "LoadStationary",
        "stationary columns / {ls} cycles, behind the previous matmul",
        f"{NKI1}, Background and Fast LoadStationary (up to 4x faster than a matmul)",
    ),
    (
        "matmul fill/drain latency",
        "128 rows + stationary columns, PE cycles",
        "no AWS figure: the geometry of the 128x128 systolic array (an estimate)",
    ),
    (
        "vector / scalar / gpsimd clock",
        "{vclock} / {sclock} / {gclock}",
        f"{NKI3}, Compute Engine Specifications table",
    ),
    (
        "vector elements per partition per cycle",
        "BF16/FP16/FP8 {vn}, other {vr}; {vp} with a PSUM operand; x2 elements for two inputs",
        f"{NKI3}, Compute Engine Specifications (512 / 256 per cycle over 128 lanes); "
        f"{NKI2}, Vector Engine Performance Mode (PSUM halves the gain); "
        f"{NKI1}, Vector Engine cost model (two inputs ~2N)",
    ),
    (
        "scalar elements per partition per cycle",
        "activations {sr}; BF16/FP16/FP8 copy and tensor_scalar {sn}",
        f"{NKI3}, Compute Engine Specifications (256 / 128) and Scalar Engine "
        "Performance mode (2x for BF16/FP16 tensor_scalar, tensor_copy)",
    ),
    ("gpsimd elements per partition per cycle", "{gr}", f"{NKI3}, table (128 per cycle)"),
    (
        "exp on the vector engine",
        "{vexp} per partition per cycle",
        f"{NKI3}, Fast Exponential Evaluation (4x the scalar engine's exp)",
    ),
    (
        "other table functions off the scalar engine",
        "{emu} per partition per cycle",
        "no AWS figure: an assumption (emulated)",
    ),
    (
        "instruction floor (vector/scalar/gpsimd)",
        "{efloor} cycles",
        "nki.isa docstrings, Estimated instruction cost (MIN_II roughly 64)",
    ),
    (
        "DMA engines per core x bandwidth",
        "{dma_engines} x {dma_bw}",
        "NKI DMA overview (16 engines per core, 38.4 GB/s each on v4)",
    ),
    (
        "DMA efficiency",
        "b / (b + {half}) for b bytes per partition; {lat} per transfer",
        "no AWS formula: fitted to the NKI DMA bandwidth guide's advice "
        "(>= 2 KiB per partition); the fixed latency is an estimate",
    ),
    (
        "HBM per chip",
        "{hbm}",
        f"{TRN3_PAGE} (4.9 TB/s); the {NKI3} says 4.7 TB/s",
    ),
]


def _gbs(x: float) -> str:
    return f"{x / 1e9:.1f} GB/s"


def constants_table() -> str:
    t = CORE_TIMING["neuroncore-v4"]
    values = {
        "pe_clock": f"{t.pe_clock / 1e9:g} GHz",
        "floor": t.matmul_floor_cycles,
        "fp32": f"{t.matmul_cycles_per_column['fp32']:g}",
        "fp8_tiles": contraction_tiles("fp8"),
        "mx_tiles": contraction_tiles("mxfp8"),
        "ls": f"{t.stationary_load_speedup:g}",
        "vclock": f"{t.engine_clock['vector'] / 1e9:g} GHz",
        "sclock": f"{t.engine_clock['scalar'] / 1e9:g} GHz",
        "gclock": f"{t.engine_clock['gpsimd'] / 1e9:g} GHz",
        "vn": f"{t.vector_narrow_rate:g}",
        "vr": f"{t.vector_rate:g}",
        "vp": f"{t.vector_psum_rate:g}",
        "sr": f"{t.scalar_rate:g}",
        "sn": f"{t.scalar_narrow_rate:g}",
        "gr": f"{t.gpsimd_rate:g}",
        "vexp": f"{t.vector_exp_rate:g}",
        "emu": f"{t.emulated_transcendental_rate:g}",
        "efloor": t.elementwise_floor_cycles,
        "dma_engines": TRN3.dma_engines_per_core,
        "dma_bw": _gbs(t.dma_engine_bandwidth),
        "half": f"{t.dma_half_efficiency_bytes:g}",
        "lat": f"{t.dma_fixed_latency * 1e6:g} us",
        "hbm": f"{TRN3.hbm_bandwidth / 1e12:g} TB/s",
    }
    rows = ["| constant (NeuronCore-v4) | model | source |", "|---|---|---|"]
    rows += [
        f"| {name} | {value.format(**values)} | {source} |" for name, value, source in CONSTANTS
    ]
    return "\n".join(rows)


def _tb(x: float) -> str:
    return f"{x / 1e12:g} TB/s"


def _us(x: float) -> str:
    return f"{x * 1e6:g} us"


# (figure, its value for one rack, source): one row per figure of the topology
TOPOLOGY: list[tuple[str, Any, str]] = [
    (
        "servers x chips per server",
        lambda r: f"{r.servers} x {r.chips_per_server} = {r.chips}",
        f"{TRN3_EC2} (Gen1, Gen2); {TRN2_EC2} (Trn2 UltraServer)",
    ),
    (
        "chip, core",
        lambda r: f"{r.chip.name.capitalize()}, {r.chip.core_version}",
        f"{TRN3_PAGE}; {TRN2_PAGE}",
    ),
    (
        "cores per chip (chiplets x cores)",
        lambda r: f"{r.chip.cores} ({r.chip.chiplets} x {r.chip.cores_per_chiplet})",
        f"{TRN3_PAGE}; {TRN2_PAGE}; the chiplet split: {NO_AWS}",
    ),
    (
        "HBM per chip",
        lambda r: f"{r.chip.hbm_bytes / GiB:g} GiB, {_tb(r.chip.hbm_bandwidth)}",
        f"{TRN3_PAGE}; {TRN2_PAGE}",
    ),
    (
        "SBUF per core",
        lambda r: (
            f"{r.chip.sbuf_bytes_per_core / MiB:g} MiB "
            f"({r.chip.sbuf_bytes_per_core // PARTITIONS // 1024} KiB per partition)"
        ),
        f"{NKI3}, NeuronCore-v4 Compute Engine Updates (v4, and v3 before it)",
    ),
    (
        "PSUM per core",
        lambda r: (
            f"{r.chip.psum_bytes_per_core / MiB:g} MiB ({PSUM_BANKS} banks of "
            f"{PSUM_BANK_BYTES // 1024} KiB per partition)"
        ),
        f"{NKI1}, PSUM; {NKI3} (unchanged on v4)",
    ),
    (
        "DMA engines per chip",
        lambda r: (
            f"{r.chip.dma_engines} ({r.chip.dma_engines_per_core} per core), "
            f"{_gbs(core_timing(r.chip).dma_engine_bandwidth)} each"
        ),
        f"{NKI3}; {NKI2}; per engine: NKI DMA overview",
    ),
    (
        "NeuronLink per chip",
        lambda r: _tb(r.chip.link_bandwidth),
        f"{TRN3_PAGE} (NeuronLink-v4); {TRN2_PAGE} (NeuronLink-v3)",
    ),
]


def topology_table() -> str:
    """One column per generation, from simdevice.topology's rack table."""
    racks: list[RackSpec] = [rack_spec(g) for g in GENERATIONS]
    rows = [
        _row("figure", *(f"`{r.generation}`" for r in racks), "source"),
        "|---" * (len(racks) + 2) + "|",
    ]
    rows += [_row(name, *(value(r) for r in racks), source) for name, value, source in TOPOLOGY]
    return "\n".join(rows)


def rules_table() -> str:
    """The timing rules, their figures from CORE_TIMING and simdevice.isa."""
    t = CORE_TIMING["neuroncore-v4"]
    floor, p = t.matmul_floor_cycles, PARTITIONS
    trn2 = rack_spec("trn2").chip
    rows = [
        "| engine | rule |",
        "|---|---|",
        _row(
            "Tensor",
            f"a MultiplyMoving occupies the array `max(min({floor}, M), N)` cycles "
            f"(FP32: {t.matmul_cycles_per_column['fp32']:g}x) for M <= {p} stationary and "
            f"N <= {MOVING_FREE_MAX} moving columns; FP8, MX and k:m sparse matmuls contract "
            f"over {contraction_tiles('fp8')}, {contraction_tiles('mxfp8')} and m/k {p}-row "
            f"tiles in one instruction (at most {MAX_CONTRACTION_TILES}), so they reach their "
            "peak by doing more per instruction, not by moving more columns. A LoadStationary "
            f"runs behind the previous matmul at {t.stationary_load_speedup:g} columns per "
            f"cycle; a result reaches PSUM after the array's fill and drain ({p} rows + M "
            "columns), which only a consumer on another engine waits for. A transpose costs "
            f"`max(P, min({floor}, F))`.",
        ),
        _row(
            "Vector / Scalar / GpSimd",
            f"`max({t.elementwise_floor_cycles}, elements / rate)` cycles, `rate` elements per "
            "partition per cycle by engine and dtype (table below); two-input ops read twice "
            "the elements; exp on the vector engine is its fast exponential, other table "
            "functions off the scalar engine are emulated.",
        ),
        _row(
            "DMA",
            "engines busy `bytes / (bandwidth x efficiency)`, efficiency = "
            f"`b / (b + {t.dma_half_efficiency_bytes:g})` for b bytes per partition; bandwidth "
            "= min(the core's engines, the core's share of HBM); each transfer completes a "
            "fixed latency after its bytes moved; completions stay in order; at most "
            f"{t.dma_outstanding} transfers in flight per core.",
        ),
        _row(
            "capacity",
            f"SBUF {TRN3.sbuf_bytes_per_core // p // 1024} KiB (Trn3) / "
            f"{trn2.sbuf_bytes_per_core // p // 1024} KiB (Trn2) per partition, PSUM "
            f"{TRN3.psum_bytes_per_core // p // 1024} KiB per partition ({PSUM_BANKS} banks); "
            "a program allocating more raises `CapacityError` naming the memory, what it "
            "allocates and what the core has. A matmul output must stay inside one bank.",
        ),
        _row(
            "HBM sharing",
            "`ServerSim` shares a chip's HBM bandwidth max-min fairly between its running "
            "cores (`simdevice/sharing.py`): each core's demand is what its job moves per "
            "second unconstrained; when the chip's cores want more than the HBM delivers, "
            "cores wanting less than the fair cap are served in full and the rest are capped "
            "(the cap rounded down to HBM / j for a whole j, so cached workload timings stay "
            "few). Running jobs are timed anew whenever the caps change.",
        ),
    ]
    return "\n".join(rows)


# What NeuronCore-v3 differs in, and the source of each of its figures.
V3_SOURCES: dict[str, str] = {
    "dma_engine_bandwidth": "NKI DMA overview",
    "engine_clock": "source not confirmed: the model's earlier Trn2 figure",
    "matmul_cycles_per_column": f"{NKI3} (MX matmuls are new on v4)",
    "scalar_narrow_rate": f"{NKI3} (the scalar engine's performance mode is new on v4)",
    "vector_exp_rate": f"{NKI3} (the fast exponential is new on v4)",
}


def older_core() -> str:
    """The fields of CORE_TIMING where neuroncore-v3 differs from v4."""
    v3, v4 = CORE_TIMING["neuroncore-v3"], CORE_TIMING["neuroncore-v4"]
    said = []
    for name, source in V3_SOURCES.items():
        old, new = getattr(v3, name), getattr(v4, name)
        if old == new:
            continue
        if name == "dma_engine_bandwidth":
            text = f"{_gbs(old)} DMA engines"
        elif name == "engine_clock":
            text = ", ".join(f"a {old[e] / 1e9:g} GHz {e} engine" for e in old if old[e] != new[e])
        elif name == "matmul_cycles_per_column":
            gone = ", ".join(d.upper() for d in new if d not in old)
            text = f"no {gone} matmuls (`dtype: neuroncore-v3 has no mxfp8 matmul`)"
        elif name == "scalar_narrow_rate":
            text = "no scalar BF16 fast mode"
        else:
            text = "no fast exponential (exp off the scalar engine is emulated)"
        said.append(f"{text} ({source})")
    differing = {f for f in v3.__dataclass_fields__ if getattr(v3, f) != getattr(v4, f)} - set(
        V3_SOURCES
    )
    if differing:
        raise SystemExit(f"neuroncore-v3 differs in {sorted(differing)}: give them a source")
    return (
        "NeuronCore-v3 (Trn2) uses the same rules with its own row of `CORE_TIMING`: "
        + "; ".join(said)
        + "."
    )


def leaves_out() -> str:
    """Every simplification, with the model's own figure for it."""
    t = CORE_TIMING["neuroncore-v4"]
    fill_us = (PARTITIONS + PARTITIONS) / t.pe_clock * 1e6
    items = [
        f"DMA efficiency is a smooth `b / (b + {t.dma_half_efficiency_bytes:g})` curve, not "
        f"a descriptor-level model, and its {_us(t.dma_fixed_latency)} fixed cost is an "
        "estimate (hidden by enough transfers in flight).",
        f"Fill/drain latency ({PARTITIONS} rows + M columns) has no AWS figure; it adds up "
        f"to {fill_us:.2f} us to each cross-engine dependency on a matmul result.",
        "Transcendental functions other than exp on the vector or gpsimd engine are assumed "
        f"emulated at {t.emulated_transcendental_rate:g} element per partition per cycle "
        "(no AWS figure).",
        "MX scales are grouped as consecutive values along the contraction axis (the OCP MX "
        "rule, OCP Microscaling Formats specification), not the hardware's grouping over "
        "partitions; quantisation error is alike, the grouping differs.",
        "Background transposes, row/column tiling of the PE array, BF16 PSUM accumulation, "
        "DMA transpose, traffic shaping and QoS are not modelled; they only speed kernels "
        "up that use them, and no kernel here does.",
        "The vector engine's static overhead for dependent back-to-back instructions is not "
        f"charged; only the {t.elementwise_floor_cycles}-cycle floor is.",
        "MX GEMMs are DMA-bound on one core (their K tiles arrive "
        f"{contraction_tiles('mxfp8')} times as fast as they are consumed in BF16), which "
        "the validation table shows; the model does not compress operands in flight.",
        "Collectives are an alpha-beta model of phases, not packet-level: no congestion, "
        "no sharing of a level's bandwidth between concurrent collectives (of one claim or "
        "of several), no reduction arithmetic, no HBM traffic, no failure mid-collective "
        "(a `link-down` fails the job before), one rank per chip (ranks sharing a chip do "
        "not talk on-chip), and no EFA between UltraServers (ranks in two Trn2 racks are "
        "refused); see Collectives.",
        "A training step runs its phases back to back (no overlap of the gradient "
        "all-reduce with the backward pass); the backward of attention is counted as "
        "twice its forward and layernorm's as once more its forward.",
        "Attention heads on one core overlap as one program does; heads on different cores "
        "are independent (no shared HBM traffic between them beyond the chip's fair share).",
    ]
    return "\n".join(f"- {item}" for item in items)


def model_limits() -> str:
    """Figures the Jobs and Numerics sections use, from the code."""
    rows = [
        "| limit | value |",
        "|---|---|",
        _row(
            "numerics on request, largest per-core shape",
            f"gemm m*n*k <= 2^{MAX_GEMM_MACS.bit_length() - 1}; elementwise, softmax, "
            f"layernorm rows*cols <= 2^{MAX_ELEMENTS.bit_length() - 1}; attention seq <= "
            f"{MAX_ATTENTION_SEQ}",
        ),
        _row(
            "fast path steps",
            f"GEMMs over row blocks of {BLOCK_ROWS} rows (fewer, down to {PARTITIONS}, when "
            f"long K does not fit SBUF) and tiles of {MOVING_FREE_MAX} columns; row-wise "
            f"kernels over {PARTITIONS}-row tiles; attention over heads",
        ),
        _row(
            "fast path extrapolation",
            f"up to {EXACT_STEPS} steps timed whole; beyond, a period of at most "
            f"{MAX_PERIOD} steps",
        ),
        _row("utilization averaging", f"time constant {UTILIZATION_TAU:g} s"),
        _row(
            "BF16-equivalent FLOPs per FLOP",
            ", ".join(f"{d} {w:g}" for d, w in BF16_EQUIVALENT.items()),
        ),
    ]
    return "\n".join(rows)


def matmul_stream(n: int, dtype: str, count: int = 1000) -> float:
    """Raw FLOP/s of back-to-back matmuls with n moving columns."""
    tiles = contraction_tiles(dtype)
    pb = ProgramBuilder("stream")
    w = tuple(pb.sbuf(f"w{i}", 128, 128).all() for i in range(tiles))
    x = tuple(pb.sbuf(f"x{i}", 128, n).all() for i in range(tiles))
    acc = pb.psum("acc", 128, 512)
    for _ in range(count):
        pb.load_stationary(w)
        pb.multiply_moving(acc[0:128, 0:n], x, dtype=dtype)
    t = time_program(pb.build(), TRN3)
    return 2.0 * 128 * 128 * tiles * n * count / t.duration


def instructions(m: int, n: int, k: int, dtype: str) -> int:
    """Roughly how many instructions gemm(m, n, k) emits (the exact run's cost)."""
    rows = block_rows(k, dtype)
    blocks, tiles = math.ceil(m / rows), math.ceil(n / MOVING_FREE_MAX)
    k_tiles, m_tiles = math.ceil(k / 128), math.ceil(min(m, rows) / 128)
    return blocks * tiles * (k_tiles * (1 + 2 * m_tiles) + 2 * m_tiles)


def extrapolated(m: int, n: int, k: int, dtype: str) -> bool:
    """Does the fast path extrapolate over rows or columns (not time it whole)?"""
    return math.ceil(m / block_rows(k, dtype)) > EXACT_STEPS or n // MOVING_FREE_MAX > EXACT_STEPS


def draw_shapes(count: int, seed: int) -> list[tuple[int, int, int, str]]:
    """GEMM shapes drawn log-uniformly in [64, 32768], by family (small K and
    wide N, large K and narrow N, anything), every dtype; each one extrapolated
    by the fast path and cheap enough to time exactly."""
    rng = np.random.default_rng(seed)
    dtypes = ("bf16", "fp32", "fp8", "mxfp8")
    families = [
        ((LOW, 4096), (8192, HIGH), (LOW, 512)),
        ((4096, HIGH), (LOW, 1024), (4096, HIGH)),
        ((LOW, HIGH), (LOW, HIGH), (LOW, HIGH)),
    ]
    shapes: list[tuple[int, int, int, str]] = []
    while len(shapes) < count:
        for family in families:
            m, n, k = (
                round(math.exp(rng.uniform(math.log(lo), math.log(hi)))) for lo, hi in family
            )
            dtype = dtypes[len(shapes) % len(dtypes)]
            if extrapolated(m, n, k, dtype) and instructions(m, n, k, dtype) <= MAX_INSTRUCTIONS:
                shapes.append((m, n, k, dtype))
    return shapes[:count]


def fast_vs_exact(m: int, n: int, k: int, dtype: str) -> tuple[int, int]:
    """PE cycles of the exact run and of the fast path."""
    exact = time_program(gemm(m, n, k, dtype), TRN3).duration
    fast = gemm_timing(m, n, k, dtype=dtype, sparsity="dense", chip=TRN3).duration
    return round(exact * TRN3_PE), round(fast * TRN3_PE)


TRN3_PE = CORE_TIMING["neuroncore-v4"].pe_clock


def gemm_efficiency(m: int, n: int, k: int, dtype: str) -> float:
    t = gemm_timing(m, n, k, dtype=dtype, sparsity="dense", chip=TRN3)
    return 2.0 * m * n * k / t.duration / CORE_TIMING["neuroncore-v4"].peak_flops(dtype)


def dma_rate(bytes_per_partition: int, transfers: int = 64) -> float:
    pb = ProgramBuilder("dma")
    cols = bytes_per_partition // 2
    src = pb.hbm("src", 128 * transfers, cols)
    dst = [pb.sbuf(f"d{i}", 128, cols) for i in range(2)]
    for i in range(transfers):
        pb.dma(dst[i % 2].all(), src[i * 128 : (i + 1) * 128, 0:cols])
    t = time_program(pb.build(), TRN3)
    return t.dma_bytes / t.duration / core_dma_bandwidth(TRN3)


def heads_at_once(seq: int, heads: int) -> dict[str, float]:
    """PE cycles of `heads` heads as one program and of one head times
    `heads`, and how far the product overstates the program."""
    exact = time_program(attention(seq, ATTENTION_HEAD_DIM, "bf16", heads), TRN3).duration
    one = time_program(attention(seq, ATTENTION_HEAD_DIM, "bf16"), TRN3).duration
    return {
        "exact_cycles": round(exact * TRN3_PE),
        "one_head_times_heads_cycles": round(heads * one * TRN3_PE),
        "overstated": round(heads * one / exact - 1, 4),
    }


def attention_fast_cases() -> list[tuple[str, int, int, int]]:
    """(generation, seq, head_dim, heads) the attention fast path is checked on."""
    return [
        (gen, seq, d, heads)
        for gen in ("trn3-gen2", "trn2")
        for seq in ATTENTION_FAST_SEQS
        for d in ATTENTION_FAST_DIMS
        for heads in ATTENTION_FAST_HEADS
    ]


def attention_fast_error(gen: str, seq: int, head_dim: int, heads: int) -> float:
    """Relative error of attention_timing against the exact run of the program."""
    chip = rack_spec(gen).chip
    exact = time_program(attention(seq, head_dim, "bf16", heads), chip).duration
    fast = attention_timing(seq, head_dim, heads, dtype="bf16", chip=chip).duration
    return abs(fast - exact) / exact


def run() -> dict[str, Any]:
    """Every validation case; the keys name the figures the page shows."""
    v4 = CORE_TIMING["neuroncore-v4"]
    results: dict[str, Any] = {}
    results["peaks_tflops_per_core"] = {
        dtype: round(matmul_stream(512, dtype) / 1e12, 2)
        for dtype in ("bf16", "fp8", "mxfp8", "fp32")
    }
    results["peak_mxfp8_pflops_per_chip"] = round(
        results["peaks_tflops_per_core"]["mxfp8"] * TRN3.cores / 1e3, 3
    )
    results["matmul_efficiency_by_moving_columns"] = {
        dtype: {
            str(n): round(matmul_stream(n, dtype) / v4.peak_flops(dtype), 3)
            for n in (16, 32, 64, 128, 256, 512)
        }
        for dtype in ("bf16", "fp8", "mxfp8")
    }
    results["gemm_efficiency_over_n"] = {
        dtype: {
            str(n): round(gemm_efficiency(2048, n, 4096, dtype), 3) for n in (128, 512, 2048, 8192)
        }
        for dtype in ("bf16", "mxfp8")
    }
    results["gemm_efficiency_over_k"] = {
        dtype: {
            str(k): round(gemm_efficiency(2048, 4096, k, dtype), 3) for k in (128, 512, 2048, 8192)
        }
        for dtype in ("bf16", "mxfp8")
    }
    sizes = [64, 128, 256, 512, 1024, 2048, 4096, 8192]
    results["dma_efficiency_by_bytes_per_partition"] = {
        str(b): round(dma_rate(b), 3) for b in sizes
    }
    results["dma_curve_at_half"] = float(dma_efficiency(v4.dma_half_efficiency_bytes, v4))
    gelu = time_program(elementwise(4096, 2048, "fp32", "gelu"), TRN3)
    results["gelu_one_trn3_core"] = {
        "gb_per_s": round(gelu.dma_bytes / gelu.duration / 1e9, 1),
        "dma_peak_gb_per_s": round(core_dma_bandwidth(TRN3) / 1e9, 1),
        "sync_busy": round(gelu.busy_ratio[4], 3),
        "scalar_busy": round(gelu.busy_ratio[2], 3),
    }
    shared = time_program(elementwise(4096, 2048, "fp32", "gelu"), TRN2, TRN2.hbm_bandwidth / 8)
    results["gelu_eight_trn2_cores"] = {
        "chip_tb_per_s": round(8 * shared.dma_bytes / shared.duration / 1e12, 3),
        "hbm_tb_per_s": round(TRN2.hbm_bandwidth / 1e12, 3),
    }
    results["gemm_numerics_relative_error"] = {
        dtype: float(f"{check('gemm', {'m': 256, 'n': 256, 'k': 512}, dtype).relative_error:.2g}")
        for dtype in ("fp32", "tf32", "bf16", "fp16", "fp8", "mxfp8", "mxfp4")
    }
    results["kernel_numerics_relative_error"] = {
        kind: float(f"{check(kind, shape, 'bf16').relative_error:.2g}")
        for kind, shape in (
            ("softmax", {"rows": 256, "cols": 512}),
            ("layernorm", {"rows": 256, "cols": 512}),
            ("attention", {"seq": 512, "head_dim": 64}),
        )
    }
    results["all_reduce_1_gib"] = {str(chips): _all_reduce_gib(chips) for chips in (4, 16, 144)}
    results["fast_path_reported_shapes_cycles"] = {
        f"{m}x{n}x{k}": dict(zip(("exact", "fast"), fast_vs_exact(m, n, k, "bf16"), strict=True))
        for m, n, k in REPORTED
    }
    errors = []
    for m, n, k, dtype in draw_shapes(SWEEP, seed=2026):
        exact, fast = fast_vs_exact(m, n, k, dtype)
        errors.append(abs(fast - exact) / exact)
    results["fast_path_sweep"] = {
        "shapes": SWEEP,
        "max_relative_error": float(f"{max(errors):.2g}"),
    }
    results["attention_heads_vs_one_head"] = {
        str(seq): {str(h): heads_at_once(seq, h) for h in ATTENTION_HEADS} for seq in ATTENTION_SEQS
    }
    cases = attention_fast_cases()
    results["attention_fast_path"] = {
        "cases": len(cases),
        "max_relative_error": float(f"{max(attention_fast_error(*c) for c in cases):.2g}"),
    }
    return results


def _all_reduce_gib(chips: int) -> dict[str, Any]:
    """A 1 GiB all-reduce over the first `chips` chips of a Gen2 rack: bandwidth-bound
    (step latency a small share of its time) at no more than its fastest level's bandwidth."""
    spec = rack_spec("trn3-gen2")
    c = time_collective("all-reduce", spec, first_chips(spec, chips), float(GiB))
    return {
        "levels": [p.level for p in c.phases],
        "ms": round(c.duration * 1e3, 3),
        "busbw_gb_per_s": round(c.busbw / 1e9, 1),
        "fastest_level_gb_per_s": round(max(p.bandwidth for p in c.phases) / 1e9, 1),
        "latency_share": round(sum(p.latency for p in c.phases) / c.duration, 4),
    }


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def validation_table(r: dict[str, Any]) -> str:
    peaks = r["peaks_tflops_per_core"]
    rows = ["| figure | published / expected | model |", "|---|---|---|"]
    rows += [
        _row(
            "BF16 per core",
            f"79 TFLOPS ({NKI3}); 671 / 8 = 83.9 ({TRN3_PAGE})",
            f"{peaks['bf16']} TFLOPS",
        ),
        _row("MXFP8 per core", f"315 TFLOPS ({NKI3})", f"{peaks['mxfp8']} TFLOPS"),
        _row(
            "MXFP8 per chip",
            f"2,517 TFLOPS ({TRN3_PAGE})",
            f"{r['peak_mxfp8_pflops_per_chip']} PFLOPS",
        ),
        _row("FP8 per core", "2x BF16 (double FP8 mode)", f"{peaks['fp8']} TFLOPS"),
        _row(
            "FP32 per core",
            f"20 TFLOPS ({NKI3}); 183 / 8 = 22.9 ({TRN3_PAGE})",
            f"{peaks['fp32']} TFLOPS",
        ),
    ]
    for dtype, curve in r["matmul_efficiency_by_moving_columns"].items():
        rows.append(
            _row(
                f"{dtype} matmul stream, % of its peak by moving columns N",
                "floor min(64, M) cycles: N >= 64 at peak",
                ", ".join(f"{n}: {_pct(e)}" for n, e in curve.items()),
            )
        )
    for axis, fixed in (("n", "m=2048, k=4096"), ("k", "m=2048, n=4096")):
        for dtype, curve in r[f"gemm_efficiency_over_{axis}"].items():
            rows.append(
                _row(
                    f"{dtype} GEMM ({fixed}) over {axis.upper()}, % of peak",
                    f"rises with {axis.upper()}",
                    ", ".join(f"{x}: {_pct(e)}" for x, e in curve.items()),
                )
            )
    dma = r["dma_efficiency_by_bytes_per_partition"]
    g, g2 = r["gelu_one_trn3_core"], r["gelu_eight_trn2_cores"]
    rows += [
        _row(
            "DMA efficiency by bytes per partition",
            "< 256 B poor, >= 2 KiB near peak",
            ", ".join(f"{b}: {e}" for b, e in dma.items()),
        ),
        _row(
            "GELU over HBM, one Trn3 core",
            "DMA-bound",
            f"{g['gb_per_s']} GB/s of {g['dma_peak_gb_per_s']}, Sync busy "
            f"{_pct(g['sync_busy'])}, Scalar {_pct(g['scalar_busy'])}",
        ),
        _row(
            "GELU over HBM, 8 Trn2 cores",
            "HBM-bound",
            f"{g2['chip_tb_per_s']} TB/s of {g2['hbm_tb_per_s']}",
        ),
    ]
    rows += [
        _row(
            "GEMM 256x256x512 vs float64 (normwise)",
            "within dtype error",
            ", ".join(f"{d} {e:g}" for d, e in r["gemm_numerics_relative_error"].items()),
        ),
        _row(
            "BF16 kernels vs float64 (normwise)",
            "within BF16 error",
            ", ".join(f"{k} {e:g}" for k, e in r["kernel_numerics_relative_error"].items()),
        ),
    ]
    for chips, c in r.get("all_reduce_1_gib", {}).items():
        rows.append(
            _row(
                f"all-reduce of 1 GiB over the first {chips} Gen2 chips",
                "bandwidth-bound (step latency under 5%), busbw at most the fastest level's",
                f"{c['ms']} ms over {' then '.join(c['levels'])}; busbw {c['busbw_gb_per_s']} "
                f"of {c['fastest_level_gb_per_s']} GB/s; latency {_pct(c['latency_share'])}",
            )
        )
    for shape, c in r["fast_path_reported_shapes_cycles"].items():
        rows.append(
            _row(
                f"GEMM {shape} (m x n x k), PE cycles",
                "fast path = exact",
                f"exact {c['exact']}, fast {c['fast']}",
            )
        )
    sweep = r["fast_path_sweep"]
    rows.append(
        _row(
            f"fast path vs exact over {sweep['shapes']} drawn shapes",
            "within 1%",
            f"largest error {sweep['max_relative_error']:g}",
        )
    )
    for seq, by_heads in r["attention_heads_vs_one_head"].items():
        rows.append(
            _row(
                f"attention, seq {seq}, d {ATTENTION_HEAD_DIM}: one head's time x heads "
                "vs the exact run of all heads as one program",
                "heads overlap, so the product overstates (>= 0)",
                ", ".join(
                    f"{h} heads: +{_pct(c['overstated'])} ({c['exact_cycles']} cycles)"
                    for h, c in by_heads.items()
                ),
            )
        )
    fast = r["attention_fast_path"]
    rows.append(
        _row(
            f"attention fast path vs exact over {fast['cases']} cases (seq "
            f"{ATTENTION_FAST_SEQS[0]}-{ATTENTION_FAST_SEQS[-1]}, "
            f"{ATTENTION_FAST_HEADS[0]}-{ATTENTION_FAST_HEADS[-1]} heads, Trn3 and Trn2)",
            f"within {ATTENTION_FAST_BOUND:g}",
            f"largest error {fast['max_relative_error']:g}",
        )
    )
    return "\n".join(rows)


# Blocks of docs/simulator.md written from the code alone (no run needed).
STATIC_BLOCKS: dict[str, Callable[[], str]] = {
    "topology": topology_table,
    "rules": rules_table,
    "constants": constants_table,
    "older-core": older_core,
    "leaves-out": leaves_out,
    "limits": model_limits,
}


def block(page: str, name: str) -> str:
    """The text between a block's markers."""
    start, end = f"<!-- {name}:start -->\n", f"\n<!-- {name}:end -->"
    return page[page.index(start) + len(start) : page.index(end)]


def main() -> None:
    # Imported here, as render below: both import the pages, which read this module.
    from benchmarks.report import Conditions

    # Nothing here is timed against the clock, so a busy machine changes no
    # figure: the conditions are recorded, never a reason to refuse.
    conditions = Conditions.begin(noisy=True, kubernetes=False)
    results = run()
    results["conditions"] = conditions.end()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    # Imported here: the renderer reads this module's tables, so importing it
    # at the top would be circular.
    from benchmarks import render

    render.write_pages()
    print(f"wrote {RESULTS.relative_to(ROOT)} and the pages")


if __name__ == "__main__":
    main()
