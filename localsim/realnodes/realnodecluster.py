"""A cluster of real nodes: the control plane's processes plus, per node,
containerd, a kubelet, kube-proxy and the NetworkPolicy agent in the node's
own namespaces; then the
Helm chart installed for real, so the controller and the node daemons run as
pods under their ServiceAccounts.

`cleanup` removes everything a real-node cluster makes outside its state
directory (namespaces, the bridge, cgroups, mounts), also after a crash.
"""

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from localsim.clusterspec import ClusterSpec
from localsim.controlplane.binaries import Binaries, NodeBinaries
from localsim.controlplane.children import stop_all
from localsim.controlplane.plane import ControlPlane
from localsim.paths import ClusterPaths
from localsim.realnodes import cgroups, hostlimits, mountns, netns, release
from localsim.realnodes.netpolicy import agent_binary, grant_agent
from localsim.realnodes.nodeprocesses import ClusterAccess, NodeRuntime, NodeStartError
from localsim.realnodes.plan import CGROUP_PARENT, RealNode, plan_nodes

NODE_READY_TIMEOUT = 180.0
NODE_WORKERS = 4
STOPPED_FIRST = ("kubelet", "kube-proxy")
"""Stopped before containerd, so nothing asks it for containers while it goes."""
POLICY_AGENT_GRACE = 0.5
"""Seconds the NetworkPolicy agents are given after SIGTERM: each sleeps 5 s
before it exits, with nothing to clean up (it fails open, and its rules go
with the node's network namespace)."""
RESOURCE_HEALTH_GATES = {"ResourceHealthStatus": True}
"""The kubelet's gate for pods' allocatedResourcesStatus from the health stream."""


@dataclass(frozen=True)
class Images:
    """Image archives every node's containerd imports, and the names the chart uses."""

    archives: tuple[Path, ...]
    sandbox: str  # the pause image's name
    driver_repository: str
    driver_tag: str

    @property
    def driver_ref(self) -> str:
        return f"{self.driver_repository}:{self.driver_tag}"


WORKLOAD_IMAGE = "localhost/trainium-dra/driver:dev"
"""The stable name the examples' workload containers use for the driver image."""


