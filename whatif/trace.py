"""Job traces: our own CSV, a reader for Alibaba's published GPU trace, a
generator with stated distributions, and the statistics the generator's
defaults come from.

Our CSV has one row per job: `name,arrival_s,pods,shape,duration_s,work,priority`,
shape as `PodShape.label` writes it (`cores-2`, `chips-1`, `server`, `rack`),
`work` empty or the JSON spec of the workload the job computes, whose run time
on the replayed generation replaces `duration_s` (`whatif.jobtimes`),
and `priority` an integer (empty or absent: 0) that orders the queue of a
replay through Kueue.

Alibaba's cluster-trace-gpu-v2023 (github.com/alibaba/clusterdata, the trace
of the ATC'23 paper "Beware of Fragmentation") lists one task per row:
`name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
creation_time,deletion_time,scheduled_time`, times in seconds. A GPU is read
as one chip: a shared GPU (`num_gpu` 1, `gpu_milli` below 1000) becomes the
smallest core partition holding that share of a chip's cores, `num_gpu` n
whole chips of one server, or a gang of pods of a whole server's chips when
n is more than a server holds. Tasks without a GPU or never scheduled are
skipped; a task runs from `scheduled_time` to `deletion_time`."""

import csv
import math
import random
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from driver.devicemodel.layout import PARTITION_SIZES
from simdevice.topology import RackSpec
from simdevice.workloads import Workload
from whatif.jobs import Job, JobError, PodShape, parse_shape
from whatif.jobtimes import parse_work, with_work, work_text

FIELDS: Final = ("name", "arrival_s", "pods", "shape", "duration_s")
OPTIONAL_FIELDS: Final = ("work", "priority")
ALIBABA_FIELDS: Final = ("name", "num_gpu", "gpu_milli", "creation_time", "scheduled_time")
HOURS: Final = 24


class TraceError(ValueError):
    """A trace file that cannot be read: names the file, row and column."""


def write_trace(path: Path, jobs: Iterable[Job]) -> None:
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(FIELDS + OPTIONAL_FIELDS)
        for j in jobs:
            work = work_text(j.work) if j.work else ""
            writer.writerow(
                [
                    j.name,
                    f"{j.arrival:.3f}",
                    j.pods,
                    j.shape.label(),
                    f"{j.duration:.3f}",
                    work,
                    j.priority,
                ]
            )


def require_columns(
    path: Path, reader: "csv.DictReader[str]", fields: Sequence[str], what: str
) -> None:
    """Refuse a CSV without every column of `fields`, naming the missing ones."""
    missing = set(fields) - set(reader.fieldnames or ())
    if missing:
        raise TraceError(f"{path}: missing columns {', '.join(sorted(missing))}; {what}")


def read_trace(path: Path) -> list[Job]:
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        require_columns(path, reader, FIELDS, f"a trace has {','.join(FIELDS)}")
        jobs = []
        for line, row in enumerate(reader, start=2):
            try:
                work, priority = row.get("work"), row.get("priority")
                jobs.append(
                    Job(
                        row["name"],
                        float(row["arrival_s"]),
                        int(row["pods"]),
                        parse_shape(row["shape"]),
                        float(row["duration_s"]),
                        parse_work(work) if work else None,
                        int(priority) if priority else 0,
                    )
                )
            except (ValueError, JobError) as err:
                raise TraceError(f"{path}:{line}: {err}") from err
    return jobs


def shape_of_gpus(num_gpu: int, gpu_milli: int, rack: RackSpec) -> tuple[int, PodShape]:
    """(pods, shape) for a task asking for `num_gpu` GPUs (`gpu_milli` of one when shared)."""
    cores = rack.chip.cores
    if num_gpu == 1 and gpu_milli < 1000:
        share = gpu_milli * cores / 1000
        size = next((s for s in PARTITION_SIZES if s >= share), None)
        return 1, PodShape("cores", size) if size else PodShape("chips", 1)
    per_server = rack.chips_per_server
    if num_gpu <= per_server:
        return 1, PodShape("chips", num_gpu)
    return math.ceil(num_gpu / per_server), PodShape("chips", per_server)


