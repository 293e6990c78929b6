"""The desired ResourceSlices (resource.k8s.io/v1) of one rack: the device
model's plan of each pool (driver/devicemodel/poolplan.py), each slice
wrapped into an object with its name, labels, driver and pool.
`pool.generation` is left at 0 here: the reconciler decides it, and
`resourceSliceCount` counts the slices of each pool.
"""

from collections.abc import Collection, Iterable, Mapping
from typing import Any, Final

from driver.devicemodel.poolplan import PoolPlan, RackInput, SlicePlan, plan_pools
from driver.jsontypes import JSON
from driver.names import rack_label

MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
MANAGED_BY: Final = "trainium-dra-controller"
MANAGED: Final = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
"""The label selector of every slice a controller of this driver writes."""


def build_slices(inp: RackInput, driver: str) -> list[JSON]:
    """The rack's ResourceSlices for `driver`, sorted by name (the allocator's
    order). The plan does not depend on the driver: only the wrapping names it."""
    slices = [
        _slice(inp.name, driver, pool, planned)
        for pool in plan_pools(inp)
        for planned in pool.slices
    ]
    return sorted(slices, key=lambda s: str(s["metadata"]["name"]))


def slice_name(driver: str, rack_name: str, part: str) -> str:
    """`<rack>.<part>.<driver>`: every DNS label stays short, and the rack's
    slices sort counters first, then servers in order, then the rack device."""
    return f"{rack_name}.{part}.{driver}"


def _slice(rack_name: str, driver: str, pool: PoolPlan, planned: SlicePlan) -> JSON:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "name": slice_name(driver, rack_name, planned.part),
            "labels": {rack_label(driver): rack_name, MANAGED_BY_LABEL: MANAGED_BY},
        },
        "spec": {
            "driver": driver,
            "pool": {"name": pool.name, "generation": 0, "resourceSliceCount": len(pool.slices)},
            **planned.spec,
        },
    }


def left_by_another_driver(
    slices: Iterable[Mapping[str, Any]], driver: str, racks: Collection[str]
) -> list[str]:
    """Names of the managed `slices` another driver's controller published for
    one of `racks` (the UltraServers this one serves): what a controller of the
    previous profile left when the chart changed profile. Nothing updates or
    deletes them any more, and the scheduler would still hand out their
    devices beside this driver's. Another driver's slices of racks this one
    does not serve are not its business."""
    return [
        s["metadata"]["name"]
        for s in slices
        if s["spec"]["driver"] != driver
        and (s["metadata"].get("labels") or {}).get(rack_label(s["spec"]["driver"])) in racks
    ]
