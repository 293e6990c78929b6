"""The one skeleton both kinds of local cluster run in the foreground: state
directories and pid file, control plane, the cluster's own start, ready,
supervise until SIGTERM or SIGINT, then everything stopped in reverse."""

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Protocol, TypeVar

from localsim.controlplane.plane import ControlPlane
from localsim.paths import ClusterPaths
from localsim.state import make_state_dirs

SUPERVISE_INTERVAL = 1.0


class Progress:
    """Progress lines with the time since start, flushed at once (`up` tails them)."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    def __call__(self, message: str) -> None:
        print(f"[{time.monotonic() - self.started:5.1f}s] {message}", flush=True)


class ServedCluster(Protocol):
    """What runs on the control plane: stand-in nodes, or real ones."""

    def start(self, progress: Callable[[str], None]) -> None: ...
    def supervise(self, progress: Callable[[str], None]) -> None: ...
    def stop(self) -> None: ...


C = TypeVar("C", bound=ServedCluster)


@contextlib.contextmanager
def stop_signals() -> Iterator[threading.Event]:
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def serve_cluster(
    paths: ClusterPaths,
    progress: Progress,
    control_plane: Callable[[], AbstractContextManager[ControlPlane]],
    cluster: Callable[[ControlPlane], C],
    when_started: Callable[[C, ControlPlane, contextlib.ExitStack], str],
) -> int:
    """Start everything, report ready, run until signalled, stop everything.
    `when_started` starts what comes after the cluster (registering its stops
    on the stack, which unwinds before the cluster stops) and says what is ready."""
    paths.ready_file.unlink(missing_ok=True)
    make_state_dirs(paths)
    paths.pid_file.write_text(str(os.getpid()))
    try:
        with stop_signals() as stop, control_plane() as plane:
            served = cluster(plane)
            extras = contextlib.ExitStack()
            try:
                served.start(progress)
                progress(f"ready: {when_started(served, plane, extras)}")
                paths.ready_file.touch()
                while not stop.wait(SUPERVISE_INTERVAL):
                    served.supervise(progress)
            finally:
                progress("stopping")
                paths.ready_file.unlink(missing_ok=True)
                extras.close()
                served.stop()
    finally:
        paths.pid_file.unlink(missing_ok=True)
    return 0
