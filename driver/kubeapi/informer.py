"""The one list-and-watch loop: a resource listed once, then followed by a watch
resumed from the last resourceVersion seen, listed again only when the
apiserver says that version is gone (410). Every watcher of the project is an
`Informer` with its own two handlers (what a fresh list means, what one change
means); `WatchedObjects` is the informer that keeps a folded view for readers.

Readers of a `WatchedObjects` take a view folded from the objects, waiting
(without holding anything the watch needs) until it shows what they ask for.
Decoding and folding happen on the watch thread, outside the lock readers
take, so a prepare never waits for a list: it reads what the watch already
brought.
"""

import http.client
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Final, Generic, TypeVar

from driver.kubeapi.apiserver import JSON_MEDIA, ApiError, ApiServer, Query, Stream
from driver.kubeapi.listwatch import METADATA_LIST, METADATA_ONLY, list_items, watch

log = logging.getLogger(__name__)

T = TypeVar("T")
P = TypeVar("P")
V = TypeVar("V")

RETRY_SECONDS: Final = 1.0
ABSENT_RETRY_SECONDS: Final = 10.0
"""How often to list again a resource the apiserver does not serve (its CRD
not installed yet): until then it has no objects."""
FAILURES: Final = (ApiError, OSError, http.client.HTTPException, ValueError, KeyError)
"""What a list or watch may fail with; each is logged once and retried."""


class VersionGoneError(Exception):
    """The watch cannot resume from its resourceVersion: list again."""


class ResourceAbsentError(ApiError):
    """The apiserver does not serve the resource (404 on the list)."""


class Informer(Generic[T]):
    """Objects of `path` matching `query` (selectors), each seen as `project(obj)`:
    `on_list(items)` after every list, `on_event(kind, item)` for every ADDED,
    MODIFIED or DELETED after it. With `metadata_only` the apiserver sends each
    object's metadata alone."""

    def __init__(
        self,
        server: ApiServer,
        path: str,
        query: Query,
        project: Callable[[Mapping[str, Any]], T],
        *,
        on_list: Callable[[list[T]], None],
        on_event: Callable[[str, T], None],
        metadata_only: bool = False,
    ) -> None:
        self.server = server
        self.path = path
        self.query = query
        self.project = project
        self.on_list = on_list
        self.on_event = on_event
        self.list_media = METADATA_LIST if metadata_only else JSON_MEDIA
        self.watch_media = METADATA_ONLY if metadata_only else JSON_MEDIA
        self.version = ""
        self._stopping = threading.Event()
        self._stream: Stream | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Run in a thread of its own until `close`."""
        self._thread = threading.Thread(target=self.run, name=f"watch {self.path}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stopping.set()
        stream = self._stream
        if stream is not None:
            stream.interrupt()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def relist(self) -> None:
        """List every page now and hand the items to `on_list`; the watch goes on
        from this list's version."""
        try:
            items, self.version = list_items(
                self.server, self.path, self.query, self.project, self.list_media
            )
        except ApiError as err:
            if err.status != 404:
                raise
            self.on_list([])
            raise ResourceAbsentError(f"{self.path} is not served (404): no objects") from err
        self.on_list(items)

    def run(self, stop: threading.Event | None = None) -> None:
        """List (unless `relist` just did), then watch, until `stop` or `close`; a
        failure is logged once until its message changes, and retried."""
        last_error = ""
        while not self._stopped(stop):
            try:
                if not self.version:
                    self.relist()
                self.version = self._watch(stop)
                last_error = ""
            except VersionGoneError:
                self.version = ""
            except FAILURES as err:
                if self._stopped(stop):
                    return
                if str(err) != last_error:
                    log.warning("watching %s: %s; retrying", self.path, err)
                last_error = str(err)
                absent = isinstance(err, ResourceAbsentError)
                self._stopping.wait(ABSENT_RETRY_SECONDS if absent else RETRY_SECONDS)

    def _stopped(self, stop: threading.Event | None) -> bool:
        return self._stopping.is_set() or (stop is not None and stop.is_set())

    def _watch(self, stop: threading.Event | None) -> str:
        """One watch request from the last version; returns the version to resume from."""
        version = self.version
        try:
            stream = self._stream = watch(
                self.server, self.path, self.query, version, self.watch_media
            )
        except ApiError as err:
            if err.status == 410:
                raise VersionGoneError from err
            raise
        try:
            if self._stopped(stop):  # closed while this watch was being opened
                return version
            for event in stream.events():
                version = self._apply(event, version)
                if self._stopped(stop):
                    break
        finally:
            self._stream = None
            stream.close()
        return version

    def _apply(self, event: Mapping[str, Any], version: str) -> str:
        """Hand one watch event on; returns the resourceVersion it leaves us at."""
        kind, obj = event["type"], event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise VersionGoneError
            raise ApiError(f"watch {self.path}: {obj.get('message', obj)}")
        meta = obj.get("metadata") or {}
        if kind != "BOOKMARK":
            self.on_event(kind, self.project(obj))
        return str(meta.get("resourceVersion") or version)


class WatchedObjects(Informer[tuple[str, P]], Generic[P, V]):
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
        super().__init__(
            server,
            path,
            query,
            lambda obj: (obj["metadata"]["name"], project(obj)),
            on_list=self._listed,
            on_event=self._changed_one,
        )
        self.fold = fold
        self._changed = threading.Condition()
        self._objects: dict[str, P] = {}
        self._view = fold({})
        self._synced = False

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

    def _listed(self, items: list[tuple[str, P]]) -> None:
        self._publish(dict(items))

    def _changed_one(self, kind: str, item: tuple[str, P]) -> None:
        name, value = item
        objects = dict(self._objects)
        if kind == "DELETED":
            objects.pop(name, None)
        else:
            objects[name] = value
        self._publish(objects)

    def _publish(self, objects: dict[str, P]) -> None:
        view = self.fold(objects)
        with self._changed:
            self._objects, self._view, self._synced = objects, view, True
            self._changed.notify_all()
