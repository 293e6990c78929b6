"""The metadata-only informer of our ResourceSlices that keeps the `SliceIndex`
current and tells the controller when a rack's slices were changed or deleted
by someone else."""

import threading
from collections.abc import Callable, Mapping
from typing import Any

from driver.controller.sliceindex import SliceIndex
from driver.kubeapi.apiserver import ApiServer
from driver.kubeapi.informer import Informer
from driver.kubeapi.resources import SLICES, path_of


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
        self.index = index
        self.on_change = on_change
        self.is_own = is_own
        self.informer: Informer[Mapping[str, Any]] = Informer(
            server,
            path_of(SLICES),
            selector,
            lambda obj: obj.get("metadata") or {},
            on_list=self._listed,
            on_event=self._changed,
            metadata_only=True,
        )

    def relist(self) -> None:
        """List every slice's metadata into the index now."""
        self.informer.relist()

    def run(self, stop: threading.Event) -> None:
        """Watch from the last list until `stop`, listing again when the watch
        cannot resume."""
        self.informer.run(stop)

    def _listed(self, metas: list[Mapping[str, Any]]) -> None:
        for rack in self.index.replace(metas):
            self.on_change(rack)

    def _changed(self, kind: str, meta: Mapping[str, Any]) -> None:
        rack = self.index.apply(kind, meta)
        if (
            rack
            and kind in ("MODIFIED", "DELETED")
            and not self.is_own(meta["name"], str(meta.get("resourceVersion") or ""))
        ):
            self.on_change(rack)
