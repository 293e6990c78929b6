"""Waiting in the main thread for a stop that a signal handler sets."""

import threading

WAKE_SECONDS = 1.0


def wait_for_stop(stop: threading.Event) -> None:
    """Return once `stop` is set. The wait wakes every WAKE_SECONDS: the kernel
    may deliver SIGTERM to any thread, and then nothing interrupts the main
    thread's blocked wait, while Python runs the handler only in the main
    thread, between bytecodes. A wait with no timeout could then never end."""
    while not stop.wait(WAKE_SECONDS):
        pass
