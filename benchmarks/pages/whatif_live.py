"""docs/whatif.md's block of live replays, from benchmarks/results/whatif-live.json:
each case's figures beside the offline anchor's for the same trace, and the
measurements that say where a replay's wall time went."""

from collections.abc import Mapping
from typing import Any

from benchmarks.pages.common import replace_block, table

TOP_PROCESSES = 5


def _share(value: float | None) -> str:
    return "" if value is None else f"{value:.1%}"


def _by_policy(case: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {run["policy"]: run for run in case["runs"]}


def _row(name: str, case: Mapping[str, Any]) -> list[object]:
    runs = _by_policy(case)
    live, first, best = runs["kube-scheduler"], runs["first-fit"], runs["best-fit"]
    q_live, q_best = live["queueing_delay_s"], best["queueing_delay_s"]
    gap = 100 * (live["allocation_rate_while_arriving"] - best["allocation_rate_while_arriving"])
    return [
        f"`{name}`",
        f"{live['jobs_run']:,} / {live['jobs_never_run']:,}",
        f"{case['wall_seconds']:,.0f} ({case['speedup']:,.1f}x)",
        f"{_share(live['allocation_rate_while_arriving'])} / "
        f"{_share(first['allocation_rate_while_arriving'])} / "
        f"{_share(best['allocation_rate_while_arriving'])}",
        f"{gap:+.1f}",
        f"{q_live['p50']:,.0f} / {q_live['p90']:,.0f}",
        f"{q_best['p50']:,.0f} / {q_best['p90']:,.0f}",
        f"{case['bind_latency_wall_s']['p50']:,.1f}",
        f"{live['evictions']}",
        f"{case['load_1min']['before']:g} \u2192 {case['load_1min']['after']:g}",
    ]


def _cost(name: str, case: Mapping[str, Any], day: str) -> str:
    cpu = case["cpu_seconds_by_process"]
    busiest = sorted(cpu.items(), key=lambda kv: -kv[1])[:TOP_PROCESSES]
    top = ", ".join(f"{p} {s:,.0f}" for p, s in busiest)
    total = sum(cpu.values())
    wall_cpu = case["wall_seconds"] * case["cpus"]
    attempts = case["scheduler_attempts"]
    spent = sum(a.get("seconds", 0.0) for a in attempts.values())
    parts = []
    for result, a in sorted(attempts.items()):
        share = f", {a.get('seconds', 0.0) / spent:.0%} of its attempt time" if spent else ""
        parts.append(f"{result} {a.get('attempts', 0):,.0f}{share}")
    return (
        f"- `{name}` ({case.get('date', day)}): {case['what']}. The cluster's processes used "
        f"{total:,.0f} CPU seconds of the {wall_cpu:,.0f} the {case['cpus']} CPUs had in "
        f"its {case['wall_seconds']:,.0f} s (most: {top}). The scheduler's attempts: "
        f"{'; '.join(parts) or 'not read'}."
    )


def render(page: str, payload: Mapping[str, Any]) -> str:
    cases: Mapping[str, Any] = payload["results"]["cases"]
    header = [
        "case",
        "jobs run / never ran",
        "wall s (speed-up)",
        "allocation while jobs arrive: live / first fit / best fit",
        "live \u2212 best fit (points)",
        "queueing p50 / p90, live (s)",
        "queueing p50 / p90, best fit (s)",
        "binding p50, wall s",
        "evictions",
        "load average",
    ]
    body = "\n".join(
        [
            "From benchmarks/results/whatif-live.json, written by `make bench-whatif-live` "
            "case by case (`BENCH_ARGS=--cases NAME` runs some and keeps the others' "
            f"results; the last run was `{payload['command']}`) on a machine of "
            f"{payload['machine']['cpus']} CPUs, each case on a cluster of its own. "
            "Queueing and allocation are in simulated time; binding is wall seconds from "
            "a job's creation to its last pod bound.",
            "",
            table(header, [_row(name, case) for name, case in cases.items()]),
            "",
            "Where each replay's time went (CPU seconds by process, and the scheduler's "
            "attempts by result, from its /metrics):",
            "",
            *(_cost(name, case, payload["machine"]["date"]) for name, case in cases.items()),
        ]
    )
    return replace_block(page, "live", body)
