"""Polling for tests against live components: wait until a probe returns
something truthy, and say what never happened when it does not."""

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    what: str, probe: Callable[[], T | None], timeout: float = 60.0, interval: float = 0.2
) -> T:
    """Return the probe's first truthy value; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout:.0f}s waiting for {what} (last: {str(last)[:500]})"
            )
        time.sleep(interval)
