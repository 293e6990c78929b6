"""Device health of one node: which prepared devices sit on unhealthy chips
or cores.

`device_health` is pure (checkpoint records + unhealthy places in, device
states out, for the kubelet's health stream in driver.kubeletplugin).
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from driver.kubeletplugin.healthstream import DeviceState
from driver.node.durable.checkpoint import ClaimRecord

Place = tuple[int, int | None]
"""(local chip, physical core), or (local chip, None) for the whole chip."""


@dataclass(frozen=True)
class PlaceState:
    """The health of a chip or of one core, as the node reports it."""

    state: str  # "healthy" | "degraded" | "failed"
    reason: str = ""


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
