"""Polling for tests against live components: wait until a probe returns
something truthy, and say what never happened when it does not.

A wait's timeout is what it may take on a machine with a CPU to spare. On
an overloaded one (`make test` runs three lanes of clusters on two CPUs, at
a load many times the CPUs) every component of the cluster runs only part
of the time, so the timeout stretches by how overloaded the machine was
while the wait went on, up to `STRETCH_LIMIT` times: a loaded machine is
slower, not broken, and what never happens still fails."""

import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

STRETCH_LIMIT = 4.0
"""At most this many times its timeout, in wall seconds, a wait can last."""


def machine_seconds(wall: float, load: float, cpus: int) -> float:
    """`wall` seconds counted as the share of them a runnable process got:
    all of them while the load is at most the CPUs, cpus/load of them above,
    never less than 1/STRETCH_LIMIT (pure)."""
    share = min(1.0, cpus / load) if load > 0 else 1.0
    return wall * max(share, 1.0 / STRETCH_LIMIT)


class Deadline:
    """`timeout` machine seconds from now (`machine_seconds`), for a loop
    that polls: each `passed()` counts the time since the last one at the
    load the machine had then."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.cpus = os.cpu_count() or 1
        self.started = self.ticked = time.monotonic()
        self.spent = 0.0
        self.peak_load = 0.0

    def passed(self) -> bool:
        now, load = time.monotonic(), os.getloadavg()[0]
        self.spent += machine_seconds(now - self.ticked, load, self.cpus)
        self.ticked, self.peak_load = now, max(self.peak_load, load)
        return self.spent > self.timeout

    def __str__(self) -> str:
        return (
            f"{self.timeout:.0f}s ({self.ticked - self.started:.0f}s of wall time, "
            f"load up to {self.peak_load:.1f} on {self.cpus} CPUs)"
        )


def wait_for(
    what: str, probe: Callable[[], T | None], timeout: float = 60.0, interval: float = 0.2
) -> T:
    """Return the probe's first truthy value; fail the test once `timeout`
    machine seconds have passed."""
    deadline = Deadline(timeout)
    while True:
        last = probe()
        if last:
            return last
        if deadline.passed():
            raise AssertionError(
                f"timed out after {deadline} waiting for {what} (last: {str(last)[:500]})"
            )
        time.sleep(interval)
