"""Workload specs, their timings on a set of cores and the collective model."""

from collections.abc import Callable
from typing import Any

import pytest

from simdevice.checks import check
from simdevice.collectives import time_collective
from simdevice.fabric import first_chips
from simdevice.isa import Program
from simdevice.kernels.rowwise import elementwise, layernorm, softmax
from simdevice.timing import time_program
from simdevice.topology import RackSpec, rack_spec
from simdevice.workloads import (
    EXACT_STEPS,
    KINDS,
    WorkloadError,
    parse_workload,
    rowwise_timing,
    workload_timing,
)

GEN2 = rack_spec("trn3-gen2")
TRN2 = rack_spec("trn2")

EXAMPLES: dict[str, dict[str, Any]] = {
    "gemm": {"kind": "gemm", "m": 1024, "n": 1024, "k": 1024, "dtype": "bf16", "iterations": 10},
    "elementwise": {"kind": "elementwise", "rows": 1024, "cols": 1024, "func": "silu"},
    "softmax": {"kind": "softmax", "rows": 1024, "cols": 1024},
    "layernorm": {"kind": "layernorm", "rows": 1024, "cols": 1024},
    "attention": {"kind": "attention", "seq": 512, "head_dim": 64, "heads": 8},
    "train-step": {"kind": "train-step", "hidden": 512, "seq": 256, "layers": 2, "chips": 8},
    "all-reduce": {"kind": "all-reduce", "bytes": 1 << 26},
    "all-gather": {"kind": "all-gather", "bytes": 1 << 26, "chips": 144},
}


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_parses_and_is_timed(kind: str) -> None:
    w = parse_workload(EXAMPLES[kind])
    assert w.kind == kind
    assert w.spec()["kind"] == kind
    p = workload_timing(w, GEN2, 8, 2)
    assert p.duration > 0
    assert p.iterations == EXAMPLES[kind].get("iterations", 1)


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"kind": "matmul"}, "kind"),
        ({"kind": "gemm", "m": 1, "n": 1}, "k"),
        ({"kind": "gemm", "m": 0, "n": 1, "k": 1}, "m"),
        ({"kind": "gemm", "m": 1, "n": 1, "k": 1, "dtype": "int8"}, "dtype"),
        ({"kind": "gemm", "m": 1, "n": 1, "k": 1, "sparsity": "3:4"}, "sparsity"),
        ({"kind": "gemm", "m": 1, "n": 1, "k": 1, "iterations": 0}, "iterations"),
        ({"kind": "gemm", "m": "8", "n": 1, "k": 1}, "m"),
        ({"kind": "gemm", "m": True, "n": 1, "k": 1}, "m"),
        ({"kind": "gemm", "m": 1, "n": 1, "k": 1, "colour": "red"}, "colour"),
        ({"kind": "attention", "seq": 128, "head_dim": 256}, "head_dim"),
        ({"kind": "train-step", "hidden": 1000, "seq": 8, "heads": 3}, "heads"),
        ({"kind": "softmax", "rows": 8, "cols": 8, "dtype": "fp8"}, "dtype"),
    ],
)
def test_bad_specs_name_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(WorkloadError, match=rf"^{field}: "):
        parse_workload(spec)


def test_defaults_are_filled_in() -> None:
    w = parse_workload({"kind": "gemm", "m": 8, "n": 8, "k": 8})
    assert w.spec() == {
        "kind": "gemm",
        "m": 8,
        "n": 8,
        "k": 8,
        "dtype": "bf16",
        "sparsity": "dense",
        "iterations": 1,
        "numerics": False,
    }


def test_shapes_a_core_cannot_hold_are_refused_when_timed() -> None:
    w = parse_workload({"kind": "softmax", "rows": 128, "cols": 100_000})
    with pytest.raises(WorkloadError, match=r"^cols: "):
        workload_timing(w, GEN2, 1, 1)


def test_more_cores_take_less_time() -> None:
    w = parse_workload({"kind": "gemm", "m": 4096, "n": 2048, "k": 2048})
    assert workload_timing(w, GEN2, 8, 1).duration < workload_timing(w, GEN2, 2, 1).duration / 3


def _all(kind: str, spec: RackSpec, chips: int, nbytes: float) -> float:
    return time_collective(kind, spec, first_chips(spec, chips), nbytes).duration


def test_collectives_pay_more_latency_between_servers() -> None:
    inside = time_collective("all-reduce", GEN2, first_chips(GEN2, 4), 0)
    across = time_collective("all-reduce", GEN2, first_chips(GEN2, 8), 0)
    assert [p.level for p in inside.phases] == ["intra-server"]
    assert [p.level for p in across.phases] == ["intra-server", "inter-server"]
    assert across.duration > inside.duration


def test_collective_bandwidth_term() -> None:
    nbytes = 1 << 30
    t = time_collective("all-reduce", GEN2, first_chips(GEN2, 144), nbytes)
    assert t.bytes_per_chip == pytest.approx(2 * 143 / 144 * nbytes)
    assert _all("all-gather", GEN2, 144, nbytes) < t.duration
    assert _all("all-reduce", TRN2, 16, nbytes) < _all(
        "all-reduce", rack_spec("trn3-gen1"), 16, nbytes
    )  # a Trn2 server's torus is faster than a Trn3 server's PCIe switch
    assert _all("all-gather", GEN2, 1, nbytes) == 0


