"""`trainium-dra up` twice, and `down` (or `up`) after a crash, leave no stray
processes or sockets. A two-node partial rack keeps these starts short."""

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from driver.localsim.children import trainium_dra_argv
from driver.localsim.clusterspec import Layout
from driver.localsim.state import owned
from tests.e2e.cluster import short_state_dir, wait_for

pytestmark = pytest.mark.integration

SMALL = ("--nodes-per-rack=2",)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        trainium_dra_argv(list(args)), capture_output=True, text=True, timeout=400, check=False
    )


def processes(layout: Layout) -> set[int]:
    """Every live process whose command line names the state directory."""
    pids = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    return {p for p in pids if p != os.getpid() and owned(p, layout) and not zombie(p)}


def zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True


def sockets(layout: Layout) -> list[Path]:
    return [p for p in layout.root.rglob("*") if p.is_socket()] if layout.root.exists() else []


def recorded_pids(layout: Layout) -> dict[str, int]:
    pids: dict[str, int] = json.loads(layout.cluster_file.read_text())["pids"]
    return pids


@pytest.fixture
def layout() -> Iterator[Layout]:
    where = Layout(short_state_dir())
    try:
        yield where
    finally:
        cli("down", f"--state-dir={where.root}")


def up(layout: Layout) -> subprocess.CompletedProcess[str]:
    result = cli("up", f"--state-dir={layout.root}", *SMALL)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def crash(layout: Layout) -> None:
    """SIGKILL `serve`, as a crash or the OOM killer would; its children die with it."""
    pids = recorded_pids(layout)
    os.kill(pids["serve"], signal.SIGKILL)
    wait_for("every process of the crashed cluster gone", lambda: not processes(layout), 60)


def test_up_twice_then_down(layout: Layout) -> None:
    first = up(layout)
    assert f"KUBECONFIG={layout.kubeconfig}" in first.stdout
    before = processes(layout)
    recorded = recorded_pids(layout)
    # serve, the 4 control-plane components, the controller and the rack's node daemon
    assert set(recorded) >= {"serve", "etcd", "kube-apiserver", "controller", "node-rack-a"}
    assert set(recorded.values()) <= before
    second = up(layout)
    assert "already running" in second.stdout
    assert processes(layout) == before
    assert recorded_pids(layout) == recorded
    down = cli("down", f"--state-dir={layout.root}")
    assert down.returncode == 0 and "stopped" in down.stdout
    assert not processes(layout)
    assert not layout.root.exists()


def test_down_and_up_after_a_crash(layout: Layout) -> None:
    up(layout)
    crash(layout)
    assert sockets(layout), "a killed node daemon leaves its sockets behind"
    again = up(layout)  # up cleans what the crash left and starts afresh
    assert "did not stop cleanly" in again.stdout
    crash(layout)
    down = cli("down", f"--state-dir={layout.root}")
    assert down.returncode == 0, down.stderr
    assert not processes(layout)
    assert not sockets(layout)
    assert not layout.root.exists()
