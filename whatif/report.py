"""The markdown report of a what-if run, from its result alone."""

from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any, Final

from whatif.jobdiff import CAUSES


def seconds(value: float | None) -> str:
    return "" if value is None else f"{value:,.0f}"


def share(value: float | None) -> str:
    return "" if value is None else f"{value:.1%}"


def _queueing(run: dict[str, Any]) -> str:
    """The replay's queueing; none for the bare scheduler, which holds no job back."""
    queueing = str(run.get("queueing", "backfill"))
    if run["policy"] == "kube-scheduler" and not queueing.startswith("kueue"):
        return "none"
    return queueing


def _seconds_of(figures: dict[str, Any], *keys: str) -> str:
    return " / ".join(seconds(figures.get(key)) for key in keys)


def _spread(run: dict[str, Any]) -> str:
    lost = run.get("spread_lost_job_s")
    return "" if lost is None else _seconds_of(lost, "total", "p50", "p90")


MAKESPAN: Final = "makespan (s)"
SPREAD_LOST: Final = "job-seconds lost to spread: total / p50 / p90"
COLUMNS: Final[dict[str, Callable[[dict[str, Any]], str]]] = {
    "placement": lambda run: str(run["policy"]),
    "queueing": _queueing,
    "gangs": lambda run: "on" if run["gangs"] else "off",
    "jobs run": lambda run: str(run["jobs_run"]),
    "never ran": lambda run: str(run["jobs_never_run"]),
    MAKESPAN: lambda run: seconds(run["makespan_s"]),
    "queueing delay p50 / p90 / p99 / max (s)": lambda run: _seconds_of(
        run["queueing_delay_s"], "p50", "p90", "p99", "max"
    ),
    "completion p50 / p90 / max (s)": lambda run: _seconds_of(
        run["completion_time_s"], "p50", "p90", "max"
    ),
    "allocation while jobs arrive, evicted attempts included": lambda run: share(
        run["allocation_rate_while_arriving"]
    ),
    "allocation while jobs wait, evicted attempts included": lambda run: share(
        run["allocation_rate_while_waiting"]
    ),
    "free cores unusable while jobs wait": lambda run: share(
        run["unusable_free_share_while_waiting"]
    ),
    "failures": lambda run: str(run["failures"]),
    "evictions": lambda run: str(run["evictions"]),
    "lost core-hours": lambda run: f"{run['lost_core_hours']:,.1f}",
    SPREAD_LOST: _spread,
}
"""Each column's header and its cell for one replay. Allocation counts every
held core, so the cores an attempt held before a failure evicted it count
although its work is lost and runs again. Job-seconds lost to spread are
left out of a table whose replays have none to count (`without_spread`)."""


def without_spread(runs: Sequence[dict[str, Any]]) -> tuple[str, ...]:
    """The spread column's header where no replay counts job-seconds lost to spread."""
    return () if any("spread_lost_job_s" in run for run in runs) else (SPREAD_LOST,)


def table(runs: Sequence[dict[str, Any]], leave_out: Collection[str] = ()) -> str:
    """One row per replay: its placement rule and gangs, then its figures,
    without the columns `leave_out` names."""
    columns = {header: cell for header, cell in COLUMNS.items() if header not in leave_out}
    lines = [
        "| " + " | ".join(columns) + " |",
        "| " + " | ".join("---" for _ in columns) + " |",
    ]
    lines += ["| " + " | ".join(cell(run) for cell in columns.values()) + " |" for run in runs]
    return "\n".join(lines)


def cost(result: dict[str, Any]) -> str:
    """Where a live replay's wall time went: the machine's load, each process's
    CPU seconds and the scheduler's attempts by result."""
    if "cpu_seconds_by_process" not in result:
        return ""
    load = result["load_1min"]
    settle = result.get("settle")
    clock = (
        f" The settle clock settled at {settle['events']:,} event times, "
        f"{settle['wall_s_p50']:.2f} s of wall time each at the median, "
        f"{settle['wall_s_max']:.1f} s at most; {settle['timeouts']} timed out."
        if settle
        else ""
    )
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
        f"The scheduler's attempts by result (and the seconds they took): {attempts or 'unread'}."
        f"{clock}\n"
    )


def diffs(result: dict[str, Any]) -> str:
    """Where the live replay and each anchor part: counts by cause, and the
    jobs whose start moved most."""
    if not result.get("diff"):
        return ""
    out = ["\n## Where live and the anchors part\n"]
    for d in result["diff"]:
        causes = "; ".join(f"{n} {CAUSES[c]}" for c, n in d["causes"].items()) or "none"
        lost = d.get("spread_lost_job_s", {})
        spread = (
            f" Job-seconds lost to spread: live {seconds(lost.get('live'))}, "
            f"anchor {seconds(lost.get('anchor'))}."
            if lost
            else ""
        )
        out.append(
            f"- against {d['anchor']}: {d['alike']} of {d['jobs']} jobs alike; {causes}.{spread}"
        )
        for j in d["largest"]:
            out.append(
                f"  - `{j['name']}` ({j['shape']}): live {seconds(j['live_start'])}, "
                f"anchor {seconds(j['anchor_start'])}: {CAUSES[j['cause']]}"
            )
    return "\n".join(out) + "\n"


def markdown(result: dict[str, Any], title: str, plots: Sequence[str] = ()) -> str:
    """The report: what was replayed and how, the table, the plots beside it."""
    first = result["runs"][0]
    images = "".join(f"\n![{Path(p).stem}]({p})\n" for p in plots)
    return (
        "# What-if report\n\n"
        f"{first['jobs']} jobs from `{result['trace']}` on {first['racks']} "
        f"{first['generation']} racks ({first['cores']:,} cores); {title}.\n\n"
        + table(result["runs"], leave_out=without_spread(result["runs"]))
        + "\n"
        + diffs(result)
        + cost(result)
        + images
    )
