"""The data path against float64 references, within each dtype's error."""

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from simdevice.isa import Program, ProgramBuilder
from simdevice.kernels.attention import attention
from simdevice.kernels.gemm import gemm
from simdevice.kernels.rowwise import elementwise, layernorm, softmax
from simdevice.numerics import (
    execute,
    quantize,
    quantize_mx,
    round_bf16,
    round_fp8,
    sparsify,
)
from simdevice.timing import time_program
from simdevice.topology import rack_spec

RNG = np.random.default_rng(7)
# Normwise relative error bounds: input rounding plus output rounding (BF16
# output for 16-bit and narrower inputs).
TOLERANCE = {
    "fp32": 1e-6,
    "tf32": 1e-3,
    "bf16": 8e-3,
    "fp16": 4e-3,
    "fp8": 6e-2,
    "mxfp8": 6e-2,
    "mxfp4": 2.5e-1,
}


def rel_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


@pytest.mark.parametrize("dtype", list(TOLERANCE))
def test_tiled_gemm_with_psum_accumulation(dtype: str) -> None:
    m, n, k = 300, 700, 260  # edge tiles in every dimension, K over 3 PSUM passes
    a, b = RNG.standard_normal((m, k)), RNG.standard_normal((k, n))
    c = execute(gemm(m, n, k, dtype), {"aT": a.T, "b": b})["c"]
    err = rel_error(c, a @ b)
    assert err < TOLERANCE[dtype]
    if dtype != "fp32":
        assert err > 1e-8  # the dtype really was emulated


def test_sparse_gemm_matches_the_pruned_reference() -> None:
    m, n, k = 128, 256, 256
    a, b = RNG.standard_normal((m, k)), RNG.standard_normal((k, n))
    c = execute(gemm(m, n, k, "fp32", "2:4"), {"aT": a.T, "b": b})["c"]
    pruned = sparsify(a.T.astype(np.float32), "2:4").T
    assert np.count_nonzero(pruned) == m * k // 2
    assert rel_error(c, pruned.astype(np.float64) @ b) < 1e-6


def test_gemm_output_is_rounded_to_bf16() -> None:
    a, b = RNG.standard_normal((64, 64)), RNG.standard_normal((64, 64))
    c = execute(gemm(64, 64, 64, "bf16"), {"aT": a.T, "b": b})["c"]
    assert np.array_equal(c, round_bf16(c))


def test_softmax() -> None:
    x = RNG.standard_normal((300, 500)) * 4
    y = execute(softmax(300, 500), {"x": x})["y"]
    e = np.exp(x - x.max(axis=1, keepdims=True))
    assert np.abs(y - e / e.sum(axis=1, keepdims=True)).max() < 1e-6


def test_layernorm() -> None:
    x = RNG.standard_normal((200, 384)) * 3 + 1
    gamma, beta = RNG.standard_normal(384), RNG.standard_normal(384)
    y = execute(
        layernorm(200, 384),
        {"x": x, "gamma": np.tile(gamma, (128, 1)), "beta": np.tile(beta, (128, 1))},
    )["y"]
    ref = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5) * gamma + beta
    assert np.abs(y - ref).max() < 1e-4


@pytest.mark.parametrize("func", ["gelu", "silu", "tanh", "sigmoid", "relu"])
def test_activations(func: str) -> None:
    x = RNG.standard_normal((130, 64)) * 3
    y = execute(elementwise(130, 64, "fp32", func), {"x": x})["y"]
    refs = {
        "gelu": 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
        "silu": x / (1 + np.exp(-x)),
        "tanh": np.tanh(x),
        "sigmoid": 1 / (1 + np.exp(-x)),
        "relu": np.maximum(x, 0),
    }
    assert np.abs(y - refs[func]).max() < 1e-5


def test_attention_block() -> None:
    s, d = 300, 64
    q, k, v = (RNG.standard_normal((s, d)) for _ in range(3))
    o = execute(attention(s, d), {"qT": q.T, "kT": k.T, "v": v})["o"]
    scores = q @ k.T / np.sqrt(d)
    p = np.exp(scores - scores.max(1, keepdims=True))
    ref = (p / p.sum(1, keepdims=True)) @ v
    assert rel_error(o, ref) < 1e-2


BOUND = float(np.float32(1e38))
finite = arrays(np.float32, 64, elements=st.floats(-BOUND, BOUND, width=32, allow_subnormal=False))


