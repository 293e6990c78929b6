"""docs/aws-neuron.md's failure-strategy block, from benchmarks/results/usoperator.json."""

from collections.abc import Sequence
from typing import Any

from benchmarks.pages.common import (
    conditions_note,
    load_conditions,
    replace_block,
    run_line,
    spread,
)

BLOCK = "usoperator"
STEPS = (
    ("degraded", "to `Degraded`"),
    ("acted", "to the strategy's act"),
    ("running", "to every pod Running"),
)


def _seconds(runs: Sequence[dict[str, Any]], step: str) -> str:
    values = [r["seconds"][step] for r in runs if r["seconds"][step] is not None]
    if not values:
        return "never (the failed node's pod stays Pending)"
    return spread(values, "{:,.1f}")


def _counts(runs: Sequence[dict[str, Any]], key: str) -> str:
    values = [r[key] for r in runs if r[key] is not None]
    if not values:
        return "—"
    low, high = min(values), max(values)
    return f"{low}" if low == high else f"{low}\u2013{high}"


def table(strategies: dict[str, list[dict[str, Any]]]) -> str:
    head = ["strategy", *(f"seconds {label}" for _, label in STEPS), "pods replaced", "claims made"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for strategy, runs in strategies.items():
        cells = [f"`{strategy}`", *(_seconds(runs, step) for step, _ in STEPS)]
        replaced = _counts(runs, "pods_replaced")
        cells += [
            replaced if replaced == "—" else f"{replaced} of {runs[0]['pods']}",
            _counts(runs, "claims_made"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render(page: str, payload: dict[str, Any]) -> str:
    r = payload["results"]
    runs = {len(v) for v in r["strategies"].values()}
    body = "\n".join(
        [
            f"From benchmarks/results/usoperator.json. {run_line(payload)}",
            "",
            conditions_note(load_conditions(payload)),
            "",
            f"On the stand-in (`trainium-dra up {' '.join(r['cluster'])}`): per strategy, a "
            "workload of one pair with its two pods Running, then chip 0 of its first node "
            "failed (`ecc-uncorrected-hbm`). Seconds from the fault, polled every "
            f"{r['poll_seconds']:g} s; the median of "
            f"{'/'.join(str(n) for n in sorted(runs))} interleaved runs with their range.",
            "",
            table(r["strategies"]),
        ]
    )
    return replace_block(page, BLOCK, body)
