"""`trainium-dra up` twice, and `down` (or `up`) after a crash, leave no stray
processes or sockets. A two-node partial rack keeps these starts short."""

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from localsim.controlplane.children import trainium_dra_argv
from localsim.paths import ClusterPaths
from localsim.state import owned
from testbed.localcluster import short_state_dir, wait_for

pytestmark = pytest.mark.integration

SMALL = ("--nodes-per-rack=2",)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        trainium_dra_argv(list(args)), capture_output=True, text=True, timeout=400, check=False
    )


def processes(paths: ClusterPaths) -> set[int]:
    """Every live process whose command line names the state directory."""
    pids = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    return {p for p in pids if p != os.getpid() and owned(p, paths) and not zombie(p)}


def zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True


def sockets(paths: ClusterPaths) -> list[Path]:
    """Every socket of the cluster: under its state or its runtime directory."""
    found = [d.rglob("*") for d in (paths.root, paths.runtime) if d.exists()]
    return [p for files in found for p in files if p.is_socket()]


def recorded_pids(paths: ClusterPaths) -> dict[str, int]:
    pids: dict[str, int] = json.loads(paths.cluster_file.read_text())["pids"]
    return pids


@pytest.fixture
def paths() -> Iterator[ClusterPaths]:
    where = ClusterPaths(short_state_dir())
    try:
        yield where
    finally:
        cli("down", f"--state-dir={where.root}")


def up(paths: ClusterPaths, *flags: str) -> subprocess.CompletedProcess[str]:
    result = cli("up", f"--state-dir={paths.root}", *(flags or SMALL))
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def crash(paths: ClusterPaths) -> None:
    """SIGKILL `serve`, as a crash or the OOM killer would; its children die with it."""
    pids = recorded_pids(paths)
    os.kill(pids["serve"], signal.SIGKILL)
    wait_for("every process of the crashed cluster gone", lambda: not processes(paths), 60)


def test_up_twice_then_down(paths: ClusterPaths) -> None:
    first = up(paths)
    assert f"KUBECONFIG={paths.kubeconfig}" in first.stdout
    before = processes(paths)
    recorded = recorded_pids(paths)
    # serve, the 4 control-plane components, the controller and the rack's node daemon
    assert set(recorded) >= {"serve", "etcd", "kube-apiserver", "controller", "node-rack-a"}
    assert set(recorded.values()) <= before
    second = up(paths)
    assert "already running" in second.stdout
    assert processes(paths) == before
    assert recorded_pids(paths) == recorded
    other = cli("up", f"--state-dir={paths.root}", "--nodes-per-rack=1", "--pools=node")
    assert other.returncode == 2, other.stdout + other.stderr
    assert "--nodes-per-rack: running 2, asked 1" in other.stderr
    assert "--pools: running rack, asked node" in other.stderr
    assert "trainium-dra up --recreate" in other.stderr
    assert processes(paths) == before
    assert recorded_pids(paths) == recorded
    down = cli("down", f"--state-dir={paths.root}")
    assert down.returncode == 0 and "stopped" in down.stdout
    assert not processes(paths)
    assert not paths.root.exists()
    assert not paths.runtime.exists()


def test_up_recreate_replaces_a_cluster_of_other_flags(paths: ClusterPaths) -> None:
    up(paths)
    before = processes(paths)
    replaced = cli("up", f"--state-dir={paths.root}", "--nodes-per-rack=1", "--recreate")
    assert replaced.returncode == 0, replaced.stdout + replaced.stderr
    assert "replacing the local cluster" in replaced.stdout
    assert "--nodes-per-rack: running 2, asked 1" in replaced.stdout
    assert not before & processes(paths)
    spec = json.loads(paths.cluster_file.read_text())["spec"]
    assert [rack["nodes"] for rack in spec["racks"]] == [1]
    assert "already running" in up(paths, "--nodes-per-rack=1").stdout


def test_a_state_dir_of_200_characters_starts_and_stops() -> None:
    """Socket paths do not grow with the state directory: they live in its runtime
    directory, whose path has the same length whatever the state directory's."""
    base = short_state_dir()
    paths = ClusterPaths(base / ("x" * (199 - len(str(base)))))
    assert len(str(paths.root)) == 200
    try:
        up(paths)
        bound = sockets(paths)
        assert any(p.name == "dra.sock" for p in bound), bound
        assert all(len(str(p)) <= 107 for p in bound)
        assert paths.runtime_link.resolve() == paths.runtime
        assert oct(paths.runtime.parent.stat().st_mode & 0o777) == "0o700"
        down = cli("down", f"--state-dir={paths.root}")
        assert down.returncode == 0, down.stdout + down.stderr
        assert not paths.runtime.exists()
        assert not paths.root.exists()
    finally:
        cli("down", f"--state-dir={paths.root}")
        shutil.rmtree(base, ignore_errors=True)


def test_down_and_up_after_a_crash(paths: ClusterPaths) -> None:
    up(paths)
    crash(paths)
    assert sockets(paths), "a killed node daemon leaves its sockets behind"
    again = up(paths)  # up cleans what the crash left and starts afresh
    assert "did not stop cleanly" in again.stdout
    crash(paths)
    down = cli("down", f"--state-dir={paths.root}")
    assert down.returncode == 0, down.stderr
    assert not processes(paths)
    assert not sockets(paths)
    assert not paths.root.exists()
