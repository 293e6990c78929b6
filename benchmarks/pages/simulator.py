"""docs/simulator.md's generated blocks: the tables written from the model's
code, and the validation table from benchmarks/results/sim-validation.json
(the collectives blocks: benchmarks/pages/sim_collectives.py). The prose around
them is the page's own."""

from typing import Any

from benchmarks.pages.common import provenance, replace_block
from benchmarks.sim_validation import STATIC_BLOCKS, validation_table

SOURCE = "benchmarks/results/sim-validation.json"


def validation(results: dict[str, Any]) -> str:
    """The validation table with the commit it was computed at; nothing in it
    is timed, and the file keeps no date."""
    commit = provenance(results.get("conditions"), SOURCE)
    return (
        f"{validation_table(results)}\n\nFrom {SOURCE} (`make validate-sim`), which keeps "
        f"no date. {commit}"
    )


def render(page: str, results: dict[str, Any]) -> str:
    """`page` with every generated block written afresh."""
    for name, text in STATIC_BLOCKS.items():
        page = replace_block(page, name, text())
    return replace_block(page, "validation", validation(results))
