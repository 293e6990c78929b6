"""The node's NodeDeviceHealth object: the controller's input for device taints.

One cluster-scoped object per node, named after it and written only by that
node's daemon (CRD in charts/trainium-dra/crds, read by driver/controller/healthtaints.py).
Unhealthy chips and single cores are listed; recovery removes them.
"""

import datetime
import logging
import re
from collections.abc import Mapping
from typing import Any

from driver.devicemodel.placement import NodePlace
from driver.kubeapi.objects import Objects
from driver.kubeapi.resources import HEALTH
from driver.names import API_GROUP, API_VERSION
from driver.node.health import Place, PlaceState
from simdevice.faulthealth import place_order

log = logging.getLogger(__name__)
KIND = "NodeDeviceHealth"


def reason_word(text: str, state: str) -> str:
    """A short CamelCase reason (the CRD allows 63 characters) from free text."""
    words = re.findall(r"[A-Za-z0-9]+", text) or [state]
    return "".join(w[:1].upper() + w[1:] for w in words)[:63]


def report_object(
    node: str, places: Mapping[Place, PlaceState], now: datetime.datetime
) -> dict[str, Any]:
    """The whole NodeDeviceHealth object for `node` (pure): one entry per
    unhealthy chip or core, chip entries first."""
    entries = []
    for chip, core in sorted(places, key=place_order):
        state = places[(chip, core)]
        if state.state == "healthy":
            continue
        entry: dict[str, Any] = {"chip": chip}
        if core is not None:
            entry["core"] = core
        entry |= {
            "state": state.state,
            "reason": reason_word(state.reason, state.state),
            "message": state.reason[:1024],
        }
        entries.append(entry)
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": KIND,
        "metadata": {"name": node},
        "spec": {
            "nodeName": node,
            "reportedAt": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "devices": entries,
        },
    }


class HealthReporter:
    """Writes each node's object on every health change (create, else replace)."""

    def __init__(self, objects: Objects) -> None:
        self.objects = objects

    def __call__(self, place: NodePlace, places: dict[Place, PlaceState]) -> None:
        body = report_object(place.node_name, places, datetime.datetime.now(datetime.UTC))
        current = self.objects.get(HEALTH, place.node_name)
        if current is None:
            self.objects.create(HEALTH, body)
            return
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        self.objects.replace(HEALTH, place.node_name, body)
