"""What a job asks for: how many pods, each of which shape, for how long."""

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from driver.devicemodel.layout import PARTITION_SIZES
from simdevice.topology import RackSpec
from simdevice.workloads import Workload

KINDS: Final = ("cores", "chips", "server", "rack")


class JobError(ValueError):
    """A job that no rack of the generation could ever hold."""


@dataclass(frozen=True)
class PodShape:
    """One pod's devices: an aligned partition of `count` cores, `count` whole
    chips of one server, a whole server or a whole rack."""

    kind: str
    count: int = 1

    def cores(self, rack: RackSpec) -> int:
        """Cores the pod holds while it runs."""
        if self.kind == "cores":
            return self.count
        if self.kind == "chips":
            return self.count * rack.chip.cores
        if self.kind == "server":
            return rack.chips_per_server * rack.chip.cores
        return rack.servers * rack.chips_per_server * rack.chip.cores

    def label(self) -> str:
        return f"{self.kind}-{self.count}" if self.kind in ("cores", "chips") else self.kind


def parse_shape(text: str) -> PodShape:
    """`cores-2`, `chips-4`, `server` or `rack`, as `PodShape.label` writes them."""
    kind, _, count = text.partition("-")
    if kind not in KINDS or (kind in ("cores", "chips")) != bool(count):
        raise JobError(
            f"shape {text!r}: write cores-N (N in {PARTITION_SIZES}), chips-N, server or rack"
        )
    shape = PodShape(kind, int(count) if count else 1)
    if shape.kind == "cores" and shape.count not in PARTITION_SIZES:
        raise JobError(f"shape {text!r}: a core partition has {PARTITION_SIZES} cores")
    if shape.count < 1:
        raise JobError(f"shape {text!r}: N must be at least 1")
    return shape


@dataclass(frozen=True)
class Job:
    """`pods` pods of `shape` arriving at `arrival` seconds and running
    `duration` seconds once all of them hold their devices; with `work`, the
    duration is what that workload takes on the replayed generation
    (`whatif.jobtimes`). `priority` orders the queue of the replays
    through Kueue (higher first, as a WorkloadPriorityClass of that value);
    the bare scheduler and its anchors ignore it."""

    name: str
    arrival: float
    pods: int
    shape: PodShape
    duration: float
    work: Workload | None = None
    priority: int = 0

    def cores(self, rack: RackSpec) -> int:
        return self.pods * self.shape.cores(rack)


def check_fits(job: Job, rack: RackSpec, racks: int) -> None:
    """Refuse a job the fleet could not hold even when empty, naming what is too big."""
    if job.pods < 1 or job.duration <= 0 or job.arrival < 0:
        raise JobError(f"job {job.name}: pods >= 1, duration > 0 and arrival >= 0 are required")
    if job.shape.kind == "chips" and job.shape.count > rack.chips_per_server:
        raise JobError(
            f"job {job.name}: {job.shape.count} chips per pod, but a {rack.generation} server "
            f"has {rack.chips_per_server}; split it into more pods"
        )
    if job.shape.kind == "rack" and job.pods > racks:
        raise JobError(f"job {job.name}: {job.pods} whole racks, but the fleet has {racks}")
    if job.cores(rack) > racks * rack.servers * rack.chips_per_server * rack.chip.cores:
        raise JobError(f"job {job.name}: needs more cores than {racks} racks hold")


def offered(job: Job, sizes: Sequence[int]) -> Job:
    """The job on a site that publishes core partitions of `sizes` only: a
    partition of a size not offered takes the next size up, or a whole chip.
    Its duration stays what it was: the cores beyond what it asked for idle."""
    if job.shape.kind != "cores" or job.shape.count in sizes:
        return job
    bigger = [n for n in sizes if n > job.shape.count]
    return replace(job, shape=PodShape("cores", min(bigger)) if bigger else PodShape("chips", 1))
