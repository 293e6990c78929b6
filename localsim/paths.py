"""Where everything of a local cluster lives on disk: under its state
directory, whose path the user chooses, and in its short runtime directory,
which holds its sockets.

Paths only: `state.py` creates and removes them.
"""

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from localsim.controlplane.schedulerconfig import SCHEDULER_CONFIG


@dataclass(frozen=True)
class ClusterPaths:
    """Where everything of a cluster lives under its state directory.

    Unix socket paths may not exceed 107 bytes, so everything that holds a
    socket (the nodes' kubelet roots, containerd states and workload sockets,
    the simulator's controls) lives in the cluster's short runtime directory,
    never under `root`, whose length is the user's choice.
    """

    root: Path

    @property
    def runtime(self) -> Path:
        return runtime_dir_for(Path(os.path.abspath(self.root)), os.getuid())

    @property
    def runtime_link(self) -> Path:
        """A symlink in the state directory to the runtime directory, to find it by."""
        return self.root / "run"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def pid_file(self) -> Path:
        return self.root / "serve.pid"

    @property
    def ready_file(self) -> Path:
        return self.root / "ready"

    @property
    def cluster_file(self) -> Path:
        """The spec and the daemons' HTTP ports, for `status`, `top` and `down`."""
        return self.root / "cluster.json"

    @property
    def settings_file(self) -> Path:
        """The flags `up` started the cluster with, for a second `up` to compare."""
        return self.root / "up.json"

    @property
    def serve_log(self) -> Path:
        return self.root / "serve.log"

    @property
    def nodes_dir(self) -> Path:
        return self.runtime / "n"

    def node_template(self, what: str) -> str:
        return str(self.nodes_dir / "{node}" / what)

    def kubelet_root(self, node: str) -> Path:
        return Path(self.node_template("k").replace("{node}", node))

    def cdi_dir(self, node: str) -> Path:
        return Path(self.node_template("cdi").replace("{node}", node))

    @property
    def credentials_dir(self) -> Path:
        """Kubeconfigs of the driver's components, each with its ServiceAccount's token."""
        return self.root / "sa"

    @property
    def controller_kubeconfig(self) -> Path:
        return self.credentials_dir / "controller.kubeconfig"

    @property
    def operator_kubeconfig(self) -> Path:
        return self.credentials_dir / "ultraserver-operator.kubeconfig"

    @property
    def node_kubeconfig_template(self) -> str:
        return str(self.credentials_dir / "{node}.kubeconfig")

    def sim_control_socket(self, rack: str) -> Path:
        """The unix socket of the simulator's fault controls of a rack's daemon."""
        return self.runtime / "sim" / f"{rack}.sock"


RUNTIME_PARENT = Path("/tmp")
"""Short and present on every Linux machine; per-user subdirectories (0700) keep
one user's sockets from another's."""


def runtime_dir_for(root: Path, uid: int) -> Path:
    """`/tmp/trainium-dra-<uid>/<12 hex digits>`: 31 bytes whatever `root` is, one
    per state directory, so two clusters of one user never share a socket."""
    digest = hashlib.sha256(os.fsencode(root)).hexdigest()[:12]
    return RUNTIME_PARENT / f"trainium-dra-{uid}" / digest


STATE_ENTRIES = (
    "etcd",
    "pki",
    "logs",
    "run",
    "kubeconfig",
    "scheduler.kubeconfig",
    SCHEDULER_CONFIG,
    "controller-manager.kubeconfig",
    "tokens.csv",
    "cluster.json",
    "up.json",
    "serve.log",
    "serve.pid",
    "ready",
    "real-nodes-values.yaml",
    "sa",
    "prometheus",
    "kueue",
    "lws",
)
"""Everything `serve` creates under the state directory; `down` removes exactly these."""
