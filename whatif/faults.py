"""Chip and core failures at stated mean times between failures, drawn from a
seeded generator: each failure takes a whole chip or one core out of service
for the repair time. What the driver does about a failed device is what the
replay does: every job holding a failed core is evicted, all its pods
together, and waits to run again from the start."""

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from simdevice.topology import RackSpec

HOUR = 3600.0


@dataclass(frozen=True)
class FaultRates:
    """Mean hours between failures of one chip and of one core (None: never),
    and how long a failed chip or core stays out of service."""

    chip_mtbf_hours: float | None = None
    core_mtbf_hours: float | None = None
    repair_hours: float = 4.0

    def __post_init__(self) -> None:
        for name in ("chip_mtbf_hours", "core_mtbf_hours"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name}: must be above 0 hours, got {value}")
        if self.repair_hours <= 0:
            raise ValueError(f"repair_hours: must be above 0, got {self.repair_hours}")


@dataclass(frozen=True)
class Failure:
    time: float
    chip: tuple[int, int, int]
    """(rack, server, chip on the server)."""
    mask: int
    """The cores that fail: all of the chip's, or one."""


class Failures(Protocol):
    """Where failures come from: `after(now)` is the first one after `now`."""

    repair_seconds: float

    def after(self, now: float) -> Failure | None: ...


class RandomFailures:
    """Failures of every chip and core of the fleet as Poisson processes at
    the stated rates; drawing from any `now` is fair, as they have no memory."""

    def __init__(self, rates: FaultRates, rack: RackSpec, racks: int, seed: int) -> None:
        self.rack, self.racks = rack, racks
        self.rng = random.Random(seed)
        self.repair_seconds = rates.repair_hours * HOUR
        chips = racks * rack.chips
        self.chip_rate = chips / (rates.chip_mtbf_hours * HOUR) if rates.chip_mtbf_hours else 0.0
        cores = chips * rack.chip.cores
        self.core_rate = cores / (rates.core_mtbf_hours * HOUR) if rates.core_mtbf_hours else 0.0

    def after(self, now: float) -> Failure | None:
        rate = self.chip_rate + self.core_rate
        if not rate:
            return None
        when = now + self.rng.expovariate(rate)
        spec = self.rack
        chip = (
            self.rng.randrange(self.racks),
            self.rng.randrange(spec.servers),
            self.rng.randrange(spec.chips_per_server),
        )
        if self.rng.random() * rate < self.chip_rate:
            mask = (1 << spec.chip.cores) - 1
        else:
            mask = 1 << self.rng.randrange(spec.chip.cores)
        return Failure(when, chip, mask)


@dataclass
class ScriptedFailures:
    """Failures at given times, for a replay that must fail exactly there."""

    failures: Sequence[Failure]
    repair_seconds: float

    def after(self, now: float) -> Failure | None:
        return next((f for f in self.failures if f.time > now), None)