def read_alibaba_v2023(path: Path, rack: RackSpec) -> tuple[list[Job], Counter[str]]:
    """The trace's GPU tasks as jobs, arrivals from the first task's creation;
    and how many rows were skipped, by reason."""
    skipped: Counter[str] = Counter()
    rows = []
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        require_columns(
            path, reader, ALIBABA_FIELDS, "not an openb_pod_list CSV of cluster-trace-gpu-v2023"
        )
        for line, row in enumerate(reader, start=2):
            try:
                num_gpu, milli = int(row["num_gpu"]), int(row["gpu_milli"] or 0)
                created = float(row["creation_time"])
                scheduled = float(row["scheduled_time"]) if row["scheduled_time"] else None
                deleted = float(row["deletion_time"]) if row.get("deletion_time") else None
            except ValueError as err:
                raise TraceError(f"{path}:{line}: {err}") from err
            if num_gpu <= 0:
                skipped["no GPU"] += 1
            elif scheduled is None or deleted is None or deleted <= scheduled:
                skipped["never ran"] += 1
            else:
                rows.append((created, row["name"], num_gpu, milli, deleted - scheduled))
    start = min((r[0] for r in rows), default=0.0)
    jobs = []
    for created, name, num_gpu, milli, duration in rows:
        pods, shape = shape_of_gpus(num_gpu, milli, rack)
        jobs.append(Job(name, created - start, pods, shape, duration))
    return jobs, skipped


def job_label(job: Job) -> str:
    """A job's kind in a mix: its shape, and `xN` for N pods."""
    return job.shape.label() + (f"x{job.pods}" if job.pods > 1 else "")


def parse_label(label: str) -> tuple[int, PodShape]:
    shape, _, pods = label.partition("x")
    try:
        count = int(pods) if pods else 1
    except ValueError as err:
        raise JobError(f"{label!r}: write SHAPE or SHAPExPODS, e.g. serverx4") from err
    return count, parse_shape(shape)


@dataclass(frozen=True)
class TraceStats:
    """What the generator needs to imitate a trace."""

    mix: Mapping[str, float]
    duration_log_mean: float
    duration_log_sigma: float
    hourly: tuple[float, ...]
    jobs: int


