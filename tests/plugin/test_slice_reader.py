"""The node daemon's slice reader against the real apiserver: scoped to its
rack it lists that rack's slices only, unscoped it sees every rack; a miss
lists at once, a stale hit answers from the cache and refreshes behind."""

from collections.abc import Iterator

import pytest
from kubernetes import client

from driver.localsim.controlplane import ControlPlane
from driver.names import rack_label
from driver.plugin.cluster import ApiReader
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

DRIVER = "scope.trainium.sim.dev"
RACKS = ("scope-a", "scope-b")


def rack_slice(rack: str, index: int = 0) -> dict[str, object]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{rack}.server00.{DRIVER}", "labels": {rack_label(DRIVER): rack}},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": rack, "generation": 1, "resourceSliceCount": 1},
            "allNodes": True,
            "devices": [{"name": "chip0", "attributes": {"index": {"int": index}}}],
        },
    }


@pytest.fixture(scope="module")
def api(control_plane: ControlPlane) -> Iterator[client.ApiClient]:
    with control_plane.api_client() as api:
        objects = client.CustomObjectsApi(api)
        for rack in RACKS:
            objects.create_cluster_custom_object(
                "resource.k8s.io", "v1", "resourceslices", rack_slice(rack)
            )
        try:
            yield api
        finally:
            for rack in RACKS:
                objects.delete_cluster_custom_object(
                    "resource.k8s.io", "v1", "resourceslices", f"{rack}.server00.{DRIVER}"
                )


def test_a_reader_scoped_to_its_rack_sees_no_other_rack(api: client.ApiClient) -> None:
    keys = {(rack, "chip0") for rack in RACKS}
    scoped = ApiReader(api, DRIVER, ultraserver="scope-a").attributes(keys)
    assert scoped == {("scope-a", "chip0"): {"index": 0}}


def test_an_unscoped_reader_sees_every_rack(api: client.ApiClient) -> None:
    keys = {(rack, "chip0") for rack in RACKS}
    assert set(ApiReader(api, DRIVER).attributes(keys)) == keys


def test_a_stale_hit_answers_at_once_and_the_refresh_follows(api: client.ApiClient) -> None:
    reader = ApiReader(api, DRIVER, cache_seconds=0, ultraserver="scope-a")
    key = ("scope-a", "chip0")
    assert reader.attributes({key}) == {key: {"index": 0}}
    objects = client.CustomObjectsApi(api)
    name = f"scope-a.server00.{DRIVER}"
    changed = objects.get_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", name)
    changed["spec"]["devices"][0]["attributes"]["index"] = {"int": 5}
    objects.replace_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", name, changed)
    try:
        assert reader.attributes({key}) == {key: {"index": 0}}
        wait_for("the refresh behind", lambda: reader.attributes({key}) == {key: {"index": 5}})
    finally:
        restored = objects.get_cluster_custom_object(
            "resource.k8s.io", "v1", "resourceslices", name
        )
        restored["spec"]["devices"][0]["attributes"]["index"] = {"int": 0}
        objects.replace_cluster_custom_object(
            "resource.k8s.io", "v1", "resourceslices", name, restored
        )


def test_a_miss_lists_at_once(api: client.ApiClient) -> None:
    reader = ApiReader(api, DRIVER, cache_seconds=3600)
    assert reader.attributes({("scope-c", "chip0")}) == {}
    objects = client.CustomObjectsApi(api)
    objects.create_cluster_custom_object(
        "resource.k8s.io", "v1", "resourceslices", rack_slice("scope-c", index=3)
    )
    try:
        assert reader.attributes({("scope-c", "chip0")}) == {("scope-c", "chip0"): {"index": 3}}
    finally:
        objects.delete_cluster_custom_object(
            "resource.k8s.io", "v1", "resourceslices", f"scope-c.server00.{DRIVER}"
        )
