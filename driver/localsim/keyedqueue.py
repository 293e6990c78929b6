"""A work queue of keys where one key is never worked on by two threads at once.

A key added while it is being worked on is run again afterwards, so the last
change is always seen (the pattern of client-go's workqueue).
"""

import threading


class KeyedQueue:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._order: list[str] = []
        self._queued: set[str] = set()
        self._active: set[str] = set()
        self._again: set[str] = set()
        self._closed = False

    def add(self, key: str) -> None:
        with self._cond:
            if key in self._active:
                self._again.add(key)
            elif key not in self._queued:
                self._queued.add(key)
                self._order.append(key)
                self._cond.notify()

    def get(self, timeout: float) -> str | None:
        """The next key, now marked active; None on timeout or when closed."""
        with self._cond:
            if not self._order and not self._closed:
                self._cond.wait(timeout)
            if self._closed or not self._order:
                return None
            key = self._order.pop(0)
            self._queued.discard(key)
            self._active.add(key)
            return key

    def done(self, key: str) -> None:
        with self._cond:
            self._active.discard(key)
            if key in self._again:
                self._again.discard(key)
                if key not in self._queued:
                    self._queued.add(key)
                    self._order.append(key)
                    self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
