"""Child processes of the local cluster that never outlive it.

Each child gets a parent-death signal (SIGKILL), so a `serve` process that
is killed takes the controller and node daemons with it, as the control
plane's components are taken.
"""

import ctypes
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

PR_SET_PDEATHSIG = 1
STOP_TIMEOUT = 15.0


def die_with_parent() -> None:
    """Runs in the child before exec."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def trainium_dra_argv(args: list[str]) -> list[str]:
    """`trainium-dra ARGS...` run by this interpreter."""
    return [sys.executable, "-m", "driver.cli", *args]


@dataclass
class Child:
    name: str
    argv: list[str]
    log_path: Path
    process: subprocess.Popen[bytes]
    log: IO[bytes]

    @classmethod
    def start(
        cls, name: str, argv: list[str], log_path: Path, env: Mapping[str, str] | None = None
    ) -> "Child":
        """Start `argv` with output to `log_path`; call from the thread that owns the child."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log = log_path.open("ab")
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=die_with_parent,  # noqa: PLW1509
        )
        return cls(name, argv, log_path, process, log)

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def stop(self) -> None:
        stop_all([self])


def stop_all(children: Sequence[Child], timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM every child at once and SIGKILL those still running after
    `timeout`: a cluster's many processes wait out one grace period together,
    not one each."""
    for child in children:
        if child.process.poll() is None:
            child.process.terminate()
    deadline = time.monotonic() + timeout
    for child in children:
        try:
            child.process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.process.kill()
            child.process.wait()
        child.log.close()
