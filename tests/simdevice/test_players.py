"""The players (a kernel's program timed without building it) against the
exact model on the built program: the same `ProgramTiming` to the bit, the
same error for a program that cannot run, and workload timings that do not
change when `workload_timing` uses them."""

import itertools
import random
from typing import Any

import pytest

from simdevice import players
from simdevice.isa import SPARSITY
from simdevice.kernels.attention import attention
from simdevice.kernels.gemm import gemm
from simdevice.kernels.rowwise import layernorm
from simdevice.players import play, play_attention, play_gemm
from simdevice.timing import ProgramTiming, time_program
from simdevice.topology import ChipSpec, rack_spec
from simdevice.workloads import (
    Workload,
    WorkloadTiming,
    clear_caches,
    parse_workload,
    workload_timing,
)

TRN3, TRN2 = rack_spec("trn3-gen2"), rack_spec("trn2")
CHIPS = {"trn3": TRN3.chip, "trn2": TRN2.chip}


def exactly(builder: Any, args: tuple[Any, ...], chip: ChipSpec, bw: float | None) -> Any:
    """The built program's timing, or the error building or timing it raises."""
    try:
        return time_program(builder(*args), chip, bw)
    except ValueError as err:
        return (type(err), str(err))


def played(player: Any, args: tuple[Any, ...], chip: ChipSpec, bw: float | None) -> Any:
    try:
        return player(*args, chip=chip, dma_bandwidth=bw)
    except ValueError as err:
        return (type(err), str(err))


def gemm_cases() -> list[tuple[Any, ...]]:
    """Edge tiles in every dimension, long K (smaller row blocks, one A
    buffer), every dtype and sparsity, both core generations, HBM shares."""
    shapes = [(1, 1, 1), (130, 700, 300), (512, 4096, 128), (1000, 1500, 2000), (300, 520, 32768)]
    kinds = [("bf16", "dense"), ("fp32", "dense"), ("tf32", "dense"), ("fp8", "dense")]
    kinds += [("mxfp8", "dense"), ("mxfp4", "1:4"), ("fp16", "2:4"), ("bf16", "4:12")]
    cases = [
        (shape, kind, chip, bw)
        for shape, kind, chip, bw in itertools.product(shapes, kinds, CHIPS, (None, 1.5e11))
    ]
    rng = random.Random(11)
    for _ in range(20):
        shape = (rng.randint(1, 5000), rng.randint(1, 5000), rng.randint(1, 5000))
        kind = (rng.choice(["bf16", "fp8", "mxfp8", "fp32"]), rng.choice(SPARSITY))
        cases.append((shape, kind, rng.choice(list(CHIPS)), rng.choice([None, 2e11])))
    return cases


@pytest.mark.parametrize(("shape", "kind", "chip", "bw"), gemm_cases())
def test_a_played_gemm_is_the_exact_timing_of_the_built_one(
    shape: tuple[int, int, int], kind: tuple[str, str], chip: str, bw: float | None
) -> None:
    args = (*shape, *kind)
    assert played(play_gemm, args, CHIPS[chip], bw) == exactly(gemm, args, CHIPS[chip], bw)


@pytest.mark.parametrize(
    "args",
    [
        (2048, 128, "bf16", 2),  # the step's windows
        (4096, 64, "fp16", 3),
        (513, 17, "bf16", 5),  # edge tiles of queries, keys and score chunks
        (1, 1, "bf16", 1),
        (100, 128, "fp16", 1),
    ],
)
@pytest.mark.parametrize("chip", list(CHIPS))
@pytest.mark.parametrize("bw", [None, 1e11])
def test_played_attention_is_the_exact_timing_of_the_built_one(
    args: tuple[Any, ...], chip: str, bw: float | None
) -> None:
    assert played(play_attention, args, CHIPS[chip], bw) == exactly(
        attention, args, CHIPS[chip], bw
    )


@pytest.mark.parametrize(
    ("builder", "args", "error"),
    [
        (gemm, (0, 8, 8, "bf16", "dense"), "m:"),
        (gemm, (8, 8, 8, "mxfp8", "dense"), "dtype:"),  # on trn2's cores
        (gemm, (8, 8, 8, "bf16", "3:5"), "sparsity:"),
        (gemm, (8, 8, 10**6, "bf16", "dense"), "k:"),
        (attention, (8192, 128, "bf16", 1), "seq:"),
        (attention, (64, 129, "bf16", 1), "head_dim:"),
        (attention, (64, 64, "fp32", 1), "dtype:"),
    ],
)
def test_a_program_that_cannot_run_fails_as_the_built_one_does(
    builder: Any, args: tuple[Any, ...], error: str
) -> None:
    expected = exactly(builder, args, TRN2.chip, None)
    assert isinstance(expected, tuple), expected
    assert expected[1].startswith(error)
    with pytest.raises(expected[0]) as raised:
        play(builder, args, TRN2.chip, None)
    assert str(raised.value) == expected[1]


@pytest.mark.parametrize(
    ("builder", "args"), [(gemm, (64, 64, 64, "bf16", "dense")), (attention, (64, 64, "bf16", 2))]
)
def test_a_share_of_no_bandwidth_is_refused(builder: Any, args: tuple[Any, ...]) -> None:
    with pytest.raises(ValueError, match=r"^dma_bandwidth: must be > 0"):
        play(builder, args, TRN3.chip, 0.0)


def test_a_builder_without_a_player_is_built_and_timed() -> None:
    args = (1000, 3000, "bf16")
    assert layernorm not in players.PLAYERS
    assert play(layernorm, args, TRN3.chip, None) == time_program(layernorm(*args), TRN3.chip)


WORKLOADS = [
    ({"kind": "train-step", "hidden": 1024, "seq": 2048, "layers": 2, "chips": 144}, 32, 4),
    ({"kind": "train-step", "hidden": 512, "seq": 8192, "heads": 8}, 8, 1),
    ({"kind": "train-step", "hidden": 2048, "seq": 1024, "batch": 2, "dtype": "fp16"}, 16, 2),
    ({"kind": "gemm", "m": 20000, "n": 9000, "k": 3000, "dtype": "mxfp8"}, 8, 1),
    ({"kind": "attention", "seq": 1024, "heads": 40, "head_dim": 96}, 4, 1),
]


def cold_timing(workload: Workload, cores: int, chips: int, bw: float | None) -> WorkloadTiming:
    clear_caches()
    return workload_timing(workload, TRN3, cores, chips, bw)


@pytest.mark.parametrize(("spec", "cores", "chips"), WORKLOADS)
@pytest.mark.parametrize("bw", [None, 2e11])
def test_workload_timings_are_the_same_as_from_built_programs(
    spec: dict[str, Any], cores: int, chips: int, bw: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each workload timing computed twice: as `workload_timing` does now, and with every
    program built and played instruction by instruction (no players)."""
    workload = parse_workload(spec)
    fast = cold_timing(workload, cores, chips, bw)
    monkeypatch.setattr(players, "PLAYERS", {})
    built = cold_timing(workload, cores, chips, bw)
    clear_caches()
    assert isinstance(fast.compute, ProgramTiming)
    assert fast == built