def trace_stats(jobs: Sequence[Job]) -> TraceStats:
    """Share of each job kind, a log-normal fit of the durations (mean and
    deviation of their logarithm) and the share of arrivals in each hour of
    the day (the trace's clock taken as starting at midnight)."""
    kinds = Counter(job_label(j) for j in jobs)
    logs = [math.log(j.duration) for j in jobs]
    hours = Counter(int(j.arrival // 3600) % HOURS for j in jobs)
    return TraceStats(
        mix={k: n / len(jobs) for k, n in sorted(kinds.items())},
        duration_log_mean=statistics.fmean(logs),
        duration_log_sigma=statistics.pstdev(logs),
        hourly=tuple(hours[h] / len(jobs) for h in range(HOURS)),
        jobs=len(jobs),
    )


ALIBABA_DEFAULT: Final = TraceStats(
    mix={
        "chips-1": 0.7938,
        "chips-2": 0.0024,
        "chips-4": 0.0024,
        "chips-4x2": 0.0071,
        "cores-1": 0.0040,
        "cores-2": 0.0363,
        "cores-4": 0.1540,
    },
    duration_log_mean=6.566,
    duration_log_sigma=1.910,
    hourly=(
        0.0576,
        0.0540,
        0.0408,
        0.0555,
        0.0537,
        0.0418,
        0.0374,
        0.0379,
        0.0301,
        0.0185,
        0.0313,
        0.0285,
        0.0213,
        0.0197,
        0.0184,
        0.0255,
        0.0380,
        0.0517,
        0.0677,
        0.0587,
        0.0447,
        0.0532,
        0.0497,
        0.0645,
    ),
    jobs=6203,
)
"""`trainium-dra whatif stats` of openb_pod_list_default.csv in Alibaba's
cluster-trace-gpu-v2023, read for a Trn3 Gen2 rack, rounded: the generator's
defaults. That trace is of a GPU-sharing cluster and has no job larger than
one 8-GPU machine; whole servers, racks and gangs of them come only from a
mix given by the user."""


@dataclass(frozen=True)
class TraceSpec:
    jobs: int
    offered_load: float = 0.9
    """Core-seconds the jobs ask for per second, over the fleet's cores."""
    stats: TraceStats = ALIBABA_DEFAULT
    mix: Mapping[str, float] = field(default_factory=dict)
    """Job kinds and weights replacing the stats' mix when given."""
    work: Workload | None = None
    """What every job computes; its iterations fill the drawn duration on the
    generation the trace is generated for."""
    max_duration: float | None = None
    """Seconds a drawn duration is cut to, if any: the log-normal's tail runs
    for days, longer than a compressed live replay can wait."""
    priorities: Mapping[str, int] = field(default_factory=dict)
    """Job kind (a label of the mix) -> its jobs' priority; others get 0."""


def lognormal_mean(mu: float, sigma: float, cap: float | None) -> float:
    """Mean of a log-normal duration, or of its minimum with `cap`."""
    mean = math.exp(mu + sigma * sigma / 2)
    if cap is None:
        return mean
    z = (math.log(cap) - mu) / sigma
    unit = statistics.NormalDist()
    return mean * unit.cdf(z - sigma) + cap * (1 - unit.cdf(z))


def generate(spec: TraceSpec, rack: RackSpec, racks: int, seed: int) -> list[Job]:
    """Jobs drawn from the spec: kinds by weight, log-normal durations, and
    arrivals from a Poisson process whose rate follows the hourly profile and
    whose mean makes the offered load `spec.offered_load`."""
    if spec.jobs < 1 or spec.offered_load <= 0:
        raise JobError("jobs must be at least 1 and offered_load above 0")
    if spec.max_duration is not None and spec.max_duration <= 0:
        raise JobError("max_duration must be above 0 seconds")
    mix = dict(spec.mix or spec.stats.mix)
    kinds = {label: parse_label(label) for label in mix}
    unknown = set(spec.priorities) - set(mix)
    if unknown:
        raise JobError(
            f"priority for {', '.join(sorted(unknown))}: no such kind in the mix "
            f"({', '.join(mix)}); name a kind the mix has"
        )
    rng = random.Random(seed)
    labels = list(mix)
    weights = [mix[k] for k in labels]
    mu, sigma = spec.stats.duration_log_mean, spec.stats.duration_log_sigma
    mean_duration = lognormal_mean(mu, sigma, spec.max_duration)
    total = sum(weights)
    mean_cores = sum(
        w / total * pods * shape.cores(rack)
        for (pods, shape), w in zip(kinds.values(), weights, strict=True)
    )
    fleet = racks * rack.servers * rack.chips_per_server * rack.chip.cores
    rate = spec.offered_load * fleet / (mean_cores * mean_duration)
    peak = max(spec.stats.hourly) * HOURS
    jobs: list[Job] = []
    now = 0.0
    while len(jobs) < spec.jobs:
        now += rng.expovariate(rate * peak)
        hour = int(now // 3600) % HOURS
        if rng.random() * peak > spec.stats.hourly[hour] * HOURS:
            continue
        label = rng.choices(labels, weights)[0]
        pods, shape = kinds[label]
        duration = rng.lognormvariate(mu, sigma)
        if spec.max_duration is not None:
            duration = min(duration, spec.max_duration)
        priority = spec.priorities.get(label, 0)
        job = Job(f"job-{len(jobs):05d}", now, pods, shape, duration, priority=priority)
        jobs.append(with_work(job, spec.work, rack) if spec.work else job)
    return jobs
