"""Device health reported by node daemons -> device taints, as pure functions.

Each node daemon owns one NodeDeviceHealth object named after its node and
lists its degraded or failed chips (or single cores). The controller, sole
writer of the rack's ResourceSlices, taints every device whose cores overlap
an unhealthy chip or core: NoSchedule when degraded, NoExecute when failed.
A device touched by several reports takes the worst state.
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from driver.devicemodel.layout import PlannedDevice

STATES: Final = ("healthy", "degraded", "failed")
EFFECTS: Final = {"degraded": "NoSchedule", "failed": "NoExecute"}
TAINT_SUFFIX: Final = "/unhealthy"


@dataclass(frozen=True)
class Report:
    """One entry of a NodeDeviceHealth: a chip, or one physical core of it."""

    chip: int  # local chip index on the node
    core: int | None
    state: str
    reason: str


@dataclass(frozen=True)
class DeviceHealth:
    """Why one published device is tainted."""

    device: str
    node: str | None
    state: str
    reason: str


def taint_key(driver: str) -> str:
    return f"{driver}{TAINT_SUFFIX}"


def parse_reports(obj: Mapping[str, Any]) -> list[Report]:
    """The unhealthy entries of one NodeDeviceHealth object (schema-validated)."""
    out = []
    for entry in obj.get("spec", {}).get("devices") or []:
        state = str(entry.get("state", "healthy"))
        if state == "healthy":
            continue
        core = entry.get("core")
        out.append(
            Report(
                chip=int(entry["chip"]),
                core=None if core is None else int(core),
                state=state,
                reason=str(entry.get("reason") or state.capitalize()),
            )
        )
    return out


def device_health(
    devices: Sequence[PlannedDevice],
    nodes: Mapping[int, str],
    reports: Mapping[str, Sequence[Report]],
) -> list[DeviceHealth]:
    """Devices overlapping an unhealthy chip or core of a mapped node, in device order."""
    by_chip: dict[tuple[int, int], list[Report]] = {}
    for server, node in nodes.items():
        for report in reports.get(node, ()):
            by_chip.setdefault((server, report.chip), []).append(report)
    if not by_chip:
        return []
    out = []
    for device in devices:
        worst: Report | None = None
        for place in device.chips:
            for report in by_chip.get((place.server, place.local_index), ()):
                if report.core is not None and (place.index, report.core) not in device.cores:
                    continue
                if worst is None or _worse(report.state, worst.state):
                    worst = report
        if worst is not None:
            where = nodes.get(device.server) if device.server is not None else None
            out.append(DeviceHealth(device.name, where, worst.state, worst.reason))
    return out


def unhealthy_cores(
    nodes: Mapping[int, str], reports: Mapping[str, Sequence[Report]], cores_per_chip: int
) -> int:
    """Physical cores of mapped nodes that are reported degraded or failed."""
    bad: set[tuple[str, int, int]] = set()
    for node in nodes.values():
        for r in reports.get(node, ()):
            cores = range(cores_per_chip) if r.core is None else (r.core,)
            bad.update((node, r.chip, c) for c in cores)
    return len(bad)


def _worse(a: str, b: str) -> bool:
    return STATES.index(a) > STATES.index(b)


def taints(health: Iterable[DeviceHealth], driver: str) -> dict[str, list[dict[str, str]]]:
    """Device name -> its one taint."""
    return {
        h.device: [{"key": taint_key(driver), "value": h.state, "effect": EFFECTS[h.state]}]
        for h in health
    }
