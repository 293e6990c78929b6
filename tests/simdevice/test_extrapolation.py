"""The fast path (`gemm_timing`, extrapolated from small programs) against the
exact event-driven run of the whole program, over GEMM shapes from 64 to
32,768 in every dimension."""

from collections.abc import Callable

import pytest

from benchmarks.sim_validation import REPORTED, draw_shapes
from simdevice.kernels.gemm import gemm
from simdevice.timing import time_program
from simdevice.topology import rack_spec
from simdevice.workloads import gemm_timing, steady_state

CHIP = rack_spec("trn3-gen2").chip


SHAPES = [*((m, n, k, "bf16") for m, n, k in REPORTED), *draw_shapes(50, seed=7)]


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
