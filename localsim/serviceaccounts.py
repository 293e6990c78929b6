"""The driver's components in the local cluster run as the chart's
ServiceAccounts, not as the admin, so `make demo` exercises the chart's RBAC
and admission policy as a real install does.

Tokens come from the apiserver's TokenRequest API. The controller's token is
plain; each node's is bound to its Node object, so the apiserver names the
node in the request (user extra authentication.kubernetes.io/node-name), as it
does for the pod-bound token of a node's daemon pod, and the chart's policy
keeps that node to its own NodeDeviceHealth. The kubelet stand-ins and the
rest of the harness stay admin: they stand in for Kubernetes itself.
"""

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from localsim.controlplane.chart import NAMESPACE, Rendered

COMPONENT_LABEL = "app.kubernetes.io/component"
TOKEN_SECONDS = 365 * 24 * 3600
"""A year: a local cluster never outlives it, and nothing here refreshes tokens."""


def service_account(rendered: Rendered, component: str) -> str:
    """Name of the chart's ServiceAccount of `component` (controller or node)."""
    for obj in rendered.applied:
        labels = obj["metadata"].get("labels") or {}
        if obj["kind"] == "ServiceAccount" and labels.get(COMPONENT_LABEL) == component:
            name: str = obj["metadata"]["name"]
            return name
    raise LookupError(f"the chart renders no ServiceAccount of component {component!r}")


def token_kubeconfig(admin: dict[str, Any], user: str, token: str) -> dict[str, Any]:
    """The admin kubeconfig's cluster with `token` as its only user (pure)."""
    cluster = admin["clusters"][0]
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": {"cluster": cluster["name"], "user": user}}],
        "current-context": user,
    }


def node_uid(api: client.ApiClient, node: str) -> str:
    uid: str = client.CoreV1Api(api).read_node(node).metadata.uid
    return uid


def request_token(api: client.ApiClient, account: str, node: tuple[str, str] | None = None) -> str:
    """A token of ServiceAccount `account`, bound to the Node (name, uid) when given."""
    spec: dict[str, Any] = {"expirationSeconds": TOKEN_SECONDS}
    if node is not None:
        name, uid = node
        spec["boundObjectRef"] = {"kind": "Node", "apiVersion": "v1", "name": name, "uid": uid}
    answer = client.CoreV1Api(api).create_namespaced_service_account_token(
        account, NAMESPACE, {"spec": spec}
    )
    token: str = answer.status.token
    return token


def write_kubeconfig(admin_kubeconfig: Path, path: Path, user: str, token: str) -> Path:
    admin = yaml.safe_load(admin_kubeconfig.read_text())
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    staged = path.with_name(f".{path.name}.new")
    staged.write_text(yaml.safe_dump(token_kubeconfig(admin, user, token)))
    staged.chmod(0o600)
    staged.replace(path)  # a daemon re-reading it never sees half a file
    return path


def write_account_kubeconfig(
    api: client.ApiClient, admin_kubeconfig: Path, rendered: Rendered, component: str, path: Path
) -> Path:
    """A kubeconfig at `path` with a token of the chart's ServiceAccount of `component`."""
    account = service_account(rendered, component)
    return write_kubeconfig(admin_kubeconfig, path, account, request_token(api, account))


def write_node_kubeconfigs(
    api: client.ApiClient,
    admin_kubeconfig: Path,
    rendered: Rendered,
    template: str,
    nodes: Iterable[str],
) -> dict[str, str]:
    """One kubeconfig per node at `template` with {node} expanded, each with a
    token bound to that Node; returns the UID of the Node each token names."""
    account = service_account(rendered, "node")
    bound = {}
    for node in nodes:
        uid = node_uid(api, node)
        path = Path(template.replace("{node}", node))
        token = request_token(api, account, (node, uid))
        write_kubeconfig(admin_kubeconfig, path, account, token)
        bound[node] = uid
    return bound


def recreated(api: client.ApiClient, bound: Mapping[str, str]) -> dict[str, str]:
    """The nodes whose Node object was created anew since their token was bound
    (its UID differs), with the new UID; a missing Node is not (yet) one."""
    current = {n.metadata.name: n.metadata.uid for n in client.CoreV1Api(api).list_node().items}
    return {node: current[node] for node, uid in bound.items() if current.get(node, uid) != uid}
