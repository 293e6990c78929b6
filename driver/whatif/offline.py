"""The offline anchor: replay jobs on a simulated fleet with no API, no
scheduler latency and an idealized placement rule.

Events are arrivals and completions. At every event time, completions free
their cores first, arrivals join the queue, then every waiting job is tried in
arrival order, and a job that does not fit now does not hold back those behind
it (the real scheduler retries every pending pod the same way). With gangs a
job's pods are placed all or none; without, each pod takes its devices as soon
as it fits and holds them until the job's last pod fits and the job runs."""

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

from driver.whatif.fleet import POLICIES, Fleet, Placement
from driver.whatif.jobs import Job, check_fits
from driver.whatif.runtime import timed_all
from simdevice.topology import RackSpec


@dataclass
class JobRecord:
    """What happened to one job; `start` and `end` stay None if it never ran."""

    job: Job
    start: float | None = None
    end: float | None = None
    held: list[Placement] = field(default_factory=list)


@dataclass(frozen=True)
class Sample:
    """The fleet right after the scheduling pass at `time`."""

    time: float
    allocated_cores: int
    waiting_jobs: int
    unusable_free_cores: int


@dataclass(frozen=True)
class Replay:
    rack: RackSpec
    racks: int
    policy: str
    gangs: bool
    records: tuple[JobRecord, ...]
    samples: tuple[Sample, ...]


def replay(
    jobs: Sequence[Job], rack: RackSpec, racks: int, *, policy: str, gangs: bool = True
) -> Replay:
    """Run every job to completion (or to the end of events, for jobs that
    still wait when nothing else will ever finish); a job with a workload runs
    as long as it takes on `rack`'s generation."""
    if policy not in POLICIES:
        raise ValueError(f"policy {policy!r}: choose one of {', '.join(POLICIES)}")
    for job in jobs:
        check_fits(job, rack, racks)
    jobs = timed_all(jobs, rack)
    fleet = Fleet(rack, racks)
    records = [JobRecord(job) for job in sorted(jobs, key=lambda j: (j.arrival, j.name))]
    arrivals = list(records)
    ends: list[tuple[float, int, JobRecord]] = []
    waiting: list[JobRecord] = []
    samples: list[Sample] = []
    next_arrival = 0
    while next_arrival < len(arrivals) or ends:
        now = min(
            arrivals[next_arrival].job.arrival if next_arrival < len(arrivals) else float("inf"),
            ends[0][0] if ends else float("inf"),
        )
        while ends and ends[0][0] == now:
            _, _, done = heapq.heappop(ends)
            for placement in done.held:
                fleet.release(placement)
            done.held.clear()
        while next_arrival < len(arrivals) and arrivals[next_arrival].job.arrival == now:
            waiting.append(arrivals[next_arrival])
            next_arrival += 1
        for record in list(waiting):
            if _try_start(fleet, record, policy, gangs):
                record.start = now
                record.end = now + record.job.duration
                heapq.heappush(ends, (record.end, id(record), record))
                waiting.remove(record)
        shapes = {r.job.shape for r in waiting}
        samples.append(
            Sample(
                now,
                fleet.cores - fleet.free_cores(),
                len(waiting),
                fleet.unusable_free_cores(shapes),
            )
        )
    return Replay(rack, racks, policy, gangs, tuple(records), tuple(samples))


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
