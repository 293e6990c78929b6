"""What a cluster of real nodes consists of, as plain data: per node its
network namespace and addresses, its directories, the paths its kubelet,
containerd and kube-proxy see, and their configuration files.

A real node here is what a kind node is inside its container, run as local
processes instead: containerd, runc, the CNI bridge, a kubelet and
kube-proxy, in the node's own network and mount namespaces. The node's
directories are bind-mounted at the standard paths inside its mount
namespace, so the Helm chart's hostPath volumes work unchanged.

Pure: names, addresses, paths and documents out; `netns.py`, `mountns.py`
and `runtime.py` do the I/O.
"""

import ipaddress
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driver.devicemodel.ultraserver import DEFAULT_SERVER_INDEX_LABEL
from localsim.clusterspec import RACK_LABEL, ClusterRack

BRIDGE = "tdra0"
"""The host bridge every node's veth is plugged into (a kind network's bridge)."""

NODE_SUBNET = ipaddress.IPv4Network("172.30.99.0/24")
"""Node addresses; the gateway (.1) is the host's end, where the apiserver listens."""

POD_SUPERNET = ipaddress.IPv4Network("10.244.0.0/16")
"""Pod addresses: node i gets 10.244.i.0/24, as kind's default pod subnet."""

NETNS_PREFIX = "tdra-"
VETH_PREFIX = "tdra-v"
CGROUP_PARENT = "trainium-dra"
"""Every node's processes and pods live in cgroups below this one (all v1 hierarchies)."""

KUBELET_PORT = 10250
MAX_NODES = 200

STANDARD_PATHS = {
    "kubelet": "/var/lib/kubelet",
    "cdi": "/var/run/cdi",
    "state": "/var/lib/trainium-dra",
    "pod-logs": "/var/log/pods",
    "container-logs": "/var/log/containers",
}
"""Node directory -> the path the kubelet, containerd and the chart expect."""


def gateway() -> str:
    return str(NODE_SUBNET.network_address + 1)


@dataclass(frozen=True)
class RealNode:
    """One real node: identity, addresses and directories."""

    name: str
    index: int  # position in the cluster, for addresses
    rack: str
    server: int  # server index within the rack
    root: Path  # the node's directory on the host
    profile_labels: Mapping[str, str] = field(default_factory=dict)
    """Labels the cluster's profile adds (AWS's UltraServer node labels)."""

    @property
    def netns(self) -> str:
        return f"{NETNS_PREFIX}{self.index}"

    @property
    def veth(self) -> str:
        """Host end of the node's veth pair; the node's end is `eth0`."""
        return f"{VETH_PREFIX}{self.index}"

    @property
    def ip(self) -> str:
        return str(NODE_SUBNET.network_address + 10 + self.index)

    @property
    def pod_cidr(self) -> str:
        return str(list(POD_SUPERNET.subnets(new_prefix=24))[self.index])

    @property
    def cgroup(self) -> str:
        """The kubelet's cgroup root: pods go to <cgroup>/kubepods."""
        return f"/{CGROUP_PARENT}/{self.name}"

    @property
    def system_cgroup(self) -> str:
        """containerd, its shims, the kubelet and kube-proxy."""
        return f"{self.cgroup}/system"

    @property
    def mount_ns(self) -> Path:
        """The bind mount that keeps the node's mount namespace alive."""
        return self.root.parent / ".ns" / self.name

    def dir(self, what: str) -> Path:
        return self.root / what

    @property
    def containerd_socket(self) -> Path:
        return self.dir("cs") / "containerd.sock"

    @property
    def labels(self) -> dict[str, str]:
        return {
            RACK_LABEL: self.rack,
            DEFAULT_SERVER_INDEX_LABEL: str(self.server),
            **self.profile_labels,
        }

    def bind_mounts(self) -> list[tuple[Path, str]]:
        """(node directory, standard path) pairs for the node's mount namespace."""
        dirs = [(self.dir(what), target) for what, target in STANDARD_PATHS.items()]
        return [*dirs, (self.resolv_conf, "/etc/resolv.conf")]

    @property
    def resolv_conf(self) -> Path:
        """No name server: nothing in a node looks names up outside the machine."""
        return self.dir("resolv.conf")


