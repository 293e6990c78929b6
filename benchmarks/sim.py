"""How fast the simulator is, honestly: a whole Trn3 Gen2 rack (36 servers,
144 chips, 1152 cores) running one training step, cold, with every distinct
program of the step really timed. The exact model (each program built whole
and played instruction by instruction) is the anchor; the planner's fast path
(small programs, steady state extrapolated) is measured beside it in the same
run. Steady-state rows that only move a simulated clock over timings already
made are reported apart: they time nothing.

Baseline for the per-instruction rates: a bare Python loop doing one float add
and one list append per item, measured in the same run.
"""

import os
import time
from collections.abc import Callable
from typing import Any

from benchmarks.report import write_report
from simdevice.isa import Program
from simdevice.kernels.attention import attention
from simdevice.kernels.gemm import gemm
from simdevice.kernels.rowwise import layernorm, softmax
from simdevice.numerics import execute
from simdevice.server import ServerSim
from simdevice.step import time_exactly
from simdevice.timing import core_timing, time_program
from simdevice.topology import rack_spec
from simdevice.workloads import (
    TIMED,
    clear_caches,
    parse_workload,
    plan,
    train_step_comm,
    train_step_programs,
)

COMMAND = "make bench-sim"
REPEATS = 5
RACK = rack_spec("trn3-gen2")
STEP = {"kind": "train-step", "hidden": 4096, "seq": 2048, "layers": 2, "chips": 144}
COLD_REPEATS = 3


def best_of(fn: Callable[[], object], repeats: int = REPEATS) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def baseline_rate(n: int = 200_000) -> float:
    """Items per second of the cheapest interpreted loop that keeps a result."""
    values = [1.0] * n

    def loop() -> None:
        out: list[float] = []
        add = out.append
        t = 0.0
        for v in values:
            t += v
            add(t)

    return n / best_of(loop)


def timing_rate() -> dict[str, Any]:
    """Instructions per second of the timing model, per kernel; each run gets a
    fresh program so descriptor conversion is counted."""
    chip = RACK.chip
    builders: list[tuple[str, Callable[[], Program]]] = [
        ("gemm 4096x4096x4096 bf16", lambda: gemm(4096, 4096, 4096)),
        ("attention seq 4096 d 128", lambda: attention(4096, 128)),
        ("layernorm 8192x4096", lambda: layernorm(8192, 4096)),
        ("softmax 8192x4096", lambda: softmax(8192, 4096)),
    ]
    per_kernel = {}
    total_instr = 0
    total_time = 0.0
    total_build = 0.0
    for name, build in builders:
        programs = [build() for _ in range(REPEATS)]
        t0 = time.perf_counter()
        build()
        build_s = time.perf_counter() - t0
        best = float("inf")
        for p in programs:
            t0 = time.perf_counter()
            time_program(p, chip)
            best = min(best, time.perf_counter() - t0)
        n = len(programs[0])
        per_kernel[name] = {
            "instructions": n,
            "timing_instr_per_s": n / best,
            "build_instr_per_s": n / build_s,
        }
        total_instr += n
        total_time += best
        total_build += build_s
    return {
        "per_kernel": per_kernel,
        "instr_per_s": total_instr / total_time,
        "build_instr_per_s": total_instr / total_build,
    }


def numerics_rate() -> float:
    program = gemm(512, 512, 512, "bf16")
    rng_inputs = {"aT": [[0.5] * 512] * 512, "b": [[0.25] * 512] * 512}
    return len(program) / best_of(lambda: execute(program, rng_inputs), 3)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def rack_servers(clock: FakeClock) -> list[ServerSim]:
    return [ServerSim(RACK, s, clock=clock) for s in range(RACK.servers)]


ALL_CORES = [(c, k) for c in range(RACK.chips_per_server) for k in range(RACK.chip.cores)]


