"""The work queue of the controller (racks) and the kubelet stand-in (pods):
each key at most once pending, never processed by two workers at once, re-run
if requested again while it was being processed, and optionally delayed (a
retry after a failure, a periodic visit)."""

import threading
import time
from collections.abc import Callable


class WorkQueue:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._due: dict[str, float] = {}
        self._active: set[str] = set()
        self._again: dict[str, float] = {}
        self._closed = False

    def add(self, key: str, delay: float = 0.0) -> None:
        """Ask for `key` to be processed after `delay` seconds (earliest request wins)."""
        with self._cond:
            when = self._clock() + delay
            target = self._again if key in self._active else self._due
            target[key] = min(when, target.get(key, when))
            self._cond.notify_all()

    def get(self, timeout: float | None = None) -> str | None:
        """The next due key, or None when closed or after `timeout` seconds."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while not self._closed:
                now = self._clock()
                ready = [k for k, t in self._due.items() if t <= now]
                if ready:
                    key = min(ready, key=lambda k: self._due[k])
                    del self._due[key]
                    self._active.add(key)
                    return key
                waits = [t - now for t in self._due.values()]
                if deadline is not None:
                    if now >= deadline:
                        return None
                    waits.append(deadline - now)
                self._cond.wait(min(waits) if waits else None)
            return None

    def done(self, key: str) -> None:
        """`key` finished; a request made meanwhile is queued now."""
        with self._cond:
            self._active.discard(key)
            if key in self._again:
                when = self._again.pop(key)
                self._due[key] = min(when, self._due.get(key, when))
            self._cond.notify_all()

    def idle(self) -> bool:
        """Nothing pending (due now or later) and nothing in progress."""
        return self.pending() == 0

    def pending(self) -> int:
        """Keys due now or later, or in progress."""
        with self._cond:
            return len(self._due.keys() | self._active | self._again.keys())

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
