"""Start and stop the processes of one real node: containerd, the kubelet,
kube-proxy and the NetworkPolicy agent, each entered into the node's cgroup and namespaces.

Configuration documents come from `plan.py`; this module writes them, the
node's certificates and kubeconfigs, and supervises the processes.
"""

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from localsim.controlplane.binaries import NodeBinaries
from localsim.controlplane.certs import CertFiles, issue_certificate
from localsim.controlplane.children import Child
from localsim.realnodes import cgroups, mountns, netns
from localsim.realnodes.netpolicy import AGENT_USER, agent_command, install_queue_rules
from localsim.realnodes.plan import (
    RealNode,
    client_kubeconfig,
    cni_config,
    containerd_config,
    kube_proxy_config,
    kubelet_config,
)

CONTAINERD_TIMEOUT = 60.0
IMPORT_TIMEOUT = 300.0


class NodeStartError(RuntimeError):
    """A node's process did not start; names the process, its log and the fix."""


@dataclass(frozen=True)
class ClusterAccess:
    """What every node needs of the control plane."""

    server: str  # https://<gateway>:<port>
    certs: CertFiles
    feature_gates: dict[str, bool]
    sandbox_image: str


@dataclass
class NodeRuntime:
    node: RealNode
    binaries: NodeBinaries
    access: ClusterAccess
    logs: Path
    policy_agent: Path
    children: dict[str, Child] = field(default_factory=dict)

    def _path(self, what: str) -> Path:
        return self.node.dir(what)

    def prepare(self) -> None:
        """Directories, cgroups, network, mount namespace, certificates and configs."""
        node = self.node
        for what in ("c", "cs", "cni", "ipam", "pki", "etc"):
            self._path(what).mkdir(parents=True, exist_ok=True)
        node.resolv_conf.write_text("# no name server in the real-node cluster\n")
        cgroups.create(node.system_cgroup)
        netns.create_node_network(node)
        mountns.create(node)
        install_queue_rules(node)
        certs = self.access.certs
        pki = self._path("pki")
        issue_certificate(
            certs,
            f"system:node:{node.name}",
            ("system:nodes",),
            pki / "kubelet.crt",
            pki / "kubelet.key",
        )
        issue_certificate(
            certs,
            f"system:node:{node.name}",
            ("system:nodes",),
            pki / "kubelet-serving.crt",
            pki / "kubelet-serving.key",
            hosts=(node.ip, node.name),
        )
        issue_certificate(
            certs, "system:kube-proxy", (), pki / "kube-proxy.crt", pki / "kube-proxy.key"
        )
        issue_certificate(
            certs, AGENT_USER, (), pki / "network-policy.crt", pki / "network-policy.key"
        )
        etc = self._path("etc")
        for user in ("kubelet", "kube-proxy", "network-policy"):
            document = client_kubeconfig(
                self.access.server, certs.ca_cert, pki / f"{user}.crt", pki / f"{user}.key"
            )
            (etc / f"{user}.kubeconfig").write_text(yaml.safe_dump(document))
        (etc / "containerd.toml").write_text(
            containerd_config(node, self.binaries.cni_dir, self.access.sandbox_image)
        )
        (self._path("cni") / "10-trainium-dra.conflist").write_text(json.dumps(cni_config(node)))
        (etc / "kubelet.yaml").write_text(
            yaml.safe_dump(kubelet_config(node, certs.ca_cert, self.access.feature_gates))
        )
        (etc / "kube-proxy.yaml").write_text(
            yaml.safe_dump(kube_proxy_config(node, etc / "kube-proxy.kubeconfig"))
        )

    def _enter(self, command: list[str]) -> list[str]:
        cgroup_dirs = [f"--cgroup-dir={d}" for d in cgroups.dirs(self.node.system_cgroup)]
        return [
            sys.executable,
            "-m",
            "localsim.realnodes.enter",
            *cgroup_dirs,
            f"--netns={netns.netns_path(self.node)}",
            f"--mountns={self.node.mount_ns}",
            "--",
            *command,
        ]

    def _start(self, what: str, command: list[str]) -> Child:
        name = f"{self.node.name}-{what}"
        path = os.pathsep.join([str(self.binaries.containerd_dir), os.environ.get("PATH", "")])
        child = Child.start(
            name, self._enter(command), self.logs / f"{name}.log", env={**os.environ, "PATH": path}
        )
        self.children[what] = child
        return child

    def start_containerd(self) -> None:
        self.spawn_containerd()
        self.await_containerd()

    def spawn_containerd(self) -> None:
        """Start containerd without waiting: a cluster's nodes start theirs together."""
        etc = self._path("etc")
        self._start(
            "containerd", [str(self.binaries.containerd), f"--config={etc / 'containerd.toml'}"]
        )

    def await_containerd(self) -> None:
        child = self.children["containerd"]
        deadline = time.monotonic() + CONTAINERD_TIMEOUT
        while not self.ctr_ok("version"):
            if not child.alive() or time.monotonic() > deadline:
                raise NodeStartError(
                    f"containerd of {self.node.name} did not start "
                    f"(exit code {child.process.poll()}); log {child.log_path}:\n{child.log_tail()}"
                )
            time.sleep(0.2)

    def ctr(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.binaries.ctr), f"--address={self.node.containerd_socket}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def ctr_ok(self, *args: str) -> bool:
        try:
            return self.ctr(*args, timeout=5.0).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def import_image(self, archive: Path) -> None:
        result = self.ctr(
            "--namespace=k8s.io",
            "images",
            "import",
            "--all-platforms",
            str(archive),
            timeout=IMPORT_TIMEOUT,
        )
        if result.returncode != 0:
            raise NodeStartError(
                f"importing {archive} into containerd of {self.node.name} failed: "
                f"{result.stderr.strip()}"
            )

    def tag_image(self, ref: str, alias: str) -> None:
        result = self.ctr("--namespace=k8s.io", "images", "tag", "--force", ref, alias)
        if result.returncode != 0:
            raise NodeStartError(
                f"tagging {ref} as {alias} in containerd of {self.node.name} failed: "
                f"{result.stderr.strip()}"
            )

    def start_kubelet(self) -> None:
        etc = self._path("etc")
        labels = ",".join(f"{k}={v}" for k, v in self.node.labels.items())
        self._start(
            "kubelet",
            [
                str(self.binaries.kubelet),
                f"--config={etc / 'kubelet.yaml'}",
                f"--kubeconfig={etc / 'kubelet.kubeconfig'}",
                f"--hostname-override={self.node.name}",
                f"--node-ip={self.node.ip}",
                f"--node-labels={labels}",
                "--v=3",  # plugin registration is logged at 3
            ],
        )

    def start_kube_proxy(self) -> None:
        etc = self._path("etc")
        self._start(
            "kube-proxy", [str(self.binaries.kube_proxy), f"--config={etc / 'kube-proxy.yaml'}"]
        )

    def start_network_policy(self) -> None:
        kubeconfig = self._path("etc") / "network-policy.kubeconfig"
        self._start("network-policy", agent_command(self.policy_agent, self.node, kubeconfig))

    def dead(self) -> list[Child]:
        return [c for c in self.children.values() if not c.alive()]

    def restart(self, what: str) -> None:
        old = self.children.pop(what)
        old.stop()
        {
            "containerd": self.start_containerd,
            "kubelet": self.start_kubelet,
            "kube-proxy": self.start_kube_proxy,
            "network-policy": self.start_network_policy,
        }[what]()

    def release(self, whats: Sequence[str]) -> list[Child]:
        """Take the node's processes `whats` out of supervision, for the caller to stop."""
        return [self.children.pop(what) for what in whats if what in self.children]
