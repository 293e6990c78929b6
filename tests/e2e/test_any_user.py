"""`make demo`'s start as an ordinary user: not root, a home directory whose path
is long, the default state directory under it. Before the cluster's sockets
moved to their own short directory, a home this long put the DRA socket past
the 107 bytes a unix socket path may have and the node daemon refused to start.

The user gets what a newcomer's `make demo` would have built: its own copy of
the tracked files, a virtualenv on the system's Python (synced offline from
the uv cache `make venv` filled) and the control-plane binaries. Needs root to
create the user; CI runs as root.
"""

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from localsim.controlplane.binaries import Binaries, cache_root
from localsim.paths import ClusterPaths

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
USER = "tdra-longhome"
CONTROL_PLANE = ("etcd-*", "helm-*", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
STATE = Path(".local/state/trainium-dra/cluster")
"""The default state directory, under the user's home."""
DRA_SOCKET = "n/rack-a-node-0/k/plugins/trainium.sim.dev/dra.sock"


@dataclass(frozen=True)
class Newcomer:
    home: Path
    checkout: Path
    bin_dir: Path

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {
            "HOME": str(self.home),
            "USER": USER,
            "LOGNAME": USER,
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "TRAINIUM_DRA_BIN_DIR": str(self.bin_dir),
        }
        argv = [str(self.checkout / ".venv" / "bin" / "trainium-dra"), *args]
        return subprocess.run(
            [
                "runuser",
                "-u",
                USER,
                "--",
                "env",
                "-i",
                *(f"{k}={v}" for k, v in env.items()),
                *argv,
            ],
            cwd=self.checkout,
            capture_output=True,
            text=True,
            timeout=400,
            check=False,
        )

    @property
    def paths(self) -> ClusterPaths:
        return ClusterPaths(self.home / STATE)


def copy_tracked_files(target: Path) -> None:
    """The working tree as git tracks it (uncommitted edits included)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def uv() -> Path:
    found = sorted(cache_root().glob("uv-*/bin/uv"))
    assert found, f"no uv under {cache_root()}: `make venv` installs it"
    return found[-1]


@pytest.fixture(scope="module")
def newcomer() -> Iterator[Newcomer]:
    assert os.geteuid() == 0, "creating a user needs root (make test runs as root)"
    base = Path(tempfile.mkdtemp(prefix="tdra-user-", dir="/tmp"))
    base.chmod(0o755)
    home = base / "home-of-a-newcomer-whose-name-is-rather-long-indeed"
    checkout = home / "trainium-dra"
    bin_dir = base / "bin"
    subprocess.run(["userdel", "--remove", USER], capture_output=True, check=False)
    subprocess.run(["useradd", "--create-home", "--home-dir", str(home), USER], check=True)
    try:
        copy_tracked_files(checkout)
        environment = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(checkout / ".venv")}
        subprocess.run(
            [str(uv()), "sync", "--frozen", "--offline", "--quiet", "--python", "/usr/bin/python3"],
            cwd=checkout,
            env=environment,
            check=True,
        )
        python = checkout / ".venv" / "bin" / "python"
        subprocess.run([str(python), "hack/gen_protos.py"], cwd=checkout, check=True)
        subprocess.run(["chown", "-R", f"{USER}:{USER}", str(home)], check=True)
        bin_dir.mkdir(mode=0o755)
        source = Binaries.locate().kube_apiserver.parent
        for pattern in CONTROL_PLANE:
            for binary in source.glob(pattern):
                link_or_copy(binary, bin_dir / binary.name)
        yield Newcomer(home, checkout, bin_dir)
    finally:
        subprocess.run(["userdel", "--remove", USER], capture_output=True, check=False)
        shutil.rmtree(base, ignore_errors=True)


def test_an_ordinary_user_with_a_long_home_starts_and_stops_the_cluster(
    newcomer: Newcomer,
) -> None:
    paths = newcomer.paths
    assert len(str(paths.root / DRA_SOCKET)) > 107, "the home must be long enough to matter"
    try:
        up = newcomer.run("up", "--nodes-per-rack=2")
        assert up.returncode == 0, up.stdout + up.stderr
        assert f"KUBECONFIG={paths.kubeconfig}" in up.stdout
        assert "real-node" not in up.stdout + up.stderr
        runtime = Path(os.readlink(paths.runtime_link))
        assert runtime.stat().st_uid == newcomer.home.stat().st_uid != 0
        socket = runtime / DRA_SOCKET
        assert socket.is_socket() and len(str(socket)) <= 107
        status = newcomer.run("status")
        assert status.returncode == 0 and "rack-a" in status.stdout, status.stdout + status.stderr
    finally:
        down = newcomer.run("down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert not paths.root.exists()
    assert not runtime.exists()
