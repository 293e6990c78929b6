"""The device health a node streams to the kubelet (NodeWatchResources): the
latest states with a version number, so streams wake on change."""

import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceState:
    pool: str
    device: str
    healthy: bool
    message: str
    since: float  # wall-clock seconds of the last change


class HealthMonitor:
    """The latest device states of one node, versioned; waiters wake on change."""

    def __init__(self, timeout_seconds: int) -> None:
        self.timeout_seconds = timeout_seconds
        self._cond = threading.Condition()
        self._version = 0
        self._devices: list[DeviceState] = []

    @property
    def devices(self) -> list[DeviceState]:
        with self._cond:
            return list(self._devices)

    def by_key(self) -> dict[tuple[str, str], DeviceState]:
        return {(d.pool, d.device): d for d in self.devices}

    def update(self, devices: list[DeviceState]) -> bool:
        """Store `devices`; True (and waiters woken) when anything changed."""
        with self._cond:
            if devices == self._devices:
                return False
            self._devices = list(devices)
            self._version += 1
            self._cond.notify_all()
            return True

    def wait_change(self, seen: int, timeout: float) -> tuple[int, list[DeviceState] | None]:
        """The states once their version differs from `seen`; None on timeout."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._version != seen, timeout):
                return seen, None
            return self._version, list(self._devices)
