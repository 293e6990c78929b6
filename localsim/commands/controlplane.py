"""`trainium-dra controlplane up|down|serve`: a local control plane that
outlives the command that started it, for the demo and for running single
tests against a kept-alive control plane."""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from driver.mainwait import wait_for_stop
from localsim.commands.hints import kubeconfig_export, path_export
from localsim.controlplane.binaries import Binaries, BinariesMissingError
from localsim.controlplane.plane import ControlPlane, ControlPlaneError

DEFAULT_STATE_DIR = Path.home() / ".local" / "state" / "trainium-dra" / "controlplane"
UP_TIMEOUT = 180.0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="trainium-dra controlplane")
    parser.add_argument(
        "action",
        choices=("up", "down", "serve"),
        help="up: start in the background; down: stop it; serve: run in the foreground",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=Path(os.environ.get("TRAINIUM_DRA_STATE_DIR", DEFAULT_STATE_DIR)),
        help="where the kubeconfig, certificates, etcd data and logs live "
        "(default: $TRAINIUM_DRA_STATE_DIR or %(default)s)",
    )
    return parser.parse_args(argv)


STATE_ENTRIES = (
    "etcd",
    "pki",
    "logs",
    "kubeconfig",
    "scheduler.kubeconfig",
    "controller-manager.kubeconfig",
    "tokens.csv",
    "serve.log",
    "serve.pid",
    "ready",
)
"""What `serve` creates in the state dir; `down` removes exactly these."""


def remove_state(state_dir: Path) -> None:
    for name in STATE_ENTRIES:
        path = state_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def pid_file(state_dir: Path) -> Path:
    return state_dir / "serve.pid"


def running_pid(state_dir: Path) -> int | None:
    """The pid of a live `serve` for this state dir, if any."""
    try:
        pid = int(pid_file(state_dir).read_text())
        os.kill(pid, 0)
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return None
    return pid


def serve(state_dir: Path) -> int:
    """Run the control plane until SIGTERM or SIGINT."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    ready = state_dir / "ready"
    ready.unlink(missing_ok=True)
    shutil.rmtree(state_dir / "etcd", ignore_errors=True)
    with ControlPlane.running(state_dir, on_progress=lambda msg: print(msg, flush=True)):
        pid_file(state_dir).write_text(str(os.getpid()))
        ready.touch()
        wait_for_stop(stop)
    ready.unlink(missing_ok=True)
    pid_file(state_dir).unlink(missing_ok=True)
    return 0


def up(state_dir: Path) -> int:
    if (pid := running_pid(state_dir)) is not None:
        print(f"control plane already running (pid {pid}); KUBECONFIG={state_dir / 'kubeconfig'}")
        return 0
    Binaries.locate()
    state_dir.mkdir(parents=True, exist_ok=True)
    log = state_dir / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "driver.cli",
                "controlplane",
                "serve",
                f"--state-dir={state_dir}",
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + UP_TIMEOUT
    shown = 0
    while not (state_dir / "ready").exists():
        lines = log.read_text(errors="replace").splitlines()
        for line in lines[shown:]:
            print(f"  {line}", flush=True)
        shown = len(lines)
        if process.poll() is not None:
            print(f"control plane failed to start; see {log}", file=sys.stderr)
            return 1
        if time.monotonic() > deadline:
            process.terminate()
            print(f"control plane not ready after {UP_TIMEOUT:.0f}s; see {log}", file=sys.stderr)
            return 1
        time.sleep(0.5)
    kubeconfig = state_dir / "kubeconfig"
    print(f"\nControl plane running (pid {process.pid}). Use it with:\n")
    print(f"  {path_export()}")
    print(f"  {kubeconfig_export(kubeconfig)}")
    print("  kubectl get deviceclasses\n")
    plane = ControlPlane.attach(kubeconfig)
    print(plane.kubectl("get", "deviceclasses").stdout or "No DeviceClasses yet.")
    print("Stop it with: trainium-dra controlplane down")
    return 0


def down(state_dir: Path) -> int:
    pid = running_pid(state_dir)
    if pid is None:
        remove_state(state_dir)
        print(f"no control plane running for {state_dir}; stale state removed")
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while running_pid(state_dir) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    if running_pid(state_dir) is not None:
        os.kill(pid, signal.SIGKILL)
    remove_state(state_dir)
    print(f"control plane stopped (pid {pid}); state removed from {state_dir}")
    return 0


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    actions = {"up": up, "down": down, "serve": serve}
    try:
        return actions[args.action](args.state_dir)
    except (BinariesMissingError, ControlPlaneError) as error:
        print(f"trainium-dra controlplane: {error}", file=sys.stderr)
        return 1
