"""An UltraServer's status as a pure function of what the controller knows.

Condition times move only when a condition's status changes, so a resync
with nothing new computes the very status already stored and writes nothing.
"""

import datetime
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from driver.controller.healthtaints import DeviceHealth
from driver.devicemodel.layout import PlannedDevice
from driver.devicemodel.nodemap import NodeMapping
from driver.jsontypes import JSON

MAX_LISTED: Final = 64
"""Longest list of unhealthy devices or missing servers shown in status."""


@dataclass(frozen=True)
class Observed:
    """What one reconcile saw and did."""

    generation: int  # metadata.generation of the UltraServer
    servers: int
    mapping: NodeMapping | None  # None when the spec is invalid
    published: Sequence[PlannedDevice]  # devices in the slices now
    pool_generation: int
    slices: int
    health: Sequence[DeviceHealth]
    allocated: Collection[str]  # device names of the pool held by claims
    unhealthy_cores: int
    error: str | None  # why publishing failed, if it did
    error_reason: str = "PublishFailed"


def compute_status(
    obs: Observed, previous: Mapping[str, Any] | None, now: datetime.datetime
) -> JSON:
    published = {d.name: d for d in obs.published}
    counts = {k: 0 for k in ("core", "chip", "server", "ultraserver")}
    for device in obs.published:
        counts[device.kind] += 1
    total_cores = _cores(obs.published)
    allocated_cores = _cores(published[n] for n in obs.allocated if n in published)
    unhealthy = [h for h in obs.health if h.device in published]
    mapping = obs.mapping
    mapped = len(mapping.nodes) if mapping else 0
    missing = (
        [f"server {s}: {why}" for s, why in sorted(mapping.missing.items())] if mapping else []
    )
    conditions = _conditions(obs, mapped, unhealthy, mapping)
    prior = {c["type"]: c for c in (previous or {}).get("conditions") or []}
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    for c in conditions:
        old = prior.get(c["type"])
        c["lastTransitionTime"] = (
            old["lastTransitionTime"] if old and old.get("status") == c["status"] else stamp
        )
    return {
        "observedGeneration": obs.generation,
        "pool": {"generation": obs.pool_generation, "slices": obs.slices},
        "servers": {
            "mapped": mapped,
            "total": obs.servers,
            "summary": f"{mapped}/{obs.servers}",
            "missing": missing[:MAX_LISTED],
        },
        "devices": counts,
        "cores": {
            "total": total_cores,
            "allocated": allocated_cores,
            "free": total_cores - allocated_cores,
            "unhealthy": obs.unhealthy_cores,
        },
        "unhealthyDevices": [
            {
                k: v
                for k, v in (
                    ("device", h.device),
                    ("node", h.node),
                    ("state", h.state),
                    ("reason", h.reason),
                )
                if v
            }
            for h in unhealthy[:MAX_LISTED]
        ],
        "conditions": conditions,
    }


def _cores(devices: Any) -> int:
    """Distinct physical cores covered by `devices`."""
    covered: set[tuple[int, int]] = set()
    for d in devices:
        covered |= d.cores
    return len(covered)


def _conditions(
    obs: Observed, mapped: int, unhealthy: Sequence[DeviceHealth], mapping: NodeMapping | None
) -> list[JSON]:
    def cond(kind: str, ok: bool, reason: str, message: str) -> JSON:
        return {
            "type": kind,
            "status": "True" if ok else "False",
            "reason": reason,
            "message": message,
            "observedGeneration": obs.generation,
        }

    if obs.error is not None:
        published = cond("Published", False, obs.error_reason, obs.error)
    else:
        published = cond(
            "Published",
            True,
            "SlicesPublished",
            f"{obs.slices} slices, pool generation {obs.pool_generation}",
        )
    problems = []
    if mapping and mapping.missing:
        problems.append(
            ("ServersWithoutNode", f"{len(mapping.missing)} of {obs.servers} servers have no node")
        )
    if mapping and mapping.rack_problem:
        problems.append(("RackDeviceWithheld", mapping.rack_problem))
    failed = sum(1 for h in unhealthy if h.state == "failed")
    if unhealthy:
        problems.append(
            (
                "DevicesUnhealthy",
                f"{len(unhealthy)} devices tainted "
                f"({failed} failed, {len(unhealthy) - failed} degraded)",
            )
        )
    if problems:
        degraded = cond("Degraded", True, problems[0][0], "; ".join(m for _, m in problems))
    else:
        degraded = cond(
            "Degraded",
            False,
            "AllHealthy",
            f"{mapped}/{obs.servers} servers mapped, no unhealthy device",
        )
    whole = obs.error is None and mapped == obs.servers and not (mapping and mapping.rack_problem)
    if obs.error is not None:
        ready = cond("Ready", False, obs.error_reason, obs.error)
    elif not whole:
        ready = cond("Ready", False, "RackIncomplete", f"{mapped}/{obs.servers} servers published")
    else:
        ready = cond("Ready", True, "RackPublished", "every server of the rack is published")
    return [ready, published, degraded]
