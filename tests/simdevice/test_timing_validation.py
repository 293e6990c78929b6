"""The model against the published figures and the timing rules of docs/simulator.md."""

import pytest

from benchmarks.sim_validation import dma_rate
from simdevice.isa import Program, ProgramBuilder, Queue, contraction_tiles
from simdevice.kernels.gemm import gemm
from simdevice.kernels.rowwise import elementwise
from simdevice.timing import core_dma_bandwidth, core_timing, simulate, time_program
from simdevice.topology import ChipSpec, rack_spec

TRN3 = rack_spec("trn3-gen2").chip
TRN2_RACK = rack_spec("trn2")


def matmul_stream(count: int, n: int, dtype: str, sparsity: str = "dense") -> Program:
    """Back-to-back matmuls on SBUF-resident operands, each taking as many
    contraction tiles as the dtype allows: the PE array alone."""
    tiles = contraction_tiles(dtype, sparsity)
    pb = ProgramBuilder("stream")
    w = tuple(pb.sbuf(f"w{i}", 128, 128, "bf16").all() for i in range(tiles))
    x = tuple(pb.sbuf(f"x{i}", 128, n, "bf16").all() for i in range(tiles))
    acc = pb.psum("acc", 128, 512)
    for _ in range(count):
        pb.load_stationary(w)
        pb.multiply_moving(acc[0:128, 0:n], x, dtype=dtype, sparsity=sparsity)
    return pb.build()


def achieved_flops(program: Program, dense_equivalent: float = 1.0) -> float:
    t = time_program(program, TRN3)
    return t.flops / t.duration * dense_equivalent


def test_bf16_peak_is_78_6_tflops_per_core() -> None:
    assert core_timing(TRN3).peak_flops("bf16") == pytest.approx(78.64e12, rel=1e-3)
    assert achieved_flops(matmul_stream(1000, 512, "bf16")) == pytest.approx(78.64e12, rel=1e-3)


def test_mxfp8_peak_is_315_tflops_per_core_and_2_517_pflops_per_chip() -> None:
    # Utilization counts MX FLOPs at 1/4; undo that to get raw MX FLOPs.
    per_core = achieved_flops(matmul_stream(1000, 512, "mxfp8"), dense_equivalent=4.0)
    assert per_core == pytest.approx(314.6e12, rel=1e-3)
    assert per_core * TRN3.cores == pytest.approx(2.517e15, rel=1e-3)
    assert core_timing(TRN3).peak_flops("mxfp4") == pytest.approx(314.6e12, rel=1e-3)


# One stream of matmuls also pays the first LoadStationary (128 columns at
# four per cycle) and the last result's fill and drain (128 rows + 128 columns).
STREAM_EDGES = 128 / 4 + 128 + 128


def test_fp32_runs_at_a_quarter_of_bf16() -> None:
    t_fp32 = time_program(matmul_stream(100, 512, "fp32"), TRN3).duration
    t_bf16 = time_program(matmul_stream(100, 512, "bf16"), TRN3).duration
    edges = STREAM_EDGES / 2.4e9
    assert t_fp32 - edges == pytest.approx(4 * (t_bf16 - edges), rel=1e-6)


@pytest.mark.parametrize(
    ("pattern", "speedup"), [("2:4", 2.0), ("1:4", 4.0), ("4:12", 3.0), ("4:16", 4.0), ("1:2", 2.0)]
)
def test_structured_sparsity_speeds_up_to_315_tflops(pattern: str, speedup: float) -> None:
    """A k:m sparse matmul contracts over m/k times the rows in one instruction."""
    dense = time_program(matmul_stream(100, 512, "bf16"), TRN3)
    sparse = time_program(matmul_stream(100, 512, "bf16", pattern), TRN3)
    nonzero, group = (int(x) for x in pattern.split(":"))
    logical = sparse.flops * group / nonzero  # the dense FLOPs the sparse matmul stands for
    assert logical / sparse.duration == pytest.approx(speedup * dense.flops / dense.duration)
    # Effective (non-zero) FLOPs never beat the dense peak: utilization stays <= 1.
    assert sparse.flops / sparse.duration <= core_timing(TRN3).peak_flops("bf16") * 1.0001
    mx = time_program(matmul_stream(100, 512, "mxfp8"), TRN3)
    mx_sparse = time_program(matmul_stream(100, 512, "mxfp8", pattern), TRN3)
    assert mx_sparse.flops == pytest.approx(mx.flops * nonzero / group)  # no faster than MX


def test_large_bf16_gemm_reaches_90_percent_of_peak() -> None:
    t = time_program(gemm(1024, 4096, 4096, "bf16"), TRN3)
    utilization = t.flops / (core_timing(TRN3).peak_flops("bf16") * t.duration)
    assert utilization >= 0.90
    assert t.busy_ratio[Queue.TENSOR] >= 0.90


def test_tiny_matmuls_are_bound_by_the_64_cycle_floor() -> None:
    count = 200
    for n in (8, 16, 32, 64):
        t = time_program(matmul_stream(count, n, "bf16"), TRN3)
        assert t.duration == pytest.approx((count * 64 + STREAM_EDGES) / 2.4e9, rel=1e-6)
    t = time_program(gemm(1024, 32, 4096, "bf16"), TRN3)
    # 32 moving columns in 64-cycle slots: at most half the peak.
    assert t.flops / t.duration <= 0.5 * core_timing(TRN3).peak_flops("bf16")


