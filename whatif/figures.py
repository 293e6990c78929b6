"""Figures of one replay: queueing delay, completion time, makespan, how full
the fleet was and how much of its free capacity the waiting jobs could not
use, and the job-seconds lost to spread. Time-weighted figures hold each
sample's value until the next sample.
Allocation is taken while jobs still arrive: after the last arrival the
fleet only drains, which says nothing about the placement rule."""

import itertools
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from whatif.replay import Replay, Sample


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def time_weighted(
    samples: Sequence[Sample],
    value: Callable[[Sample], float],
    only: Callable[[Sample], object] | None = None,
) -> float | None:
    """Mean of value(sample) over time, each sample holding until the next;
    `only(sample)` limits it to the stretches where it is true."""
    total = weight = 0.0
    for here, after in itertools.pairwise(samples):
        if only is not None and not only(here):
            continue
        span = after.time - here.time
        total += value(here) * span
        weight += span
    return total / weight if weight else None


def spread_figures(run: Replay) -> dict[str, Any]:
    """Job-seconds lost to spread, {} where none is counted: no job carries
    work (a job without work runs its trace duration wherever it lands), or
    none that ran was timed by its placement (a live job whose chips could
    not be read). Per job over the jobs with work that ran; signed, as a
    looser placement is sometimes the faster one."""
    lost = [
        r.spread_seconds
        for r in run.records
        if r.timed_by_placement() and r.end is not None and r.spread_seconds is not None
    ]
    if not lost:
        return {}
    return {
        "spread_lost_job_s": {
            "total": sum(lost),
            "p50": percentile(lost, 0.5),
            "p90": percentile(lost, 0.9),
            "jobs": len(lost),
        }
    }


def summarize(run: Replay) -> dict[str, Any]:
    ran = [r for r in run.records if r.start is not None and r.end is not None]
    waits = [r.start - r.job.arrival for r in ran if r.start is not None]
    completions = [r.end - r.job.arrival for r in ran if r.end is not None]
    cores = run.racks * run.rack.servers * run.rack.chips_per_server * run.rack.chip.cores
    first = min((r.job.arrival for r in run.records), default=0.0)
    last = max((r.job.arrival for r in run.records), default=0.0)
    makespan = max((r.end for r in ran if r.end is not None), default=first) - first
    return {
        "generation": run.rack.generation,
        "racks": run.racks,
        "cores": cores,
        "policy": run.policy,
        "queueing": run.queueing,
        "gangs": run.gangs,
        "jobs": len(run.records),
        "jobs_run": len(ran),
        "jobs_never_run": len(run.records) - len(ran),
        "makespan_s": makespan,
        "queueing_delay_s": {
            "mean": statistics.fmean(waits) if waits else None,
            "p50": percentile(waits, 0.5),
            "p90": percentile(waits, 0.9),
            "p99": percentile(waits, 0.99),
            "max": max(waits, default=None),
        },
        "completion_time_s": {
            "p50": percentile(completions, 0.5),
            "p90": percentile(completions, 0.9),
            "max": max(completions, default=None),
        },
        "allocation_rate_while_arriving": time_weighted(
            run.samples, lambda s: s.allocated_cores / cores, only=lambda s: s.time < last
        ),
        "allocation_rate_while_waiting": time_weighted(
            run.samples, lambda s: s.allocated_cores / cores, only=lambda s: s.waiting_jobs
        ),
        "failures": run.failures,
        "evictions": sum(r.evictions for r in run.records),
        "lost_core_hours": sum(r.lost_core_seconds for r in run.records) / 3600,
        "unusable_free_share_while_waiting": (
            None
            if any(s.unusable_free_cores is None for s in run.samples)
            else time_weighted(
                run.samples,
                lambda s: (
                    (s.unusable_free_cores or 0)
                    / max(1, cores - s.allocated_cores - s.failed_cores)
                ),
                only=lambda s: s.waiting_jobs,
            )
        ),
        **spread_figures(run),
    }
