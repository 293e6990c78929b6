"""The rack device's guard in the `node` pool layout (docs/device-model.md,
"Pool layouts").

There the rack device lives in a pool of its own and consumes no counter, so
the scheduler does not see that it overlaps every server's devices. The
controller keeps them apart with two taints and one binding condition:

- while some claim holds a device of one of the rack's servers, the rack
  device is not published, so the scheduler cannot pick it (if a claim holds
  the rack device as well, it stays, with the `rack-in-use` taint);
- of the racks nothing is allocated from, at most a window of them publish
  their rack device (`advertised_racks`): every rack-wide slice costs the
  scheduler a node-selector match on every node for every pod;
- while some claim holds the rack device, every server device carries the
  `rack-claimed` taint, so the scheduler picks none of them;
- the rack device binds only once `RackExclusive` is True: the `rack-claimed`
  taints have been published for `settle` seconds (long enough for an
  allocation the scheduler decided before it saw them to be written) and no
  claim holds a server device. Found one, the controller sets `RackInUse`, a
  binding failure: the scheduler takes the rack device back and tries again.

Pure: what the claims hold and when the taints went out in, taints and
conditions out.
"""

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from driver.devicemodel.fabric import condition
from driver.devicemodel.layout import PlannedDevice
from driver.devicemodel.naming import ULTRASERVER_DEVICE, rack_of_pool
from driver.jsontypes import JSON

RACK_EXCLUSIVE: Final = "RackExclusive"
RACK_IN_USE: Final = "RackInUse"
DEFAULT_SETTLE_SECONDS: Final = 2.0
"""How long the `rack-claimed` taints stand before the rack device binds; the
scheduler writes an allocation within milliseconds of deciding it."""

Allocation = tuple[str, str, str]  # driver, pool, device


def rack_claimed_key(driver: str) -> str:
    return f"{driver}/rack-claimed"


def rack_in_use_key(driver: str) -> str:
    return f"{driver}/rack-in-use"


@dataclass(frozen=True)
class Occupancy:
    """Which side of one rack some claim holds."""

    rack_claimed: bool  # the rack device
    servers_in_use: bool  # any device of a server pool


def occupancy(allocations: Iterable[frozenset[Allocation]], driver: str, rack: str) -> Occupancy:
    """What the claims (each a set of allocated devices) hold of `rack`."""
    return occupancies(allocations, driver, [rack])[rack]


def occupancies(
    allocations: Iterable[frozenset[Allocation]], driver: str, racks: Iterable[str]
) -> dict[str, Occupancy]:
    """What the claims hold of each of `racks`, in one pass over the claims."""
    claimed: set[str] = set()
    in_use: set[str] = set()
    wanted = set(racks)
    for held in allocations:
        for drv, pool, device in held:
            rack = rack_of_pool(pool)
            if drv != driver or rack not in wanted:
                continue
            if pool == rack and device == ULTRASERVER_DEVICE:
                claimed.add(rack)
            elif pool != rack:
                in_use.add(rack)
    return {r: Occupancy(r in claimed, r in in_use) for r in wanted}


def advertised_racks(occupied: Mapping[str, Occupancy], window: int) -> frozenset[str]:
    """The racks whose rack device is published: each rack whose device a claim
    holds, and the first `window` racks (by name) of which no claim holds
    anything, all of them for `window` 0. A rack with a server device in use
    cannot be claimed whole, so its rack device is not published at all; the
    window bounds how many rack-wide slices every node's scheduling sees."""
    held = {r for r, o in occupied.items() if o.rack_claimed}
    free = sorted(r for r, o in occupied.items() if not o.rack_claimed and not o.servers_in_use)
    return frozenset(held.union(free[:window] if window else free))


def occupancy_taints(
    devices: Iterable[PlannedDevice], occupied: Occupancy, driver: str
) -> dict[str, list[dict[str, str]]]:
    """Device name -> the guard's taints (NoSchedule: nothing running is evicted)."""
    out: dict[str, list[dict[str, str]]] = {}
    for d in devices:
        if d.kind == "ultraserver" and occupied.servers_in_use:
            out[d.name] = [{"key": rack_in_use_key(driver), "effect": "NoSchedule"}]
        elif d.kind != "ultraserver" and occupied.rack_claimed:
            out[d.name] = [{"key": rack_claimed_key(driver), "effect": "NoSchedule"}]
    return out


@dataclass(frozen=True)
class RackHold:
    """What the controller has published and seen of one rack's guard."""

    claimed_since: datetime.datetime | None  # `rack-claimed` taints published since
    servers_in_use: bool


def granted(entries: Iterable[JSON]) -> set[tuple[str, str]]:
    """(pool, device) of the `status.devices` entries whose RackExclusive is True."""
    return {
        (str(e.get("pool")), str(e.get("device")))
        for e in entries
        for c in e.get("conditions") or []
        if c.get("type") == RACK_EXCLUSIVE and c.get("status") == "True"
    }


def granted_since(old: Sequence[JSON], allocated_at: datetime.datetime | None) -> bool:
    """`old` holds a RackExclusive grant made since the allocation."""
    for c in old:
        if c.get("type") != RACK_EXCLUSIVE or c.get("status") != "True":
            continue
        since = datetime.datetime.fromisoformat(str(c["lastTransitionTime"]).replace("Z", "+00:00"))
        # Condition times have whole seconds; the allocation's may not.
        return allocated_at is None or since >= allocated_at.replace(microsecond=0)
    return False


def guard_conditions(
    hold: RackHold | None,
    *,
    settle: float,
    now: datetime.datetime,
    old: Sequence[JSON],
    allocated_at: datetime.datetime | None = None,
) -> tuple[list[JSON], float | None]:
    """RackExclusive / RackInUse of an allocated rack device, and when to look
    again. A grant made for this allocation (at or after `allocated_at`)
    stands for the rest of it: the scheduler may have bound on it, and a
    restarted controller has no guard state yet."""
    recheck: float | None = None
    if granted_since(old, allocated_at):
        return [dict(c) for c in old if c.get("type") in (RACK_EXCLUSIVE, RACK_IN_USE)], None
    if hold is not None and hold.servers_in_use:
        exclusive, in_use, reason = False, True, "ServerDevicesAllocated"
        message = "a claim holds a device of one of the rack's servers; the scheduler retries"
    elif hold is None or hold.claimed_since is None:
        exclusive, in_use, reason, recheck = False, False, "TaintingServers", settle
        message = "tainting the rack's server devices so that no claim takes them"
    else:
        left = settle - (now - hold.claimed_since).total_seconds()
        if left > 0:
            exclusive, in_use, reason, recheck = False, False, "Settling", left
            message = "waiting for allocations decided before the taints to show"
        else:
            exclusive, in_use, reason = True, False, "Exclusive"
            message = "no claim holds a device of the rack's servers"
    return [
        condition(RACK_EXCLUSIVE, exclusive, reason=reason, message=message, now=now, old=old),
        condition(RACK_IN_USE, in_use, reason=reason, message=message, now=now, old=old),
    ], recheck
