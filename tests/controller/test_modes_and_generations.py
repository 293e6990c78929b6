"""Every generation in every mode is accepted by the real apiserver, and flat
mode works on a control plane without DRAPartitionableDevices (the default of
Kubernetes 1.34/1.35), where partitioned mode is refused with a clear reason."""

import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from localsim.controlplane.plane import ControlPlane
from testbed.controlplane import (
    allocation,
    condition,
    controller,
    create_claim_and_pod,
    custom,
    get_rack,
    install,
    load_claim,
    published,
    rack_slices,
    ultraserver,
)
from testbed.waiting import wait_for

pytestmark = pytest.mark.integration

NODES = [f"ctl-modes-{i:02d}" for i in range(36)]
# (generation, mode, flatDevice) -> slices: counters + per node + rack device
EXPECTED = {
    ("trn3-gen2", "partitioned", None): 5 + 36 + 1,
    ("trn3-gen1", "partitioned", None): 3 + 16 + 1,
    ("trn2", "partitioned", None): 3 + 16 + 1,
    ("trn3-gen2", "flat", "chip"): 36,
    ("trn3-gen1", "flat", "chip"): 4,
    ("trn2", "flat", "chip"): 4,
    ("trn3-gen2", "flat", "core"): 36,
    ("trn3-gen1", "flat", "core"): 8,
    ("trn2", "flat", "core"): 8,
}


def rack_name(generation: str, mode: str, flat: str | None) -> str:
    return f"ctl-modes-{generation}-{mode}" + (f"-{flat}" if flat else "")


def rack_body(generation: str, mode: str, flat: str | None) -> dict[str, Any]:
    nodes = NODES if generation == "trn3-gen2" else NODES[:4]
    spec = {"mode": mode} | ({"flatDevice": flat} if flat else {})
    return ultraserver(rack_name(generation, mode, flat), generation, nodes, **spec)


@pytest.fixture
def nodes(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    install(control_plane)
    for node in NODES:
        control_plane.create_node(node)
    try:
        yield control_plane
    finally:
        for node in NODES:
            control_plane.delete_node(node)


def test_apiserver_accepts_every_generation_in_every_mode(
    nodes: ControlPlane, tmp_path: Path
) -> None:
    cp = nodes
    with (
        cp.api_client() as api,
        controller(cp, tmp_path / "c.log", "--resync-seconds", "2", "--lease-name", "ctl-modes"),
    ):
        racks = custom(api)
        try:
            for key in EXPECTED:
                racks.create_cluster_custom_object(
                    "trainium.sim.dev", "v1alpha1", "ultraservers", rack_body(*key)
                )
            for (generation, mode, flat), count in EXPECTED.items():
                name = rack_name(generation, mode, flat)
                wait_for(f"{name} published", partial(published, api, name, count), 120)
            for key in EXPECTED:
                rack = get_rack(api, rack_name(*key))
                assert condition(rack, "Ready")["status"] == "True"  # type: ignore[index]
        finally:
            for key in EXPECTED:
                racks.delete_cluster_custom_object(
                    "trainium.sim.dev", "v1alpha1", "ultraservers", rack_name(*key)
                )
            wait_for(
                "slices removed",
                lambda: not any(rack_slices(api, rack_name(*k)) for k in EXPECTED),
                60,
            )
            racks.delete_namespaced_custom_object(
                "coordination.k8s.io", "v1", "default", "leases", "ctl-modes"
            )


def test_flat_mode_without_partitionable_devices(tmp_path: Path) -> None:
    with ControlPlane.running(
        tmp_path / "cp", feature_gates={"DRAPartitionableDevices": False}
    ) as cp:
        install(cp)
        nodes = [f"flat-{i}" for i in range(4)]
        for node in nodes:
            cp.create_node(node)
        with cp.api_client() as api, controller(cp, tmp_path / "c.log", "--resync-seconds", "1"):
            racks = custom(api)
            racks.create_cluster_custom_object(
                "trainium.sim.dev",
                "v1alpha1",
                "ultraservers",
                ultraserver("flat", "trn2", nodes, mode="flat"),
            )
            wait_for("flat rack published", lambda: published(api, "flat", 4), 60)
            client.CoreV1Api(api).create_namespace({"metadata": {"name": "flat"}})
            create_claim_and_pod(api, load_claim("chip", "one-chip", "flat"))
            create_claim_and_pod(api, load_claim("two-chips-same-server", "two-chips", "flat"))
            [one] = wait_for("chip allocated", lambda: allocation(api, "flat", "one-chip"))
            two = wait_for("two chips allocated", lambda: allocation(api, "flat", "two-chips"))
            assert one["pool"] == "flat" and one["device"].startswith("server0")
            assert len({one["device"], *(r["device"] for r in two)}) == 3

            racks.create_cluster_custom_object(
                "trainium.sim.dev", "v1alpha1", "ultraservers", ultraserver("parted", "trn2", nodes)
            )
            rack = wait_for(
                "partitioned refused",
                lambda: (r := get_rack(api, "parted")) and condition(r, "Published") and r,
                60,
            )
            published_cond = condition(rack, "Published")
            assert published_cond is not None
            assert (published_cond["status"], published_cond["reason"]) == (
                "False",
                "PartitionableDevicesOff",
            )
            assert "set spec.mode to flat" in published_cond["message"]
            time.sleep(3)
            assert rack_slices(api, "parted") == []


def test_without_binding_conditions_the_rack_publishes_once_and_servers_bind(
    tmp_path: Path,
) -> None:
    """DRADeviceBindingConditions off (the apiserver drops the field): the
    controller says so and publishes without them, instead of rewriting the
    slices on every resync; a server claim still binds."""
    gates = {"DRADeviceBindingConditions": False}
    with ControlPlane.running(tmp_path / "cp", feature_gates=gates) as cp:
        install(cp)
        nodes = [f"nobc-{i}" for i in range(4)]
        for node in nodes:
            cp.create_node(node)
        log = tmp_path / "c.log"
        with cp.api_client() as api, controller(cp, log, "--resync-seconds", "1"):
            custom(api).create_cluster_custom_object(
                "trainium.sim.dev",
                "v1alpha1",
                "ultraservers",
                ultraserver("nobc", "trn3-gen1", nodes),
            )
            wait_for("rack published", lambda: published(api, "nobc", 3 + 16 + 1), 60)
            wait_for("the warning", lambda: "drops bindingConditions" in log.read_text(), 30)
            versions = {
                s["metadata"]["name"]: s["metadata"]["resourceVersion"]
                for s in rack_slices(api, "nobc")
            }
            time.sleep(4)  # four resyncs
            again = {
                s["metadata"]["name"]: s["metadata"]["resourceVersion"]
                for s in rack_slices(api, "nobc")
            }
            assert again == versions
            client.CoreV1Api(api).create_namespace({"metadata": {"name": "nobc"}})
            create_claim_and_pod(api, load_claim("server", "server", "nobc"))
            wait_for("server claim allocated", lambda: allocation(api, "nobc", "server"), 60)
            node = wait_for(
                "pod bound",
                lambda: client.CoreV1Api(api).read_namespaced_pod("server", "nobc").spec.node_name,
            )
            assert node in nodes
