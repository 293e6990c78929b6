"""`--publishing order` on the real controller, apiserver and scheduler: held
devices move what they block to the end of their slices, the scheduler still
allocates every core once, a release puts the layout order back, and the
writes this costs are counted per allocation."""

from collections.abc import Iterator
from functools import partial

import pytest
from kubernetes import client

from driver.devicemodel.blocking import blocked_devices
from driver.devicemodel.layout import LayoutOptions, build_layout
from driver.devicemodel.naming import rack_of_pool, server_pool
from driver.jsontypes import JSON
from localsim.controlplane.plane import ControlPlane
from simdevice.topology import rack_spec
from testbed.controlplane import (
    custom,
    delta,
    load_claim,
    node_pool_racks,
    pod,
    published,
    rack_slices,
    request_counts,
    write_allocated,
    writes,
)
from testbed.fleetfill import GENERATION, Held, held_claim
from testbed.waiting import wait_for

pytestmark = pytest.mark.integration

NS = "order-pub"
RACK = "order-pub"
NODES = [f"order-pub-{s:02d}" for s in range(36)]
LAYOUT = build_layout(rack_spec(GENERATION), LayoutOptions("server"))
LAYOUT_ORDER = {d.name: i for i, d in enumerate(LAYOUT.devices)}
DEVICE_CORES = {d.name: d.cores for d in LAYOUT.devices}
HELD = (Held(0, 0, "server00-chip00", 8, "chip"), Held(0, 1, "server01-chip02-core5", 1, "core"))
PODS = 12


@pytest.fixture(scope="module")
def api(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[client.ApiClient]:
    log = tmp_path_factory.mktemp("order-pub") / "controller.log"
    with node_pool_racks(
        control_plane,
        log,
        "order-pub",
        NS,
        {RACK: NODES},
        "--publishing",
        "order",
        generation=GENERATION,
        pools="server",
    ) as api:
        wait_for(f"{RACK} published", partial(published, api, RACK, 2 * len(NODES)), 300, 1)
        yield api


def allocated(api: client.ApiClient) -> dict[str, list[JSON]]:
    claims = custom(api).list_namespaced_custom_object(
        "resource.k8s.io", "v1", NS, "resourceclaims"
    )["items"]
    return {
        c["metadata"]["name"]: c["status"]["allocation"]["devices"]["results"]
        for c in claims
        if (c.get("status") or {}).get("allocation")
    }


def ordered_as_wanted(api: client.ApiClient) -> bool:
    """Every device slice lists the devices the allocations block after the
    free ones, each part in layout order."""
    held = {r["device"] for results in allocated(api).values() for r in results}
    blocked = blocked_devices(LAYOUT, held)
    for s in rack_slices(api, RACK):
        names = [d["name"] for d in s["spec"].get("devices") or []]
        want = sorted(names, key=lambda n: (n in blocked, LAYOUT_ORDER[n]))
        if names != want:
            return False
    return True


def device_names(api: client.ApiClient, server: int) -> list[str]:
    """The devices of `server`'s device slice, in their published order."""
    (found,) = (
        s
        for s in rack_slices(api, RACK)
        if s["spec"]["pool"]["name"] == server_pool(RACK, server) and s["spec"].get("devices")
    )
    return [d["name"] for d in found["spec"]["devices"]]


def every_bound(api: client.ApiClient) -> bool:
    pods = client.CoreV1Api(api).list_namespaced_pod(NS).items
    return len(pods) == PODS and all(p.spec.node_name for p in pods)


def test_ordered_slices_follow_allocations_and_keep_cores_exclusive(
    control_plane: ControlPlane, api: client.ApiClient
) -> None:
    before = request_counts(control_plane)
    write_allocated(
        api,
        [
            held_claim(f"held-{i}", NS, h, (server_pool(RACK, h.server), NODES[h.server]))
            for i, h in enumerate(HELD)
        ],
    )
    wait_for("held devices ordered last", partial(ordered_as_wanted, api), 60, 0.5)
    chip0 = device_names(api, 0)
    assert chip0[-1] == "server00" and chip0[-2] == "server00-chip00-cores4-7"
    assert chip0[:2] == [
        "server00-chip00",
        "server00-chip01-core0",
    ]  # the held chip keeps its place

    for i in range(PODS):
        name = f"core-{i:02d}"
        custom(api).create_namespaced_custom_object(
            "resource.k8s.io", "v1", NS, "resourceclaims", load_claim("core-1", name, NS)
        )
        client.CoreV1Api(api).create_namespaced_pod(NS, pod(name, NS, [name]))
    wait_for("every pod bound", partial(every_bound, api), 120, 0.5)
    wait_for("allocations ordered", partial(ordered_as_wanted, api), 60, 0.5)
    claims = allocated(api)
    owner: dict[tuple[str, int, int], str] = {}
    for name, results in claims.items():
        for r in results:
            for chip, core in DEVICE_CORES[r["device"]]:
                key = (rack_of_pool(r["pool"]), chip, core)
                assert key not in owner, f"core {key} held by {owner[key]} and by {name}"
                owner[key] = name
    assert len(claims) == len(HELD) + PODS
    slice_writes = writes(delta(before, request_counts(control_plane)), ["resourceslices"])
    print(f"\n{slice_writes} slice writes for {len(claims)} allocations")
    assert 1 <= slice_writes <= len(claims)  # at most one write per allocation, batched

    custom(api).delete_namespaced_custom_object(
        "resource.k8s.io", "v1", NS, "resourceclaims", "held-0"
    )
    wait_for("a released chip back in layout order", partial(ordered_as_wanted, api), 60, 0.5)
    assert device_names(api, 0)[0] == "server00-chip00-core0"
