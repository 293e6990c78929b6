"""Invariants of the timing model and the server, over generated inputs."""

from dataclasses import dataclass

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simdevice.faults import Fault, FaultKind
from simdevice.isa import Op, Queue
from simdevice.kernels.gemm import gemm
from simdevice.kernels.rowwise import layernorm
from simdevice.server import TERMINAL, ServerSim
from simdevice.timing import core_timing, durations, simulate
from simdevice.topology import rack_spec
from simdevice.workloads import parse_workload

GEN2 = rack_spec("trn3-gen2")
CHIP = GEN2.chip


@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(1, 1200),
    n=st.integers(1, 1200),
    k=st.integers(1, 600),
    dtype=st.sampled_from(["bf16", "fp32", "mxfp8", "fp8"]),
)
def test_gemm_timing_respects_queues_semaphores_and_peak(
    m: int, n: int, k: int, dtype: str
) -> None:
    program = gemm(m, n, k, dtype)
    timing, start, end = simulate(program, CHIP)
    # no engine is busier than the whole run, nothing beats the peak
    assert all(b <= timing.duration * (1 + 1e-9) for b in timing.busy)
    assert timing.flops <= core_timing(CHIP).peak_flops("bf16") * timing.duration * (1 + 1e-9)
    assert (
        timing.flops == 2.0 * m * n * k * {"bf16": 1, "fp32": 4, "mxfp8": 0.25, "fp8": 0.5}[dtype]
    )
    # every wait is honoured: an instruction starts after the signal it waits for
    events: list[float] = []
    queues = np.asarray(program.queue)
    for i, (waits, sig) in enumerate(zip(program.waits, program.signal, strict=True)):
        for event in waits:
            assert start[i] >= events[event] - 1e-15
        if sig >= 0:
            events.append(end[i])
    # compute queues are in order: each instruction starts once the previous
    # one has left the engine (a LoadStationary runs behind the matmul before
    # it, and a matmul's result arrives after its fill/drain latency)
    busy, latency = durations(program, CHIP)
    engine_free = start + busy
    foreground = np.asarray(program.op) != Op.LOAD_STATIONARY
    for q in (Queue.TENSOR, Queue.VECTOR, Queue.SCALAR, Queue.GPSIMD):
        idx = np.flatnonzero((queues == q) & foreground)
        assert np.all(start[idx][1:] >= engine_free[idx][:-1] - 1e-15)
    assert np.all(end >= engine_free + latency - 1e-15)


@settings(max_examples=15, deadline=None)
@given(rows=st.integers(1, 700), cols=st.integers(1, 2048), share=st.floats(1e10, 1e12))
def test_less_hbm_bandwidth_never_speeds_a_program_up(rows: int, cols: int, share: float) -> None:
    program = layernorm(rows, cols)
    full = simulate(program, CHIP)[0].duration
    assert simulate(program, CHIP, share)[0].duration >= full * (1 - 1e-12)


@dataclass(frozen=True)
class Submit:
    chip: int
    cores: tuple[int, ...]
    iterations: int


@dataclass(frozen=True)
class Advance:
    seconds: float


@dataclass(frozen=True)
class Cancel:
    nth: int


@dataclass(frozen=True)
class Hang:
    chip: int
    core: int
    on: bool


operations = st.lists(
    st.one_of(
        st.builds(
            Submit,
            chip=st.integers(0, 3),
            cores=st.sets(st.integers(0, 7), min_size=1, max_size=3).map(tuple),
            iterations=st.integers(1, 2000),
        ),
        st.builds(Advance, seconds=st.floats(0, 0.2)),
        st.builds(Cancel, nth=st.integers(0, 20)),
        st.builds(Hang, chip=st.integers(0, 3), core=st.integers(0, 7), on=st.booleans()),
    ),
    max_size=30,
)


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


@settings(max_examples=40, deadline=None)
@given(operations)
def test_server_invariants(ops: list[object]) -> None:
    clock = Clock()
    sim = ServerSim(GEN2, 0, clock=clock)
    workload = {"kind": "gemm", "m": 256, "n": 512, "k": 256}
    progress: dict[str, float] = {}
    final: dict[str, str] = {}
    flops_before = 0.0
    for op in ops:
        if isinstance(op, Submit):
            w = parse_workload({**workload, "iterations": op.iterations})
            sim.submit(w, [(op.chip, c) for c in op.cores])
        elif isinstance(op, Advance):
            clock.now += op.seconds
        elif isinstance(op, Cancel):
            jobs = sim.jobs()
            if jobs:
                sim.cancel(jobs[op.nth % len(jobs)].id)
        elif isinstance(op, Hang):
            fault = Fault(FaultKind.CORE_HANG, op.chip, op.core)
            if op.on:
                sim.inject(fault)
            else:
                sim.clear(fault)
        jobs = sim.jobs()
        busy: set[tuple[int, int]] = set()
        for job in jobs:
            assert 0.0 <= job.progress <= 1.0
            assert job.progress >= progress.get(job.id, 0.0) - 1e-12
            progress[job.id] = job.progress
            if job.id in final:
                assert job.state == final[job.id]  # terminal states stick
            if job.state in TERMINAL:
                final[job.id] = job.state
                assert job.finished is not None and job.finished <= clock.now
            if job.state == "running":
                assert busy.isdisjoint(job.cores)  # one running job per core
                busy.update(job.cores)
            if job.state == "succeeded":
                assert job.progress == 1.0
        tel = sim.telemetry()
        assert {(c.chip, c.core) for c in tel.cores if c.job} == busy
        flops = sum(c.flops for c in tel.cores)
        assert flops >= flops_before - 1e-6
        flops_before = flops
        assert all(0.0 <= c.utilization <= 1.0 + 1e-9 for c in tel.cores)
