"""Device health of one node: which prepared devices sit on unhealthy chips
or cores.

`device_health` is pure (checkpoint records + unhealthy places in, device
states out); `HealthMonitor` keeps the latest list with a version number so the
NodeWatchResources streams and the controller's health report wake on change.
"""

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from driver.plugin.checkpoint import ClaimRecord

Place = tuple[int, int | None]
"""(local chip, physical core), or (local chip, None) for the whole chip."""


@dataclass(frozen=True)
class PlaceState:
    """The health of a chip or of one core, as the node reports it."""

    state: str  # "healthy" | "degraded" | "failed"
    reason: str = ""


@dataclass(frozen=True)
class DeviceState:
    pool: str
    device: str
    healthy: bool
    message: str
    since: float  # wall-clock seconds of the last change


def describe(place: Place) -> str:
    chip, core = place
    return f"chip {chip}" if core is None else f"chip {chip} core {core}"


def device_health(
    records: Iterable[ClaimRecord],
    places: Mapping[Place, PlaceState],
    previous: Mapping[tuple[str, str], DeviceState],
    now: float,
) -> list[DeviceState]:
    """Every prepared device; unhealthy when a failed chip or a failed core of
    its own lies under it (a bad core spares the partitions beside it)."""
    states: dict[tuple[str, str], DeviceState] = {}
    for record in records:
        for device in record.devices:
            cores = {(r.chip, c) for r in device.core_ranges() for c in r.physical()}
            chips = {chip for chip, _ in cores}
            hit = sorted(
                (place, state)
                for place, state in places.items()
                if state.state != "healthy"
                and (place in cores if place[1] is not None else place[0] in chips)
            )
            bad = [(p, st) for p, st in hit if st.state == "failed"]
            degraded = [(p, st) for p, st in hit if st.state == "degraded"]
            notes = [f"{describe(p)} failed: {st.reason}" for p, st in bad]
            notes += [f"{describe(p)} degraded: {st.reason}" for p, st in degraded]
            key = (device.pool, device.device)
            healthy, message = not bad, "; ".join(notes)
            before = previous.get(key)
            same = before is not None and (before.healthy, before.message) == (healthy, message)
            since = before.since if same and before is not None else now
            states[key] = DeviceState(device.pool, device.device, healthy, message, since)
    return [states[key] for key in sorted(states)]


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
