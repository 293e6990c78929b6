"""In-memory views of the objects the controller reacts to, fed by watch
events and by lists, so a reconcile reads no nodes, health reports or claims
from the API.

A resourceVersion is opaque (the API promises no order between two of them),
so events are applied in the order they arrive, which is the order of the
watch. A watch that starts again lists what exists and never reports what was
deleted before it listed: neither the controller's first watch (it starts
after the priming list) nor kopf's own restarts. A periodic `relist` is how a
store forgets those objects.
"""

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from driver.controller.healthtaints import Report, parse_reports
from driver.controller.workloadtags import Allocations, allocations_of
from driver.devicemodel.rackguard import Allocation
from driver.jsontypes import JSON

T = TypeVar("T")


class Store(Generic[T]):
    """name -> projection of an object, as the last event or list left it."""

    def __init__(self, project: Callable[[Mapping[str, Any]], T]) -> None:
        self._project = project
        self._lock = threading.Lock()
        self._items: dict[str, T] = {}
        self._during_list: dict[str, T | None] | None = None

    def relist(self, fetch: Callable[[], Iterable[Mapping[str, Any]]]) -> set[str]:
        """Replace the items with what `fetch` lists; returns the keys whose
        projection the list changed (an event reports its own change). Events
        applied while the list was fetched are as new as it or newer, so they are
        applied again on top of it."""
        with self._lock:
            self._during_list = {}
        try:
            listed = {key_of(o): self._project(o) for o in fetch()}
        except BaseException:
            with self._lock:
                self._during_list = None
            raise
        with self._lock:
            during, self._during_list = self._during_list or {}, None
            for key, value in during.items():
                if value is None:
                    listed.pop(key, None)
                else:
                    listed[key] = value
            changed = {
                key
                for key in self._items.keys() | listed.keys()
                if self._items.get(key) != listed.get(key)
            }
            self._items = listed
            return changed

    def apply(self, event_type: str | None, obj: Mapping[str, Any]) -> tuple[T | None, T | None]:
        """Apply one watch event; returns (old, new) projections."""
        key = key_of(obj)
        new = None if event_type == "DELETED" else self._project(obj)
        with self._lock:
            old = self._items.pop(key, None) if new is None else self._items.get(key)
            if new is not None:
                self._items[key] = new
            if self._during_list is not None:
                self._during_list[key] = new
            return (old, new)

    def get(self, key: str) -> T | None:
        with self._lock:
            return self._items.get(key)

    def items(self) -> dict[str, T]:
        with self._lock:
            return dict(self._items)


def key_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata", {})
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else str(meta["name"])


def node_labels(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict(obj.get("metadata", {}).get("labels") or {})


def claim_devices(obj: Mapping[str, Any]) -> frozenset[Allocation]:
    """(driver, pool, device) of every device allocated to a ResourceClaim."""
    allocation = (obj.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    return frozenset((str(r["driver"]), str(r["pool"]), str(r["device"])) for r in results)


@dataclass
class Stores:
    """Watched state shared by handlers and workers."""

    nodes: Store[dict[str, str]] = field(default_factory=lambda: Store(node_labels))
    health: Store[list[Report]] = field(default_factory=lambda: Store(parse_reports))
    claims: Store[frozenset[Allocation]] = field(default_factory=lambda: Store(claim_devices))
    racks: Store[JSON] = field(default_factory=lambda: Store(dict))
    workloads: Store[Allocations] = field(default_factory=lambda: Store(allocations_of))
    """NeuronUltraServers (AWS profile): the allocations of each; empty when not served."""
