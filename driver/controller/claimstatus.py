"""The `status.devices` of claims holding this driver's devices: read the
claim, compute each device's entry with `devicemodel.fabric`, write only when
it differs. The fabric of server and ultraserver devices comes up here, so
the scheduler, waiting on their binding conditions, binds the pods; so does
the guard of a rack device in the `node` pool layout (`devicemodel.rackguard`)."""

import datetime
import logging
from collections.abc import Callable, Mapping
from typing import Any

from driver.devicemodel.fabric import device_status
from driver.devicemodel.layout import devices_by_name
from driver.devicemodel.naming import rack_of_pool
from driver.devicemodel.rackguard import (
    DEFAULT_SETTLE_SECONDS,
    RackHold,
    granted,
    guard_conditions,
)
from driver.devicemodel.ultraserver import SpecError, UltraServerSpec, parse_spec
from driver.jsontypes import JSON
from driver.kubeapi.apiserver import MERGE_PATCH, ApiError
from driver.kubeapi.objects import Objects
from driver.kubeapi.resources import CLAIMS, path_of

log = logging.getLogger(__name__)


class StatusConflictError(RuntimeError):
    """The claim changed between our read and our write; read it again."""


def allocated_at(claim: Mapping[str, Any], now: datetime.datetime) -> datetime.datetime:
    """When the scheduler allocated the claim; without the timestamp the fabric
    is taken to be up already (it cannot be timed)."""
    raw = ((claim.get("status") or {}).get("allocation") or {}).get("allocationTimestamp")
    if not raw:
        return datetime.datetime.min.replace(tzinfo=datetime.UTC)
    return datetime.datetime.fromisoformat(str(raw).replace("Z", "+00:00"))


def desired_devices(
    claim: Mapping[str, Any],
    racks: Mapping[str, UltraServerSpec],
    driver: str,
    now: datetime.datetime,
    *,
    hold_of: Callable[[str], RackHold | None] = lambda _: None,
    settle: float = DEFAULT_SETTLE_SECONDS,
) -> tuple[list[JSON], float | None]:
    """The claim's whole `status.devices` (other drivers' entries kept as they
    are) and the seconds until ours change by themselves. `hold_of(rack)`: the
    rack's guard, asked only for rack devices of `node` pool racks."""
    status = claim.get("status") or {}
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
    current = status.get("devices") or []
    ours = {(e["pool"], e["device"]): e for e in current if e.get("driver") == driver}
    out = [e for e in current if e.get("driver") != driver]
    when = allocated_at(claim, now)
    recheck: float | None = None
    for result in results:
        rack = rack_of_pool(result["pool"])
        spec = racks.get(rack)
        if result["driver"] != driver or spec is None:
            continue
        device = devices_by_name(
            spec.rack.generation, spec.mode, spec.flat_device, spec.layout
        ).get(result["device"])
        if device is None:
            continue
        key = (result["pool"], result["device"])
        entry = device_status(
            driver,
            key[0],
            device,
            fabric=spec.fabric,
            allocated_at=when,
            now=now,
            old=ours.get(key),
        )
        out.append(entry.entry)
        waits = [entry.recheck_seconds]
        if spec.layout.pools == "node" and device.kind == "ultraserver":
            previous = (ours.get(key) or {}).get("conditions") or []
            guard, wait = guard_conditions(
                hold_of(rack), settle=settle, now=now, old=previous, allocated_at=when
            )
            entry.entry["conditions"] = [*guard, *entry.entry["conditions"]]
            waits.append(wait)
        for wait in waits:
            if wait is not None:
                recheck = wait if recheck is None else min(recheck, wait)
    return out, recheck


def confirmed_devices(
    claim: Mapping[str, Any],
    racks: Mapping[str, UltraServerSpec],
    driver: str,
    now: datetime.datetime,
    *,
    hold_of: Callable[[str], RackHold | None],
    confirmed_hold_of: Callable[[str], RackHold | None],
    settle: float = DEFAULT_SETTLE_SECONDS,
) -> tuple[list[JSON], float | None]:
    """`desired_devices` with `hold_of`, decided again with `confirmed_hold_of`
    when that would grant a rack device the claim's status does not yet show
    granted: a grant cannot be taken back, so it rests on the fresher view."""
    devices, recheck = desired_devices(claim, racks, driver, now, hold_of=hold_of, settle=settle)
    current = (claim.get("status") or {}).get("devices") or []
    if granted(devices) - granted(current):
        return desired_devices(claim, racks, driver, now, hold_of=confirmed_hold_of, settle=settle)
    return devices, recheck


def as_stored(entries: list[JSON]) -> list[JSON]:
    """Entries as the apiserver hands them back: it returns an empty list
    field as null, so comparing what we want with what is there must not
    count that as a difference, or every event on the claim would write it
    again."""
    return [{k: v for k, v in e.items() if v not in (None, [])} for e in entries]


def parse_racks(objects: Mapping[str, JSON]) -> dict[str, UltraServerSpec]:
    """UltraServer name -> spec; a spec that does not parse is the rack reconcile's to report."""
    specs = {}
    for name, obj in objects.items():
        try:
            specs[name] = parse_spec(obj)
        except SpecError:
            continue
    return specs


class ClaimStatusWriter:
    def __init__(
        self, objects: Objects, driver: str, settle: float = DEFAULT_SETTLE_SECONDS
    ) -> None:
        self.objects = objects
        self.driver = driver
        self.settle = settle

    def sync(
        self,
        key: str,
        racks: Mapping[str, JSON],
        hold_of: Callable[[str], RackHold | None] = lambda _: None,
        confirmed_hold_of: Callable[[str], RackHold | None] | None = None,
    ) -> float | None:
        """Bring one claim's device status up to date; seconds until it needs
        another look. `hold_of` answers from the watched claims; a grant it
        would make is decided again with `confirmed_hold_of`, which reads the
        claims from the apiserver: a server claim written a moment ago may not
        have reached the watch, and a grant cannot be taken back."""
        namespace, name = key.split("/", 1)
        claim = self.objects.get(CLAIMS, name, namespace)
        if claim is None or not (claim.get("status") or {}).get("allocation"):
            return None
        now = datetime.datetime.now(datetime.UTC)
        devices, recheck = confirmed_devices(
            claim,
            parse_racks(racks),
            self.driver,
            now,
            hold_of=hold_of,
            confirmed_hold_of=confirmed_hold_of or hold_of,
            settle=self.settle,
        )
        current = claim["status"].get("devices") or []
        if as_stored(devices) != as_stored(current):
            self._write(claim, devices)
        return recheck

    def _write(self, claim: JSON, devices: list[JSON]) -> None:
        meta = claim["metadata"]
        body = {
            "metadata": {"resourceVersion": meta["resourceVersion"]},
            "status": {"devices": devices},
        }
        path = path_of(CLAIMS, meta["name"], meta["namespace"]) + "/status"
        try:
            self.objects.server.call("PATCH", path, body=body, content_type=MERGE_PATCH)
        except ApiError as err:
            if err.status == 409:
                raise StatusConflictError(
                    f"claim {meta['namespace']}/{meta['name']} changed meanwhile"
                ) from err
            if err.status != 404:
                raise
        log.info(
            "claim %s/%s: status of %d device(s) written",
            meta["namespace"],
            meta["name"],
            len(devices),
        )
