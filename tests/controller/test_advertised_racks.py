"""The window of advertised racks in the `node` pool layout, under the real
scheduler and the real controller run with `--advertised-racks 1`: only the
first free rack publishes its rack device; a core taken from it moves the
window to the next free rack, a rack claim is served from the window and
keeps its device, and freeing everything brings the window back."""

from collections.abc import Iterator

import pytest
from kubernetes import client

from localsim.controlplane.plane import ControlPlane
from testbed.controlplane import (
    clear_pods_and_claims,
    custom,
    load_claim,
    node_pool_racks,
    pod,
    published,
    rack_slices,
)
from testbed.waiting import wait_for

pytestmark = pytest.mark.integration

NS = "ctl-window"
RACKS = [f"ctl-window-{i}" for i in range(3)]
SERVER_SLICES = 4 * (1 + 4)  # per server: a counter slice and 4 group slices


def nodes_of(rack: str) -> list[str]:
    return [f"{rack}-{s}" for s in range(4)]


@pytest.fixture(scope="module")
def api(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[client.ApiClient]:
    log = tmp_path_factory.mktemp("ctl-window") / "controller.log"
    racks = {rack: nodes_of(rack) for rack in RACKS}
    with node_pool_racks(
        control_plane, log, "ctl-window", NS, racks, "--advertised-racks", "1"
    ) as api:
        yield api


def advertised(api: client.ApiClient) -> set[str]:
    """Racks that publish their rack device."""
    return {
        rack
        for rack in RACKS
        for s in rack_slices(api, rack)
        if any(d["name"] == "ultraserver" for d in s["spec"].get("devices", []))
    }


def window_is(api: client.ApiClient, want: set[str]) -> bool:
    return advertised(api) == want and all(
        published(api, r, SERVER_SLICES + (r in want)) for r in RACKS
    )


def claim_with_pod(api: client.ApiClient, shape: str, name: str, rack: str | None) -> str:
    """Create the claim and its pod; the node the pod is bound to."""
    custom(api).create_namespaced_custom_object(
        "resource.k8s.io", "v1", NS, "resourceclaims", load_claim(shape, name, NS, rack)
    )
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(NS, pod(name, NS, [name]))
    node: str = wait_for(
        f"pod {name} bound", lambda: core.read_namespaced_pod(name, NS).spec.node_name, 120
    )
    return node


def test_the_window_moves_past_taken_racks_and_comes_back(api: client.ApiClient) -> None:
    first, second, third = RACKS
    wait_for("only the first rack advertised", lambda: window_is(api, {first}), 120)

    node = claim_with_pod(api, "core-1", "core", first)
    assert node in nodes_of(first)
    wait_for("the window past the used rack", lambda: window_is(api, {second}), 60)

    # A rack claim pinned to no rack can only get the advertised one; it keeps
    # its device published while the window moves on to the third rack.
    node = claim_with_pod(api, "ultraserver", "whole", None)
    assert node in nodes_of(second)
    wait_for("the held rack and the next free one", lambda: window_is(api, {second, third}), 60)

    clear_pods_and_claims(api, NS)
    wait_for("the window back at the first rack", lambda: window_is(api, {first}), 120)
