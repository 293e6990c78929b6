"""How long a job runs, from the simulated cores when it says what it computes.

A job may carry a workload (`simdevice.workloads`, e.g. a data-parallel
training step) instead of only a duration: its run time is then the
workload's iterations times one iteration on the cores and chips its shape
gets, on the generation being replayed. One iteration is timed once per
workload, generation and shape. So the same trace answers "what if these jobs
ran on Trn2, Trn3 Gen1 or Trn3 Gen2". The duration here is the job's on its
tightest placement; a replay that knows the chips a job was given times it
there (`whatif.placetimes`)."""

import json
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from simdevice.topology import RackSpec
from simdevice.workloads import Workload, WorkloadError, parse_workload
from whatif.jobs import Job, JobError
from whatif.placetimes import packed_duration, replace_iterations


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


def timed(job: Job, rack: RackSpec) -> Job:
    """The job with its duration from its workload on `rack`'s generation, on
    its tightest placement (`whatif.placetimes`)."""
    if job.work is None:
        return job
    return replace(job, duration=packed_duration(job, rack))


def timed_all(jobs: Sequence[Job], rack: RackSpec) -> list[Job]:
    return [timed(j, rack) for j in jobs]


def with_work(job: Job, work: Workload, reference: RackSpec) -> Job:
    """`job` computing `work` for as many iterations as fill its duration on
    `reference` (at least one), on its tightest placement, so its duration on
    another generation is what the same computation takes there."""
    one = replace(job, work=replace_iterations(work, 1))
    step = packed_duration(one, reference)
    iterations = max(1, math.floor(job.duration / step + 0.5))
    return timed(replace(job, work=replace_iterations(work, iterations)), reference)
