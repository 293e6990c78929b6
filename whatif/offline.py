"""The offline anchor: replay jobs on a simulated fleet with no API, no
scheduler latency and an idealized placement rule.

Events are arrivals, completions, failures and repairs. At every event time,
completions free their cores, repairs return cores to service, failures evict
the jobs on the failed cores (`whatif.faults`), arrivals join the
queue, then the waiting jobs are tried in arrival order under one of two
queueing policies (`QUEUEING`): with `backfill` a job that does not fit now
does not hold back those behind it (the real scheduler retries every pending
pod the same way, with no reservation); with `fifo` the first job that does
not fit stops the pass, so no job overtakes an earlier one. With gangs a
job's pods are placed all or none; without, each pod takes its devices as
soon as it fits and holds them until the job's last pod fits and the job
runs."""

import bisect
import heapq
from collections.abc import Sequence
from typing import Final

from simdevice.topology import RackSpec
from whatif.faults import Failure, Failures
from whatif.fleet import PLACEMENTS, Fleet, Placement, servers_of
from whatif.jobs import Job, check_fits
from whatif.jobtimes import timed_all
from whatif.placetimes import duration_on, places_of
from whatif.replay import JobRecord, Replay, Sample

QUEUEING: Final = ("backfill", "fifo")
KUEUE_QUEUEING: Final = ("kueue-strict", "kueue-best-effort")
"""Quota admission before placement, for the replays that go through Kueue."""


class _Run:
    """One replay's mutable state; `replay` drives it."""

    def __init__(self, fleet: Fleet, policy: str, gangs: bool, queueing: str) -> None:
        self.fleet, self.policy, self.gangs, self.queueing = fleet, policy, gangs, queueing
        self.waiting: list[JobRecord] = []
        self.ends: list[tuple[float, int, JobRecord]] = []
        self.failed: dict[tuple[int, int, int], int] = {}
        self.repairs: list[tuple[float, tuple[int, int, int], int]] = []
        self.failures = 0
        self.quota = fleet.cores if queueing in KUEUE_QUEUEING else None
        self.admitted: set[int] = set()
        """Jobs (by id) holding quota: admitted and not yet ended or evicted."""

    def finish(self, record: JobRecord) -> None:
        for placement in record.held:
            self.fleet.release(placement)
        record.held.clear()

    def repair(self, chip: tuple[int, int, int], mask: int) -> None:
        self.fleet.release(Placement(((chip, mask),)))
        self.failed[chip] &= ~mask

    def fail(self, now: float, failure: Failure, repair_seconds: float) -> None:
        """Evict every job holding a failed core, then keep the cores out of service."""
        self.failures += 1
        mask = failure.mask & ~self.failed.get(failure.chip, 0)
        if not mask:
            return
        holders = [r for _, _, r in self.ends if r.end is not None] + self.waiting
        for record in holders:
            if any(c == failure.chip and m & mask for p in record.held for c, m in p.masks):
                self.evict(now, record)
        self.fleet.hold(Placement(((failure.chip, mask),)))
        self.failed[failure.chip] = self.failed.get(failure.chip, 0) | mask
        heapq.heappush(self.repairs, (now + repair_seconds, failure.chip, mask))

    def evict(self, now: float, record: JobRecord) -> None:
        """All of the job's pods go; it waits to run again from the start."""
        if record.start is not None:
            record.evictions += 1
            record.lost_core_seconds += (now - record.start) * sum(
                m.bit_count() for p in record.held for _, m in p.masks
            )
            self.ends = [e for e in self.ends if e[2] is not record]
            heapq.heapify(self.ends)
            record.start = record.end = None
            bisect.insort(self.waiting, record, key=JobRecord.order)
        self.admitted.discard(id(record))
        self.finish(record)

    def admit(self) -> None:
        """Admit waiting jobs while the quota covers them, as Kueue orders its
        queue: higher priority first, then arrival."""
        assert self.quota is not None
        rack = self.fleet.rack
        used = sum(r.job.cores(rack) for r in self.waiting if id(r) in self.admitted)
        used += sum(r.job.cores(rack) for _, _, r in self.ends)
        for record in sorted(self.waiting, key=lambda r: -r.job.priority):
            if id(record) in self.admitted:
                continue
            need = record.job.cores(rack)
            if used + need <= self.quota:
                self.admitted.add(id(record))
                used += need
            elif self.queueing == "kueue-strict":
                return

    def schedule(self, now: float) -> None:
        if self.quota is not None:
            self.admit()
        for record in list(self.waiting):
            if self.quota is not None and id(record) not in self.admitted:
                continue
            if _try_start(self.fleet, record, self.policy, self.gangs):
                duration = duration_on(record.job, self.fleet.rack, places_of(record.held))
                record.start = now
                record.end = now + duration
                record.spread_seconds = duration - record.job.duration
                record.servers = servers_of(record.held)
                heapq.heappush(self.ends, (record.end, id(record), record))
                self.waiting.remove(record)
            elif self.queueing == "fifo":
                return

    def sample(self, now: float) -> Sample:
        failed = sum(m.bit_count() for m in self.failed.values())
        shapes = {r.job.shape for r in self.waiting}
        return Sample(
            now,
            self.fleet.cores - self.fleet.free_cores() - failed,
            len(self.waiting),
            self.fleet.unusable_free_cores(shapes),
            failed,
        )