@settings(max_examples=50, deadline=None)
@given(finite)
def test_bf16_rounding_is_nearest_with_8_bit_mantissa(x: np.ndarray) -> None:
    r = round_bf16(x)
    assert np.array_equal(round_bf16(r), r)  # idempotent
    assert np.all(r.view(np.uint32) & 0xFFFF == 0)  # fits in BF16
    assert np.all(np.abs(r - x) <= np.abs(x) * 2.0**-8 + 1e-45)


@settings(max_examples=50, deadline=None)
@given(arrays(np.float32, (64, 3), elements=st.floats(-1e4, 1e4, width=32, allow_subnormal=False)))
def test_mx_blocks_share_one_power_of_two_scale(x: np.ndarray) -> None:
    q = quantize_mx(x, "fp8")
    assert np.array_equal(quantize_mx(q, "fp8"), q)
    for block in range(2):
        rows = slice(32 * block, 32 * block + 32)
        amax = np.abs(x[rows]).max(axis=0)
        scale = np.exp2(np.floor(np.log2(np.where(amax > 0, amax, 1))) - 8)
        # elements are E4M3 multiples of the shared scale (finest step 2^-9)...
        units = q[rows] / (scale * 2.0**-9)
        assert np.array_equal(units, np.round(units))
        # ...and off by at most the top binade's clipping (1/8 of the block max)
        assert np.all(np.abs(q[rows] - x[rows]) <= amax / 8 + 1e-6)


def test_fp8_saturates_and_mx_keeps_range() -> None:
    assert round_fp8(np.array([1000.0]))[0] == 448.0
    # far beyond E4M3's range, the shared scale keeps the value
    big = np.full((32, 1), 4e5, dtype=np.float32)
    assert quantize(big, "mxfp8")[0, 0] == pytest.approx(4e5, rel=0.07)


def test_dma_accumulate_adds_into_sbuf_at_full_rate() -> None:
    def program(accumulate: bool) -> Program:
        pb = ProgramBuilder("acc")
        x, y, out = (
            pb.hbm("x", 128, 256, "fp32"),
            pb.hbm("y", 128, 256, "fp32"),
            pb.hbm("out", 128, 256, "fp32"),
        )
        t = pb.sbuf("t", 128, 256, "fp32")
        first = pb.dma(t.all(), x.all(), signal="ld")
        second = pb.dma(t.all(), y.all(), accumulate=accumulate, wait=(first,), signal="ld")
        pb.dma(out.all(), t.all(), wait=(second,))
        return pb.build()

    x, y = RNG.standard_normal((128, 256)), RNG.standard_normal((128, 256))
    summed = execute(program(True), {"x": x, "y": y})["out"]
    assert np.allclose(summed, x + y, atol=1e-6)
    chip = rack_spec("trn3-gen2").chip
    assert time_program(program(True), chip) == time_program(program(False), chip)


@pytest.mark.parametrize(
    ("alu", "ref"),
    [
        ("add", np.add),
        ("subtract", np.subtract),
        ("multiply", np.multiply),
        ("max", np.maximum),
        ("min", np.minimum),
        ("divide", np.divide),
    ],
)
def test_alu_ops_and_reductions(alu: str, ref: Any) -> None:
    pb = ProgramBuilder(alu)
    a_h, b_h, o_h = (
        pb.hbm("a", 64, 32, "fp32"),
        pb.hbm("b", 64, 32, "fp32"),
        pb.hbm("o", 64, 32, "fp32"),
    )
    r_h = pb.hbm("r", 64, 1, "fp32")
    a, b, r = (
        pb.sbuf("as", 64, 32, "fp32"),
        pb.sbuf("bs", 64, 32, "fp32"),
        pb.sbuf("rs", 64, 1, "fp32"),
    )
    la = pb.dma(a.all(), a_h.all(), signal="ld")
    lb = pb.dma(b.all(), b_h.all(), signal="ld")
    t = pb.tensor_tensor(a.all(), a.all(), b.all(), alu, wait=(la, lb), signal="v")
    t = pb.reduce(r.all(), a.all(), "max", wait=(t,), signal="v")
    t = pb.tensor_scalar(a.all(), a.all(), r.all(), "subtract", wait=(t,), signal="v")
    pb.dma(o_h.all(), a.all(), wait=(t,))
    pb.dma(r_h.all(), r.all(), wait=(t,))
    x, y = RNG.standard_normal((64, 32)), RNG.uniform(0.5, 2.0, (64, 32))
    got = execute(pb.build(), {"a": x, "b": y})
    want = ref(x, y)
    assert np.allclose(got["r"][:, 0], want.max(axis=1), rtol=1e-6)
    assert np.allclose(got["o"], want - want.max(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
