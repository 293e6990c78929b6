"""Pieces every page shares: tables, a median with its spread, what a tail
quantile may be called, and the line under each section's title that says how
and under which conditions its figures were measured."""

import re
import statistics
from collections.abc import Mapping, Sequence
from typing import Any, Final

from benchmarks.conditions import is_noisy

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


SI_PREFIXES: Final = ((1e9, " G"), (1e6, " M"), (1e3, " k"))


def scaled(value: float) -> str:
    """`value` to three significant figures under the SI prefix that keeps it
    from 1 to 999 (18.75 -> `18.8`, 27,471 -> `27.5 k`, 5.4e6 -> `5.40 M`): a
    small rate in a large unit would read 0.0."""
    for factor, prefix in SI_PREFIXES:
        if abs(value) >= 0.9995 * factor:
            return f"{value / factor:#.3g}".rstrip(".") + prefix
    return f"{value:#.3g}".rstrip(".")


def spread(values: Sequence[float], fmt: str = "{:,.2f}") -> str:
    """The median of repeated runs with their range beside it; a single run's
    figure alone (the page says where figures come from one run)."""
    if len(values) == 1:
        return fmt.format(values[0])
    mid = statistics.median(values)
    return f"{fmt.format(mid)} ({fmt.format(min(values))}\u2013{fmt.format(max(values))})"


def single_runs(counts: Sequence[int]) -> list[str]:
    """The lines under a table that say which of its figures come from a
    single run, given the runs behind each row: a figure with a range is a
    median, one without is the only run (rows of no run do not count)."""
    counts = [n for n in counts if n]
    if not counts or min(counts) > 1:
        return []
    if max(counts) == 1:
        return ["", "Every figure of this table comes from a single run."]
    return ["", "A figure without a range in brackets comes from a single run."]


def values(runs: Sequence[Mapping[str, Any]], key: str) -> list[float]:
    return [float(r[key]) for r in runs]


def median(runs: Sequence[Mapping[str, Any]], key: str) -> float:
    return float(statistics.median(values(runs, key)))


RECORDED: Final = (
    "cpus",
    "load_1min_before",
    "load_during_1min",
    "load_1min_after",
    "kubernetes_version",
    "git_commit",
)
"""What a run's conditions must hold for a page to show its figures: the
machine's load before, during and after it, the Kubernetes release
(None for a run that starts no Kubernetes component) and the commit."""


class NotRecordedError(ValueError):
    """Figures whose run did not record the conditions it ran under: no page
    shows them."""


def recorded(conditions: Mapping[str, Any] | None, source: str) -> Mapping[str, Any]:
    """`conditions` when they hold everything RECORDED names; otherwise the
    figures of `source` (a results file, or a part of one) are refused."""
    missing = [key for key in RECORDED if key not in (conditions or {})]
    if conditions is None or missing:
        raise NotRecordedError(
            f"{source}: the run recorded no {', '.join(missing)}, so no page shows its "
            "figures. Measure it again (its `make bench-*` target records them) or remove "
            "it from the results file."
        )
    return conditions


def loads_text(conditions: Mapping[str, Any]) -> str:
    """The run's 1-minute load readings in a phrase, saying where it was not
    sampled during the run."""
    before, after = conditions["load_1min_before"], conditions["load_1min_after"]
    during = conditions.get("load_during_1min") or {}
    if during.get("samples"):
        return (
            f"{before:.1f} before, up to {during['max']:.1f} during ({during['samples']} "
            f"samples) and {after:.1f} after the run"
        )
    return f"{before:.1f} before and {after:.1f} after the run, not sampled during it"


def provenance(conditions: Mapping[str, Any] | None, source: str) -> str:
    """The Kubernetes release and the commit the run of `source` recorded (a
    run that starts no Kubernetes component records None for the release)."""
    c = recorded(conditions, source)
    dirty = ", with uncommitted changes" if c.get("git_dirty") else ""
    commit = f"commit {c['git_commit'][:10]}{dirty}."
    if c["kubernetes_version"]:
        return f"Kubernetes {c['kubernetes_version']}; {commit}"
    return commit[0].upper() + commit[1:]


def conditions_note(
    conditions: Mapping[str, Any] | None, source: str, date: str | None = None
) -> str:
    """A run's load, release and commit: a quiet run's plainly, a noisy one's
    (benchmarks/conditions.py decides) as a warning nobody can miss. Figures
    of `source` (run on `date`, where it keeps one) whose run did not record
    them are refused."""
    c = recorded(conditions, source if date is None else f"{source} (run {date})")
    cpus = c["cpus"]
    if is_noisy(c):
        load = (
            f"> **NOISY RUN.** The 1-minute load average exceeded the {cpus} CPUs: "
            f"{loads_text(c)}. Runnable work outnumbered the CPUs, so every time this "
            "run measured includes waiting for one. Run again on a quiet machine before "
            "comparing."
        )
    else:
        load = f"1-minute load average {loads_text(c)}, {cpus} CPUs."
    return f"{load}\n\n{provenance(c, source)}"


def run_line(payload: Mapping[str, Any]) -> str:
    """Which command, when, on what."""
    m = payload["machine"]
    return f"Command: `{payload['command']}` — {m['date']}, {m['cpus']} CPUs, Python {m['python']}."


def section_head(title: str, payload: Mapping[str, Any], note: str | None = None) -> str:
    """A section's title, the command that made it and the conditions it ran
    under (`note` where the file's own conditions do not cover the section)."""
    if note is None:
        note = conditions_note(payload.get("conditions"), f"benchmarks/results/{title}.json")
    return "\n\n".join([f"## {title}", run_line(payload), note])


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
