"""The AWS-profile controller process against the real apiserver and the
UltraServer operator's NeuronUltraServer CRD from the chart: the devices of a
node the operator allocated carry its `workloadId`, and only those; clearing
the allocation removes it; without the CRD the controller publishes as
before and says so once, and the operator installed or removed while the
controller runs is followed."""

import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from localsim.controlplane import chart
from localsim.controlplane.binaries import Binaries
from localsim.controlplane.plane import ControlPlane
from testbed.controlplane import controller, custom, install, ultraserver
from testbed.waiting import wait_for

pytestmark = pytest.mark.integration

DRIVER = "wltags.sim.dev"
RACK = "wltags-rack"
NODES = [f"wltags-n{i}" for i in range(4)]  # a trn2u.48xlarge UltraServer: 4 nodes
SLICES = 2 * len(NODES)  # per node: its counters, its devices
NAMESPACE = "wltags-operator"
LEASE = "wltags"
CRD = "neuronultraservers.neuron.aws.com"
GROUP, VERSION, PLURAL = "neuron.aws.com", "v1", "neuronultraservers"
NOT_SERVED = f"{CRD} is not served (AWS's UltraServer operator is not installed)"


def rendered(profile: str, **values: str) -> list[dict[str, Any]]:
    text = chart.render(
        chart.helm_binary(Binaries.locate()), DRIVER, profile=profile, values=values
    )
    return [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]


def operator_crd() -> dict[str, Any]:
    """The NeuronUltraServer CRD as the chart renders it for the operator."""
    docs = rendered("aws", **{"ultraserverOperator.enabled": "true"})
    (crd,) = [
        d
        for d in docs
        if d.get("kind") == "CustomResourceDefinition" and d["metadata"]["name"] == CRD
    ]
    return crd


def crd_served(cp: ControlPlane) -> bool:
    found = cp.kubectl("get", "crd", "--ignore-not-found", "-o", "name").stdout.split()
    return f"customresourcedefinition.apiextensions.k8s.io/{CRD}" in found


def remove_crd(cp: ControlPlane) -> None:
    cp.kubectl("delete", "crd", CRD, "--ignore-not-found", "--wait=true")
    wait_for(f"{CRD} to go", lambda: not crd_served(cp), 60)


def create_crd(cp: ControlPlane) -> None:
    cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(operator_crd()))
    cp.kubectl("wait", "--for=condition=Established", f"crd/{CRD}")


def slices(api: client.ApiClient) -> list[dict[str, Any]]:
    found = custom(api).list_cluster_custom_object(
        "resource.k8s.io", "v1", "resourceslices", label_selector=f"{DRIVER}/ultraserver={RACK}"
    )
    items: list[dict[str, Any]] = found["items"]
    return items


def tags(api: client.ApiClient) -> dict[str, set[str | None]] | None:
    """node -> the workloadIds its devices carry (None: a device without one),
    once all the rack's slices are there."""
    found = slices(api)
    if len(found) != SLICES:
        return None
    out: dict[str, set[str | None]] = {}
    for s in found:
        for d in s["spec"].get("devices") or []:
            value = (d["attributes"].get("workloadId") or {}).get("string")
            out.setdefault(s["spec"]["nodeName"], set()).add(value)
    return out


def untagged() -> dict[str, set[str | None]]:
    return {node: {None} for node in NODES}


def tagged(node: str, workload_id: str) -> dict[str, set[str | None]]:
    return {**untagged(), node: {workload_id}}


def versions(api: client.ApiClient) -> dict[str, str]:
    return {s["metadata"]["name"]: s["metadata"]["resourceVersion"] for s in slices(api)}


