"""The kubelet's view of device health, as the node daemon's tests model it: each
NodeWatchResources update stamps its devices with the time it arrived, and a
device whose last update is older than its `health_check_timeout_seconds`
reads as Unknown — which is why a plugin must resend the list while nothing
changes. Pure: updates and clock readings in, states out."""

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

UNKNOWN = "Unknown"
NAMES = {0: UNKNOWN, 1: "Healthy", 2: "Unhealthy"}
"""The health stream's enum values (kubelet dra health v1alpha1)."""


@dataclass
class HealthCache:
    last: dict[tuple[str, str], tuple[str, float, float]] = field(default_factory=dict)
    """(pool, device) -> (state, received at, timeout seconds)."""

    def ingest(self, devices: Iterable[Any], now: float) -> None:
        for d in devices:
            key = (d.device.pool_name, d.device.device_name)
            self.last[key] = (
                NAMES.get(int(d.health), UNKNOWN),
                now,
                d.health_check_timeout_seconds,
            )

    def state(self, pool: str, device: str, now: float) -> str:
        entry = self.last.get((pool, device))
        if entry is None:
            return UNKNOWN
        state, received, timeout = entry
        return UNKNOWN if now - received > timeout else state
