"""The markdown report of a what-if run, from its result alone."""

from typing import Any


def seconds(value: float | None) -> str:
    return "" if value is None else f"{value:,.0f}"


def share(value: float | None) -> str:
    return "" if value is None else f"{value:.1%}"


def markdown(result: dict[str, Any]) -> str:
    runs = result["offline"]
    first = runs[0]
    lines = [
        "# What-if report",
        "",
        f"{first['jobs']} jobs from `{result['trace']}` on {first['racks']} {first['generation']} "
        f"racks ({first['cores']:,} cores), gangs {'on' if first['gangs'] else 'off'}; "
        "the offline anchor (no API, idealized placement).",
        "",
        "| placement | jobs run | never ran | makespan (s) | queueing p50 / p90 / p99 (s) "
        "| completion p50 / p90 (s) | allocation while jobs arrive | allocation while jobs wait "
        "| free cores unusable while jobs wait |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for run in runs:
        q, c = run["queueing_delay_s"], run["completion_time_s"]
        lines.append(
            f"| {run['policy']} | {run['jobs_run']} | {run['jobs_never_run']} "
            f"| {seconds(run['makespan_s'])} "
            f"| {seconds(q['p50'])} / {seconds(q['p90'])} / {seconds(q['p99'])} "
            f"| {seconds(c['p50'])} / {seconds(c['p90'])} "
            f"| {share(run['allocation_rate_while_arriving'])} "
            f"| {share(run['allocation_rate_while_waiting'])} "
            f"| {share(run['unusable_free_share_while_waiting'])} |"
        )
    return "\n".join(lines) + "\n"
