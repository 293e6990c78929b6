"""The metadata-only list and watch of our ResourceSlices that keeps the
`SliceIndex` current and tells the controller when a rack's slices were
changed or deleted by someone else."""

import logging
import threading
from collections.abc import Callable
from typing import Final

from driver.controller.kube import METADATA_LIST, METADATA_ONLY, PAGE, SLICES, Kube, path_of
from driver.controller.sliceindex import SliceIndex
from driver.jsontypes import JSON

log = logging.getLogger(__name__)
WATCH_SECONDS: Final = 300
RETRY_SECONDS: Final = 1.0


class SliceWatch:
    """`on_change(rack)` is called for a slice modified or deleted by another
    writer (our own writes are recognised by `is_own(name, resourceVersion)`),
    and for every rack whose slices differ after a relist."""

    def __init__(
        self,
        kube: Kube,
        index: SliceIndex,
        selector: dict[str, str],
        on_change: Callable[[str], None],
        is_own: Callable[[str, str], bool],
    ) -> None:
        self.kube = kube
        self.index = index
        self.selector = selector
        self.on_change = on_change
        self.is_own = is_own

    def relist(self) -> str:
        """List every slice's metadata into the index; returns the list's resourceVersion."""
        items: list[JSON] = []
        token = ""
        while True:
            query = {**self.selector, "limit": str(PAGE)}
            if token:
                query["continue"] = token
            page = self.kube.request("GET", path_of(SLICES), query=query, accept=METADATA_LIST)
            items += [i["metadata"] for i in page.get("items") or []]
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                for rack in self.index.replace(items):
                    self.on_change(rack)
                return str(page["metadata"]["resourceVersion"])

    def run(self, stop: threading.Event, version: str) -> None:
        """Watch from `version` until `stop`; relist when the watch cannot resume."""
        while not stop.is_set():
            try:
                version = self._watch(stop, version)
            except Exception as err:
                log.warning("slice watch: %s; listing again", err)
                if stop.wait(RETRY_SECONDS):
                    return
                version = ""
            if not version and not stop.is_set():
                try:
                    version = self.relist()
                except Exception as err:
                    log.warning("slice list: %s", err)
                    stop.wait(RETRY_SECONDS)

    def _watch(self, stop: threading.Event, version: str) -> str:
        """One watch request; returns the version to resume from, or "" to relist."""
        query = {
            **self.selector,
            "watch": "true",
            "resourceVersion": version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_SECONDS),
        }
        for event in self.kube.stream(path_of(SLICES), query, METADATA_ONLY, WATCH_SECONDS + 30):
            kind, meta = event["type"], (event.get("object") or {}).get("metadata") or {}
            if kind == "ERROR":
                return ""
            version = str(meta.get("resourceVersion") or version)
            if kind == "BOOKMARK":
                continue
            rack = self.index.apply(kind, meta)
            if rack and kind in ("MODIFIED", "DELETED") and not self.is_own(meta["name"], version):
                self.on_change(rack)
            if stop.is_set():
                break
        return version
