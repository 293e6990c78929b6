"""Where the settle clock's wall time goes, by part, so a replay says what its
clock cost beside what the cluster cost: waiting for the replay's own writes,
for pods to be seen and decided, for Kueue, for the scheduler and the
controller to be idle, the quiet spell between two readings of their
/metrics, the reading itself, the seconds Kueue's ordering asks arrivals to
be spaced by, and failures being applied."""

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

PARTS = ("writes", "pods", "kueue", "deciders", "quiet", "metrics", "spacing", "faults")
"""The parts, in the order a step meets them; `own` is the rest (the replay's
own work between waits)."""


@dataclass
class SettleCosts:
    """Wall seconds by part, summed over the replay's steps, and the /metrics
    the clock read: how many texts and how many bytes."""

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PARTS, 0.0))
    reads: int = 0
    read_bytes: int = 0

    def add(self, part: str, seconds: float) -> None:
        if part not in self.seconds:
            raise ValueError(f"part {part!r}: not one of {', '.join(PARTS)}")
        self.seconds[part] += seconds

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        began = time.monotonic()
        try:
            yield
        finally:
            self.add(name, time.monotonic() - began)

    def read(self, size: int) -> None:
        self.reads += 1
        self.read_bytes += size

    def summary(self, events: int, wall: float) -> dict[str, float]:
        """Per event time: wall seconds by part (`own` the rest of `wall`),
        /metrics texts read and bytes parsed."""
        per = max(events, 1)
        out = {f"{name}_s": round(s / per, 4) for name, s in self.seconds.items()}
        out["own_s"] = round(max(0.0, wall - sum(self.seconds.values())) / per, 4)
        out["metrics_reads"] = round(self.reads / per, 2)
        out["metrics_bytes"] = round(self.read_bytes / per)
        return out
