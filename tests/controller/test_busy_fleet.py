"""A four-rack Trn3 Gen2 fleet in the `node` pool layout filled past 90% under
the real scheduler and the real controller, and every allocation rule still
holding: no core in two claims, whole racks and servers exclusive.

One rack is held to 88% by claims written already allocated (the mix of
servers, chips and core partitions the scheduler benchmark holds: scheduling
them one pod at a time would take hundreds of pods more);
the scheduler then takes the rest as a mixed workload: two whole racks,
servers, chips and 4, 2 and 1-core partitions, bringing the fleet to over
90%. The whole racks can only be two of the three racks nothing was held of.
Four racks, not more: the scheduler's cost per pod grows with the fleet's
nodes and slices, and four already leave the small shapes a choice between
the held rack's scattered cores and a free rack's whole chips.
"""

from collections.abc import Iterator
from functools import partial

import pytest
from kubernetes import client

from driver.devicemodel.layout import LayoutOptions, build_layout
from driver.devicemodel.naming import ULTRASERVER_DEVICE, rack_of_pool, server_pool
from driver.jsontypes import JSON
from localsim.controlplane.plane import ControlPlane
from simdevice.topology import rack_spec
from testbed.controlplane import (
    custom,
    load_claim,
    node_pool_racks,
    pod,
    published,
    write_allocated,
)
from testbed.fleetfill import GENERATION, RACK_CORES, fleet_fill, held_claims
from testbed.waiting import wait_for

pytestmark = pytest.mark.integration

NS = "busy-fleet"
RACKS = 4
HELD_RACKS = 1
HELD = 0.88
SLICES = 36 * 2 + 1
WORKLOAD = {"ultraserver": 2, "server": 16, "chip": 40, "cores-4": 30, "cores-2": 30, "core-1": 40}
"""Claims the scheduler allocates, in this order: racks and servers first,
while whole ones are free, then the smaller shapes wherever they fit."""
CORES_OF = {"ultraserver": RACK_CORES, "server": 32, "chip": 8, "cores-4": 4, "cores-2": 2}
LAYOUT = build_layout(rack_spec(GENERATION), LayoutOptions("node"))
DEVICE_CORES = {d.name: d.cores for d in LAYOUT.devices}


def rack_name(rack: int) -> str:
    return f"busy-{rack:02d}"


def node_name(rack: int, server: int) -> str:
    return f"busy-{rack:02d}-{server:02d}"


@pytest.fixture(scope="module")
def api(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[client.ApiClient]:
    log = tmp_path_factory.mktemp("busy-fleet") / "controller.log"
    racks = {rack_name(r): [node_name(r, s) for s in range(36)] for r in range(RACKS)}
    with node_pool_racks(control_plane, log, "busy-fleet", NS, racks, generation=GENERATION) as api:
        for rack in racks:
            wait_for(f"{rack} published", partial(published, api, rack, SLICES), 300, 1)
        yield api


def schedule(api: client.ApiClient, kind: str, count: int) -> list[str]:
    names = [f"{kind}-{i:03d}" for i in range(count)]
    for name in names:
        custom(api).create_namespaced_custom_object(
            "resource.k8s.io", "v1", NS, "resourceclaims", load_claim(kind, name, NS)
        )
        client.CoreV1Api(api).create_namespaced_pod(NS, pod(name, NS, [name]))
    return names


def bound(api: client.ApiClient, names: list[str]) -> bool:
    pods = client.CoreV1Api(api).list_namespaced_pod(NS).items
    return {p.metadata.name for p in pods if p.spec.node_name} >= set(names)


def cores_of(result: JSON) -> set[tuple[str, int, int]]:
    """(rack, rack chip index, core) every core an allocation result covers."""
    rack = rack_of_pool(result["pool"])
    if result["device"] == ULTRASERVER_DEVICE:
        every = {c for cores in DEVICE_CORES.values() for c in cores}
        return {(rack, chip, core) for chip, core in every}
    return {(rack, chip, core) for chip, core in DEVICE_CORES[result["device"]]}


def test_a_fleet_past_ninety_percent_keeps_every_allocation_rule(api: client.ApiClient) -> None:
    held = fleet_fill(HELD_RACKS, HELD, seed=3)
    write_allocated(
        api,
        held_claims(
            held,
            lambda h: server_pool(rack_name(h.rack), h.server),
            lambda h: node_name(h.rack, h.server),
            NS,
        ),
    )
    for kind, count in WORKLOAD.items():
        names = schedule(api, kind, count)
        wait_for(f"every {kind} claim bound", partial(bound, api, names), 240, 1)

    claims = custom(api).list_namespaced_custom_object(
        "resource.k8s.io", "v1", NS, "resourceclaims"
    )["items"]
    owner: dict[tuple[str, int, int], str] = {}
    for claim in claims:
        name = claim["metadata"]["name"]
        for result in claim["status"]["allocation"]["devices"]["results"]:
            for core in cores_of(result):
                assert core not in owner, f"core {core} held by {owner[core]} and by {name}"
                owner[core] = name
    assert len(owner) >= 0.9 * RACKS * RACK_CORES, f"{len(owner)} cores held"
    racks_taken = {
        rack_of_pool(r["pool"])
        for c in claims
        for r in c["status"]["allocation"]["devices"]["results"]
        if r["device"] == ULTRASERVER_DEVICE
    }
    free = {rack_name(r) for r in range(HELD_RACKS, RACKS)}  # the racks nothing was held of
    assert len(racks_taken) == WORKLOAD["ultraserver"] and racks_taken <= free
    scheduled = sum(CORES_OF.get(kind, 1) * count for kind, count in WORKLOAD.items())
    assert len(owner) == sum(h.cores for h in held) + scheduled