def set_allocations(api: client.ApiClient, name: str, allocations: list[dict[str, Any]]) -> None:
    """Write the NeuronUltraServer's status as the operator does (creating it first)."""
    objects = custom(api)
    try:
        obj = objects.get_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, name)
    except client.exceptions.ApiException as err:
        if err.status != 404:
            raise
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NeuronUltraServer",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"instanceType": "trn2u.48xlarge", "nodes": NODES},
        }
        obj = objects.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, body)
    obj["status"] = {"allocations": allocations, "nodeCount": len(NODES)}
    objects.replace_namespaced_custom_object_status(GROUP, VERSION, NAMESPACE, PLURAL, name, obj)


def allocation(workload: str, workload_id: str, *nodes: str) -> dict[str, Any]:
    return {"workload": f"{NAMESPACE}/{workload}", "workloadId": workload_id, "nodes": list(nodes)}


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> Iterator[client.ApiClient]:
    cp = control_plane
    install(cp)
    remove_crd(cp)  # a kept-alive control plane may still have it
    for node in NODES:
        cp.create_node(node)
    with cp.api_client() as api:
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": NAMESPACE}})
        custom(api).create_cluster_custom_object(
            "trainium.sim.dev", "v1alpha1", "ultraservers", ultraserver(RACK, "trn2", NODES)
        )
        try:
            yield api
        finally:
            with suppress(client.exceptions.ApiException):
                custom(api).delete_cluster_custom_object(
                    "trainium.sim.dev", "v1alpha1", "ultraservers", RACK
                )
            for s in slices(api):
                with suppress(client.exceptions.ApiException):
                    custom(api).delete_cluster_custom_object(
                        "resource.k8s.io", "v1", "resourceslices", s["metadata"]["name"]
                    )
            with suppress(client.exceptions.ApiException):
                core.delete_namespace(NAMESPACE)
            remove_crd(cp)
            for node in NODES:
                with suppress(client.exceptions.ApiException):
                    cp.delete_node(node)
            with suppress(client.exceptions.ApiException):
                custom(api).delete_namespaced_custom_object(
                    "coordination.k8s.io", "v1", "default", "leases", LEASE
                )


def aws_controller(cp: ControlPlane, log: Path, *args: str) -> Any:
    return controller(
        cp, log, "--profile", "aws", "--driver-name", DRIVER, "--lease-name", LEASE, *args
    )


def test_the_chart_lets_only_the_aws_controller_list_neuronultraservers() -> None:
    def rules(profile: str) -> list[dict[str, Any]]:
        (role,) = [
            d
            for d in rendered(profile)
            if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith("-controller")
        ]
        return [r for r in role["rules"] if PLURAL in r.get("resources", [])]

    assert rules("aws") == [
        {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["list", "watch"]}
    ]
    assert rules("trainium") == []


def test_without_the_crd_the_controller_publishes_untagged_then_follows_it_once_served(
    control_plane: ControlPlane, cluster: client.ApiClient, tmp_path: Path
) -> None:
    api, log = cluster, tmp_path / "controller.log"
    assert not crd_served(control_plane)
    with aws_controller(control_plane, log):
        wait_for("untagged slices", lambda: tags(api) == untagged(), 60)
        time.sleep(12)  # the watch looks again (every 10s), and so does the first resync
        text = log.read_text()
        assert text.count(NOT_SERVED) == 1, text
        assert "Unresolved resources" not in text  # kopf does not watch it
        # The operator arrives while the controller runs: its allocations are listed.
        create_crd(control_plane)
        set_allocations(api, "us-late", [allocation("early", "wl-early", NODES[2])])
        wait_for("the tag, once served", lambda: tags(api) == tagged(NODES[2], "wl-early"), 60)
        assert f"{CRD} is served now" in log.read_text()
        set_allocations(api, "us-late", [])
        wait_for("the tag to go", lambda: tags(api) == untagged(), 60)
    custom(api).delete_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, "us-late")


