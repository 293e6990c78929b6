"""The metadata-only list and watch of our ResourceSlices that keeps the
`SliceIndex` current and tells the controller when a rack's slices were
changed or deleted by someone else."""

import logging
import threading
from collections.abc import Callable
from typing import Final

from driver.controller.sliceindex import SliceIndex
from driver.kubeapi.apiserver import ApiServer
from driver.kubeapi.listwatch import METADATA_LIST, METADATA_ONLY, list_items, watch
from driver.kubeapi.resources import SLICES, path_of

log = logging.getLogger(__name__)
RETRY_SECONDS: Final = 1.0


class SliceWatch:
    """`on_change(rack)` is called for a slice modified or deleted by another
    writer (our own writes are recognised by `is_own(name, resourceVersion)`),
    and for every rack whose slices differ after a relist."""

    def __init__(
        self,
        server: ApiServer,
        index: SliceIndex,
        selector: dict[str, str],
        on_change: Callable[[str], None],
        is_own: Callable[[str, str], bool],
    ) -> None:
        self.server = server
        self.index = index
        self.selector = selector
        self.on_change = on_change
        self.is_own = is_own

    def relist(self) -> str:
        """List every slice's metadata into the index; returns the list's resourceVersion."""
        metas, version = list_items(
            self.server, path_of(SLICES), self.selector, lambda i: i["metadata"], METADATA_LIST
        )
        for rack in self.index.replace(metas):
            self.on_change(rack)
        return version

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
        with watch(self.server, path_of(SLICES), self.selector, version, METADATA_ONLY) as stream:
            for event in stream.events():
                kind, meta = event["type"], (event.get("object") or {}).get("metadata") or {}
                if kind == "ERROR":
                    return ""
                version = str(meta.get("resourceVersion") or version)
                if kind == "BOOKMARK":
                    continue
                rack = self.index.apply(kind, meta)
                if (
                    rack
                    and kind in ("MODIFIED", "DELETED")
                    and not self.is_own(meta["name"], version)
                ):
                    self.on_change(rack)
                if stop.is_set():
                    break
        return version
