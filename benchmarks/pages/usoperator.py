"""docs/aws-neuron.md's failure-strategy block, from benchmarks/results/usoperator.json."""

from collections.abc import Sequence
from typing import Any

from benchmarks.pages.common import (
    conditions_note,
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
        return "never: nothing moved"
    return spread(values, "{:,.1f}")


def _counts(runs: Sequence[dict[str, Any]], key: str) -> str:
    values = [r[key] for r in runs if r[key] is not None]
    if not values:
        return "—"
    low, high = min(values), max(values)
    return f"{low}" if low == high else f"{low}\u2013{high}"


OLD_FAULT = "chip 0 failed (`ecc-uncorrected-hbm`)"
"""What a results file from before the fault kinds measured: only this."""


def faults_of(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Fault kind -> what it is and its runs by strategy; a file of the first
    format (strategies alone) measured a failed chip."""
    if "faults" in results:
        found: dict[str, dict[str, Any]] = results["faults"]
        return found
    return {"chip": {"what": OLD_FAULT, "strategies": results["strategies"]}}


def table(faults: dict[str, dict[str, Any]]) -> str:
    head = [
        "fault",
        "strategy",
        *(f"seconds {label}" for _, label in STEPS),
        "pods replaced",
        "claims made",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for kind, fault in faults.items():
        for strategy, runs in fault["strategies"].items():
            lines.append(_row(f"`{kind}`", strategy, runs))
    return "\n".join(lines)


def _row(kind: str, strategy: str, runs: Sequence[dict[str, Any]]) -> str:
    cells = [kind, f"`{strategy}`", *(_seconds(runs, step) for step, _ in STEPS)]
    replaced = _counts(runs, "pods_replaced")
    cells += [
        replaced if replaced == "—" else f"{replaced} of {runs[0]['pods']}",
        _counts(runs, "claims_made"),
    ]
    return "| " + " | ".join(cells) + " |"


def render(page: str, payload: dict[str, Any]) -> str:
    r = payload["results"]
    faults = faults_of(r)
    runs = {len(v) for f in faults.values() for v in f["strategies"].values()}
    what = "; ".join(f"`{kind}`: {f['what']}" for kind, f in faults.items())
    body = "\n".join(
        [
            f"From benchmarks/results/usoperator.json. {run_line(payload)}",
            "",
            conditions_note(payload.get("conditions"), "benchmarks/results/usoperator.json"),
            "",
            f"On the stand-in (`trainium-dra up {' '.join(r['cluster'])}`): per fault kind and "
            "strategy, a workload of one pair with its two pods Running, then the fault put on "
            f"its first node ({what}). Seconds from the fault, polled every "
            f"{r['poll_seconds']:g} s; the median of "
            f"{'/'.join(str(n) for n in sorted(runs))} interleaved runs with their range.",
            "",
            table(faults),
        ]
    )
    return replace_block(page, BLOCK, body)
