"""Multi-head attention: every head as one program (heads overlap), its
numerics per head, and the fast path against the exact run of that program
with the bound docs/simulator.md states."""

import numpy as np
import pytest

from benchmarks.sim_validation import (
    ATTENTION_FAST_BOUND,
    ATTENTION_FAST_DIMS,
    ATTENTION_FAST_HEADS,
    ATTENTION_FAST_SEQS,
    ATTENTION_HEADS,
    ATTENTION_SEQS,
    attention_fast_error,
    heads_at_once,
)
from simdevice.isa import ProgramError
from simdevice.kernels.attention import attention
from simdevice.numerics import execute
from simdevice.timing import time_program
from simdevice.topology import rack_spec
from simdevice.workloads import EXACT_STEPS, parse_workload, workload_timing

GEN2 = rack_spec("trn3-gen2")


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    scores = q @ k.T / np.sqrt(q.shape[1])
    p = np.exp(scores - scores.max(1, keepdims=True))
    out: np.ndarray = (p / p.sum(1, keepdims=True)) @ v
    return out


@pytest.mark.parametrize(("seq", "heads"), [(200, 3), (128, 4)])
def test_every_head_of_one_program_matches_float64(seq: int, heads: int) -> None:
    d = 64
    rng = np.random.default_rng(seq * heads)
    q, k, v = (rng.standard_normal((heads, seq, d)) for _ in range(3))
    inputs = {
        "qT": np.concatenate([x.T for x in q]),
        "kT": np.concatenate([x.T for x in k]),
        "v": v.reshape(heads * seq, d),
    }
    o = execute(attention(seq, d, "bf16", heads), inputs)["o"].astype(np.float64)
    for h in range(heads):
        want = reference(q[h], k[h], v[h])
        got = o[h * seq : (h + 1) * seq]
        assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-2


def test_heads_overlap_in_one_program() -> None:
    for seq in ATTENTION_SEQS:
        for heads in ATTENTION_HEADS:
            c = heads_at_once(seq, heads)
            assert c["exact_cycles"] < c["one_head_times_heads_cycles"]
    # short sequences gain the most: the next head's loads and first tiles
    # fill the engines the last one leaves idle
    short, long_ = (heads_at_once(s, ATTENTION_HEADS[-1]) for s in (128, 2048))
    assert short["overstated"] > 4 * long_["overstated"]


def test_a_job_is_timed_as_its_heads_in_one_program() -> None:
    w = parse_workload({"kind": "attention", "seq": 512, "head_dim": 64, "heads": 4, "batch": 3})
    p = workload_timing(w, GEN2, cores=2, chips=1)
    exact = time_program(attention(512, 64, "bf16", 6), GEN2.chip)
    assert EXACT_STEPS >= 6  # so workload_timing plays the whole program
    assert p.compute.duration == pytest.approx(exact.duration, rel=1e-12)


FAST_CASES = [
    (gen, seq, d, heads)
    for gen in ("trn3-gen2", "trn2")
    for seq in ATTENTION_FAST_SEQS[:3]
    for d in ATTENTION_FAST_DIMS[-1:]
    for heads in ATTENTION_FAST_HEADS
]


@pytest.mark.parametrize(("gen", "seq", "head_dim", "heads"), FAST_CASES)
def test_fast_path_matches_the_exact_multi_head_run(
    gen: str, seq: int, head_dim: int, heads: int
) -> None:
    assert heads > EXACT_STEPS  # extrapolated, not timed whole
    assert attention_fast_error(gen, seq, head_dim, heads) <= ATTENTION_FAST_BOUND


def test_heads_must_be_positive() -> None:
    with pytest.raises(ProgramError, match=r"^heads:"):
        attention(128, 64, "bf16", 0)
