"""docs/whatif.md's example block, from benchmarks/results/whatif.json."""

from typing import Any

from benchmarks.pages.common import replace_block, run_line
from driver.whatif.report import table


def render(page: str, payload: dict[str, Any]) -> str:
    r = payload["results"]
    example, faults = r["example"], r["faults"]
    mix = ", ".join(f"`{k}` {v:g}" for k, v in example["mix"].items())
    body = "\n".join(
        [
            f"From benchmarks/results/whatif.json. {run_line(payload)}",
            "",
            f"{example['jobs']:,} jobs generated with seed {example['seed']} at offered load "
            f"{example['offered_load']:g} on {example['racks']} {example['generation']} racks; "
            f"kinds by weight: {mix}. Durations and arrivals from the generator's defaults. "
            "The rows with failures assume a mean of "
            f"{faults['chip_mtbf_hours']:,.0f} hours between one chip's failures and "
            f"{faults['core_mtbf_hours']:,.0f} between one core's, each out of service "
            f"{faults['repair_hours']:g} hours: assumed, as no failure rate of Trainium "
            "chips is published.",
            "",
            table(r["runs"]),
        ]
    )
    return replace_block(page, "example", body)
