"""The programs one core runs in a layer of a data-parallel training step.

One description serves two timers: `workloads.workload_timing` times each
program by its fast path (extrapolated from small programs, played without
building them: see simdevice.players), and `time_exactly` builds every
distinct program whole and plays it through the event-driven model, which is
what the fast path is checked and benchmarked against.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from simdevice.isa import Program, collector_paused
from simdevice.kernels.attention import MAX_SEQ, attention
from simdevice.kernels.gemm import gemm
from simdevice.kernels.rowwise import layernorm
from simdevice.timing import ProgramTiming, combine, time_program
from simdevice.topology import ChipSpec


@dataclass(frozen=True)
class StepProgram:
    """A program of the layer (`builder(*args)`) and how often a layer runs it."""

    builder: Callable[..., Program]
    args: tuple[Any, ...]
    runs: float


def train_step_gemms(tokens: int, hidden: int) -> list[tuple[int, int, int]]:
    """(m, n, k) of one transformer layer's GEMMs: forward, then the input and
    weight gradients of the backward pass (QKV, output projection, MLP up, down)."""
    t, h, f = tokens, hidden, 4 * hidden
    forward = [(t, 3 * h, h), (t, h, h), (t, f, h), (t, h, f)]
    input_grads = [(t, h, 3 * h), (t, h, h), (t, h, f), (t, f, h)]
    weight_grads = [(h, 3 * h, t), (h, h, t), (h, f, t), (f, h, t)]
    return forward + input_grads + weight_grads


def layer_programs(hidden: int, seq: int, batch: int, heads: int, dtype: str) -> list[StepProgram]:
    """Every core runs a whole layer on its own `seq * batch` tokens; the
    backward of attention counts as twice its forward (attention longer than
    one core's MAX_SEQ runs as that many MAX_SEQ windows) and layernorm's
    backward as once more its forward."""
    tokens = seq * batch
    programs = [
        StepProgram(gemm, (m, n, k, dtype, "dense"), 1.0)
        for m, n, k in train_step_gemms(tokens, hidden)
    ]
    window = min(seq, MAX_SEQ)
    programs.append(
        StepProgram(attention, (window, hidden // heads, dtype, heads * batch), 3.0 * seq / window)
    )
    programs.append(StepProgram(layernorm, (tokens, hidden, "bf16"), 4.0))
    return programs


@dataclass(frozen=True)
class ExactTiming:
    """A layer timed program by program, and how much was timed to get it."""

    layer: ProgramTiming
    programs: int  # distinct programs built and played
    instructions: int  # their instructions, each played once


def time_exactly(
    programs: list[StepProgram], chip: ChipSpec, dma_bandwidth: float | None = None
) -> ExactTiming:
    """Build each distinct program whole and time it instruction by instruction."""
    timed: dict[tuple[Callable[..., Program], tuple[Any, ...]], ProgramTiming] = {}
    for p in programs:
        key = (p.builder, p.args)
        if key not in timed:
            with collector_paused():
                timed[key] = time_program(p.builder(*p.args), chip, dma_bandwidth)
    layer = combine([(timed[(p.builder, p.args)], p.runs) for p in programs])
    return ExactTiming(layer, len(timed), sum(t.instructions for t in timed.values()))
