"""How fast the simulator is, honestly: a whole Trn3 Gen2 rack (36 servers,
144 chips, 1152 cores) running one training step, cold, with every distinct
program of the step really timed. The exact model (each program built whole
and played instruction by instruction) is the anchor; `workload_timing`'s fast path
(small programs, steady state extrapolated) is measured beside it in the same
run. Steady-state rows that only move a simulated clock over timings already
made are reported apart: they time nothing.

Baseline for the per-instruction rates: a bare Python loop doing one float add
and one list append per item, measured in the same run.
"""

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from benchmarks.paths import ROOT
from benchmarks.report import (
    REPEATS,
    Conditions,
    add_noisy_flag,
    add_out_flag,
    interleaved,
    write_results,
    write_trial,
)
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
    train_step_comm,
    train_step_programs,
    workload_timing,
)

COMMAND = "make bench-sim"
RACK = rack_spec("trn3-gen2")
STEP = {"kind": "train-step", "hidden": 4096, "seq": 2048, "layers": 2, "chips": 144}
# The rack's training step as the 36-pod gang example submits it from every
# node: each node daemon plans it on its own server's 32 cores.
GANG_EXAMPLE = Path("deploy/examples/gang-rack/gang-rack.yaml")
PLAN_TARGETS = {"cpu_s": 0.5, "peak_mib": 50.0}  # per node daemon


def gang_step() -> dict[str, Any]:
    """The workload the gang-rack example's pods submit (their annotation)."""
    for doc in yaml.safe_load_all((ROOT / GANG_EXAMPLE).read_text()):
        if doc and doc.get("kind") == "Job":
            annotations = doc["spec"]["template"]["metadata"]["annotations"]
            spec: dict[str, Any] = json.loads(annotations["trainium.sim.dev/workload"])
            return spec
    raise ValueError(f"{GANG_EXAMPLE}: no Job with a trainium.sim.dev/workload annotation")


def plan_in_this_process(traced: bool) -> None:
    """One node daemon's plan of the gang's step, in a fresh process, printed
    as JSON: the CPU seconds of `ServerSim.plan_job` and how much it raised the
    process's peak resident size (after its imports and the server); with
    `traced`, instead the peak of what planning allocated (tracemalloc, which
    also sees numpy's buffers; it slows the run, so CPU is measured apart)."""
    workload = parse_workload(gang_step())
    server = ServerSim(RACK, 0, clock=FakeClock())
    if traced:
        tracemalloc.start()
        server.plan_job(workload, ALL_CORES)
        _, peak = tracemalloc.get_traced_memory()
        print(json.dumps({"peak_mib": peak / 2**20}))
        return
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cpu0 = time.process_time()
    timed = server.plan_job(workload, ALL_CORES)
    cpu = time.process_time() - cpu0
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                "cpu_s": cpu,
                "rss_growth_mib": (after - before) / 1024,  # ru_maxrss is in KiB on Linux
                "resident_before_mib": before / 1024,
                "step_s": timed.plan.iteration_time,
            }
        )
    )