def plan_nodes(
    nodes_dir: Path,
    racks: tuple[ClusterRack, ...],
    profile_labels: Callable[[ClusterRack, int], Mapping[str, str]] = lambda rack, server: {},
) -> list[RealNode]:
    nodes: list[RealNode] = []
    for rack in racks:
        for server in range(rack.nodes):
            name = rack.node_name(server)
            extra = profile_labels(rack, server)
            nodes.append(RealNode(name, len(nodes), rack.name, server, nodes_dir / name, extra))
    if len(nodes) > MAX_NODES:
        raise ValueError(f"at most {MAX_NODES} real nodes fit the node subnet {NODE_SUBNET}")
    return nodes


def containerd_config(node: RealNode, cni_bin_dir: Path, sandbox_image: str) -> str:
    """containerd 2 (config version 3): the node's own root, state and socket;
    CDI (always on in 2.x) reads the node's /var/run/cdi; CNI from the node's
    conf dir; pods' network namespaces under the node's state, not the host's
    /var/run/netns; NRI off (its socket path is fixed, and nodes share /var/run).
    `restrict_oom_score_adj`: these hosts lack CAP_SYS_RESOURCE, and
    runc fails to raise a container's oom_score_adj without it."""
    return f"""version = 3
root = {json.dumps(str(node.dir("c")))}
state = {json.dumps(str(node.dir("cs")))}

[grpc]
  address = {json.dumps(str(node.containerd_socket))}

[ttrpc]
  address = {json.dumps(str(node.dir("cs") / "containerd.sock.ttrpc"))}

[plugins."io.containerd.cri.v1.runtime"]
  enable_cdi = true
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true

[plugins."io.containerd.cri.v1.runtime".containerd]
  default_runtime_name = "runc"

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
  SystemdCgroup = false

[plugins."io.containerd.cri.v1.runtime".cni]
  bin_dirs = [{json.dumps(str(cni_bin_dir))}]
  conf_dir = {json.dumps(str(node.dir("cni")))}

[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = {json.dumps(sandbox_image)}

[plugins."io.containerd.nri.v1.nri"]
  disable = true
"""


def cni_config(node: RealNode) -> dict[str, Any]:
    """A bridge with the node's pod subnet; pods reach the rest through the
    node's address (ipMasq), as in a kind node."""
    return {
        "cniVersion": "1.0.0",
        "name": "trainium-dra",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": True,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(node.dir("ipam")),
                    "ranges": [[{"subnet": node.pod_cidr}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def kubelet_config(node: RealNode, ca_file: Path, feature_gates: dict[str, bool]) -> dict[str, Any]:
    """cgroupfs and `failCgroupV1: false`: these hosts are cgroup v1. Each node
    has its own cgroup root, since all kubelets share the host's hierarchy."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": node.ip,
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca_file)},
        },
        "authorization": {"mode": "Webhook"},
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": node.cgroup,
        "failCgroupV1": False,
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{node.containerd_socket}",
        "tlsCertFile": str(node.dir("pki") / "kubelet-serving.crt"),
        "tlsPrivateKeyFile": str(node.dir("pki") / "kubelet-serving.key"),
        "clusterDomain": "cluster.local",
        "resolvConf": str(node.resolv_conf),
        "featureGates": feature_gates,
        "imageGCHighThresholdPercent": 100,
        "evictionHard": {"memory.available": "100Mi"},
        "serializeImagePulls": False,
        "syncFrequency": "10s",
        "fileCheckFrequency": "10s",
        "nodeStatusReportFrequency": "1m",
        "registerNode": True,
        "localStorageCapacityIsolation": False,
        "maxPods": 110,
    }


def kube_proxy_config(node: RealNode, kubeconfig: Path) -> dict[str, Any]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": node.name,
        "clusterCIDR": str(POD_SUPERNET),
        "bindAddress": node.ip,
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        "conntrack": {"maxPerCore": 0},
    }


def client_kubeconfig(server: str, ca_file: Path, cert: Path, key: Path) -> dict[str, Any]:
    user = "node"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "local", "cluster": {"server": server, "certificate-authority": str(ca_file)}}
        ],
        "users": [
            {"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}
        ],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
        "current-context": "local",
    }