def test_collective_chips_must_fit_the_rack() -> None:
    w = parse_workload({"kind": "all-reduce", "bytes": 1024, "chips": 145})
    with pytest.raises(WorkloadError, match=r"^chips: "):
        workload_timing(w, GEN2, 1, 1)


def test_train_step_has_a_communication_phase() -> None:
    w = parse_workload({"kind": "train-step", "hidden": 1024, "seq": 512, "chips": 144})
    p = workload_timing(w, GEN2, 32, 4)
    assert p.comm > 0 and p.comm_bytes == pytest.approx(2 * 143 / 144 * 12 * 1024**2 * 2)
    alone = workload_timing(parse_workload({**w.spec(), "chips": 1}), GEN2, 32, 4)
    assert alone.comm == 0
    assert p.compute == alone.compute
    # forward + backward = 3x the forward GEMM FLOPs (plus attention and norms)
    gemm_flops = 3 * 2 * 512 * 1024 * 12 * 1024
    assert gemm_flops < p.compute.flops < 1.3 * gemm_flops


def test_numerics_flag_must_be_a_boolean() -> None:
    with pytest.raises(WorkloadError, match=r"^numerics: "):
        parse_workload({"kind": "softmax", "rows": 8, "cols": 8, "numerics": "yes"})
    with pytest.raises(WorkloadError, match=r"^numerics: "):
        parse_workload({"kind": "all-reduce", "bytes": 8, "numerics": True})


@pytest.mark.parametrize(
    ("kind", "shape", "dtype"),
    [
        ("gemm", {"m": 200, "n": 300, "k": 150}, "bf16"),
        ("softmax", {"rows": 150, "cols": 256}, "bf16"),
        ("elementwise", {"rows": 150, "cols": 256}, "bf16"),
        ("layernorm", {"rows": 150, "cols": 256}, "fp32"),
        ("attention", {"seq": 160, "head_dim": 32}, "bf16"),
    ],
)
def test_checks_compare_one_core_with_float64(kind: str, shape: dict[str, int], dtype: str) -> None:
    result = check(kind, shape, dtype)
    assert result.ok
    assert 0 < result.relative_error <= result.tolerance
    assert check(kind, shape, dtype) == result  # seeded: the same inputs every time


def test_sparse_gemm_check_uses_the_pruned_weights() -> None:
    result = check("gemm", {"m": 128, "n": 128, "k": 128}, "fp32", sparsity="2:4")
    assert result.relative_error < 1e-6


def test_a_job_must_fit_the_chips_hbm() -> None:
    w = parse_workload({"kind": "gemm", "m": 400_000, "n": 400_000, "k": 4096})
    with pytest.raises(WorkloadError, match=r"^m: the job keeps .* GiB .* 144 GiB"):
        workload_timing(w, GEN2, 8, 1)
    fits = parse_workload({"kind": "gemm", "m": 4096, "n": 4096, "k": 4096})
    footprint = (512 * 4096 + 4096 * 4096 + 512 * 4096) * 2
    assert workload_timing(fits, GEN2, 8, 1).hbm_bytes == footprint


def test_k_too_long_for_sbuf_is_refused_without_building_anything() -> None:
    w = parse_workload({"kind": "gemm", "m": 1, "n": 1, "k": 10**6})
    with pytest.raises(WorkloadError, match=r"^k: .*split K"):
        workload_timing(w, GEN2, 1, 1)


def test_long_k_uses_smaller_row_blocks() -> None:
    w = parse_workload({"kind": "gemm", "m": 2048, "n": 1024, "k": 40_000})
    p = workload_timing(w, GEN2, 1, 1)
    utilization = p.compute.flops / (p.compute.duration * 78.64e12)
    assert utilization > 0.8


@pytest.mark.parametrize(
    ("builder", "args"),
    [(layernorm, ("fp32",)), (softmax, ("bf16",)), (elementwise, ("fp32", "gelu"))],
)
def test_rowwise_extrapolation_matches_the_full_program(
    builder: Callable[..., Program], args: tuple[str, ...]
) -> None:
    chip = GEN2.chip
    rows = (EXACT_STEPS + 23) * 128 + 77  # past the exact limit, with a partial tile
    full = time_program(builder(rows, 512, *args), chip)
    fast = rowwise_timing(builder, rows, 512, *args, chip=chip)
    assert fast.duration == pytest.approx(full.duration, rel=0.01)
    assert fast.instructions == full.instructions


def test_huge_row_counts_time_quickly_and_scale_linearly() -> None:
    small = workload_timing(
        parse_workload({"kind": "elementwise", "rows": 10**6, "cols": 64}), GEN2, 1, 1
    )
    big = workload_timing(
        parse_workload({"kind": "elementwise", "rows": 10**8, "cols": 64}), GEN2, 1, 1
    )
    assert big.duration == pytest.approx(100 * small.duration, rel=0.01)


def test_train_step_tokens_are_bounded() -> None:
    with pytest.raises(WorkloadError, match=r"^seq: "):
        parse_workload({"kind": "train-step", "hidden": 1024, "seq": 65536, "batch": 2})
