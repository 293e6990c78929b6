"""Where a live replay and an anchor part, job by job: each job that started
at another time or on more servers, with the likeliest cause read from the
two fleets at that time. A later start with enough cores free is
fragmentation (where the scheduler put earlier pods left no piece of the
shape the job asks for); with too few free it is a fuller fleet (earlier jobs
ran differently). An earlier start is the anchor's strict FIFO holding the job
behind an earlier one, its Kueue-like queue not admitting it yet, or the
anchor's own placement or fullness. Beside them, the job-seconds each
lost to spread, where jobs with work were timed by their chips. Pure: the
replays in, a summary out."""

import bisect
from collections import Counter
from dataclasses import dataclass
from typing import Any, Final

from whatif.figures import spread_figures
from whatif.replay import JobRecord, Replay

SAME: Final = 1.0
"""Simulated seconds within which two starts are the same."""
SHOWN: Final = 10
HELD_BY: Final = {
    "fifo": "earlier-fifo",
    "kueue-strict": "earlier-queue",
    "kueue-best-effort": "earlier-queue",
}
"""The anchor's queueing -> what held a job the live replay started earlier."""
CAUSES: Final = {
    "later-fragmented": "started later: enough cores were free, not in the shape it asks for",
    "later-fuller": "started later: earlier jobs held the cores it needed",
    "earlier-fifo": "started earlier: the anchor's strict FIFO held it behind an earlier job",
    "earlier-queue": "started earlier: the anchor's quota had not admitted it (an earlier job "
    "at the head, or admitted jobs holding the count)",
    "earlier-fragmented": "started earlier: the anchor's placement left no piece of its shape",
    "earlier-fuller": "started earlier: the anchor's earlier jobs held the cores it needed",
    "spread": "same start, on more servers than the anchor used",
    "live-only": "ran live only",
    "anchor-only": "ran in the anchor only",
}


@dataclass(frozen=True)
class JobDiff:
    name: str
    shape: str
    live_start: float | None
    anchor_start: float | None
    cause: str

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "shape": self.shape,
            "live_start": self.live_start,
            "anchor_start": self.anchor_start,
            "cause": self.cause,
        }


class _Free:
    """Free cores of a replay at any simulated time, from its samples."""

    def __init__(self, run: Replay) -> None:
        self.cores = run.racks * run.rack.chips * run.rack.chip.cores
        self.times = [s.time for s in run.samples]
        self.samples = run.samples

    def at(self, when: float) -> int:
        i = bisect.bisect_right(self.times, when) - 1
        if i < 0:
            return self.cores
        s = self.samples[i]
        return self.cores - s.allocated_cores - s.failed_cores


def _cause(
    live: JobRecord, anchor: JobRecord, free: tuple[_Free, _Free], queueing: str, cores: int
) -> str | None:
    live_free, anchor_free = free
    if live.start is None or anchor.start is None:
        if live.start is None and anchor.start is None:
            return None
        return "anchor-only" if live.start is None else "live-only"
    if live.start > anchor.start + SAME:
        return "later-fragmented" if live_free.at(anchor.start) >= cores else "later-fuller"
    if live.start < anchor.start - SAME:
        if anchor_free.at(live.start) < cores:
            return "earlier-fuller"
        return HELD_BY.get(queueing, "earlier-fragmented")
    if live.servers and anchor.servers and len(live.servers) > len(anchor.servers):
        return "spread"
    return None


def diff(live: Replay, anchor: Replay) -> dict[str, Any]:
    """How many jobs started alike, each cause's count, the jobs whose
    start moved most, with their causes, and the job-seconds lost to spread
    live and in the anchor (where either counts them)."""
    free = (_Free(live), _Free(anchor))
    theirs = {r.job.name: r for r in anchor.records}
    found: list[JobDiff] = []
    for mine in live.records:
        other = theirs[mine.job.name]
        cause = _cause(mine, other, free, anchor.queueing, mine.job.cores(live.rack))
        if cause is not None:
            found.append(
                JobDiff(mine.job.name, mine.job.shape.label(), mine.start, other.start, cause)
            )

    def moved(d: JobDiff) -> float:
        if d.live_start is None or d.anchor_start is None:
            return float("inf")
        return abs(d.live_start - d.anchor_start)

    lost = {
        side: figures["spread_lost_job_s"]["total"]
        for side, run in (("live", live), ("anchor", anchor))
        if (figures := spread_figures(run))
    }
    return {
        "anchor": f"{anchor.policy} {anchor.queueing}",
        "jobs": len(live.records),
        "alike": len(live.records) - len(found),
        "causes": dict(Counter(d.cause for d in found).most_common()),
        "largest": [d.as_json() for d in sorted(found, key=moved, reverse=True)[:SHOWN]],
        **({"spread_lost_job_s": lost} if lost else {}),
    }
