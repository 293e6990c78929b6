"""The node daemon's slice reader against the real apiserver: scoped to its
rack it holds that rack's slices only, unscoped it sees every rack; changes
arrive by its watch, and a miss waits for the watch without stalling other
reads."""

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest
from kubernetes import client

from driver.kubeapi.apiserver import ApiServer
from driver.kubeapi.informer import WatchedObjects
from driver.names import rack_label
from driver.node.apireader import ApiReader
from localsim.controlplane.plane import ControlPlane
from testbed.waiting import wait_for

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


SLICES = ("resource.k8s.io", "v1", "resourceslices")


@contextmanager
def reader(
    api: client.ApiClient, wait_seconds: float = 5.0, ultraserver: str | None = None
) -> Iterator[ApiReader]:
    started = ApiReader(
        ApiServer(api.configuration, "trainium-dra-test", 30.0), DRIVER, wait_seconds, ultraserver
    )
    started.start()
    try:
        assert started.wait_synced(30)
        yield started
    finally:
        started.close()


def set_index(api: client.ApiClient, rack: str, value: int) -> None:
    objects = client.CustomObjectsApi(api)
    name = f"{rack}.server00.{DRIVER}"
    changed = objects.get_cluster_custom_object(*SLICES, name)
    changed["spec"]["devices"][0]["attributes"]["index"] = {"int": value}
    objects.replace_cluster_custom_object(*SLICES, name, changed)


def test_a_reader_scoped_to_its_rack_sees_no_other_rack(api: client.ApiClient) -> None:
    keys = {(rack, "chip0") for rack in RACKS}
    with reader(api, ultraserver="scope-a") as scoped:
        assert scoped.attributes(keys) == {("scope-a", "chip0"): {"index": 0}}


def test_an_unscoped_reader_sees_every_rack(api: client.ApiClient) -> None:
    keys = {(rack, "chip0") for rack in RACKS}
    with reader(api) as unscoped:
        assert set(unscoped.attributes(keys)) == keys


def test_a_change_arrives_by_the_watch(api: client.ApiClient) -> None:
    key = ("scope-a", "chip0")
    with reader(api, ultraserver="scope-a") as scoped:
        assert scoped.attributes({key}) == {key: {"index": 0}}
        set_index(api, "scope-a", 5)
        try:
            wait_for("the watch event", lambda: scoped.attributes({key}) == {key: {"index": 5}})
        finally:
            set_index(api, "scope-a", 0)
        wait_for("the change back", lambda: scoped.attributes({key}) == {key: {"index": 0}})


def test_a_miss_waits_for_the_watch_and_other_reads_go_on(api: client.ApiClient) -> None:
    held, late = ("scope-a", "chip0"), ("scope-c", "chip0")
    objects = client.CustomObjectsApi(api)
    with reader(api, wait_seconds=60) as unscoped, ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(unscoped.attributes, {late})
        time.sleep(0.5)
        assert not waiting.done()
        started = time.monotonic()
        assert unscoped.attributes({held}) == {held: {"index": 0}}
        assert time.monotonic() - started < 1.0
        objects.create_cluster_custom_object(*SLICES, rack_slice("scope-c", index=3))
        try:
            assert waiting.result(timeout=30) == {late: {"index": 3}}
        finally:
            objects.delete_cluster_custom_object(*SLICES, f"scope-c.server00.{DRIVER}")


def test_a_miss_gives_up_after_its_wait(api: client.ApiClient) -> None:
    with reader(api, wait_seconds=0.2) as unscoped:
        started = time.monotonic()
        assert unscoped.attributes({("scope-z", "chip0")}) == {}
        assert 0.2 <= time.monotonic() - started < 5.0


def test_a_resource_the_apiserver_does_not_serve_has_no_objects(api: client.ApiClient) -> None:
    server = ApiServer(api.configuration, "trainium-dra-test", 30.0)
    absent = WatchedObjects(server, "/apis/absent.example.com/v1/things", {}, str, len)
    absent.start()
    try:
        assert absent.wait_synced(30)
        assert absent.view() == 0
    finally:
        absent.close()
