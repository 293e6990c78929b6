"""In-memory views of the objects the controller reacts to, fed by watch
events and primed by one list at start, so a reconcile reads no nodes,
health reports or claims from the API."""

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Store(Generic[T]):
    """name -> projection of an object; stale events (older resourceVersion) are ignored."""

    def __init__(self, project: Callable[[Mapping[str, Any]], T]) -> None:
        self._project = project
        self._lock = threading.Lock()
        self._items: dict[str, tuple[int, T]] = {}

    def replace(self, objects: Iterable[Mapping[str, Any]]) -> None:
        with self._lock:
            self._items = {key_of(o): (rv_of(o), self._project(o)) for o in objects}

    def apply(self, event_type: str | None, obj: Mapping[str, Any]) -> tuple[T | None, T | None]:
        """Apply one watch event; returns (old, new) projections."""
        key, rv = key_of(obj), rv_of(obj)
        with self._lock:
            old = self._items.get(key)
            if event_type == "DELETED":
                self._items.pop(key, None)
                return (old[1] if old else None, None)
            if old is not None and rv < old[0]:
                return (old[1], old[1])
            new = self._project(obj)
            self._items[key] = (rv, new)
            return (old[1] if old else None, new)

    def get(self, key: str) -> T | None:
        with self._lock:
            item = self._items.get(key)
            return item[1] if item else None

    def items(self) -> dict[str, T]:
        with self._lock:
            return {k: v for k, (_, v) in self._items.items()}


def key_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata", {})
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else str(meta["name"])


def rv_of(obj: Mapping[str, Any]) -> int:
    raw = str(obj.get("metadata", {}).get("resourceVersion") or "0")
    return int(raw) if raw.isdigit() else 0
