"""The local cluster's credentials for the driver: built from the chart's
ServiceAccounts and the admin kubeconfig's cluster, never its user."""

import pytest

from localsim.controlplane.chart import select
from localsim.serviceaccounts import service_account, token_kubeconfig

ADMIN = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "local", "cluster": {"server": "https://127.0.0.1:6443"}}],
    "users": [{"name": "admin", "user": {"token": "admin-secret"}}],
    "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin"}}],
    "current-context": "local",
}


def test_a_component_kubeconfig_has_the_cluster_and_only_its_token() -> None:
    doc = token_kubeconfig(ADMIN, "trainium-dra-node", "node-token")
    assert doc["clusters"] == ADMIN["clusters"]
    assert doc["users"] == [{"name": "trainium-dra-node", "user": {"token": "node-token"}}]
    assert "admin-secret" not in str(doc)
    [context] = doc["contexts"]
    assert doc["current-context"] == context["name"]
    assert context["context"] == {"cluster": "local", "user": "trainium-dra-node"}


def account(name: str, component: str) -> dict[str, object]:
    labels = {"app.kubernetes.io/component": component}
    return {"kind": "ServiceAccount", "metadata": {"name": name, "labels": labels}}


def test_service_accounts_are_found_by_component() -> None:
    rendered = select([account("r-node", "node"), account("r-controller", "controller")])
    assert service_account(rendered, "node") == "r-node"
    assert service_account(rendered, "controller") == "r-controller"
    with pytest.raises(LookupError, match="no ServiceAccount of component 'node'"):
        service_account(select([account("r-controller", "controller")]), "node")