def replay(
    jobs: Sequence[Job],
    rack: RackSpec,
    racks: int,
    *,
    policy: str,
    gangs: bool = True,
    queueing: str = "backfill",
    failures: Failures | None = None,
) -> Replay:
    """Run every job to completion (or to the end of events, for jobs that
    still wait when nothing else will ever finish); a job with a workload runs
    as long as it takes on `rack`'s generation on the chips it was placed on
    (its `duration` stays the packed one, the reference). Failures happen only while
    some job runs: a fleet that only waits or drains breaks nothing."""
    if policy not in PLACEMENTS:
        raise ValueError(f"policy {policy!r}: choose one of {', '.join(PLACEMENTS)}")
    if queueing not in QUEUEING + KUEUE_QUEUEING:
        choices = ", ".join(QUEUEING + KUEUE_QUEUEING)
        raise ValueError(f"queueing {queueing!r}: choose one of {choices}")
    for job in jobs:
        check_fits(job, rack, racks)
    run = _Run(Fleet(rack, racks), policy, gangs, queueing)
    records = sorted((JobRecord(job) for job in timed_all(jobs, rack)), key=JobRecord.order)
    arrivals = list(records)
    samples: list[Sample] = []
    next_arrival = 0
    failure: Failure | None = None
    inf = float("inf")
    while next_arrival < len(arrivals) or run.ends or (run.waiting and run.repairs):
        if not run.ends:
            failure = None
        now = min(
            arrivals[next_arrival].job.arrival if next_arrival < len(arrivals) else inf,
            run.ends[0][0] if run.ends else inf,
            run.repairs[0][0] if run.repairs else inf,
            failure.time if failure else inf,
        )
        while run.ends and run.ends[0][0] == now:
            run.finish(heapq.heappop(run.ends)[2])
        while run.repairs and run.repairs[0][0] == now:
            _, chip, mask = heapq.heappop(run.repairs)
            run.repair(chip, mask)
        while failures and failure and failure.time == now:
            run.fail(now, failure, failures.repair_seconds)
            failure = failures.after(now)
        while next_arrival < len(arrivals) and arrivals[next_arrival].job.arrival == now:
            run.waiting.append(arrivals[next_arrival])
            next_arrival += 1
        run.schedule(now)
        if failures and failure is None and run.ends:
            failure = failures.after(now)
        samples.append(run.sample(now))
    return Replay(
        rack,
        racks,
        policy,
        gangs,
        tuple(records),
        tuple(samples),
        run.failures,
        queueing,
    )


def _try_start(fleet: Fleet, record: JobRecord, policy: str, gangs: bool) -> bool:
    """Place what the job still lacks; True once all its pods hold devices."""
    placed: list[Placement] = []
    for _ in range(record.job.pods - len(record.held)):
        spot = fleet.place(record.job.shape, policy)
        if spot is None:
            break
        fleet.hold(spot)
        placed.append(spot)
    if gangs and len(record.held) + len(placed) < record.job.pods:
        for spot in placed:
            fleet.release(spot)
        return False
    record.held.extend(placed)
    return len(record.held) == record.job.pods
