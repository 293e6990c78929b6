"""The `sim` section of docs/bench-simulator.md, from benchmarks/results/sim.json."""

from typing import Any

from benchmarks.pages.common import scaled, spread

COLD_HEADER = (
    "| path | distinct programs timed | instructions timed | wall | CPU "
    "| timed instructions / wall s | step simulated | simulated / wall | simulated / CPU |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


def seconds(row: dict[str, Any], key: str) -> str:
    """One timed figure: the median and range of the runs where they were kept,
    else the single figure the run kept."""
    runs = row.get(f"{key}_runs")
    return spread(runs, "{:.3f}") + " s" if runs else f"{row[key]:.3f} s"


def cold_row(name: str, row: dict[str, Any]) -> str:
    return (
        f"| {name} | {row['programs']} | {row['instructions_timed']:,} | "
        f"{seconds(row, 'wall_s')} | {seconds(row, 'cpu_s')} | "
        f"{scaled(row['instr_per_s'])}/s | "
        f"{row['step_s'] * 1e3:.2f} ms | **{row['ratio']:.3f}** | {row['ratio_cpu']:.3f} |"
    )


def how_timed(repeats: dict[str, Any], what: str) -> str:
    n = repeats[what]
    if repeats.get("statistic") == "median":
        return f"median of {n} interleaved runs, their range in brackets"
    return f"best of {n}"


def node_daemon_plan(daemon: dict[str, Any] | None) -> str:
    """A node daemon's cold plan of the rack's step against its targets; each
    miss named."""
    if daemon is None:
        return (
            "A node daemon's plan of the rack's training step (CPU and memory against "
            "the targets of 0.5 s and 50 MiB): not measured in this run."
        )
    targets = daemon["targets"]
    rows = "\n".join(
        f"| {name} | {spread(daemon[f'{key}_runs'], fmt)} {unit} | <= {targets[key]:g} {unit} | "
        f"{'**missed**' if key in daemon['misses'] else 'met'} |"
        for name, key, fmt, unit in (
            ("CPU of `ServerSim.plan_job`", "cpu_s", "{:.3f}", "s"),
            (
                "peak of what it allocates (tracemalloc, numpy included)",
                "peak_mib",
                "{:.1f}",
                "MiB",
            ),
        )
    )
    growth = spread(daemon["rss_growth_mib_runs"], "{:.1f}")
    misses = ", ".join(daemon["misses"]) or "none"
    return f"""A node daemon's cold plan of the rack's training step: the workload the
`{daemon["example"]}` example's 36 pods submit, `{daemon["spec"]}`, planned
on one server's 32 cores as each node daemon does (`ServerSim.plan_job`), in a
fresh process each of {len(daemon["cpu_s_runs"])} runs (median, range in brackets). The process had
{daemon["resident_before_mib"]:.0f} MiB resident before planning, and planning raised its
peak resident size by {growth} MiB; the step is
{daemon["step_s"] * 1e3:.1f} ms simulated.

| per node daemon | measured | target | |
|---|---|---|---|
{rows}

Targets missed: {misses}."""


def render(payload: dict[str, Any]) -> str:
    """The section's body for the results of `benchmarks.sim`."""
    results = payload["results"]
    repeats = results["repeats"]
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
        f"| {name} | {k['instructions']:,} | {scaled(k['timing_instr_per_s'])}/s | "
        f"{scaled(k['build_instr_per_s'])}/s |"
        for name, k in timing["per_kernel"].items()
    )
    total = (
        f"| **all** | | **{scaled(timing['instr_per_s'])}/s** | "
        f"{scaled(timing['build_instr_per_s'])}/s |"
    )
    cold_rows = "\n".join(
        (
            cold_row("exact model: every distinct program built whole and played", exact),
            cold_row(
                "fast path: `workload_timing` (small programs, steady state extrapolated)", fast
            ),
            cold_row("fast path through 36 `ServerSim`s (one plans, 35 hit its cache)", rack),
        )
    )
    bookkeeping = "\n".join(
        f"| {name} | {simulated} | {seconds(row, 'wall_s')} | {ratio} |"
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
    spec = step["spec"]
    return f"""Full Trn3 Gen2 rack (36 servers, 144 chips, 1152 cores), one steady training
step `{spec}` on every core, cold (all timing caches cleared; {how_timed(repeats, "cold")}
by wall time, the process's CPU time beside it). One step is
{step["step_s"] * 1e3:.1f} ms simulated ({step["comm_s"] * 1e3:.2f} ms of it the
gradient all-reduce over 144 chips); each core runs
{step["instructions_per_core"]:,} instructions, the rack
{step["instructions_per_rack"]:,}.

{COLD_HEADER}
{cold_rows}

Goal, a rack step at >= 1x real time with every distinct program timed by the
exact model: **{goal}**: {exact["ratio"]:.3f}x real time by the wall clock,
{exact["ratio_cpu"]:.3f}x by the process's CPU time
({scaled(exact["instr_per_cpu_s"])} instructions timed per CPU second). To
keep up, the exact path would have to build and play
{exact["instructions_timed"]:,} instructions in {exact["step_s"] * 1e3:.1f} ms,
{scaled(exact["instructions_timed"] / exact["step_s"])}/s.

Reuse factor: **{c["cores_per_timed_program"]} cores share each timed program**
(data parallel on identical cores: every core runs the same programs). Within
one core's step the programs repeat as well (layers, GEMM shapes the forward
and backward share, attention's backward, layernorm's four passes:
{within_core:.2f} runs per timed instruction), so one timed instruction stands
for {c["reuse_factor"]:,.0f} executed on the rack. Timing every core's program
separately at the exact path's rate would run at
{no_reuse_ratio:.6f}x real time.

{node_daemon_plan(results.get("node_daemon_plan"))}

The fast path plans the step {c["fast_vs_exact_speedup"]:.1f}x faster than the
exact model in the same run, and its step differs from the exact one by
{c["fast_vs_exact_step_error"]:+.1e} (relative).

Once a step's programs are timed, running more steps is bookkeeping on the
simulated clock; these rows time no program and are not the simulator's speed:

| bookkeeping only (plans cached) | simulated | wall | simulated / wall |
|---|---|---|---|
{bookkeeping}

The timing model per kernel, one CPU core (each run gets a fresh program so
descriptor conversion is counted; {how_timed(repeats, "kernels")}):

| kernel | instructions | timed | built |
|---|---|---|---|
{kernels}
{total}

Baseline: a bare Python loop (one float add + one append per item) runs
{scaled(base)} items/s here, so timing one instruction costs
{base / timing["instr_per_s"]:.1f} such loop steps. The numpy data path
(numerics on request) runs {scaled(data_path)} instructions/s.

What the fast path trades: cores of one job finish together (no per-core
jitter), a step's phases run back to back without overlap between layers, and
GEMM and attention timings are extrapolated from small programs over their
periodic steady state (`make validate-sim` checks them against the exact run).
"""
