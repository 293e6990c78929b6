"""kopf handlers: thin. Each updates a store and queues the racks it affects;
the workers do the rest."""

from collections.abc import Callable
from typing import Any

import kopf

from driver.controller.kube import CLAIMS, HEALTH, SLICES, ULTRASERVERS
from driver.controller.reconciler import Stores, racks_for_node, racks_of_claim
from driver.controller.slices import rack_label
from driver.controller.stores import key_of

CLAIM_DELAY = 2.0
"""Claims change only the rack's status (allocated cores); waiting a little
folds a burst of allocations into one reconcile."""
SLICE_EDIT_DELAY = 1.0
"""Seconds before a rack whose slice changed is checked: our own burst of
writes settles first, so its echoes cost one reconcile."""


def register(
    registry: kopf.OperatorRegistry,
    stores: Stores,
    *,
    enqueue: Callable[[str, float], None],
    enqueue_claim: Callable[[str, float], None],
    driver: str,
    login: Callable[..., Any],
) -> None:
    """`enqueue` takes rack names, `enqueue_claim` namespace/name of claims
    whose device status may need writing."""
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
            for rack in racks_of_claim(driver, [old, new]):
                enqueue(rack, CLAIM_DELAY)
        if new and any(drv == driver for drv, _, _ in new):
            enqueue_claim(key_of(body), 0.0)

    @kopf.on.event(SLICES.group, SLICES.version, SLICES.plural, registry=registry)
    def resource_slice(*, type: str | None, body: kopf.Body, **_: Any) -> None:
        """A slice of our driver deleted or edited behind our back is put back,
        also one whose labels were edited away (so no label filter here). The
        echo of our own write costs one reconcile that finds nothing to write."""
        labels = body.get("metadata", {}).get("labels") or {}
        # The pool is named after the rack; the label may be what was edited away.
        pool = (body.get("spec") or {}).get("pool") or {}
        rack = pool.get("name") or labels.get(rack_label(driver))
        if (
            type in ("DELETED", "MODIFIED")
            and rack
            and body.get("spec", {}).get("driver") == driver
        ):
            enqueue(rack, 0.0 if type == "DELETED" else SLICE_EDIT_DELAY)


def claims_of_rack(stores: Stores, driver: str, rack: str) -> list[str]:
    """Claims holding a device of `rack`."""
    return [
        key
        for key, allocations in stores.claims.items().items()
        if any(drv == driver and pool == rack for drv, pool, _ in allocations)
    ]


def _meta(obj: Any, key: str) -> Any:
    return (obj.get("metadata") or {}).get(key)
