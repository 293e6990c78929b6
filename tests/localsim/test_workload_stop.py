"""A workload container stopped by a signal exits as the signal ended it, so a
Job replaces a pod evicted or deleted mid-run instead of counting it done."""

import os
import signal
import threading

import pytest

from driver import container


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_the_hold_with_128_plus_its_number(
    sig: signal.Signals, capsys: pytest.CaptureFixture[str]
) -> None:
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    timer = threading.Timer(0.3, os.kill, (os.getpid(), sig))
    timer.start()
    try:
        assert container.hold_until_signalled() == 128 + sig
    finally:
        timer.cancel()
        for s, handler in previous.items():
            signal.signal(s, handler)
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"{container.HOLDING}=until the pod stops", f"stopped_by={sig.name}"]
