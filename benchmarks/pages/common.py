"""Pieces every page shares: tables, a median with its spread, what a tail
quantile may be called, and the line under each section's title that says how
and under which load its figures were measured."""

import re
import statistics
from collections.abc import Mapping, Sequence
from typing import Any, Final

PROFILE_ROWS: Final = 15
"""Functions a profile's table shows, by share."""
TAIL_MIN_SAMPLES: Final = 100
"""Below this many samples the 99th percentile is the largest one: call it max."""


def row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    return "\n".join([row(*header), row(*["---"] * len(header)), *(row(*r) for r in rows)])


def tail_name(samples: float) -> str:
    """ "p99" only where there are enough samples for it to differ from the max."""
    return "p99" if samples >= TAIL_MIN_SAMPLES else "max"


def spread(values: Sequence[float], fmt: str = "{:,.2f}") -> str:
    """The median of repeated runs with their range beside it; a single run's
    figure alone (the page says where figures come from one run)."""
    if len(values) == 1:
        return fmt.format(values[0])
    mid = statistics.median(values)
    return f"{fmt.format(mid)} ({fmt.format(min(values))}\u2013{fmt.format(max(values))})"


def single_runs(counts: Sequence[int]) -> str:
    """A sentence for tables whose figures come from one run each."""
    if counts and max(counts) == 1:
        return (
            "\nEvery figure above comes from a single run: these results predate repeated runs.\n"
        )
    return ""


def values(runs: Sequence[Mapping[str, Any]], key: str) -> list[float]:
    return [float(r[key]) for r in runs]


def median(runs: Sequence[Mapping[str, Any]], key: str) -> float:
    return float(statistics.median(values(runs, key)))


def load_conditions(payload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The run's CPU count and load, as the shared code records them (or as the
    simulator benchmark recorded them itself before it did)."""
    if "conditions" in payload:
        conditions: dict[str, Any] = payload["conditions"]
        return conditions
    old = (payload.get("results") or {}).get("load_average_1min")
    if old:
        cpus = payload["machine"]["cpus"]
        return {
            "cpus": cpus,
            "load_1min_before": old["before"],
            "load_1min_after": old["after"],
            "noisy": old["before"] > cpus,
        }
    return None


def load_note(conditions: Mapping[str, Any] | None, unrecorded: str = "") -> str:
    """A quiet run's load in a line; a noisy one, or one whose load nobody
    recorded, as a warning nobody can miss."""
    if conditions is None:
        extra = f" {unrecorded}" if unrecorded else ""
        return (
            "> **Load not recorded.** The benchmark did not record the machine's load "
            f"for this run.{extra}"
        )
    before, after = conditions["load_1min_before"], conditions["load_1min_after"]
    cpus = conditions["cpus"]
    if conditions["noisy"]:
        return (
            f"> **NOISY RUN.** The 1-minute load average was {before:.1f} before and "
            f"{after:.1f} after the run on {cpus} CPUs: other work outnumbered the CPUs, "
            "so every time below is stretched by it. Run again on a quiet machine before "
            "comparing."
        )
    return f"1-minute load average {before:.1f} before and {after:.1f} after the run, {cpus} CPUs."


def run_line(payload: Mapping[str, Any]) -> str:
    """Which command, when, on what."""
    m = payload["machine"]
    return f"Command: `{payload['command']}` — {m['date']}, {m['cpus']} CPUs, Python {m['python']}."


def section_head(title: str, payload: Mapping[str, Any]) -> str:
    """A section's title, the command that made it and the load it ran under."""
    conditions = load_conditions(payload)
    return "\n\n".join(
        [
            f"## {title}",
            run_line(payload),
            load_note(conditions, payload.get("unrecorded_load", "")),
        ]
    )


def replace_block(page: str, name: str, body: str) -> str:
    """`page` with the text between a generated block's markers replaced by `body`."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    if not pattern.search(page):
        raise SystemExit(f"no {start} ... {end} markers in the page")
    return pattern.sub(lambda _: f"{start}\n{body}\n{end}", page)


def profile_table(profile: Mapping[str, Any]) -> str:
    """A py-spy profile's functions by the share of the handler's samples whose
    stack holds them (benchmarks/pyspy.py)."""
    lines = ["| function (file) | share of prepare samples |", "|---|---|"]
    for name, share in profile["functions"][:PROFILE_ROWS]:
        lines.append(f"| `{name}` | {100 * share:.1f} % |")
    return "\n".join(lines)
