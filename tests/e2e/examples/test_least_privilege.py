"""The local cluster runs the controller and the node daemons as the chart's
ServiceAccounts: a node's credential may write its own NodeDeviceHealth and
is refused another node's by the chart's admission policy."""

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from driver.localsim.chart import NAMESPACE
from tests.e2e.cluster import Cluster

pytestmark = pytest.mark.integration

GROUP, VERSION, PLURAL = "trainium.sim.dev", "v1alpha1", "nodedevicehealths"
OWN, OTHER = "rack-a-node-3", "rack-a-node-4"


def as_user(kubeconfig: Path) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(kubeconfig))


def health(node: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "NodeDeviceHealth",
        "metadata": {"name": node},
        "spec": {"nodeName": node, "reportedAt": "2026-01-01T00:00:00Z", "devices": []},
    }


def who(api: client.ApiClient) -> client.V1UserInfo:
    review = client.AuthenticationV1Api(api).create_self_subject_review(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    )
    user: client.V1UserInfo = review.status.user_info
    return user


def command_line(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


def test_the_driver_runs_as_the_chart_s_service_accounts(cluster: Cluster) -> None:
    pids = json.loads(cluster.paths.cluster_file.read_text())["pids"]
    assert f"--kubeconfig={cluster.paths.controller_kubeconfig}" in command_line(pids["controller"])
    node_config = f"--kubeconfig={cluster.paths.node_kubeconfig_template}"
    assert node_config in command_line(pids["node-rack-a"])
    with as_user(cluster.paths.controller_kubeconfig) as api:
        assert who(api).username == f"system:serviceaccount:{NAMESPACE}:trainium-dra-controller"
        with pytest.raises(client.ApiException) as refused:  # not a verb of its Role
            client.CoreV1Api(api).list_namespaced_secret(NAMESPACE)
        assert refused.value.status == 403


def write_dry(custom: client.CustomObjectsApi, node: str) -> None:
    """Write `node`'s NodeDeviceHealth as its daemon does (create, else replace), as a
    dry run: admission runs in full and the daemon's real report is left alone."""
    body = health(node)
    try:
        current = custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, node)
    except client.ApiException as err:
        if err.status != 404:
            raise
        custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, body, dry_run="All")
        return
    body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    custom.replace_cluster_custom_object(GROUP, VERSION, PLURAL, node, body, dry_run="All")


def test_a_node_writes_only_its_own_health(cluster: Cluster) -> None:
    kubeconfig = Path(cluster.paths.node_kubeconfig_template.replace("{node}", OWN))
    with as_user(kubeconfig) as api:
        user = who(api)
        assert user.username == f"system:serviceaccount:{NAMESPACE}:trainium-dra-node"
        assert user.extra["authentication.kubernetes.io/node-name"] == [OWN]
        custom = client.CustomObjectsApi(api)
        write_dry(custom, OWN)
        for other in (OTHER, "rack-a-node-99"):  # another node's, existing or new
            with pytest.raises(client.ApiException) as refused:
                write_dry(custom, other)
            assert refused.value.status == 403
            message = f"node {OWN} may write only NodeDeviceHealth {OWN}, not {other}"
            assert message in str(refused.value.body)
