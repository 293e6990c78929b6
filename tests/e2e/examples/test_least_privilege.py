"""The local cluster runs the controller and the node daemons as the chart's
ServiceAccounts: a node's credential may write its own NodeDeviceHealth and
is refused another node's by the chart's admission policy."""

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from driver.kubeapi.credentials import typed_client
from localsim.clusterspec import ClusterSpec
from localsim.controlplane.chart import NAMESPACE
from localsim.controlplane.plane import fake_node_status
from localsim.standin.serve import published
from testbed.localcluster import Cluster, wait_for

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


def test_a_node_created_anew_gets_a_token_bound_to_it(cluster: Cluster) -> None:
    """Deleting a Node invalidates the token bound to it; the local cluster mints
    one for the new Node and the rack's daemon reports its health with it."""
    node = "rack-a-node-5"
    core = client.CoreV1Api(cluster.api)
    old = core.read_node(node)
    kubeconfig = Path(cluster.paths.node_kubeconfig_template.replace("{node}", node))
    core.delete_node(node)
    wait_for("the Node gone", lambda: node not in {n.metadata.name for n in core.list_node().items})
    core.create_node({"metadata": {"name": node, "labels": old.metadata.labels}})
    core.patch_node_status(node, {"status": fake_node_status()})
    new_uid = core.read_node(node).metadata.uid

    def renewed() -> bool:
        with as_user(kubeconfig) as api:
            try:
                uids: list[str] = who(api).extra["authentication.kubernetes.io/node-uid"]
            except client.ApiException as err:
                assert err.status == 401, err  # the old token, bound to the deleted Node
                return False
            return uids == [new_uid]

    wait_for("a token bound to the new Node", renewed)
    fault = {"node": node, "kind": "ecc-uncorrected-hbm", "chip": 2}
    with cluster.sim_control() as sim:
        sim.post("/sim/v1/faults", json=fault).raise_for_status()
        try:
            wait_for("the daemon's report with the new token", lambda: failed_chips(cluster, node))
        finally:
            sim.request("DELETE", "/sim/v1/faults", json=fault).raise_for_status()
    wait_for("the report healthy again", lambda: not failed_chips(cluster, node))
    wait_for("the rack mapped and published again", lambda: rack_published(cluster))


def failed_chips(cluster: Cluster, node: str) -> list[int]:
    try:
        report = client.CustomObjectsApi(cluster.api).get_cluster_custom_object(
            GROUP, VERSION, PLURAL, node
        )
    except client.ApiException:
        return []
    return [d["chip"] for d in report["spec"].get("devices") or [] if d["state"] == "failed"]


def rack_published(cluster: Cluster) -> bool:
    spec = json.loads(cluster.paths.cluster_file.read_text())["spec"]
    rack = ClusterSpec.from_json(spec).racks[0]
    with typed_client(cluster.paths.kubeconfig) as api:
        return published(api, rack)
