"""What a replay, live or offline, hands to the figures, plots and reports:
each job's record and the fleet sampled over time."""

from dataclasses import dataclass, field
from typing import Any

from simdevice.topology import RackSpec
from whatif.fleet import Placement
from whatif.jobs import Job


@dataclass
class JobRecord:
    """What happened to one job; `start` and `end` are those of its last run,
    None if it never ran to the end."""

    job: Job
    start: float | None = None
    end: float | None = None
    held: list[Placement] = field(default_factory=list)
    evictions: int = 0
    lost_core_seconds: float = 0.0
    servers: list[tuple[int, int]] = field(default_factory=list)
    """(rack, server) of every server its last run held devices on."""
    spread_seconds: float | None = None
    """Seconds its last run took beyond its packed duration, for where its
    chips were (`whatif.placetimes`); 0 for a job without work, None
    where the replay did not time the job by its placement."""
    nodes: list[str] = field(default_factory=list)
    """The nodes its pods were bound to; live replays only."""

    def order(self) -> tuple[float, str]:
        return self.job.arrival, self.job.name

    def timed_by_placement(self) -> bool:
        """Did its last run's length follow from where its chips were?"""
        return self.job.work is not None and self.spread_seconds is not None

    def as_json(self) -> dict[str, Any]:
        """What `result.json` keeps of the job: enough to check its fate by hand."""
        return {
            "name": self.job.name,
            "arrival": self.job.arrival,
            "pods": self.job.pods,
            "shape": self.job.shape.label(),
            "duration": self.job.duration,
            "priority": self.job.priority,
            "start": self.start,
            "end": self.end,
            "evictions": self.evictions,
            "servers": [list(s) for s in self.servers],
            **({"nodes": self.nodes} if self.nodes else {}),
            **({"spread_s": self.spread_seconds} if self.timed_by_placement() else {}),
        }


@dataclass(frozen=True)
class Sample:
    """The fleet right after the scheduling pass at `time`."""

    time: float
    allocated_cores: int
    waiting_jobs: int
    unusable_free_cores: int | None
    """None where the replay cannot see where pods were placed."""
    failed_cores: int = 0


@dataclass(frozen=True)
class Replay:
    rack: RackSpec
    racks: int
    policy: str
    gangs: bool
    records: tuple[JobRecord, ...]
    samples: tuple[Sample, ...]
    failures: int = 0
    queueing: str = "backfill"
    """How waiting jobs are tried: `backfill` (none holds back those behind
    it, as the real scheduler) or `fifo` (strictly in arrival order)."""
