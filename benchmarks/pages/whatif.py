"""docs/whatif.md's example block, from benchmarks/results/whatif.json."""

from collections.abc import Sequence
from typing import Any

from benchmarks.pages.common import provenance, replace_block, run_line
from driver.whatif.report import MAKESPAN, table


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
            f"them. {provenance(payload['conditions'])}",
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
            table(runs, leave_out=(MAKESPAN,) if alike else ()),
            *(["", makespan_note(alike)] if alike else []),
        ]
    )
    return replace_block(page, "example", body)
