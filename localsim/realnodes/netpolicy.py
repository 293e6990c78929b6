"""The NetworkPolicy agent of the real nodes: kube-network-policies, one host
process per node in the node's namespaces, beside its kubelet and kube-proxy.

It reads Pods, Namespaces and NetworkPolicies from the apiserver, takes the
first packet of each new connection of the node's pods from an NFQUEUE, and
answers accept or drop from the policies. An iptables rule in the node's
namespace feeds that queue (`queue_rules`: these hosts' kernel lacks the
nftables `queue` expression the agent's own table would use). The agent
reads with its own identity, whose ClusterRole grants only that; the policy
peers the chart gets in this mode are here too, beside what enforces them.
"""

import os
import subprocess
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from localsim.controlplane.binaries import BinariesMissingError, cache_root
from localsim.realnodes.plan import RealNode, gateway

AGENT_VERSION = "v1.1.1"
"""sigs.k8s.io/kube-network-policies; matches hack/kube-network-policies/go.mod."""

AGENT_USER = "system:kube-network-policies"
"""The agents' client-certificate name, the subject of their ClusterRole binding."""

AGENT_ROLE = "trainium-dra:kube-network-policies"

AGENT_METRICS_PORT = 9080
"""Its Prometheus endpoint, on the node namespace's loopback only."""

READ = ["get", "list", "watch"]

AGENT_QUEUE = 100
"""The NFQUEUE the agent reads (its --nfqueue-id default)."""

QUEUE_CHAIN = "TDRA-NETPOL"

MONITORING_NAMESPACE = "monitoring"
"""Pods in this namespace stand for a cluster's Prometheus: they may read /metrics."""


def agent_binary() -> Path:
    path = (
        cache_root() / "node" / f"kube-network-policies-{AGENT_VERSION}" / "kube-network-policies"
    )
    if not os.access(path, os.X_OK):
        raise BinariesMissingError(
            f"the NetworkPolicy agent is missing: {path}; build it with `make binaries` "
            "(hack/kube-network-policies/build.sh)"
        )
    return path


def agent_command(binary: Path, node: RealNode, kubeconfig: Path) -> list[str]:
    """NRI is off in the nodes' containerd, so pod addresses come from the apiserver."""
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--hostname-override={node.name}",
        "--disable-nri",
        f"--nfqueue-id={AGENT_QUEUE}",
        f"--metrics-bind-address=127.0.0.1:{AGENT_METRICS_PORT}",
    ]


def queue_rules(node: RealNode) -> list[list[str]]:
    """iptables commands (mangle table, before SNAT) that send the first packet
    of every connection from or to the node's pods to the agent's queue.

    The agent's own nftables table does this with nftables' `queue`
    expression, which kernels without CONFIG_NFT_QUEUE lack (these hosts);
    the xtables NFQUEUE target reaches the same queue. Like the agent's
    table, the node's own root processes (the kubelet's probes) pass. An
    established connection passes too: upstream marks the connections it
    accepted with a conntrack label from its verdict, which these kernels
    cannot set (CONFIG_NETFILTER_NETLINK_GLUE_CT unset), and without this a
    reply to a selected pod would be judged as new ingress. `--queue-bypass`
    lets packets through while no agent listens (its --fail-open)."""
    chain = ["iptables", "-w", "-t", "mangle"]
    rule = [*chain, "-A", QUEUE_CHAIN]
    queue = ["-j", "NFQUEUE", "--queue-num", str(AGENT_QUEUE), "--queue-bypass"]
    return [
        [*chain, "-N", QUEUE_CHAIN],
        [*rule, "-m", "owner", "--uid-owner", "0", "-j", "RETURN"],
        [*rule, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "RETURN"],
        [*rule, "-s", node.pod_cidr, *queue],
        [*rule, "-d", node.pod_cidr, *queue],
        [*chain, "-A", "POSTROUTING", "-j", QUEUE_CHAIN],
    ]


def install_queue_rules(node: RealNode) -> None:
    """Once per node (the namespace and its rules go with `down`)."""
    for argv in queue_rules(node):
        result = subprocess.run(
            ["ip", "netns", "exec", node.netns, *argv], capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"`{' '.join(argv)}` in {node.netns} failed: {result.stderr.strip()} (the "
                "kernel needs the xtables NFQUEUE target and the owner and conntrack matches)"
            )


def agent_rbac() -> tuple[dict[str, Any], dict[str, Any]]:
    """A ClusterRole with what the agent's informers read, and its binding."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": AGENT_ROLE},
        "rules": [
            {"apiGroups": [""], "resources": ["pods", "namespaces"], "verbs": READ},
            {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": READ},
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": AGENT_ROLE},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": AGENT_ROLE,
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": AGENT_USER}],
    }
    return role, binding


def grant_agent(api: client.ApiClient) -> None:
    """Create the agents' ClusterRole and binding (kept if they exist)."""
    rbac = client.RbacAuthorizationV1Api(api)
    role, binding = agent_rbac()
    for create, body in (
        (rbac.create_cluster_role, role),
        (rbac.create_cluster_role_binding, binding),
    ):
        try:
            create(body)
        except ApiException as err:
            if err.status != 409:
                raise


def policy_peers() -> dict[str, Any]:
    """The chart's networkPolicy values in this mode: /metrics from the
    monitoring namespace and from the host (the apiserver's pod proxy behind
    `trainium-dra top`, a Prometheus on the host); the simulator's controls
    from the host only (the tests and the fault walk-through run there).
    Every other pod is refused both."""
    host = {"ipBlock": {"cidr": f"{gateway()}/32"}}
    monitoring = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": MONITORING_NAMESPACE}}
    }
    return {"metricsFrom": [monitoring, host], "simControlFrom": [host]}
