"""docs/bench-whatif.md's example and packed-versus-spread blocks, from
benchmarks/results/whatif.json."""

from collections.abc import Sequence
from typing import Any

from benchmarks.pages.common import provenance, replace_block, run_line
from whatif.report import COLUMNS, MAKESPAN, SPREAD_LOST, table, without_spread

SOURCE = "benchmarks/results/whatif.json"


def alike_makespans(runs: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Each queueing's makespan where every replay under it has the same one
    (a column that tells no placement rule from another); {} where any differ."""
    found: dict[str, set[float]] = {}
    for run in runs:
        found.setdefault(run["queueing"], set()).add(round(run["makespan_s"]))
    if any(len(spans) > 1 for spans in found.values()):
        return {}
    return {queueing: spans.pop() for queueing, spans in found.items()}


def makespan_note(alike: dict[str, float]) -> str:
    each = ", ".join(f"{queueing} {span:,.0f} s" for queueing, span in alike.items())
    return (
        "The makespan, from the first arrival to the last job's end, is left out: it is "
        f"the same in every row of one queueing ({each}), so it tells no rule from another."
    )


def evictions_note(runs: Sequence[dict[str, Any]]) -> str:
    """Why allocation rises with failures, where the table has any."""
    if not any(run["evictions"] for run in runs):
        return ""
    return (
        " A job a failure evicts runs again from its start; the cores its evicted attempt "
        "held count in the allocation columns although that work is lost (lost core-hours), "
        "so allocation rises with failures while the work done does not."
    )


def render(page: str, payload: dict[str, Any]) -> str:
    r = payload["results"]
    example, faults, runs = r["example"], r["faults"], r["runs"]
    mix = ", ".join(f"`{k}` {v:g}" for k, v in example["mix"].items())
    alike = alike_makespans(runs)
    body = "\n".join(
        [
            f"From benchmarks/results/whatif.json. {run_line(payload)} Nothing below is "
            "timed: the replays run on simulated time, so the machine's load does not enter "
            f"them. {provenance(payload.get('conditions'), SOURCE)}",
            "",
            f"{example['jobs']:,} jobs generated with seed {example['seed']} at offered load "
            f"{example['offered_load']:g} on {example['racks']} {example['generation']} racks; "
            f"kinds by weight: {mix}. Durations and arrivals from the generator's defaults. "
            "The rows with failures assume a mean of "
            f"{faults['chip_mtbf_hours']:,.0f} hours between one chip's failures and "
            f"{faults['core_mtbf_hours']:,.0f} between one core's, each out of service "
            f"{faults['repair_hours']:g} hours: assumed, as no failure rate of Trainium "
            f"chips is published.{evictions_note(runs)}",
            "",
            table(runs, leave_out=((MAKESPAN,) if alike else ()) + without_spread(runs)),
            *(["", makespan_note(alike)] if alike else []),
        ]
    )
    page = replace_block(page, "example", body)
    if "spread_runs" in r:
        page = replace_block(page, "spread", spread_body(payload))
    return page


SPREAD_COLUMNS = ("placement", "jobs run", MAKESPAN, "completion p50 / p90 / max (s)", SPREAD_LOST)


def spread_body(payload: dict[str, Any]) -> str:
    """Packed versus spread: the lost job-seconds under each placement rule."""
    r = payload["results"]
    case, runs = r["spread_case"], r["spread_runs"]
    lost = {run["policy"]: run["spread_lost_job_s"]["total"] for run in runs}
    packed = min(v for k, v in lost.items() if k != "spread")
    return "\n".join(
        [
            f"From benchmarks/results/whatif.json. {run_line(payload)} "
            f"{provenance(payload.get('conditions'), SOURCE)}",
            "",
            f"`{case['trace']}`, {runs[0]['jobs']} jobs, on {case['racks']} "
            f"{case['generation']} racks, backfill queueing, gangs on:",
            "",
            table(runs, leave_out=[h for h in COLUMNS if h not in SPREAD_COLUMNS]),
            "",
            f"Spread loses {lost['spread']:,.0f} job-seconds, "
            f"{lost['spread'] / packed:,.0f} times the packing rules' fewest ({packed:,.0f})."
            if packed > 0
            else f"Spread loses {lost['spread']:,.0f} job-seconds; the packing rules lose none.",
        ]
    )
