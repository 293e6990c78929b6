"""The fast path (`gemm_timing`, extrapolated from small programs) against the
exact event-driven run of the whole program, over GEMM shapes from 64 to
32,768 in every dimension."""

import math
from collections.abc import Callable

import numpy as np
import pytest

from simdevice.isa import MOVING_FREE_MAX
from simdevice.kernels.gemm import block_rows, gemm
from simdevice.timing import time_program
from simdevice.topology import rack_spec
from simdevice.workloads import EXACT_STEPS, gemm_timing, steady_state

CHIP = rack_spec("trn3-gen2").chip
LOW, HIGH = 64, 32768
MAX_INSTRUCTIONS = 120_000  # per exact run, so the whole test stays fast
# The argument order of kernels.gemm.gemm(m, n, k): small K, wide N.
REPORTED = [(4096, 4096, 128), (512, 4096, 128), (512, 32768, 128), (256, 16384, 256)]


def instructions(m: int, n: int, k: int, dtype: str) -> int:
    """Roughly how many instructions gemm(m, n, k) emits (the exact run's cost)."""
    rows = block_rows(k, dtype)
    blocks, tiles = math.ceil(m / rows), math.ceil(n / MOVING_FREE_MAX)
    k_tiles, m_tiles = math.ceil(k / 128), math.ceil(min(m, rows) / 128)
    return blocks * tiles * (k_tiles * (1 + 2 * m_tiles) + 2 * m_tiles)


def extrapolated(m: int, n: int, k: int, dtype: str) -> bool:
    """Does the fast path extrapolate over rows or columns (not time it whole)?"""
    return math.ceil(m / block_rows(k, dtype)) > EXACT_STEPS or n // MOVING_FREE_MAX > EXACT_STEPS


def draw_shapes(count: int, seed: int = 7) -> list[tuple[int, int, int, str]]:
    """Shapes drawn log-uniformly in [64, 32768], by family: small K and wide
    N, large K and narrow N, and anything; every dtype; each one extrapolated
    and cheap enough to time exactly."""
    rng = np.random.default_rng(seed)
    dtypes = ("bf16", "fp32", "fp8", "mxfp8")

    def log_uniform(lo: int, hi: int) -> int:
        return round(math.exp(rng.uniform(math.log(lo), math.log(hi))))

    # (m, n, k) ranges: small K and wide N, large K and narrow N, anything
    families = [
        ((LOW, 4096), (8192, HIGH), (LOW, 512)),
        ((4096, HIGH), (LOW, 1024), (4096, HIGH)),
        ((LOW, HIGH), (LOW, HIGH), (LOW, HIGH)),
    ]
    shapes: list[tuple[int, int, int, str]] = []
    while len(shapes) < count:
        for family in families:
            m, n, k = (log_uniform(lo, hi) for lo, hi in family)
            dtype = dtypes[len(shapes) % len(dtypes)]
            if extrapolated(m, n, k, dtype) and instructions(m, n, k, dtype) <= MAX_INSTRUCTIONS:
                shapes.append((m, n, k, dtype))
    return shapes[:count]


SHAPES = [*((m, n, k, "bf16") for m, n, k in REPORTED), *draw_shapes(50)]


def test_the_drawn_shapes_cover_every_family_and_dtype() -> None:
    drawn = SHAPES[len(REPORTED) :]
    assert len(drawn) >= 50
    assert {s[3] for s in drawn} == {"bf16", "fp32", "fp8", "mxfp8"}
    assert any(k <= 512 and n >= 8192 for _, n, k, _ in drawn)
    assert any(k >= 4096 and n <= 1024 for _, n, k, _ in drawn)
    for axis in range(3):
        values = [int(s[axis]) for s in drawn]
        assert min(values) < 256 and max(values) > 8192


@pytest.mark.parametrize(("m", "n", "k", "dtype"), SHAPES)
def test_fast_path_is_within_one_percent_of_the_exact_run(
    m: int, n: int, k: int, dtype: str
) -> None:
    exact = time_program(gemm(m, n, k, dtype), CHIP)
    fast = gemm_timing(m, n, k, dtype=dtype, sparsity="dense", chip=CHIP)
    assert fast.duration == pytest.approx(exact.duration, rel=0.01)
    assert fast.instructions == exact.instructions
    assert fast.flops == pytest.approx(exact.flops, rel=1e-9)
    assert fast.busy == pytest.approx(exact.busy, rel=0.01)


def test_steady_state_finds_the_period_and_the_warm_up() -> None:
    def total(step_costs: list[float]) -> Callable[[int], float]:
        return lambda steps: sum(step_costs[:steps])

    # two warm-up steps, then steps alternating 1 and 2: from 2 steps on,
    # every 2 more cost the same
    assert steady_state(total([3.0, 5.0] + [1.0, 2.0] * 10)) == (2, 2)
    assert steady_state(total([4.0] + [1.0, 1.0, 6.0] * 10)) == (1, 3)
    assert steady_state(total([7.0] * 20)) == (1, 1)