def node_daemon_plan(repeats: int = REPEATS) -> dict[str, Any]:
    """`plan_in_this_process` in `repeats` fresh processes, one after another;
    the median of each figure, every run's beside it, and the targets."""
    runs = []
    for _ in range(repeats):
        run: dict[str, Any] = {}
        for traced in (False, True):
            code = (
                f"from benchmarks.sim import plan_in_this_process; plan_in_this_process({traced})"
            )
            done = subprocess.run(
                [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
            )
            run.update(json.loads(done.stdout))
        runs.append(run)
    out: dict[str, Any] = {"spec": gang_step(), "example": str(GANG_EXAMPLE)}
    for key in ("cpu_s", "peak_mib", "rss_growth_mib", "resident_before_mib", "step_s"):
        values = [float(r[key]) for r in runs]
        out[key] = statistics.median(values)
        out[f"{key}_runs"] = values
    out["targets"] = PLAN_TARGETS
    out["misses"] = [key for key, limit in PLAN_TARGETS.items() if out[key] > limit]
    return out


def median_seconds(fn: Callable[[], object], repeats: int = REPEATS) -> float:
    """The median wall time of `repeats` calls."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def middle_run(runs: list[dict[str, Any]], key: str = "wall_s") -> dict[str, Any]:
    """The median run by `key`, with every run's `key` (and CPU time, where
    kept) beside it, so the page can show the spread."""
    ordered = sorted(runs, key=lambda r: float(r[key]))
    out = {**ordered[len(ordered) // 2], f"{key}_runs": [r[key] for r in runs]}
    if all("cpu_s" in r for r in runs):
        out["cpu_s_runs"] = [r["cpu_s"] for r in runs]
    return out


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

    return n / median_seconds(loop)


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
        times = []
        for p in programs:
            t0 = time.perf_counter()
            time_program(p, chip)
            times.append(time.perf_counter() - t0)
        typical = statistics.median(times)
        n = len(programs[0])
        per_kernel[name] = {
            "instructions": n,
            "timing_instr_per_s": n / typical,
            "build_instr_per_s": n / build_s,
        }
        total_instr += n
        total_time += typical
        total_build += build_s
    return {
        "per_kernel": per_kernel,
        "instr_per_s": total_instr / total_time,
        "build_instr_per_s": total_instr / total_build,
    }


def numerics_rate() -> float:
    program = gemm(512, 512, 512, "bf16")
    rng_inputs = {"aT": [[0.5] * 512] * 512, "b": [[0.25] * 512] * 512}
    return len(program) / median_seconds(lambda: execute(program, rng_inputs))


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def rack_servers(clock: FakeClock) -> list[ServerSim]:
    return [ServerSim(RACK, s, clock=clock) for s in range(RACK.servers)]


ALL_CORES = [(c, k) for c in range(RACK.chips_per_server) for k in range(RACK.chip.cores)]


def cold(run: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    """One cold run (every cache cleared first), its wall time and the process
    CPU time beside it (other work shares this machine)."""

    def once() -> dict[str, Any]:
        clear_caches()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        result = run()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        return {**result, "wall_s": wall, "cpu_s": cpu}

    return once


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
    """`workload_timing` on one server's share of the step (32 cores on 4 chips)."""
    step_timing = workload_timing(parse_workload(STEP), RACK, len(ALL_CORES), RACK.chips_per_server)
    return {
        "programs": TIMED.programs,
        "instructions_timed": TIMED.instructions,
        "step_s": step_timing.duration,
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
        # a nanosecond past the last end: a job's end is its start plus 1 / (1 /
        # duration), which can round an ulp past start + duration
        clock.now = 1e-9 + max(
            s.job(j).submitted + s.job(j).duration for s, j in zip(servers, ids, strict=True)
        )
        for s, j in zip(servers, ids, strict=True):
            if s.job(j).state != "succeeded":
                raise RuntimeError(f"step {j} on server {s.server} did not finish")
    wall = time.perf_counter() - t0
    return {"steps": steps, "simulated_s": clock.now, "wall_s": wall, "ratio": clock.now / wall}


def measure() -> dict[str, Any]:
    """Every figure of the section; the cold paths and the bookkeeping rows in
    interleaved rounds, each figure the median run."""
    base = baseline_rate()
    timing = timing_rate()
    data_path = numerics_rate()
    paths = interleaved(
        {"exact": cold(exact_step), "fast": cold(fast_step), "rack": cold(rack_step)}
    )
    exact, fast, rack = (with_rates(middle_run(paths[k])) for k in ("exact", "fast", "rack"))
    bookkeeping: dict[str, Callable[[], dict[str, Any]]] = {
        "long": rack_steady_long_job,
        "per_step": rack_step_per_job,
    }
    kept = interleaved(bookkeeping)
    long_job, per_step = middle_run(kept["long"]), middle_run(kept["per_step"])
    daemon_plan = node_daemon_plan()
    step_timing = workload_timing(parse_workload(STEP), RACK, len(ALL_CORES), RACK.chips_per_server)
    per_core_instr = step_timing.compute.instructions * step_timing.iterations
    rack_instr = per_core_instr * RACK.cores
    return {
        "repeats": {"cold": REPEATS, "kernels": REPEATS, "statistic": "median"},
        "baseline_loop_items_per_s": base,
        "timing": timing,
        "timing_vs_baseline": timing["instr_per_s"] / base,
        "numerics_instr_per_s": data_path,
        "train_step": {
            "spec": STEP,
            "step_s": step_timing.duration,
            "comm_s": step_timing.comm,
            "instructions_per_core": per_core_instr,
            "instructions_per_rack": rack_instr,
            "utilization": step_timing.compute.flops
            / (step_timing.compute.duration * core_timing(RACK.chip).peak_flops()),
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
        "node_daemon_plan": daemon_plan,
        # every core's program timed, at the exact path's rate
        "rack_no_reuse_projected_ratio": step_timing.duration / (rack_instr / exact["instr_per_s"]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.sim")
    add_out_flag(parser)
    add_noisy_flag(parser)
    args = parser.parse_args(argv)
    conditions = Conditions.begin(args.noisy, kubernetes=False)
    results = measure()
    daemon = results["node_daemon_plan"]
    for key in daemon["misses"]:
        print(
            f"missed: a node daemon's plan of the rack's step took {key} = {daemon[key]:.3f}, "
            f"target <= {daemon['targets'][key]}"
        )
    if args.out is not None:
        print(write_trial(args.out, "sim", COMMAND, results, conditions))
        return 0
    print(write_results("sim", COMMAND, results, conditions))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
