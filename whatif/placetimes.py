"""How long a job that computes runs on the chips it was given.

A job with `work` runs the workload's iterations, each one step: the compute
of one core's share of the work (`simdevice.workloads.workload_timing`),
then the step's collectives (a training step's gradient all-reduce, or the
all-reduce or all-gather the workload is) timed by
`simdevice.collectives.time_collective` on the ranks' actual chips, one rank
per chip the job holds. Chips in one server talk across the intra-server
level only; chips spread over servers or racks cross the slower levels too,
and ranks spread unevenly run one flat phase at the slowest level they span.
So where a job lands decides how long it runs.

The reference is the job's packed duration: the same job on the tightest
placement, its pods placed first fit on an empty fleet (as few chips,
servers and racks as the shape allows). The job-seconds lost to spread are
actual minus packed. A job without work runs its trace duration wherever it
lands: nothing is lost to spread.

One step's compute is timed once per workload, generation and shape; a
collective once per operation, size, generation and level signature of the
ranks (how many ranks each server and rack holds, and whether the racks hold
them in the same places), which is all its time depends on. Not modelled:
congestion between jobs (every collective is timed as if alone on the
fabric) and EFA between UltraServers (a Trn2 job spanning racks is refused)."""

import functools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from simdevice.collectives import time_collective
from simdevice.fabric import RankPlace
from simdevice.topology import RackSpec
from simdevice.workloads import Workload, WorkloadError, parse_workload, workload_timing
from whatif.fleet import Fleet, Placement
from whatif.jobs import Job, JobError, PodShape


@dataclass(frozen=True)
class Collective:
    """One collective of a step: `operation` on `size` bytes over the job's
    first `chips` chips (0: all of them)."""

    operation: str
    size: float
    chips: int


def gradient_bytes(work: Workload) -> float:
    """The buffer of a training step's gradient all-reduce: 12 h^2 BF16
    values per layer, as `simdevice.workloads.train_step_comm` all-reduces."""
    hidden: int = work["hidden"]
    layers: int = work["layers"]
    return 12.0 * hidden * hidden * 2 * layers


def step_collectives(work: Workload) -> tuple[Collective, ...]:
    """The collectives one step of `work` runs between chips."""
    if work.kind == "train-step":
        return (Collective("all-reduce", gradient_bytes(work), work["chips"]),)
    if work.kind in ("all-reduce", "all-gather"):
        return (Collective(work.kind, float(work["bytes"]), work["chips"]),)
    return ()


def replace_iterations(work: Workload, iterations: int) -> Workload:
    return parse_workload({**work.spec(), "iterations": iterations})


def places_of(placements: Sequence[Placement]) -> tuple[RankPlace, ...]:
    """The chips the pods hold, one rank each, in (rack, server, chip) order."""
    chips = sorted({chip for p in placements for chip, _ in p.masks})
    return tuple(RankPlace(r, s, c) for r, s, c in chips)


def level_signature(places: Sequence[RankPlace]) -> tuple[Any, ...]:
    """What a collective's time depends on besides its operation and size:
    the ranks each server holds, grouped by rack (sorted, so which servers
    and racks does not matter), and whether every rack holds its ranks in
    the same places (the inter-rack links join chips in the same place)."""
    per_server = Counter((p.rack, p.server) for p in places)
    racks: dict[int, list[int]] = {}
    for (rack, _), count in per_server.items():
        racks.setdefault(rack, []).append(count)
    spots: dict[int, set[tuple[int, int]]] = {}
    for p in places:
        spots.setdefault(p.rack, set()).add((p.server, p.chip))
    same = len({frozenset(s) for s in spots.values()}) <= 1
    shape = tuple(sorted((tuple(sorted(c, reverse=True)) for c in racks.values()), reverse=True))
    return shape, same


_COLLECTIVES: dict[tuple[Any, ...], float] = {}
"""Seconds of a collective by (operation, size, rack, level signature)."""


def collective_seconds(
    collective: Collective, rack: RackSpec, places: Sequence[RankPlace], job: str
) -> float:
    """One collective of the step on the job's chips (memoized by level signature)."""
    if collective.chips > len(places):
        raise JobError(
            f"job {job}: its work's chips is {collective.chips}, but the job holds "
            f"{len(places)} chips; set chips to 0 (the job's chips) or at most {len(places)}"
        )
    ranks = places[: collective.chips] if collective.chips else places
    key = (collective.operation, collective.size, rack, level_signature(ranks))
    if key not in _COLLECTIVES:
        try:
            timing = time_collective(collective.operation, rack, ranks, collective.size)
        except ValueError as err:
            raise JobError(f"job {job}: work on its chips: {err}") from err
        _COLLECTIVES[key] = timing.duration
    return _COLLECTIVES[key]


@functools.lru_cache(maxsize=1024)
def packed_places(pods: int, shape: PodShape, rack: RackSpec) -> tuple[RankPlace, ...]:
    """The chips of the tightest placement: the pods placed first fit, one
    after another, on an empty fleet with as few racks as hold them."""
    racks = max(
        pods if shape.kind == "rack" else 1, math.ceil(pods * shape.cores(rack) / _cores(rack))
    )
    while True:
        fleet = Fleet(rack, racks)
        placed: list[Placement] = []
        for _ in range(pods):
            spot = fleet.place(shape, "first-fit")
            if spot is None:
                break
            fleet.hold(spot)
            placed.append(spot)
        if len(placed) == pods:
            return places_of(placed)
        racks += 1


def _cores(rack: RackSpec) -> int:
    return rack.servers * rack.chips_per_server * rack.chip.cores


@functools.lru_cache(maxsize=4096)
def compute_seconds(work: Workload, rack: RackSpec, pods: int, shape: PodShape) -> float:
    """One step's compute on each core (memoized per workload, generation and
    shape). `workload_timing` is told the chips of the packed placement, at most a
    rack's: it checks what each chip keeps in HBM."""
    cores = pods * shape.cores(rack)
    chips = min(len(packed_places(pods, shape, rack)), rack.chips)
    try:
        return workload_timing(work, rack, cores, chips).compute.duration
    except WorkloadError as err:
        raise JobError(f"work on {cores} cores of {chips} {rack.generation} chips: {err}") from err


def step_seconds(job: Job, rack: RackSpec, places: Sequence[RankPlace]) -> float:
    """One step of the job's work on `places`: compute, then its collectives."""
    assert job.work is not None
    one = replace_iterations(job.work, 1)
    comm = sum(collective_seconds(c, rack, places, job.name) for c in step_collectives(one))
    return compute_seconds(one, rack, job.pods, job.shape) + comm


def duration_on(job: Job, rack: RackSpec, places: Sequence[RankPlace]) -> float:
    """How long the job runs on the chips at `places`: its work's iterations
    of a step there, or its trace duration if it carries no work."""
    if job.work is None:
        return job.duration
    return job.work.iterations * step_seconds(job, rack, places)


def packed_duration(job: Job, rack: RackSpec) -> float:
    """How long the job runs on its tightest placement."""
    return duration_on(job, rack, packed_places(job.pods, job.shape, rack))


def spread_seconds(job: Job, rack: RackSpec, places: Sequence[RankPlace]) -> float:
    """Seconds the job runs beyond its packed duration because of where its
    chips are (negative where a looser placement happens to be faster)."""
    return duration_on(job, rack, places) - packed_duration(job, rack)
