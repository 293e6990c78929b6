"""The instruction set refuses programs that cannot run, naming the field."""

import pytest

from simdevice.isa import CapacityError, ProgramBuilder, ProgramError, Queue, Token
from simdevice.kernels.gemm import gemm
from simdevice.timing import check_capacity, time_program
from simdevice.topology import rack_spec

TRN3 = rack_spec("trn3-gen2").chip
TRN2 = rack_spec("trn2").chip


def test_out_of_bounds_view_is_refused_not_wrapped() -> None:
    pb = ProgramBuilder("bounds")
    t = pb.sbuf("t", 128, 64)
    with pytest.raises(ProgramError, match=r"^cols: .*no silent wrap"):
        t[0:128, 0:65]
    with pytest.raises(ProgramError, match=r"^rows: "):
        t[0:129, 0:1]


def test_on_chip_buffers_have_at_most_128_partitions() -> None:
    with pytest.raises(ProgramError, match=r"^partitions: "):
        ProgramBuilder("p").sbuf("t", 129, 4)


def test_sbuf_overflow_is_a_capacity_error() -> None:
    pb = ProgramBuilder("big")
    pb.sbuf("a", 128, 100 * 1024, "bf16")
    pb.sbuf("b", 128, 40 * 1024, "bf16")  # 280 KiB per partition > 256 KiB
    with pytest.raises(CapacityError, match=r"^sbuf: .*256 KiB|^sbuf: .*262144"):
        check_capacity(pb.build(), TRN3)


def test_trn2_sbuf_is_smaller_than_trn3() -> None:
    pb = ProgramBuilder("mid")
    pb.sbuf("a", 128, 120 * 1024, "bf16")  # 240 KiB: fits Trn3 (256), not Trn2 (224)
    program = pb.build()
    check_capacity(program, TRN3)
    with pytest.raises(CapacityError, match=r"^sbuf: "):
        check_capacity(program, TRN2)


def test_psum_overflow_is_a_capacity_error() -> None:
    pb = ProgramBuilder("psum")
    for i in range(9):
        pb.psum(f"bank{i}", 128, 512)
    with pytest.raises(CapacityError, match=r"^psum: "):
        time_program(pb.build(), TRN3)


def test_matmul_output_must_stay_in_one_psum_bank() -> None:
    pb = ProgramBuilder("bank")
    w, x = pb.sbuf("w", 128, 128), pb.sbuf("x", 128, 512)
    acc = pb.psum("acc", 128, 1024)
    pb.load_stationary(w.all())
    with pytest.raises(ProgramError, match=r"^dst: .*cross a PSUM bank"):
        pb.multiply_moving(acc[0:128, 256:768], x.all())
    pb.multiply_moving(acc[0:128, 512:1024], x.all())


def test_moving_free_size_and_stationary_order() -> None:
    pb = ProgramBuilder("mm")
    x = pb.sbuf("x", 128, 600)
    acc = pb.psum("acc", 128, 512)
    with pytest.raises(ProgramError, match=r"^stationary: "):
        pb.multiply_moving(acc[0:128, 0:512], x[0:128, 0:512])
    pb.load_stationary(pb.sbuf("w", 128, 128).all())
    with pytest.raises(ProgramError, match=r"^moving: free size 600"):
        pb.multiply_moving(acc[0:128, 0:512], x.all())


def test_semaphore_rules() -> None:
    pb = ProgramBuilder("sem")
    pb.barrier(Queue.VECTOR, signal="s")
    with pytest.raises(ProgramError, match=r"^signal: .*vector queue already"):
        pb.barrier(Queue.SCALAR, signal="s")
    with pytest.raises(ProgramError, match=r"^wait: "):
        pb.barrier(Queue.SCALAR, wait=(Token("s", 2),))
    with pytest.raises(ProgramError, match=r"^wait: "):
        pb.barrier(Queue.SCALAR, wait=(Token("never", 1),))


def test_dma_directions_and_dtypes() -> None:
    pb = ProgramBuilder("dma")
    h, s, f = pb.hbm("h", 128, 64), pb.sbuf("s", 128, 64), pb.sbuf("f", 128, 64, "fp32")
    with pytest.raises(ProgramError, match=r"^dst: "):
        pb.dma(h.all(), h.all())
    with pytest.raises(ProgramError, match=r"^dtype: "):
        pb.dma(f.all(), h.all())
    with pytest.raises(ProgramError, match=r"^dst: "):
        pb.dma(h.all(), s.all(), accumulate=True)


def test_mx_matmul_needs_neuroncore_v4() -> None:
    program = gemm(128, 512, 128, "mxfp8")
    time_program(program, TRN3)
    with pytest.raises(ProgramError, match=r"^dtype: neuroncore-v3 has no mxfp8"):
        time_program(program, TRN2)
