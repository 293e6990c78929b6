"""Straight-line fits of measured cost against rack count, and their value at
the projected scale. Pure: measured points in, fitted lines out."""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

PROJECTION_MIN_POINTS: Final = 3
"""Fewer rack counts than this fit a line exactly whatever the cost does, so
they project nothing."""
SCHEDULER_RACKS: Final = (1, 4, 16)
"""The rack counts `make bench-scale` measures the scheduler at unless told
otherwise: as many as a projection needs, small enough for the whole run to end
within SCHEDULER_RUN_HOURS on a machine of 2 CPUs and 24 GiB. The apiserver's
memory and the scheduler's time per claim grow with the racks, so a point of
100 racks is a run of its own (`--scheduler-racks 100`)."""
SCHEDULER_RUN_HOURS: Final = 1
CHIPS_PER_GEN2_RACK: Final = 144
MILLION_CHIP_RACKS: Final = 6944
"""Trn3 Gen2 racks for one million chips (6,944 x 144 = 999,936)."""


@dataclass(frozen=True)
class Line:
    """y = intercept + slope * racks, fitted by least squares."""

    intercept: float
    slope: float
    points: tuple[tuple[float, float], ...]

    def at(self, racks: float) -> float:
        return self.intercept + self.slope * racks

    def offsets(self) -> list[float]:
        """How far each measured point sits from the line, relative to the point
        (0.1: the line is 10% above it); at a zero point, 0 if the line meets it."""
        return [
            (self.at(x) - y) / abs(y) if y else (0.0 if self.at(x) == 0 else math.inf)
            for x, y in self.points
        ]

    def projects(self) -> bool:
        """Enough distinct rack counts for the line to say something past them."""
        return len({x for x, _ in self.points}) >= PROJECTION_MIN_POINTS


def fit(points: Sequence[tuple[float, float]]) -> Line:
    """Least-squares line through (racks, value) points; one point gives a line
    through the origin, as every cost here is zero without racks."""
    if not points:
        raise ValueError("fit: no measured points")
    xs = [float(x) for x, _ in points]
    ys = [float(y) for _, y in points]
    n = len(xs)
    if n == 1 or len(set(xs)) == 1:
        return Line(0.0, sum(ys) / sum(xs), tuple(zip(xs, ys, strict=True)))
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return Line(my - slope * mx, slope, tuple(zip(xs, ys, strict=True)))
