"""kopf handlers: thin. Each updates a store and queues the racks it affects;
the workers do the rest. Slices are not watched here: kopf would decode
every slice in full, `slicewatch` reads only their metadata."""

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import kopf

from driver.controller.stores import Stores, key_of
from driver.devicemodel.naming import ULTRASERVER_DEVICE, rack_of_pool
from driver.devicemodel.rackguard import Allocation
from driver.jsontypes import JSON
from driver.kubeapi.resources import CLAIMS, HEALTH, ULTRASERVERS

CLAIM_DELAY = 2.0
"""Claims change only the rack's status (allocated cores); waiting a little
folds a burst of allocations into one reconcile."""


def register(
    registry: kopf.OperatorRegistry,
    stores: Stores,
    *,
    enqueue: Callable[[str, float], None],
    enqueue_claim: Callable[[str, float], None],
    driver: str,
    login: Callable[..., Any],
    rack_claimed: Callable[[str], bool] = lambda _: False,
) -> None:
    """`enqueue` takes rack names, `enqueue_claim` namespace/name of claims
    whose device status may need writing; `rack_claimed(rack)`: a claim holds
    the rack's device and its guard is up (`node` pool layout)."""
    kopf.on.login(registry=registry)(login)

    @kopf.on.event(ULTRASERVERS.group, ULTRASERVERS.version, ULTRASERVERS.plural, registry=registry)
    def ultraserver(*, type: str | None, body: kopf.Body, name: str, **_: Any) -> None:
        old, new = stores.racks.apply(type, dict(body))
        if new is None or old is None or _meta(old, "generation") != _meta(new, "generation"):
            enqueue(name, 0.0)
            for claim in claims_of_rack(stores, driver, name):
                enqueue_claim(claim, 0.0)

    @kopf.on.event("", "v1", "nodes", registry=registry)
    def node(*, type: str | None, body: kopf.Body, name: str, **_: Any) -> None:
        old, new = stores.nodes.apply(type, dict(body))
        if old != new or old is None:
            for rack in racks_for_node(stores.racks.items(), name):
                enqueue(rack, 0.0)

    @kopf.on.event(HEALTH.group, HEALTH.version, HEALTH.plural, registry=registry)
    def health(*, type: str | None, body: kopf.Body, name: str, **_: Any) -> None:
        old, new = stores.health.apply(type, dict(body))
        if old != new:
            for rack in racks_for_node(stores.racks.items(), name):
                enqueue(rack, 0.0)

    @kopf.on.event(CLAIMS.group, CLAIMS.version, CLAIMS.plural, registry=registry)
    def claim(*, type: str | None, body: kopf.Body, **_: Any) -> None:
        old, new = stores.claims.apply(type, dict(body))
        if old != new:
            # A rack device taken or given back moves its guard: no delay.
            delay = 0.0 if holds_rack_device(driver, [old, new]) else CLAIM_DELAY
            for rack in racks_of_claim(driver, [old, new]):
                enqueue(rack, delay)
                # A rack claim waiting on its guard must see a server claim at once.
                if rack_claimed(rack):
                    for waiting in claims_of_rack(stores, driver, rack, rack_device=True):
                        enqueue_claim(waiting, 0.0)
        if new and any(drv == driver for drv, _, _ in new):
            enqueue_claim(key_of(body), 0.0)


def claims_of_rack(
    stores: Stores, driver: str, rack: str, *, rack_device: bool = False
) -> list[str]:
    """Claims holding a device of `rack` (with `rack_device`, the rack device)."""
    return [
        key
        for key, allocations in stores.claims.items().items()
        if any(
            drv == driver
            and rack_of_pool(pool) == rack
            and (not rack_device or (pool == rack and device == ULTRASERVER_DEVICE))
            for drv, pool, device in allocations
        )
    ]


def holds_rack_device(
    driver: str, allocations: list[frozenset[tuple[str, str, str]] | None]
) -> bool:
    return any(
        drv == driver and device == ULTRASERVER_DEVICE and "/" not in pool
        for held in allocations
        if held
        for drv, pool, device in held
    )


def _meta(obj: Any, key: str) -> Any:
    return (obj.get("metadata") or {}).get(key)


def racks_for_node(racks: Mapping[str, JSON], node: str) -> list[str]:
    """Racks that map `node` by name, or that map nodes by labels."""
    out = []
    for name, obj in racks.items():
        nodes = (obj.get("spec") or {}).get("nodes") or {}
        if "selector" in nodes or node in (nodes.get("names") or []):
            out.append(name)
    return out


def racks_for_nodes(racks: Mapping[str, JSON], nodes: Iterable[str]) -> set[str]:
    """Racks that may hold any of `nodes` (`racks_for_node` of each)."""
    return {rack for node in sorted(set(nodes)) for rack in racks_for_node(racks, node)}


def racks_of_claim(driver: str, allocations: Sequence[frozenset[Allocation] | None]) -> set[str]:
    return {rack_of_pool(pool) for a in allocations if a for drv, pool, _ in a if drv == driver}
