"""Proves the harness is a real control plane: the real resourceclaim
controller turns a template into a claim, the real scheduler allocates it
against shared counters, binds the pod, and refuses an overcommit."""

from collections.abc import Iterator
from typing import Any, TypeVar

import pytest
from kubernetes import client as k8s

from localsim.controlplane.plane import ControlPlane
from testbed.waiting import wait_for

pytestmark = pytest.mark.integration

DRIVER = "smoke.example.com"
NODE = "smoke-node"
NAMESPACE = "smoke"
T = TypeVar("T")


def slices() -> list[dict[str, Any]]:
    """One pool in two slices: a counter-only slice and one whose devices consume it."""
    pool = {"name": "smoke-pool", "generation": 1, "resourceSliceCount": 2}
    one = {"value": "1"}
    counters = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "smoke-counters"},
        "spec": {
            "driver": DRIVER,
            "pool": pool,
            "allNodes": True,
            "sharedCounters": [{"name": "chip0", "counters": {"core0": one, "core1": one}}],
        },
    }

    def device(name: str, kind: str, cores: list[str]) -> dict[str, Any]:
        return {
            "name": name,
            "nodeName": NODE,
            "attributes": {"kind": {"string": kind}},
            "consumesCounters": [{"counterSet": "chip0", "counters": {c: one for c in cores}}],
        }

    devices = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "smoke-devices"},
        "spec": {
            "driver": DRIVER,
            "pool": pool,
            "perDeviceNodeSelection": True,
            "devices": [
                device("pair", "pair", ["core0", "core1"]),
                device("single0", "single", ["core0"]),
            ],
        },
    }
    return [counters, devices]


def claim_template(name: str, kind: str) -> dict[str, Any]:
    selector = {"cel": {"expression": f'device.attributes["{DRIVER}"].kind == "{kind}"'}}
    request = {"name": "acc", "exactly": {"deviceClassName": DRIVER, "selectors": [selector]}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def pod(name: str, template: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"claims": [{"name": "acc"}]},
                }
            ],
            "resourceClaims": [{"name": "acc", "resourceClaimTemplateName": template}],
        },
    }


@pytest.fixture
def api(control_plane: ControlPlane) -> Iterator[k8s.ApiClient]:
    with control_plane.api_client() as client:
        yield client


@pytest.fixture
def smoke_cluster(control_plane: ControlPlane, api: k8s.ApiClient) -> Iterator[None]:
    core, custom = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api)
    control_plane.create_node(NODE)
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    device_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": DRIVER},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }
    custom.create_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", device_class)
    for body in slices():
        custom.create_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", body)
    yield
    core.delete_namespace(NAMESPACE)
    for body in slices():
        custom.delete_cluster_custom_object(
            "resource.k8s.io", "v1", "resourceslices", body["metadata"]["name"]
        )
    custom.delete_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", DRIVER)
    control_plane.delete_node(NODE)


def test_scheduler_allocates_through_counters_and_refuses_overcommit(
    api: k8s.ApiClient, smoke_cluster: None
) -> None:
    core, custom = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api)
    for name, kind in (("pair", "pair"), ("single", "single")):
        custom.create_namespaced_custom_object(
            "resource.k8s.io", "v1", NAMESPACE, "resourceclaimtemplates", claim_template(name, kind)
        )

    core.create_namespaced_pod(NAMESPACE, pod("first", "pair"))
    bound = wait_for(
        "the first pod to be bound",
        lambda: core.read_namespaced_pod("first", NAMESPACE).spec.node_name,
    )
    assert bound == NODE

    claims = custom.list_namespaced_custom_object(
        "resource.k8s.io", "v1", NAMESPACE, "resourceclaims"
    )["items"]
    assert len(claims) == 1, "the resourceclaim controller makes one claim from the template"
    results = claims[0]["status"]["allocation"]["devices"]["results"]
    assert [(r["driver"], r["pool"], r["device"]) for r in results] == [
        (DRIVER, "smoke-pool", "pair")
    ]

    core.create_namespaced_pod(NAMESPACE, pod("second", "single"))

    def unschedulable_message() -> str | None:
        status = core.read_namespaced_pod("second", NAMESPACE).status
        for condition in status.conditions or []:
            if condition.type == "PodScheduled" and condition.reason == "Unschedulable":
                message: str = condition.message
                return message
        return None

    message = wait_for("the scheduler to refuse the second pod", unschedulable_message)
    assert "cannot allocate all claims" in message
    assert core.read_namespaced_pod("second", NAMESPACE).spec.node_name is None


def test_a_storage_only_plane_serves_the_api_without_scheduler_or_manager(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The publishing benchmark's plane: etcd and kube-apiserver answer, nothing else runs."""
    workdir = tmp_path_factory.mktemp("storage-only")
    with ControlPlane.running(workdir, storage_only=True) as cp, cp.api_client() as api:
        assert [c.name for c in cp.components] == ["etcd", "kube-apiserver"]
        k8s.CoreV1Api(api).create_namespace({"metadata": {"name": "storage-only"}})
        names = [n.metadata.name for n in k8s.CoreV1Api(api).list_namespace().items]
        assert "storage-only" in names
