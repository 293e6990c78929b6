"""Which of our ResourceSlices exist, per rack, at which resourceVersion: fed
by a metadata-only watch, so the controller can tell that nothing touched a
rack's slices without listing them (a rack's slices are 2 MB; their
metadata a few kB)."""

import threading
from collections.abc import Mapping, Sequence
from typing import Any


class SliceIndex:
    """rack -> {slice name: resourceVersion} of the slices that exist now."""

    def __init__(self, rack_label: str) -> None:
        self._rack_label = rack_label
        self._lock = threading.Lock()
        self._by_rack: dict[str, dict[str, str]] = {}
        self._rack_of: dict[str, str] = {}

    def replace(self, items: Sequence[Mapping[str, Any]]) -> set[str]:
        """Start over from a full list; returns the racks whose slices differ from before."""
        with self._lock:
            before = self._by_rack
            self._by_rack, self._rack_of = {}, {}
            for meta in items:
                self._put(meta)
            return {
                r for r in set(before) | set(self._by_rack) if before.get(r) != self._by_rack.get(r)
            }

    def apply(self, event_type: str, meta: Mapping[str, Any]) -> str | None:
        """One watch event; returns the rack of the slice, if it belongs to one."""
        with self._lock:
            name = str(meta.get("name", ""))
            old = self._rack_of.pop(name, None)
            if old is not None:
                self._by_rack.get(old, {}).pop(name, None)
                if not self._by_rack.get(old, True):
                    del self._by_rack[old]
            if event_type == "DELETED":
                return old
            return self._put(meta) or old

    def versions(self, rack: str) -> dict[str, str]:
        with self._lock:
            return dict(self._by_rack.get(rack, {}))

    def _put(self, meta: Mapping[str, Any]) -> str | None:
        rack = (meta.get("labels") or {}).get(self._rack_label)
        if not rack:
            return None
        name = str(meta["name"])
        self._by_rack.setdefault(rack, {})[name] = str(meta.get("resourceVersion", ""))
        self._rack_of[name] = rack
        return str(rack)
