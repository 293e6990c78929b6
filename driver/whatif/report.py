"""The markdown report of a what-if run, from its result alone."""

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def seconds(value: float | None) -> str:
    return "" if value is None else f"{value:,.0f}"


def share(value: float | None) -> str:
    return "" if value is None else f"{value:.1%}"


def table(runs: Sequence[dict[str, Any]]) -> str:
    """One row per replay: its placement rule and gangs, then its figures."""
    lines = [
        "| placement | gangs | jobs run | never ran | makespan (s) "
        "| queueing p50 / p90 / p99 (s) | completion p50 / p90 (s) "
        "| allocation while jobs arrive | allocation while jobs wait "
        "| free cores unusable while jobs wait | failures | evictions | lost core-hours |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for run in runs:
        q, c = run["queueing_delay_s"], run["completion_time_s"]
        lines.append(
            f"| {run['policy']} | {'on' if run['gangs'] else 'off'} | {run['jobs_run']} "
            f"| {run['jobs_never_run']} | {seconds(run['makespan_s'])} "
            f"| {seconds(q['p50'])} / {seconds(q['p90'])} / {seconds(q['p99'])} "
            f"| {seconds(c['p50'])} / {seconds(c['p90'])} "
            f"| {share(run['allocation_rate_while_arriving'])} "
            f"| {share(run['allocation_rate_while_waiting'])} "
            f"| {share(run['unusable_free_share_while_waiting'])} "
            f"| {run['failures']} | {run['evictions']} | {run['lost_core_hours']:,.1f} |"
        )
    return "\n".join(lines)


def cost(result: dict[str, Any]) -> str:
    """Where a live replay's wall time went: the machine's load, each process's
    CPU seconds and the scheduler's attempts by result."""
    if "cpu_seconds_by_process" not in result:
        return ""
    load = result["load_1min"]
    cpu = ", ".join(f"{name} {sec:,.0f}" for name, sec in result["cpu_seconds_by_process"].items())
    attempts = ", ".join(
        f"{result_} {a['attempts']:,.0f} ({a['seconds']:,.0f} s)"
        for result_, a in sorted(result["scheduler_attempts"].items())
    )
    return (
        "\n## Where the wall time went\n\n"
        f"{result['wall_seconds']:,.0f} s of wall time on {result['cpus']} CPUs; load average "
        f"(1 minute) {load['before']:g} before the replay, {load['after']:g} after it. "
        f"CPU seconds each process used meanwhile: {cpu}. "
        f"The scheduler's attempts by result (and the seconds they took): {attempts or 'unread'}.\n"
    )


def markdown(result: dict[str, Any], title: str, plots: Sequence[str] = ()) -> str:
    """The report: what was replayed and how, the table, the plots beside it."""
    first = result["runs"][0]
    images = "".join(f"\n![{Path(p).stem}]({p})\n" for p in plots)
    return (
        "# What-if report\n\n"
        f"{first['jobs']} jobs from `{result['trace']}` on {first['racks']} "
        f"{first['generation']} racks ({first['cores']:,} cores); {title}.\n\n"
        + table(result["runs"])
        + "\n"
        + cost(result)
        + images
    )
