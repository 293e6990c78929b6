"""docs/whatif.md's example block, from benchmarks/results/whatif.json."""

from typing import Any

from benchmarks.pages.common import replace_block, run_line
from driver.whatif.report import table


def render(page: str, payload: dict[str, Any]) -> str:
    r = payload["results"]
    example = r["example"]
    mix = ", ".join(f"`{k}` {v:g}" for k, v in example["mix"].items())
    body = "\n".join(
        [
            f"From benchmarks/results/whatif.json. {run_line(payload)}",
            "",
            f"{example['jobs']:,} jobs generated with seed {example['seed']} at offered load "
            f"{example['offered_load']:g} on {example['racks']} {example['generation']} racks; "
            f"kinds by weight: {mix}. Durations and arrivals from the generator's defaults.",
            "",
            table(r["runs"]),
        ]
    )
    return replace_block(page, "example", body)
