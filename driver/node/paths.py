"""Where one simulated node's files live (pure path arithmetic).

Kubelet protocol paths follow the kubelet's conventions under its root dir;
the rest sit under the daemon's state dir, one subdirectory per node.
"""

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class NodePaths:
    kubelet_root: Path
    driver: str
    state_dir: Path  # this node's own state directory
    cdi_dir: Path
    pod_uid: str = ""  # set during rolling updates: sockets get unique names

    @property
    def registry_dir(self) -> Path:
        return self.kubelet_root / "plugins_registry"

    @property
    def plugin_dir(self) -> Path:
        return self.kubelet_root / "plugins" / self.driver

    @property
    def registration_socket(self) -> Path:
        """`<driver>-reg.sock`, or `<driver>-<podUID>-reg.sock` for rolling updates."""
        infix = f"-{self.pod_uid}" if self.pod_uid else ""
        return self.registry_dir / f"{self.driver}{infix}-reg.sock"

    @property
    def registration_staging(self) -> Path:
        """Where the registration socket is bound before it is renamed into place:
        the same directory (a rename cannot cross the separate mounts a pod has
        for the registry and the plugin directory), hidden by its leading dot,
        which the kubelet's plugin watcher skips."""
        return self.registry_dir / f".{self.registration_socket.name}"

    @property
    def dra_socket(self) -> Path:
        """`dra.sock`, or `dra-<podUID>.sock` so old and new pods never share a path."""
        suffix = f"-{self.pod_uid}" if self.pod_uid else ""
        return self.plugin_dir / f"dra{suffix}.sock"

    @property
    def checkpoint(self) -> Path:
        return self.state_dir / "checkpoint.json"

    @property
    def token_key(self) -> Path:
        """The node's secret from which every claim token is derived (0600)."""
        return self.state_dir / "token.key"

    @property
    def workload_dir(self) -> Path:
        """Holds only the workload socket; CDI mounts this directory into containers,
        so a restarted daemon's new socket reaches containers that started before."""
        return self.state_dir / "workload"

    @property
    def workload_socket(self) -> Path:
        return self.workload_dir / "workload.sock"

    @property
    def claims_dir(self) -> Path:
        return self.state_dir / "claims"

    def token_file(self, claim_uid: str) -> Path:
        """`claims/<uid>.token`: a file, no directory (an rmdir costs a journal commit)."""
        return self.claims_dir / f"{claim_uid}.token"

    def legacy_token_file(self, claim_uid: str) -> Path:
        """Where earlier releases kept the token: `claims/<uid>/token`."""
        return self.claims_dir / claim_uid / "token"


def node_path(template: str, node: str) -> Path:
    """Expand `{node}` in a path flag so one process can host many nodes."""
    return Path(template.replace("{node}", node))
