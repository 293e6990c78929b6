"""A controller started under another driver name (the chart switched profile)
deletes the slices the previous one published for its racks, and only those:
nothing else would ever update or delete them, and the scheduler would hand
out the rack's hardware twice."""

from contextlib import suppress
from pathlib import Path

import pytest
from kubernetes import client

from driver.controller.slices import MANAGED_BY, MANAGED_BY_LABEL, left_by_another_driver
from driver.jsontypes import JSON
from localsim.controlplane.plane import ControlPlane
from testbed.controlplane import controller, custom, install, rack_slices, ultraserver
from testbed.waiting import wait_for

RACK = "drvchange-rack"
NODES = [f"drvchange-n{i}" for i in range(4)]
OLD, NEW, BYSTANDER = "old.sim.dev", "new.sim.dev", "bystander.sim.dev"
LEASE = "drvchange"
ULTRASERVERS = ("trainium.sim.dev", "v1alpha1", "ultraservers")


def managed(name: str, driver: str, rack: str) -> JSON:
    labels = {MANAGED_BY_LABEL: MANAGED_BY, f"{driver}/ultraserver": rack}
    return {"metadata": {"name": name, "labels": labels}, "spec": {"driver": driver}}


def test_only_another_driver_s_slices_of_a_rack_served_here_are_left_over() -> None:
    slices: list[JSON] = [
        managed("old-a", OLD, RACK),
        managed("new-a", NEW, RACK),
        managed("other-b", OLD, "another-rack"),
        {"metadata": {"name": "unlabelled"}, "spec": {"driver": OLD}},
    ]
    assert left_by_another_driver(slices, NEW, {RACK}) == ["old-a"]
    assert left_by_another_driver(slices, NEW, set()) == []


def bystander_slice() -> JSON:
    """Another driver's slice of a rack no controller here serves."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": managed("drvchange-bystander", BYSTANDER, "elsewhere")["metadata"],
        "spec": {
            "driver": BYSTANDER,
            "pool": {"name": "elsewhere", "generation": 0, "resourceSliceCount": 1},
            "allNodes": True,
            "devices": [],
        },
    }


@pytest.mark.integration
def test_a_controller_of_a_new_driver_name_deletes_what_the_old_one_published(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    log = tmp_path / "controller.log"
    install(control_plane)
    for node in NODES:
        control_plane.create_node(node)
    with control_plane.api_client() as api:
        objects = custom(api)
        slices_api = ("resource.k8s.io", "v1", "resourceslices")
        objects.create_cluster_custom_object(*slices_api, bystander_slice())
        spec = ultraserver(RACK, "trn3-gen1", NODES, pools="node")
        objects.create_cluster_custom_object(*ULTRASERVERS, spec)
        try:
            lease = ("--lease-name", LEASE)
            with controller(control_plane, log, "--driver-name", OLD, *lease):
                wait_for(f"{OLD} publishes {RACK}", lambda: rack_slices(api, RACK, OLD), 60)
            assert rack_slices(api, RACK, OLD), "a stopped controller's slices stay"
            with controller(control_plane, log, "--driver-name", NEW, *lease):
                wait_for(
                    f"{NEW} publishes {RACK} and {OLD}'s slices are gone",
                    lambda: rack_slices(api, RACK, NEW) and not rack_slices(api, RACK, OLD),
                    60,
                )
                kept = objects.get_cluster_custom_object(*slices_api, "drvchange-bystander")
                assert kept["spec"]["driver"] == BYSTANDER
            assert "deleted" in log.read_text() and "another driver left" in log.read_text()
        finally:
            # The slices name the UltraServer as their owner: the garbage
            # collector takes them with it.
            objects.delete_cluster_custom_object(*ULTRASERVERS, RACK)
            objects.delete_cluster_custom_object(*slices_api, "drvchange-bystander")
            wait_for(
                "the rack's slices gone with it",
                lambda: not any(rack_slices(api, RACK, d) for d in (OLD, NEW)),
                60,
            )
            for node in NODES:
                control_plane.delete_node(node)
            with suppress(client.ApiException):
                client.CustomObjectsApi(api).delete_namespaced_custom_object(
                    "coordination.k8s.io", "v1", "default", "leases", LEASE
                )
