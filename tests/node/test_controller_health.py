"""End to end through the real controller: a fault injected into a node's
simulated server becomes a NoExecute taint on exactly the published devices of
that chip, and recovery removes it.

Path: ServerSim -> node daemon health loop -> NodeDeviceHealth -> controller
(`trainium-dra controller`, a real process) -> ResourceSlice device taints.
"""

import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from driver.names import DEVICE_KINDS, device_class_name
from localsim.controlplane.plane import ControlPlane
from testbed import controlplane
from testbed.daemon import Daemon, short_tmpdir
from testbed.rack import RACK, Site, published_rack
from testbed.waiting import wait_for

pytestmark = pytest.mark.integration

SITE = Site("e2ehealth.sim.dev", "e2ehealth-rack", "e2ehealth", ("e2ehealth-n0", "e2ehealth-n1"))
LEASE = f"{SITE.driver}-controller"
CHIP = 1


def names() -> list[str]:
    return [*SITE.nodes, *(f"e2ehealth-absent-{i}" for i in range(len(SITE.nodes), RACK.servers))]


def tainted(api: k8s.ApiClient) -> dict[str, list[dict[str, Any]]]:
    """Device name -> taints, over the rack's published slices."""
    return {
        device["name"]: device["taints"]
        for item in controlplane.rack_slices(api, SITE.rack_id, SITE.driver)
        for device in item["spec"].get("devices") or []
        if device.get("taints")
    }


def on_chip(api: k8s.ApiClient, server: int, chip: int) -> set[str]:
    """Devices of the rack that use the chip (chip-local devices only)."""
    out = set()
    for item in controlplane.rack_slices(api, SITE.rack_id, SITE.driver):
        for device in item["spec"].get("devices") or []:
            attrs = device.get("attributes") or {}
            if attrs.get("serverIndex", {}).get("int") != server:
                continue
            if attrs.get("chipIndex", {}).get("int") in (chip, None):
                out.add(device["name"])
    return out


@pytest.fixture
def controller_rack(control_plane: ControlPlane, tmp_path: Path) -> Iterator[k8s.ApiClient]:
    controlplane.install(control_plane, SITE.driver)
    api = control_plane.api_client()
    objects = k8s.CustomObjectsApi(api)
    with published_rack(control_plane, SITE, [], device_class=False):
        objects.create_cluster_custom_object(
            "trainium.sim.dev",
            "v1alpha1",
            "ultraservers",
            controlplane.ultraserver(SITE.rack_id, "trn3-gen2", names()),
        )
        try:
            with controlplane.controller(
                control_plane, tmp_path / "controller.log", "--driver-name", SITE.driver
            ):
                wait_for("the controller's slices", lambda: on_chip(api, 0, CHIP), timeout=60)
                yield api
        finally:
            with suppress(k8s.ApiException):
                objects.delete_cluster_custom_object(
                    "trainium.sim.dev", "v1alpha1", "ultraservers", SITE.rack_id
                )
            wait_for("the UltraServer to go", lambda: not controlplane.get_rack(api, SITE.rack_id))
            for item in controlplane.rack_slices(api, SITE.rack_id, SITE.driver):
                with suppress(k8s.ApiException):
                    k8s.ResourceV1Api(api).delete_resource_slice(item["metadata"]["name"])
            for node in SITE.nodes:
                with suppress(k8s.ApiException):
                    objects.delete_cluster_custom_object(
                        "trainium.sim.dev", "v1alpha1", "nodedevicehealths", node
                    )
            for kind in (*DEVICE_KINDS, None):
                with suppress(k8s.ApiException):
                    k8s.ResourceV1Api(api).delete_device_class(device_class_name(kind, SITE.driver))
            with suppress(k8s.ApiException):
                k8s.CoordinationV1Api(api).delete_namespaced_lease(LEASE, "default")


def test_fault_taints_the_chips_devices_until_it_clears(
    controller_rack: k8s.ApiClient, control_plane: ControlPlane
) -> None:
    api = controller_rack
    assert tainted(api) == {}
    with short_tmpdir() as workdir:
        daemon = Daemon(workdir, control_plane.kubeconfig, site=SITE).start()
        try:
            fault = {"node": SITE.nodes[0], "kind": "ecc-uncorrected-hbm", "chip": CHIP}
            started = time.monotonic()
            assert daemon.sim("POST", "/sim/v1/faults", json=fault).status_code == 200
            taints = wait_for("taints on the chip's devices", lambda: tainted(api), timeout=30)
            took = time.monotonic() - started
            expected = on_chip(api, 0, CHIP)
            assert set(taints) == expected
            assert all(
                t == [{"key": f"{SITE.driver}/unhealthy", "value": "failed", "effect": "NoExecute"}]
                for t in (
                    [{k: v for k, v in taint.items() if k != "timeAdded"} for taint in found]
                    for found in taints.values()
                )
            )
            assert took < 15, f"fault took {took:.1f}s to become taints"
            assert daemon.sim("DELETE", "/sim/v1/faults", json=fault).status_code == 200
            wait_for("taints to clear", lambda: tainted(api) == {}, timeout=30)
        finally:
            assert daemon.stop() == 0