class RealNodeCluster:
    def __init__(
        self,
        paths: ClusterPaths,
        spec: ClusterSpec,
        plane: ControlPlane,
        binaries: Binaries,
        images: Images,
    ) -> None:
        self.paths = paths
        self.spec = spec
        self.plane = plane
        self.binaries = binaries
        self.node_binaries = NodeBinaries.locate(binaries)
        self.images = images
        self.nodes = plan_nodes(paths.nodes_dir, spec.racks, spec.profile_labels)
        gates = {**plane.config.feature_gates, **RESOURCE_HEALTH_GATES}
        access = ClusterAccess(plane.config.url, plane.config.certs, gates, images.sandbox)
        agent = agent_binary()
        self.runtimes = [
            NodeRuntime(node, self.node_binaries, access, paths.logs, agent) for node in self.nodes
        ]

    def start(self, progress: Callable[[str], None]) -> None:
        progress(f"creating {len(self.nodes)} real nodes: network, mount namespaces, cgroups")
        hostlimits.raise_for(len(self.nodes), progress)
        for runtime in self.runtimes:
            runtime.prepare()
        progress("starting containerd on every node and importing the images")
        for runtime in self.runtimes:  # this thread owns the children (parent-death signal)
            runtime.spawn_containerd()
        self._each(self._import_images)
        progress("starting the kubelets, kube-proxies and NetworkPolicy agents")
        with self.plane.api_client() as api:
            grant_agent(api)
        for runtime in self.runtimes:
            runtime.start_kubelet()
            runtime.start_kube_proxy()
            runtime.start_network_policy()
        self._await_nodes_ready(progress)
        progress("installing the Helm chart (controller Deployment, node DaemonSet)")
        release.install(
            self.binaries,
            self.paths,
            self.spec,
            self.images.driver_repository,
            self.images.driver_tag,
        )
        progress("  chart installed; every daemon pod is Ready")

    def _import_images(self, runtime: NodeRuntime) -> None:
        runtime.await_containerd()
        for archive in self.images.archives:
            runtime.import_image(archive)
        runtime.tag_image(self.images.driver_ref, WORKLOAD_IMAGE)

    def _each(self, work: Callable[[NodeRuntime], object]) -> None:
        with ThreadPoolExecutor(NODE_WORKERS) as pool:
            list(pool.map(work, self.runtimes))

    def _await_nodes_ready(self, progress: Callable[[str], None]) -> None:
        names = {node.name for node in self.nodes}
        deadline = time.monotonic() + NODE_READY_TIMEOUT
        with self.plane.api_client() as api:
            core = client.CoreV1Api(api)
            while True:
                ready = {n.metadata.name for n in core.list_node().items if node_ready(n)}
                if names <= ready:
                    progress(f"  {len(names)} nodes Ready")
                    return
                for runtime in self.runtimes:
                    for child in runtime.dead():
                        raise NodeStartError(
                            f"{child.name} exited with code {child.process.returncode}; "
                            f"log {child.log_path}:\n{child.log_tail()}"
                        )
                if time.monotonic() > deadline:
                    raise NodeStartError(
                        f"nodes not Ready after {NODE_READY_TIMEOUT:.0f}s: "
                        f"{', '.join(sorted(names - ready))}; see the kubelet logs in "
                        f"{self.paths.logs}/"
                    )
                time.sleep(0.5)

    def pids(self) -> dict[str, int]:
        return {
            child.name: child.process.pid
            for runtime in self.runtimes
            for child in runtime.children.values()
        }

    def record(self) -> dict[str, Any]:
        """What `status`, tests and `down` need to know of the nodes."""
        return {
            "real_nodes": [
                {"name": n.name, "ip": n.ip, "netns": n.netns, "pod_cidr": n.pod_cidr}
                for n in self.nodes
            ]
        }

    def supervise(self, progress: Callable[[str], None]) -> None:
        """Restart a node process that died, as systemd does inside a kind node."""
        for runtime in self.runtimes:
            for what, child in list(runtime.children.items()):
                if not child.alive():
                    progress(
                        f"{child.name} exited with code {child.process.returncode}; restarting"
                    )
                    runtime.restart(what)

    def stop(self) -> None:
        """Every node at once: the policy agents, the kubelets and kube-proxies,
        then containerd; then `cleanup` kills what is left in the nodes' cgroups
        (shims and containers outlive containerd). The bridge stays for the
        control plane, which stops after the nodes: the apiserver's address is
        on it, and on its way down the apiserver deletes its own identity
        Lease through that address (with the bridge gone it waits out its
        timeouts instead)."""
        agents = [c for runtime in self.runtimes for c in runtime.release(("network-policy",))]
        stop_all(agents, POLICY_AGENT_GRACE)
        for whats in (STOPPED_FIRST, ("containerd",)):
            stop_all([c for runtime in self.runtimes for c in runtime.release(whats)])
        cleanup(self.paths.nodes_dir, bridge=False)


def node_ready(node: Any) -> bool:
    conditions = node.status.conditions or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def holds_real_nodes(nodes_dir: Path) -> bool:
    """Whether a state dir's nodes are real ones (each has a kubelet config).
    The bridge, namespaces and cgroups `cleanup` removes are the host's: the
    `down` of a stand-in cluster must leave a running real-node cluster alone."""
    return any(nodes_dir.glob("*/etc/kubelet.yaml"))


def cleanup(nodes_dir: Path, *, bridge: bool = True) -> list[str]:
    """Remove every trace of real nodes outside the state directory: processes
    in their cgroups, namespaces, the bridge (unless told to leave it), mounts.
    Safe to run twice."""
    removed = []
    try:
        parent = f"/{CGROUP_PARENT}"
        if cgroups.pids(parent) or any(d.exists() for d in cgroups.dirs(parent)):
            cgroups.kill_all(parent)
            removed.append(f"cgroup {parent}")
    except cgroups.CgroupError:
        pass
    removed += netns.remove_all(bridge=bridge)
    removed += mountns.remove_all(nodes_dir)
    return removed


__all__ = ["Images", "RealNode", "RealNodeCluster", "cleanup"]
