"""A whole Trn3 Gen2 rack filled core by core under the real scheduler and the
real controller, in the `node` pool layout: 1,152 single-core claims, each
with its pod, created at once, all bind, every core of the rack goes to
exactly one claim on its own server's node, and then nothing more fits: a
1,153rd core and the rack itself stay unschedulable, the rack device being
unpublished while any core of the rack is held."""

import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import pytest
from kubernetes import client

from driver.devicemodel.naming import ULTRASERVER_DEVICE, partition_name, server_pool
from localsim.controlplane.plane import ControlPlane
from testbed.controlplane import (
    allocation,
    clear_pods_and_claims,
    custom,
    delta,
    load_claim,
    node_pool_racks,
    pod,
    published,
    rack_slices,
    request_counts,
    unschedulable,
)
from testbed.waiting import wait_for

pytestmark = pytest.mark.integration

NS = "ctl-fill"
RACK = "ctl-fill"
SERVERS, CHIPS, CORES = 36, 4, 8
CLAIMS = SERVERS * CHIPS * CORES
SLICES = SERVERS * 2 + 1  # per server a counter slice and a device slice; the rack device's
CREATORS = 4
"""Threads creating claims and pods, each with a client of its own."""


def node_of(server: int) -> str:
    return f"{RACK}-{server:02d}"


@pytest.fixture(scope="module")
def api(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[client.ApiClient]:
    log = tmp_path_factory.mktemp("ctl-fill") / "controller.log"
    racks = {RACK: [node_of(s) for s in range(SERVERS)]}
    with node_pool_racks(control_plane, log, "ctl-fill", NS, racks, generation="trn3-gen2") as api:
        wait_for("rack published", lambda: published(api, RACK, SLICES), 120)
        yield api


def create_all(api: client.ApiClient, names: list[str]) -> None:
    local = threading.local()

    def create(name: str) -> None:
        if not hasattr(local, "api"):
            local.api = client.ApiClient(api.configuration)
        custom(local.api).create_namespaced_custom_object(
            "resource.k8s.io", "v1", NS, "resourceclaims", load_claim("core-1", name, NS, RACK)
        )
        client.CoreV1Api(local.api).create_namespaced_pod(NS, pod(name, NS, [name]))

    with ThreadPoolExecutor(CREATORS) as pool:
        list(pool.map(create, names))


def bound(api: client.ApiClient) -> dict[str, str]:
    pods = client.CoreV1Api(api).list_namespaced_pod(NS).items
    return {p.metadata.name: p.spec.node_name for p in pods if p.spec.node_name}


def all_bound(api: client.ApiClient) -> dict[str, str] | None:
    """Pod name -> node once every pod of the fill is bound."""
    nodes = bound(api)
    return nodes if len(nodes) == CLAIMS else None


def rack_device_published(api: client.ApiClient) -> bool:
    return any(
        d["name"] == ULTRASERVER_DEVICE
        for s in rack_slices(api, RACK)
        for d in s["spec"].get("devices", [])
    )


def test_every_core_of_a_rack_goes_to_exactly_one_claim(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    names = [f"core-{i:04d}" for i in range(CLAIMS)]
    before = request_counts(control_plane)
    create_all(api, names)
    nodes = wait_for("every pod bound", lambda: all_bound(api), 900, 2)
    # The controller writes a core's status (its fabric address) once: an
    # entry that reads back differently (an empty list comes back as null)
    # would be written again on every event of the claim.
    status_writes = delta(before, request_counts(control_plane)).get(
        ("resourceclaims", "status", "PATCH"), 0
    )
    assert status_writes <= CLAIMS

    claims = custom(api).list_namespaced_custom_object(
        "resource.k8s.io", "v1", NS, "resourceclaims"
    )["items"]
    given: dict[tuple[str, str], str] = {}
    for claim in claims:
        [result] = claim["status"]["allocation"]["devices"]["results"]
        key = (result["pool"], result["device"])
        assert key not in given, f"{key} allocated to {given[key]} and {claim['metadata']['name']}"
        given[key] = claim["metadata"]["name"]
    every_core = {
        (server_pool(RACK, s), partition_name(s, c, k, 1))
        for s in range(SERVERS)
        for c in range(CHIPS)
        for k in range(CORES)
    }
    assert set(given) == every_core
    for (pool, _), name in given.items():
        assert nodes[name] == node_of(int(pool.rsplit("server", 1)[1])), name
    assert set(Counter(nodes.values()).values()) == {CHIPS * CORES}
    assert not rack_device_published(api)

    create_all(api, ["core-extra"])
    custom(api).create_namespaced_custom_object(
        "resource.k8s.io", "v1", NS, "resourceclaims", load_claim("ultraserver", "rack", NS, RACK)
    )
    client.CoreV1Api(api).create_namespaced_pod(NS, pod("rack", NS, ["rack"]))
    for name in ("core-extra", "rack"):
        wait_for(f"{name} unschedulable", partial(unschedulable, api, NS, name), 120)
        assert allocation(api, NS, name) is None

    clear_pods_and_claims(api, NS)
    wait_for("pods gone", lambda: not client.CoreV1Api(api).list_namespaced_pod(NS).items, 300, 1)
    wait_for("rack device published again", lambda: rack_device_published(api), 120, 1)
