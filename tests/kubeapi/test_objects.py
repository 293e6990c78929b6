"""Whole-object reads and writes against the real apiserver: what is missing
reads as None and deletes as done, a stale write is a 409 the caller can act
on, and core resources are found under /api."""

from collections.abc import Iterator

import pytest

from driver.kubeapi.apiserver import ApiError, ApiServer
from driver.kubeapi.objects import Objects
from driver.kubeapi.resources import LEASES, NODES, Resource, path_of
from localsim.controlplane.plane import ControlPlane

pytestmark = pytest.mark.integration

NAMESPACE = "default"
NAMESPACES = Resource("", "v1", "namespaces")


@pytest.fixture
def objects(control_plane: ControlPlane) -> Iterator[Objects]:
    with control_plane.api_client() as api:
        yield Objects(ApiServer(api.configuration, "trainium-dra-test", 30.0))


def lease(name: str, holder: str) -> dict[str, object]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"holderIdentity": holder},
    }


def test_missing_objects_read_as_none_and_delete_as_done(objects: Objects) -> None:
    assert objects.get(LEASES, "kubeapi-never-created", NAMESPACE) is None
    assert objects.get(NODES, "kubeapi-never-created") is None
    objects.delete(NODES, "kubeapi-never-created")


def test_a_stale_replace_is_a_conflict(objects: Objects) -> None:
    name = "kubeapi-stale-replace"
    created = objects.create(LEASES, lease(name, "first"), NAMESPACE)
    try:
        renewed = objects.replace(
            LEASES, name, {**created, "spec": {"holderIdentity": "second"}}, NAMESPACE
        )
        assert renewed["spec"]["holderIdentity"] == "second"
        with pytest.raises(ApiError) as conflict:
            objects.replace(LEASES, name, created, NAMESPACE)
        assert conflict.value.status == 409
        assert conflict.value.reason == "Conflict"
    finally:
        objects.server.call("DELETE", path_of(LEASES, name, NAMESPACE))


def test_a_core_resource_lists_from_api(objects: Objects) -> None:
    names = {o["metadata"]["name"] for o in objects.list_all(NAMESPACES)}
    assert {"default", "kube-system"} <= names
