"""How the real-node benchmark deploys the Go reference plugin: as a DaemonSet
like ours, with the kubelet's default registration paths, the node's CDI
directory, our daemon's resources, and pods that claim its devices."""

from pathlib import Path

import pytest
import yaml

from benchmarks.realnodes_goref import (
    BINARY_MOUNT,
    GO_ACCOUNT,
    GO_DRIVER,
    GO_NAMESPACE,
    REAL_NODE_VALUES,
    access_objects,
    go_claim_template,
    go_pod,
    our_daemon_resources,
    plugin_daemonset,
)
from driver.jsontypes import JSON


def daemonset() -> JSON:
    resources = {"requests": {"cpu": "50m", "memory": "128Mi"}}
    return plugin_daemonset(Path("/cache/dra-example-driver-v0/plugin"), resources)


def test_the_plugin_uses_the_kubelets_default_paths_and_the_cdi_directory() -> None:
    spec = daemonset()["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    flags = dict(arg.split("=", 1) for arg in container["command"][1:])
    assert container["command"][0] == f"{BINARY_MOUNT}/plugin"
    assert flags["--cdi-root"] == "/var/run/cdi"
    assert flags["--node-name"] == "$(NODE_NAME)"
    assert not {"--kubelet-registrar-directory-path", "--kubelet-plugins-directory-path"} & set(
        flags
    )
    mounted = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]}
    assert (
        mounted["plugins-registry"]
        == host["plugins-registry"]
        == ("/var/lib/kubelet/plugins_registry")
    )
    assert mounted["plugins"] == host["plugins"] == "/var/lib/kubelet/plugins"
    assert mounted["cdi"] == host["cdi"] == "/var/run/cdi"
    assert host["binary"] == "/cache/dra-example-driver-v0"
    assert mounted["binary"] == BINARY_MOUNT
    assert spec["serviceAccountName"] == GO_ACCOUNT
    (port,) = container["ports"]
    assert port["name"] == "metrics"
    assert flags["--metrics-port"] == str(port["containerPort"])


def test_the_plugin_gets_our_daemons_resources_from_the_real_node_values() -> None:
    values = yaml.safe_load(REAL_NODE_VALUES.read_text())
    resources = our_daemon_resources(values)
    ds = plugin_daemonset(Path("/b/plugin"), resources)
    assert (
        ds["spec"]["template"]["spec"]["containers"][0]["resources"] == values["node"]["resources"]
    )
    with pytest.raises(ValueError, match=r"node\.resources"):
        our_daemon_resources({"node": {}})


def test_pods_claim_a_device_of_the_plugins_class_and_the_account_may_publish() -> None:
    template = go_claim_template("ns", "gpu")
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    pod = go_pod("ns", "p0", "gpu")
    (container,) = pod["spec"]["containers"]
    assert request["exactly"]["deviceClassName"] == GO_DRIVER
    assert pod["spec"]["resourceClaims"] == [
        {"name": request["name"], "resourceClaimTemplateName": "gpu"}
    ]
    assert container["resources"]["claims"] == [{"name": request["name"]}]
    kinds = {o["kind"]: o for o in access_objects()}
    (slices,) = [r for r in kinds["ClusterRole"]["rules"] if "resourceslices" in r["resources"]]
    assert {"create", "update", "delete"} <= set(slices["verbs"])
    assert kinds["DeviceClass"]["metadata"]["name"] == GO_DRIVER
    binding = kinds["ClusterRoleBinding"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": GO_ACCOUNT, "namespace": GO_NAMESPACE}
    ]
    assert binding["roleRef"]["name"] == kinds["ClusterRole"]["metadata"]["name"]
