"""How long a job runs, from the simulated cores when it says what it computes.

A job may carry a workload (`simdevice.workloads`, e.g. a data-parallel
training step) instead of only a duration: its run time is then the
workload's iterations times one iteration on the cores and chips its shape
gets, on the generation being replayed. One iteration is timed once per
workload, generation and shape. So the same trace answers "what if these jobs
ran on Trn2, Trn3 Gen1 or Trn3 Gen2". Collectives are modelled inside one
rack: a job spanning racks is timed as if its chips shared one."""

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from driver.whatif.jobs import Job, JobError, PodShape
from simdevice.topology import RackSpec
from simdevice.workloads import Workload, WorkloadError, parse_workload, plan


def parse_work(text: str) -> Workload:
    """A workload spec as JSON, e.g. {"kind": "train-step", "hidden": 2048, "seq": 2048}."""
    try:
        spec: Any = json.loads(text)
    except json.JSONDecodeError as err:
        raise JobError(f"work {text!r}: not JSON ({err.msg})") from err
    try:
        return parse_workload(spec)
    except WorkloadError as err:
        raise JobError(f"work: {err}") from err


def work_text(work: Workload) -> str:
    return json.dumps(work.spec(), sort_keys=True, separators=(",", ":"))


def placement_size(pods: int, shape: PodShape, rack: RackSpec) -> tuple[int, int]:
    """(cores, chips) a job of `pods` pods of `shape` holds; chips capped at one rack's."""
    if shape.kind == "cores":
        cores, chips = shape.count, 1
    elif shape.kind == "chips":
        cores, chips = shape.count * rack.chip.cores, shape.count
    elif shape.kind == "server":
        cores, chips = rack.chips_per_server * rack.chip.cores, rack.chips_per_server
    else:
        cores, chips = rack.chips * rack.chip.cores, rack.chips
    return pods * cores, min(pods * chips, rack.chips)


@functools.lru_cache(maxsize=4096)
def iteration_seconds(work: Workload, rack: RackSpec, cores: int, chips: int) -> float:
    """One iteration of `work` on `cores` cores of `chips` chips (memoized)."""
    try:
        return plan(replace_iterations(work, 1), rack, cores, chips).iteration_time
    except WorkloadError as err:
        raise JobError(f"work on {cores} cores of {chips} {rack.generation} chips: {err}") from err


def replace_iterations(work: Workload, iterations: int) -> Workload:
    return parse_workload({**work.spec(), "iterations": iterations})


def timed(job: Job, rack: RackSpec) -> Job:
    """The job with its duration from its workload on `rack`'s generation."""
    if job.work is None:
        return job
    cores, chips = placement_size(job.pods, job.shape, rack)
    return replace(
        job, duration=job.work.iterations * iteration_seconds(job.work, rack, cores, chips)
    )


def timed_all(jobs: Sequence[Job], rack: RackSpec) -> list[Job]:
    return [timed(j, rack) for j in jobs]


def with_work(job: Job, work: Workload, reference: RackSpec) -> Job:
    """`job` computing `work` for as many iterations as fill its duration on
    `reference` (at least one), so its duration on another generation is what
    the same computation takes there."""
    cores, chips = placement_size(job.pods, job.shape, reference)
    step = iteration_seconds(work, reference, cores, chips)
    iterations = max(1, math.floor(job.duration / step + 0.5))
    return timed(replace(job, work=replace_iterations(work, iterations)), reference)
