"""The node's group commit: changes to the checkpoint (checkpoint.py, its
journal in journal.py) queued by concurrent prepares and unprepares are
applied and made durable together by whichever thread takes the node lock,
one fsync for the batch.
"""

import fcntl
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from driver.node.durable.checkpoint import Checkpoint, ClaimRecord


class Change(ABC):
    """One claim's change to the checkpoint, run by whichever thread writes its batch.

    `apply` runs under the node lock on the claims as the changes before it in
    the batch left them, and says whether it changed them; `after` runs once
    the batch is durable (the claim's files). An exception in either is the
    change's error, raised to the thread that asked for it.
    """

    def __init__(self) -> None:
        self.done = False
        self.error: Exception | None = None

    @abstractmethod
    def apply(self, claims: dict[str, ClaimRecord]) -> bool: ...

    @abstractmethod
    def after(self) -> None: ...


class NodeState:
    """The node's checkpoint and the lock that serialises changes to it.

    The lock is a thread lock plus an flock on `<checkpoint>.lock`, so the old
    and the new daemon of a rolling update (same state dir, different pod UID)
    never interleave; the checkpoint is re-read whenever the lock is taken.
    """

    def __init__(self, checkpoint: Checkpoint) -> None:
        self.checkpoint = checkpoint
        self._thread_lock = threading.Lock()
        self._lock_file = checkpoint.path.with_name(checkpoint.path.name + ".lock")
        self._queue: list[Change] = []
        self._queue_lock = threading.Lock()

    @contextmanager
    def locked(self) -> Iterator[Checkpoint]:
        with self._thread_lock:
            fd = os.open(self._lock_file, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                self.checkpoint.reload()
                yield self.checkpoint
            finally:
                os.close(fd)

    def commit(self, changes: Sequence[Change]) -> None:
        """Apply `changes`, make them durable, run their `after`; return once all
        are done. Whoever takes the lock writes every change queued by then."""
        if not changes:
            return
        with self._queue_lock:
            self._queue.extend(changes)
        try:
            with self.locked() as checkpoint:
                if not all(change.done for change in changes):
                    with self._queue_lock:
                        batch, self._queue = self._queue, []
                    write_batch(checkpoint, batch)
        except Exception as err:  # the lock or re-reading the checkpoint failed
            with self._queue_lock:
                self._queue = [c for c in self._queue if all(c is not d for d in changes)]
            for change in changes:
                if not change.done:
                    change.error, change.done = err, True


def write_batch(checkpoint: Checkpoint, batch: Sequence[Change]) -> None:
    """One durable checkpoint write for the whole batch, then each change's files."""
    claims = dict(checkpoint.claims)
    applied: list[Change] = []
    changed = False
    for change in batch:
        try:
            changed = change.apply(claims) or changed
            applied.append(change)
        except Exception as err:
            change.error = err
    try:
        if changed:
            checkpoint.store(claims)
    except Exception as err:
        for change in applied:
            change.error = err
        applied = []
    for change in applied:
        try:
            change.after()
        except Exception as err:
            change.error = err
    for change in batch:
        change.done = True
