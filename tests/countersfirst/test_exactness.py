"""The counters-first kube-scheduler (hack/k8s-counters-first) decides as the
stock one does: one busy rack in the node pool layout, the same claims
scheduled one at a time by each, and every claim gets the same devices or the
same refusal, message and all.

Not part of `make test` (the patched scheduler is one more kube-scheduler
build): `make test-counters-first` runs it, after upstream's allocator tests
on the patched module."""

from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from kubernetes import client

from benchmarks.scheduler_busy import BUSY_LAYOUTS, clear_busy
from benchmarks.scheduler_layouts import rack_nodes
from benchmarks.scheduler_runs import NS, ensure_fleet_nodes, publish
from driver.jsontypes import JSON
from driver.names import DEFAULT_DRIVER_NAME
from localsim.controlplane.plane import ControlPlane
from testbed.controlplane import (
    allocation,
    custom,
    install,
    load_claim,
    pod,
    unschedulable,
    write_allocated,
)
from testbed.countersfirst import counters_first_scheduler
from testbed.fleetfill import Held, fleet_fill, held_claims
from testbed.waiting import wait_for

pytestmark = pytest.mark.integration

HELD = 0.6
SEED = 5
NODES = 12
"""The servers the claims are pinned to: a pinned claim is allocated on one
node, so its devices depend on the allocator alone, not on node scoring."""
SHAPES = ("core-1", "cores-2", "chip", "chip-cores", "server")
"""Per node, in this order; `chip-cores`: every single core of the server's
first chip (allocationMode All), refused when any of them is taken."""

Outcome = tuple[str, ...]
"""The devices a claim got (pool/device, sorted), or ("refused", message)."""


def claim_of(shape: str, name: str) -> JSON:
    if shape != "chip-cores":
        return load_claim(shape, name, NS)
    claim = load_claim("core-1", name, NS)
    exactly = claim["spec"]["devices"]["requests"][0]["exactly"]
    exactly["allocationMode"] = "All"
    chip = f'device.attributes["{DEFAULT_DRIVER_NAME}"].chipIndex == 0'
    exactly["selectors"].append({"cel": {"expression": chip}})
    return claim


def settled(api: client.ApiClient, name: str) -> Outcome | None:
    bound = client.CoreV1Api(api).read_namespaced_pod(name, NS).spec.node_name
    if bound:
        results = allocation(api, NS, name) or []
        return tuple(sorted(f"{r['pool']}/{r['device']}" for r in results))
    message = unschedulable(api, NS, name)
    return ("refused", message) if message is not None else None


def schedule_all(api: client.ApiClient, held: list[Held]) -> dict[str, Outcome]:
    """Publish the rack, write the held claims, then each claim and its pod,
    one at a time, waiting for it to be bound or refused."""
    layout = BUSY_LAYOUTS["node pools"]
    publish(api, layout.slices(1, held))
    write_allocated(
        api, held_claims(held, layout.pool_of, lambda h: rack_nodes(h.rack)[h.server], NS)
    )
    outcomes = {}
    try:
        for server, node in enumerate(rack_nodes(0)[:NODES]):
            for shape in SHAPES:
                name = f"{shape}-{server:02d}"
                custom(api).create_namespaced_custom_object(
                    "resource.k8s.io", "v1", NS, "resourceclaims", claim_of(shape, name)
                )
                client.CoreV1Api(api).create_namespaced_pod(NS, pod(name, NS, [name], [node]))
                outcomes[name] = wait_for(name, partial(settled, api, name), 60, 0.1)
    finally:
        clear_busy(api)
    return outcomes


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with ControlPlane.running(Path(tmp_path_factory.mktemp("counters-first"))) as cp:
        install(cp)
        with cp.api_client() as api:
            ensure_fleet_nodes(cp, api, 1)
            client.CoreV1Api(api).create_namespace({"metadata": {"name": NS}})
        yield cp


def test_the_patched_scheduler_allocates_and_refuses_as_the_stock_one(
    plane: ControlPlane,
) -> None:
    held = fleet_fill(1, HELD, SEED)
    assert plane.binaries is not None
    with plane.api_client() as api:
        stock = schedule_all(api, held)
        plane.restart_scheduler(counters_first_scheduler())
        patched = schedule_all(api, held)
    refused = [name for name, outcome in stock.items() if outcome[0] == "refused"]
    # Both kinds of outcome occur, so the comparison below compares something.
    assert refused and len(refused) < len(stock), stock
    assert any(name.startswith("chip-cores") for name in refused), refused
    differ = {name: (stock[name], patched[name]) for name in stock if stock[name] != patched[name]}
    assert not differ, differ
