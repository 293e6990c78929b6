"""In-memory views of the objects the controller reacts to, fed by watch
events and primed by one list at start, so a reconcile reads no nodes,
health reports or claims from the API.

A resourceVersion is opaque (the API promises no order between two of them),
so events are applied in the order they arrive, which is the order of the
watch. The watches start after the priming list, so every event is as new as
what that list put in.
"""

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Store(Generic[T]):
    """name -> projection of an object, as the last event left it."""

    def __init__(self, project: Callable[[Mapping[str, Any]], T]) -> None:
        self._project = project
        self._lock = threading.Lock()
        self._items: dict[str, T] = {}

    def replace(self, objects: Iterable[Mapping[str, Any]]) -> None:
        with self._lock:
            self._items = {key_of(o): self._project(o) for o in objects}

    def apply(self, event_type: str | None, obj: Mapping[str, Any]) -> tuple[T | None, T | None]:
        """Apply one watch event; returns (old, new) projections."""
        key = key_of(obj)
        new = None if event_type == "DELETED" else self._project(obj)
        with self._lock:
            old = self._items.pop(key, None) if new is None else self._items.get(key)
            if new is not None:
                self._items[key] = new
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
