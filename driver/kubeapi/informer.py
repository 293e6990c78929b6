"""One resource's objects held in memory: listed once, then kept current by a
watch resumed from the last resourceVersion seen, listed again only when the
apiserver says that version is gone (410).

Readers take a view folded from the objects, waiting (without holding
anything the watch needs) until it shows what they ask for. Decoding and
folding happen on the watch thread, outside the lock readers take, so a
prepare never waits for a list: it reads what the watch already brought.
"""

import http.client
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Final, Generic, TypeVar

from driver.kubeapi.apiserver import ApiError, ApiServer, Query, Stream
from driver.kubeapi.listwatch import list_items, watch

log = logging.getLogger(__name__)

P = TypeVar("P")
V = TypeVar("V")

RETRY_SECONDS: Final = 1.0
ABSENT_RETRY_SECONDS: Final = 10.0
"""How often to list again a resource the apiserver does not serve (its CRD
not installed yet): until then it has no objects."""


class VersionGoneError(Exception):
    """The watch cannot resume from its resourceVersion: list again."""


class ResourceAbsentError(ApiError):
    """The apiserver does not serve the resource (404 on the list)."""


class WatchedObjects(Generic[P, V]):
    """Objects of `path` matching `query` (selectors), each kept as `project(obj)`
    by name, and the `fold` of them all that readers see."""

    def __init__(
        self,
        server: ApiServer,
        path: str,
        query: Query,
        project: Callable[[Mapping[str, Any]], P],
        fold: Callable[[Mapping[str, P]], V],
    ) -> None:
        self.server = server
        self.path = path
        self.query = query
        self.project = project
        self.fold = fold
        self._changed = threading.Condition()
        self._objects: dict[str, P] = {}
        self._view = fold({})
        self._synced = False
        self._stopping = threading.Event()
        self._stream: Stream | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"watch {self.path}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stopping.set()
        stream = self._stream
        if stream is not None:
            stream.interrupt()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def wait_synced(self, timeout: float) -> bool:
        """True once the first list is in."""
        with self._changed:
            return self._changed.wait_for(lambda: self._synced, timeout)

    def view(self, ready: Callable[[V], bool] = lambda _: True, timeout: float = 0.0) -> V:
        """The current view, once it is listed and `ready` holds for it, or after
        `timeout` seconds, whichever is first."""
        with self._changed:
            self._changed.wait_for(lambda: self._synced and ready(self._view), timeout)
            return self._view

    def _publish(self, objects: dict[str, P]) -> None:
        view = self.fold(objects)
        with self._changed:
            self._objects, self._view, self._synced = objects, view, True
            self._changed.notify_all()

    def _run(self) -> None:
        """List, then watch from the list's version, for as long as the daemon runs;
        a failure is logged once until its message changes, and retried."""
        version = last_error = ""
        while not self._stopping.is_set():
            try:
                version = version or self._list()
                version = self._watch(version)
                last_error = ""
            except VersionGoneError:
                version = ""
            except (ApiError, OSError, http.client.HTTPException, ValueError, KeyError) as err:
                if self._stopping.is_set():
                    return
                if str(err) != last_error:
                    log.warning("watching %s: %s; retrying", self.path, err)
                last_error = str(err)
                absent = isinstance(err, ResourceAbsentError)
                self._stopping.wait(ABSENT_RETRY_SECONDS if absent else RETRY_SECONDS)

    def _list(self) -> str:
        """List every page into a fresh view; returns the list's resourceVersion."""
        try:
            items, version = list_items(self.server, self.path, self.query, self._named)
        except ApiError as err:
            if err.status != 404:
                raise
            self._publish({})
            raise ResourceAbsentError(f"{self.path} is not served (404): no objects") from err
        self._publish(dict(items))
        return version

    def _named(self, obj: Mapping[str, Any]) -> tuple[str, P]:
        return obj["metadata"]["name"], self.project(obj)

    def _watch(self, version: str) -> str:
        """One watch request from `version`; returns the version to resume from."""
        try:
            stream = self._stream = watch(self.server, self.path, self.query, version)
        except ApiError as err:
            if err.status == 410:
                raise VersionGoneError from err
            raise
        try:
            if self._stopping.is_set():  # closed while this watch was being opened
                return version
            for event in stream.events():
                version = self._apply(event, version)
        finally:
            self._stream = None
            stream.close()
        return version

    def _apply(self, event: Mapping[str, Any], version: str) -> str:
        """Fold one watch event in; returns the resourceVersion it leaves us at."""
        kind, obj = event["type"], event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise VersionGoneError
            raise ApiError(f"watch {self.path}: {obj.get('message', obj)}")
        meta = obj.get("metadata") or {}
        if kind != "BOOKMARK":
            objects = dict(self._objects)
            if kind == "DELETED":
                objects.pop(meta["name"], None)
            else:
                objects[meta["name"]] = self.project(obj)
            self._publish(objects)
        return str(meta.get("resourceVersion") or version)
