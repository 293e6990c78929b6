"""The NetworkPolicy agent of the real nodes: kube-network-policies, one host
process per node in the node's namespaces, beside its kubelet and kube-proxy.

It reads Pods, Namespaces and NetworkPolicies from the apiserver, puts an
nftables table in the node's network namespace that sends the first packet
of each connection to or from a selected pod to an NFQUEUE, and answers
accept or drop from the policies. It reads with its own identity, whose
ClusterRole grants only that; the policy peers the chart gets in this mode
are here too, beside the agent that enforces them.
"""

import os
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from driver.localsim.binaries import BinariesMissingError, cache_root
from driver.localsim.realnodes.plan import RealNode, gateway

AGENT_VERSION = "v1.1.1"
"""sigs.k8s.io/kube-network-policies; matches hack/kube-network-policies/go.mod."""

AGENT_USER = "system:kube-network-policies"
"""The agents' client-certificate name, the subject of their ClusterRole binding."""

AGENT_ROLE = "trainium-dra:kube-network-policies"

AGENT_METRICS_PORT = 9080
"""Its Prometheus endpoint, on the node namespace's loopback only."""

READ = ["get", "list", "watch"]

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
        f"--metrics-bind-address=127.0.0.1:{AGENT_METRICS_PORT}",
    ]


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
