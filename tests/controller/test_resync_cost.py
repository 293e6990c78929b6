"""What a resync costs against the real apiserver: with nothing changed it
writes nothing, lists no slice and rebuilds nothing (the apiserver's request
counts and the controller's own counters agree); a change in one rack writes
only that rack's slices; a slice deleted behind the controller's back comes
back through the metadata watch."""

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kubernetes import client

from localsim.controlplane.plane import ControlPlane, free_port
from testbed.controlplane import (
    controller,
    custom,
    delta,
    install,
    metric_key,
    metric_samples,
    published,
    rack_slices,
    request_counts,
    ultraserver,
    writes,
)
from testbed.waiting import wait_for

pytestmark = pytest.mark.integration

RACKS = {
    "ctl-cost-a": [f"ctl-cost-a-{i}" for i in range(4)],
    "ctl-cost-b": [f"ctl-cost-b-{i}" for i in range(4)],
}
SLICES = 3 + 16 + 1  # Trn2: counter slices, one per chip group, the rack device
LEASE = "ctl-cost"
GROUP, VERSION = "trainium.sim.dev", "v1alpha1"


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> Iterator[tuple[ControlPlane, client.ApiClient]]:
    install(control_plane)
    for nodes in RACKS.values():
        for node in nodes:
            control_plane.create_node(node)
    with control_plane.api_client() as api:
        for name, nodes in RACKS.items():
            custom(api).create_cluster_custom_object(
                GROUP, VERSION, "ultraservers", ultraserver(name, "trn2", nodes)
            )
        try:
            yield control_plane, api
        finally:
            for name in RACKS:
                custom(api).delete_cluster_custom_object(GROUP, VERSION, "ultraservers", name)
            for nodes in RACKS.values():
                for node in nodes:
                    control_plane.delete_node(node)


@pytest.fixture
def running(
    cluster: tuple[ControlPlane, client.ApiClient], tmp_path: Path
) -> Iterator[tuple[ControlPlane, client.ApiClient, int]]:
    cp, api = cluster
    port = free_port()
    with controller(
        cp,
        tmp_path / "controller.log",
        "--resync-seconds",
        "1",
        "--lease-name",
        LEASE,
        "--lease-seconds",
        "6",
        f"--http-address=127.0.0.1:{port}",
    ):
        wait_for("every rack reconciled by this controller", lambda: reconciled(port), 120)
        wait_for("both racks published", lambda: all(published(api, n, SLICES) for n in RACKS), 120)
        yield cp, api, port


def reconciled(port: int) -> bool:
    try:
        seen = counts(port)
    except httpx.HTTPError:
        return False
    return seen["rebuilt"] + seen["unchanged"] >= len(RACKS)


def counts(port: int) -> dict[str, float]:
    samples = metric_samples(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text)
    return {
        "unchanged": samples.get(
            metric_key("trainium_dra_controller_reconcile_paths_total", path="unchanged"), 0
        ),
        "rebuilt": samples.get(
            metric_key("trainium_dra_controller_reconcile_paths_total", path="rebuilt"), 0
        ),
        "slice_lists": samples.get(metric_key("trainium_dra_controller_slice_lists_total"), 0),
    }


def versions(api: client.ApiClient, rack: str) -> dict[str, str]:
    return {s["metadata"]["name"]: s["metadata"]["resourceVersion"] for s in rack_slices(api, rack)}


def test_a_resync_with_nothing_changed_lists_and_writes_nothing(
    running: tuple[ControlPlane, client.ApiClient, int],
) -> None:
    cp, api, port = running
    # Let the first full reconciles and the echoes of their writes pass.
    wait_for(
        "racks seen unchanged",
        lambda: counts(port)["unchanged"] >= 2 * len(RACKS),
        60,
    )
    kept = {rack: versions(api, rack) for rack in RACKS}
    before, mine = request_counts(cp), counts(port)
    wait_for(
        "three more resyncs of both racks",
        lambda: counts(port)["unchanged"] - mine["unchanged"] >= 3 * len(RACKS),
        60,
    )
    served, after = delta(before, request_counts(cp)), counts(port)
    assert writes(served, ("resourceslices", "ultraservers")) == 0
    assert served.get(("resourceslices", "", "LIST"), 0) == 0
    assert after["slice_lists"] == mine["slice_lists"]
    assert after["rebuilt"] == mine["rebuilt"]
    assert {rack: versions(api, rack) for rack in RACKS} == kept


def test_a_change_in_one_rack_writes_only_that_rack(
    running: tuple[ControlPlane, client.ApiClient, int],
) -> None:
    _, api, _ = running
    node = RACKS["ctl-cost-a"][1]
    other = versions(api, "ctl-cost-b")
    before = versions(api, "ctl-cost-a")
    health = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "NodeDeviceHealth",
        "metadata": {"name": node},
        "spec": {"nodeName": node, "devices": [{"chip": 0, "state": "failed"}]},
    }
    custom(api).create_cluster_custom_object(GROUP, VERSION, "nodedevicehealths", health)
    try:
        wait_for(
            "the failed chip tainted in rack a",
            lambda: any(
                d.get("taints")
                for s in rack_slices(api, "ctl-cost-a")
                for d in s["spec"].get("devices") or []
            ),
            60,
        )
        time.sleep(3)  # several resync periods
        assert versions(api, "ctl-cost-a") != before
        assert versions(api, "ctl-cost-b") == other
    finally:
        custom(api).delete_cluster_custom_object(GROUP, VERSION, "nodedevicehealths", node)


def test_a_slice_deleted_behind_its_back_is_published_again(
    running: tuple[ControlPlane, client.ApiClient, int],
) -> None:
    _, api, port = running
    victim = sorted(versions(api, "ctl-cost-b"))[5]
    rebuilt = counts(port)["rebuilt"]
    custom(api).delete_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", victim)
    wait_for("the slice is back", lambda: victim in versions(api, "ctl-cost-b"), 60)
    assert published(api, "ctl-cost-b", SLICES)
    assert counts(port)["rebuilt"] > rebuilt
