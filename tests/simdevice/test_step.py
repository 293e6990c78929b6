"""A training step's programs, timed whole by the exact model and by the
`workload_timing`'s fast path, and what timing a workload counts as timed."""

import pytest

from simdevice.step import layer_programs, time_exactly
from simdevice.topology import rack_spec
from simdevice.workloads import (
    TIMED,
    clear_caches,
    parse_workload,
    train_step_programs,
    workload_timing,
)

RACK = rack_spec("trn3-gen2")


def test_the_exact_run_times_each_distinct_program_once() -> None:
    programs = layer_programs(hidden=256, seq=256, batch=1, heads=2, dtype="bf16")
    exact = time_exactly(programs, RACK.chip)
    distinct = {(p.builder, p.args) for p in programs}
    # the forward and the backward share GEMM shapes
    assert exact.programs == len(distinct) < len(programs)
    assert exact.instructions == sum(len(builder(*args)) for builder, args in distinct)
    executed = sum(len(p.builder(*p.args)) * p.runs for p in programs)
    assert exact.layer.instructions == round(executed)


def test_workload_timing_agrees_with_the_exact_run_where_it_extrapolates() -> None:
    # 16,384 tokens: the token-long GEMMs span 32 row blocks, past what the
    # fast path times whole, and attention runs as four 4,096-token windows
    w = parse_workload({"kind": "train-step", "hidden": 512, "seq": 16384, "layers": 2})
    exact = time_exactly(train_step_programs(w), RACK.chip)
    fast = workload_timing(w, RACK, 8, 1).compute
    assert fast.instructions == exact.layer.instructions * 2
    assert fast.duration == pytest.approx(exact.layer.duration * 2, rel=0.01)
    assert fast.flops == pytest.approx(exact.layer.flops * 2, rel=1e-9)


def test_timing_a_workload_counts_each_timed_program_once() -> None:
    clear_caches()
    w = parse_workload({"kind": "train-step", "hidden": 256, "seq": 512})
    workload_timing(w, RACK, 8, 1)
    timed = (TIMED.programs, TIMED.instructions)
    assert timed[0] > 0
    assert timed[1] > 0
    # another core count is timed anew, but every program's timing is cached
    workload_timing(w, RACK, 16, 2)
    assert (TIMED.programs, TIMED.instructions) == timed
    clear_caches()
    assert (TIMED.programs, TIMED.instructions) == (0, 0)
