"""Where the upstream control-plane binaries are, and a clear error when they are not.

They are built by `hack/build-binaries.sh` (run by `make`) into a cache keyed
by version; this module only finds them.
"""

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

K8S_VERSION = "v1.36.3"
"""Default Kubernetes version; matches hack/k8s/go.mod (a unit test keeps them equal)."""

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
        """Find the binaries in `bin_dir`, `$TRAINIUM_DRA_BIN_DIR` or the default cache."""
        env_dir = os.environ.get("TRAINIUM_DRA_BIN_DIR")
        directory = bin_dir or (Path(env_dir) if env_dir else cache_root() / "k8s" / K8S_VERSION)
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