def cold(run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Best of COLD_REPEATS cold runs (every cache cleared first), by wall time;
    the process CPU time is kept beside it (other work shares this machine)."""
    best: dict[str, Any] = {}
    for _ in range(COLD_REPEATS):
        clear_caches()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        result = run()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        if not best or wall < best["wall_s"]:
            best = {**result, "wall_s": wall, "cpu_s": cpu}
    return best


def exact_step() -> dict[str, Any]:
    """The anchor: every distinct program of a core's step built whole and
    played by the event-driven model, then the gradient all-reduce."""
    workload = parse_workload(STEP)
    exact = time_exactly(train_step_programs(workload), RACK.chip)
    comm, _ = train_step_comm(workload, RACK, RACK.chips_per_server)
    return {
        "programs": exact.programs,
        "instructions_timed": exact.instructions,
        "step_s": exact.layer.duration * workload["layers"] + comm,
    }


def fast_step() -> dict[str, Any]:
    """The planner on one server's share of the step (32 cores on 4 chips)."""
    step_plan = plan(parse_workload(STEP), RACK, len(ALL_CORES), RACK.chips_per_server)
    return {
        "programs": TIMED.programs,
        "instructions_timed": TIMED.instructions,
        "step_s": step_plan.duration,
    }


def rack_step() -> dict[str, Any]:
    """The step submitted on all 36 servers: each plans it (the first one times
    its programs, the others find the plan cached) and schedules 32 cores."""
    clock = FakeClock()
    servers = rack_servers(clock)
    workload = parse_workload(STEP)
    ids = [s.submit(workload, ALL_CORES) for s in servers]
    return {
        "programs": TIMED.programs,
        "instructions_timed": TIMED.instructions,
        "step_s": servers[0].job(ids[0]).duration,
    }


def with_rates(row: dict[str, Any]) -> dict[str, Any]:
    return {
        **row,
        "instr_per_s": row["instructions_timed"] / row["wall_s"],
        "instr_per_cpu_s": row["instructions_timed"] / row["cpu_s"],
        "ratio": row["step_s"] / row["wall_s"],
        "ratio_cpu": row["step_s"] / row["cpu_s"],
    }


def rack_steady_long_job(simulated: float = 600.0, scrape: float = 5.0) -> dict[str, Any]:
    """Bookkeeping only: a long training job (many steps) on every core of the
    rack, timed once, then the clock moving in 1 s ticks and telemetry read
    every `scrape` seconds per server."""
    clock = FakeClock()
    servers = rack_servers(clock)
    workload = parse_workload({**STEP, "iterations": 10**9})
    for s in servers:
        s.submit(workload, ALL_CORES)
    t0 = time.perf_counter()
    while clock.now < simulated:
        clock.now += 1.0
        for s in servers:
            s.advance()
        if clock.now % scrape == 0:
            for s in servers:
                s.telemetry()
    wall = time.perf_counter() - t0
    return {"simulated_s": simulated, "wall_s": wall, "ratio": simulated / wall}


def rack_step_per_job(steps: int = 100) -> dict[str, Any]:
    """Bookkeeping only: a training loop that submits one step job per server
    (its plan cached after the first), waits for all of them, and goes again."""
    clock = FakeClock()
    servers = rack_servers(clock)
    workload = parse_workload(STEP)
    t0 = time.perf_counter()
    for _ in range(steps):
        ids = [s.submit(workload, ALL_CORES) for s in servers]
        clock.now = max(
            s.job(j).submitted + s.job(j).duration for s, j in zip(servers, ids, strict=True)
        )
        for s, j in zip(servers, ids, strict=True):
            if s.job(j).state != "succeeded":
                raise RuntimeError(f"step {j} on server {s.server} did not finish")
    wall = time.perf_counter() - t0
    return {"steps": steps, "simulated_s": clock.now, "wall_s": wall, "ratio": clock.now / wall}


def measure() -> dict[str, Any]:
    """Every figure of the section, with the load average around the run."""
    load_before = os.getloadavg()[0]
    base = baseline_rate()
    timing = timing_rate()
    data_path = numerics_rate()
    exact = with_rates(cold(exact_step))
    fast = with_rates(cold(fast_step))
    rack = with_rates(cold(rack_step))
    long_job = rack_steady_long_job()
    per_step = rack_step_per_job()
    step_plan = plan(parse_workload(STEP), RACK, len(ALL_CORES), RACK.chips_per_server)
    per_core_instr = step_plan.compute.instructions * step_plan.iterations
    rack_instr = per_core_instr * RACK.cores
    load_after = os.getloadavg()[0]
    return {
        "load_average_1min": {"before": load_before, "after": load_after},
        "baseline_loop_items_per_s": base,
        "timing": timing,
        "timing_vs_baseline": timing["instr_per_s"] / base,
        "numerics_instr_per_s": data_path,
        "train_step": {
            "spec": STEP,
            "step_s": step_plan.duration,
            "comm_s": step_plan.comm,
            "instructions_per_core": per_core_instr,
            "instructions_per_rack": rack_instr,
            "utilization": step_plan.compute.flops
            / (step_plan.compute.duration * core_timing(RACK.chip).peak_flops()),
        },
        "cold_step": {
            "exact": exact,
            "fast": fast,
            "rack_36_servers": rack,
            "cores_per_timed_program": RACK.cores,
            "reuse_factor": rack_instr / exact["instructions_timed"],
            "fast_vs_exact_speedup": exact["wall_s"] / fast["wall_s"],
            "fast_vs_exact_step_error": fast["step_s"] / exact["step_s"] - 1,
            "goal_ratio": 1.0,
            # judged on both clocks: wall is what the issue asks for, CPU what
            # the simulator itself spends when other work shares the machine
            "goal_met": exact["ratio"] >= 1.0 and exact["ratio_cpu"] >= 1.0,
        },
        "bookkeeping": {"long_job": long_job, "step_per_job": per_step},
        # every core's program timed, at the exact path's rate
        "rack_no_reuse_projected_ratio": step_plan.duration / (rack_instr / exact["instr_per_s"]),
    }


COLD_HEADER = (
    "| path | distinct programs timed | instructions timed | wall | CPU "
    "| timed instructions / wall s | step simulated | simulated / wall | simulated / CPU |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


def _cold_row(name: str, row: dict[str, Any]) -> str:
    return (
        f"| {name} | {row['programs']} | {row['instructions_timed']:,} | "
        f"{row['wall_s']:.3f} s | {row['cpu_s']:.3f} s | {row['instr_per_s'] / 1e6:.2f} M/s | "
        f"{row['step_s'] * 1e3:.2f} ms | **{row['ratio']:.3f}** | {row['ratio_cpu']:.3f} |"
    )


def render(results: dict[str, Any]) -> str:
    """The docs/benchmarks.md section for the results of `measure`."""
    load_before = results["load_average_1min"]["before"]
    load_after = results["load_average_1min"]["after"]
    base = results["baseline_loop_items_per_s"]
    timing = results["timing"]
    data_path = results["numerics_instr_per_s"]
    step = results["train_step"]
    c = results["cold_step"]
    exact, fast, rack = c["exact"], c["fast"], c["rack_36_servers"]
    long_job = results["bookkeeping"]["long_job"]
    per_step = results["bookkeeping"]["step_per_job"]
    no_reuse_ratio = results["rack_no_reuse_projected_ratio"]
    kernels = "\n".join(
        f"| {name} | {k['instructions']:,} | {k['timing_instr_per_s'] / 1e6:.2f} M/s | "
        f"{k['build_instr_per_s'] / 1e6:.2f} M/s |"
        for name, k in timing["per_kernel"].items()
    )
    total = (
        f"| **all** | | **{timing['instr_per_s'] / 1e6:.2f} M/s** | "
        f"{timing['build_instr_per_s'] / 1e6:.2f} M/s |"
    )
    cold_rows = "\n".join(
        (
            _cold_row("exact model: every distinct program built whole and played", exact),
            _cold_row("fast path: the planner (small programs, steady state extrapolated)", fast),
            _cold_row("fast path through 36 `ServerSim`s (one plans, 35 hit its cache)", rack),
        )
    )
    bookkeeping = "\n".join(
        f"| {name} | {simulated} | {row['wall_s']:.2f} s | {ratio} |"
        for name, simulated, row, ratio in (
            (
                "long job, 1 s clock ticks, telemetry every 5 s per server",
                f"{long_job['simulated_s']:.0f} s",
                long_job,
                f"{long_job['ratio']:,.0f}",
            ),
            (
                f"one job per step, {per_step['steps']} steps",
                f"{per_step['simulated_s']:.2f} s",
                per_step,
                f"{per_step['ratio']:,.1f}",
            ),
        )
    )
    goal = "met" if c["goal_met"] else "not met"
    within_core = step["instructions_per_core"] / exact["instructions_timed"]
    markdown = f"""
Full Trn3 Gen2 rack (36 servers, 144 chips, 1152 cores), one steady training
step `{STEP}` on every core, cold (all timing caches cleared; best of
{COLD_REPEATS} by wall time, the process's CPU time beside it). One step is
{step["step_s"] * 1e3:.1f} ms simulated ({step["comm_s"] * 1e3:.2f} ms of it the
gradient all-reduce over 144 chips); each core runs
{step["instructions_per_core"]:,} instructions, the rack
{step["instructions_per_rack"]:,}.

{COLD_HEADER}
{cold_rows}

Goal, a rack step at >= 1x real time with every distinct program timed by the
exact model: **{goal}**: {exact["ratio"]:.3f}x real time by the wall clock,
{exact["ratio_cpu"]:.3f}x by the process's CPU time
({exact["instr_per_cpu_s"] / 1e6:.2f} M instructions timed per CPU second). To
keep up, the exact path would have to build and play
{exact["instructions_timed"]:,} instructions in {exact["step_s"] * 1e3:.1f} ms,
{exact["instructions_timed"] / exact["step_s"] / 1e6:.1f} M/s.

Reuse factor: **{c["cores_per_timed_program"]} cores share each timed program**
(data parallel on identical cores: every core runs the same programs). Within
one core's step the programs repeat as well (layers, GEMM shapes the forward
and backward share, attention's backward, layernorm's four passes:
{within_core:.2f} runs per timed instruction), so one timed instruction stands
for {c["reuse_factor"]:,.0f} executed on the rack. Timing every core's program
separately at the exact path's rate would run at
{no_reuse_ratio:.6f}x real time.

The fast path plans the step {c["fast_vs_exact_speedup"]:.1f}x faster than the
exact model in the same run, and its step differs from the exact one by
{c["fast_vs_exact_step_error"]:+.1e} (relative).

Once a step's programs are timed, running more steps is bookkeeping on the
simulated clock; these rows time no program and are not the simulator's speed:

| bookkeeping only (plans cached) | simulated | wall | simulated / wall |
|---|---|---|---|
{bookkeeping}

The timing model per kernel, one CPU core (each run gets a fresh program so
descriptor conversion is counted; best of {REPEATS}):

| kernel | instructions | timed | built |
|---|---|---|---|
{kernels}
{total}

The machine's 1-minute load average was {load_before:.1f} before and
{load_after:.1f} after the run (other work shares its CPUs).

Baseline: a bare Python loop (one float add + one append per item) runs
{base / 1e6:.1f} M items/s here, so timing one instruction costs
{base / timing["instr_per_s"]:.1f} such loop steps. The numpy data path
(numerics on request) runs {data_path / 1e3:.1f} k instructions/s.

What the fast path trades: cores of one job finish together (no per-core
jitter), a step's phases run back to back without overlap between layers, and
GEMM and attention timings are extrapolated from small programs over their
periodic steady state (`make validate-sim` checks them against the exact run).
"""
    return markdown


def main() -> int:
    results = measure()
    markdown = render(results)
    write_report("sim", COMMAND, results, markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
