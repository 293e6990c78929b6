"""One resource's objects held in memory: listed once, then kept current by a
watch resumed from the last resourceVersion seen, listed again only when the
apiserver says that version is gone (410).

Readers take a view folded from the objects, waiting (without holding
anything the watch needs) until it shows what they ask for. Decoding and
folding happen on the watch thread, outside the lock readers take, so a
prepare never waits for a list: it reads what the watch already brought.
"""

import http.client
import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Final, Generic, TypeVar

from driver.plugin.apiget import ApiError, ApiGetter, Stream

log = logging.getLogger(__name__)

P = TypeVar("P")
V = TypeVar("V")

WATCH_SECONDS: Final = 300
"""How long one watch request asks the apiserver to stay open."""
RETRY_SECONDS: Final = 1.0
ABSENT_RETRY_SECONDS: Final = 10.0
"""How often to list again a resource the apiserver does not serve (its CRD
not installed yet): until then it has no objects."""
PAGE: Final = "500"


class VersionGoneError(Exception):
    """The watch cannot resume from its resourceVersion: list again."""


class ResourceAbsentError(ApiError):
    """The apiserver does not serve the resource (404 on the list)."""


class WatchedObjects(Generic[P, V]):
    """Objects of `path` matching `query` (selectors), each kept as `project(obj)`
    by name, and the `fold` of them all that readers see."""

    def __init__(
        self,
        getter: ApiGetter,
        path: str,
        query: list[tuple[str, str]],
        project: Callable[[Mapping[str, Any]], P],
        fold: Callable[[Mapping[str, P]], V],
    ) -> None:
        self.getter = getter
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
        objects: dict[str, P] = {}
        token = ""
        while True:
            query = [*self.query, ("limit", PAGE)] + ([("continue", token)] if token else [])
            page = self.getter.get_json(self.path, query)
            if page is None:
                self._publish({})
                raise ResourceAbsentError(f"{self.path} is not served (404): no objects")
            for item in page.get("items") or []:
                objects[item["metadata"]["name"]] = self.project(item)
            meta = page.get("metadata") or {}
            token = meta.get("continue") or ""
            if not token:
                self._publish(objects)
                return str(meta["resourceVersion"])

    def _watch(self, version: str) -> str:
        """One watch request from `version`; returns the version to resume from."""
        query = [
            *self.query,
            ("watch", "true"),
            ("resourceVersion", version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(WATCH_SECONDS)),
        ]
        stream = self._stream = self.getter.stream(self.path, query, WATCH_SECONDS + 30)
        try:
            if self._stopping.is_set():  # closed while this watch was being opened
                return version
            if stream.status == 410:
                raise VersionGoneError
            if stream.status >= 400:
                raise ApiError(f"watch {self.path}: HTTP {stream.status}")
            for line in stream.lines():
                version = self._apply(json.loads(line), version)
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