def test_dma_efficiency_rises_with_bytes_per_partition() -> None:
    """The same measurement `make validate-sim` tabulates (a share of the core's peak)."""
    sizes = [64, 128, 256, 512, 1024, 2048, 4096, 8192]
    rates = [dma_rate(b) for b in sizes]
    assert rates == sorted(rates)
    assert rates[0] < 0.25  # tiny rows: poor
    assert rates[sizes.index(2048)] > 0.8  # >= 2 KiB: near peak
    assert core_dma_bandwidth(TRN3) == pytest.approx(16 * 38.4e9)


def test_elementwise_over_hbm_is_dma_bound_on_one_core() -> None:
    t = time_program(elementwise(4096, 2048, "fp32", "gelu"), TRN3)
    busy = t.busy_ratio
    assert busy[Queue.SYNC] > 0.9
    assert busy[Queue.SCALAR] < busy[Queue.SYNC]
    assert t.dma_bytes / t.duration > 0.85 * core_dma_bandwidth(TRN3)


def test_elementwise_on_every_core_is_hbm_bound() -> None:
    """Eight Trn2 cores stream more than the chip's 2.9 TB/s of HBM: each gets
    an eighth and the op runs at HBM speed, not at the engines' speed."""
    chip = TRN2_RACK.chip
    assert 8 * core_dma_bandwidth(chip) > chip.hbm_bandwidth
    program = elementwise(4096, 2048, "fp32", "gelu")
    own = time_program(program, chip)
    shared = time_program(program, chip, chip.hbm_bandwidth / 8)
    assert shared.duration > own.duration
    chip_rate = 8 * shared.dma_bytes / shared.duration
    assert 0.85 * chip.hbm_bandwidth < chip_rate <= chip.hbm_bandwidth
    assert shared.busy_ratio[Queue.SYNC] > 0.9 > shared.busy_ratio[Queue.SCALAR]


def test_queues_run_in_parallel_and_semaphores_order_them() -> None:
    pb = ProgramBuilder("overlap")
    a, b = pb.sbuf("a", 128, 1024, "fp32"), pb.sbuf("b", 128, 1024, "fp32")
    v = pb.tensor_tensor(a.all(), a.all(), a.all(), "add", signal="v")
    pb.activation(b.all(), b.all(), "exp")  # scalar, independent: overlaps
    pb.activation(a.all(), a.all(), "exp", wait=(v,))  # waits for the vector op
    t, start, end = simulate(pb.build(), TRN3)
    one = 1024 / 1.2e9
    assert start[1] == 0.0
    assert start[2] == pytest.approx(end[0])
    assert t.duration == pytest.approx(2 * one)


def test_vector_fast_exp_is_four_times_scalar_exp_on_v4_only() -> None:
    def one(queue: Queue, chip: ChipSpec = TRN3) -> float:
        pb = ProgramBuilder("exp")
        a = pb.sbuf("a", 128, 2048, "fp32")
        pb.activation(a.all(), a.all(), "exp", queue=queue)
        return time_program(pb.build(), chip).duration

    assert 4 * one(Queue.VECTOR) == pytest.approx(one(Queue.SCALAR))
    trn2 = TRN2_RACK.chip
    assert one(Queue.VECTOR, trn2) > one(Queue.SCALAR, trn2)


@pytest.mark.parametrize(
    ("dtype", "psum", "queue", "per_cycle"),
    [
        ("bf16", False, Queue.VECTOR, 4),
        ("bf16", True, Queue.VECTOR, 2),
        ("fp32", False, Queue.VECTOR, 2),
        ("bf16", False, Queue.SCALAR, 2),
        ("fp32", False, Queue.SCALAR, 1),
        ("bf16", False, Queue.GPSIMD, 1),
    ],
)
def test_copy_rates_follow_the_engine_table(
    dtype: str, psum: bool, queue: Queue, per_cycle: int
) -> None:
    """Elements per partition per cycle: the Trn3 engine table (a PSUM
    source, which holds FP32, runs at the 32-bit rate)."""
    pb = ProgramBuilder("copy")
    src = pb.psum("p", 128, 512) if psum else pb.sbuf("s", 128, 2048, dtype)
    cols = src.cols
    pb.copy(pb.sbuf("d", 128, cols, dtype).all(), src.all(), queue=queue)
    t = time_program(pb.build(), TRN3)
    assert t.duration == pytest.approx(cols / per_cycle / 1.2e9)


def test_elementwise_floor_is_64_cycles() -> None:
    pb = ProgramBuilder("small")
    a = pb.sbuf("a", 128, 8, "fp32")
    for _ in range(10):
        pb.tensor_scalar(a.all(), a.all(), 2.0, "multiply")
    assert time_program(pb.build(), TRN3).duration == pytest.approx(10 * 64 / 1.2e9)


def test_timing_is_a_pure_function_of_the_program() -> None:
    first = time_program(gemm(600, 1000, 300), TRN3)
    again = time_program(gemm(600, 1000, 300), TRN3)
    assert first == again