def test_tags_follow_the_allocations_on_that_nodes_devices_only(
    control_plane: ControlPlane, cluster: client.ApiClient, tmp_path: Path
) -> None:
    """The NeuronUltraServers are watched: with the resync 5 minutes away, each
    change below shows within seconds."""
    api, log = cluster, tmp_path / "controller.log"
    if not crd_served(control_plane):
        create_crd(control_plane)
    set_allocations(api, "us-a", [])
    with aws_controller(control_plane, log, "--resync-seconds", "300"):
        wait_for("untagged slices", lambda: tags(api) == untagged(), 60)
        before = versions(api)
        set_allocations(api, "us-a", [allocation("train", "wl-1", NODES[1])])
        wait_for("node 1 tagged", lambda: tags(api) == tagged(NODES[1], "wl-1"), 8)
        after = versions(api)
        moved = {name for name in before if before[name] != after.get(name)}
        assert moved == {f"{RACK}.server01.{DRIVER}"}, "only node 1's device slice is rewritten"
        # A status change that moves no allocation, and a workloadId no slice can
        # carry (the log says why), write nothing.
        obj = custom(api).get_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, "us-a")
        obj["status"]["health"] = "Healthy"
        custom(api).replace_namespaced_custom_object_status(
            GROUP, VERSION, NAMESPACE, PLURAL, "us-a", obj
        )
        set_allocations(api, "us-b", [allocation("long", "w" * 65, NODES[3])])
        wait_for("the reason", lambda: "is longer than the 64 characters" in log.read_text(), 8)
        time.sleep(2)
        assert tags(api) == tagged(NODES[1], "wl-1")
        assert versions(api) == after
        set_allocations(api, "us-a", [allocation("train", "wl-1", NODES[0])])
        wait_for("the tag to move", lambda: tags(api) == tagged(NODES[0], "wl-1"), 8)
        set_allocations(api, "us-a", [])
        wait_for("the tag to go", lambda: tags(api) == untagged(), 8)
        set_allocations(api, "us-a", [allocation("train", "wl-1", NODES[2])])
        wait_for("node 2 tagged", lambda: tags(api) == tagged(NODES[2], "wl-1"), 8)
        text = log.read_text()
        assert NOT_SERVED not in text
        assert text.count("is longer than the 64 characters") == 1
        # The operator uninstalled: its objects go with its CRD, and the tags with them.
        remove_crd(control_plane)
        wait_for("the tag to go with the CRD", lambda: tags(api) == untagged(), 8)


def test_the_operator_uninstalled_and_installed_again_while_the_controller_runs(
    control_plane: ControlPlane, cluster: client.ApiClient, tmp_path: Path
) -> None:
    """kopf would stop the whole controller when a resource it watches loses its
    CRD; the NeuronUltraServers' own watch takes it as "not installed"."""
    cp, api, log = control_plane, cluster, tmp_path / "controller.log"
    if not crd_served(cp):
        create_crd(cp)
    set_allocations(api, "us-a", [allocation("train", "wl-1", NODES[1])])
    with aws_controller(cp, log, "--resync-seconds", "300") as proc:
        wait_for("node 1 tagged", lambda: tags(api) == tagged(NODES[1], "wl-1"), 60)
        removed = time.monotonic()
        remove_crd(cp)
        wait_for("the tag to go", lambda: tags(api) == untagged(), 30)
        wait_for("the controller to notice", lambda: NOT_SERVED in log.read_text(), 30)
        create_crd(cp)
        set_allocations(api, "us-c", [allocation("again", "wl-2", NODES[3])])
        wait_for("node 3 tagged", lambda: tags(api) == tagged(NODES[3], "wl-2"), 30)
        assert f"{CRD} is served now" in log.read_text()
        time.sleep(max(0.0, removed + 12 - time.monotonic()))
        assert proc.poll() is None, log.read_text()[-3000:]
        # kopf still feeds the other stores: a node that leaves takes its pool along.
        cp.delete_node(NODES[0])
        wait_for("node 0's slices to go", lambda: len(slices(api)) == SLICES - 2, 15)
        cp.create_node(NODES[0])
        wait_for("node 0's slices back", lambda: tags(api) == tagged(NODES[3], "wl-2"), 15)
    custom(api).delete_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, "us-c")
