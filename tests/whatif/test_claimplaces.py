"""Allocation results read back as ranks: each device's chips from the
device model of its rack's UltraServer, the rack numbered by the node its pod
was bound to, worked by hand on two Trn3 Gen1 racks (4 servers of 16 chips)."""

import pytest

from driver.devicemodel.ultraserver import parse_spec
from driver.names import DEFAULT_DRIVER_NAME
from localsim.clusterspec import ClusterRack, ultraserver_object
from simdevice.fabric import RankPlace
from whatif.claimplaces import FleetDevices, HeldDevices, allocation_results

DRIVER = DEFAULT_DRIVER_NAME
A, B = (ClusterRack(name, "trn3-gen1", 4, 4) for name in ("rack-a", "rack-b"))
SERVERS = {rack.node_name(s): (r, s) for r, rack in enumerate((A, B)) for s in range(4)}


def fleet(device_mode: str = "partitioned", pools: str = "node") -> FleetDevices:
    specs = [parse_spec(ultraserver_object(rack, device_mode, pools)) for rack in (A, B)]
    return FleetDevices(DRIVER, {spec.name: spec for spec in specs}, SERVERS)


def result(pool: str, device: str, driver: str = DRIVER) -> dict[str, str]:
    return {"request": "devices", "driver": driver, "pool": pool, "device": device}


def test_chips_and_partitions_are_ranks_on_the_pods_rack_one_per_chip() -> None:
    held = [
        HeldDevices("rack-b-node-2", [result("rack-b/server02", "server02-chip03")]),
        HeldDevices("rack-a-node-1", [result("rack-a/server01", "server01-chip05-cores0-1")]),
        HeldDevices("rack-a-node-1", [result("rack-a/server01", "server01-chip05-cores4-7")]),
    ]
    assert fleet().places(held) == (RankPlace(0, 1, 5), RankPlace(1, 2, 3))


def test_a_server_device_is_its_sixteen_chips_and_the_rack_device_every_chip() -> None:
    server = fleet().places([HeldDevices("rack-a-node-3", [result("rack-a/server03", "server03")])])
    assert server == tuple(RankPlace(0, 3, c) for c in range(16))
    rack = fleet().places([HeldDevices("rack-b-node-0", [result("rack-b", "ultraserver")])])
    assert rack == tuple(RankPlace(1, s, c) for s in range(4) for c in range(16))


def test_the_rack_pool_layout_and_flat_mode_name_chips_alike() -> None:
    for mode in ("partitioned", "flat"):
        held = [HeldDevices("rack-a-node-0", [result("rack-a", "server00-chip15")])]
        assert fleet(mode, "rack").places(held) == (RankPlace(0, 0, 15),), mode


def test_another_drivers_devices_are_not_the_jobs_chips() -> None:
    held = [
        HeldDevices(
            "rack-a-node-0",
            [result("rack-a/server00", "server00-chip01"), result("elsewhere", "gpu0", "other")],
        )
    ]
    assert fleet().places(held) == (RankPlace(0, 0, 1),)


@pytest.mark.parametrize(
    "held",
    [
        HeldDevices("rack-a-node-0", [result("rack-a/server00", "neuron0")]),
        HeldDevices("rack-c-node-0", [result("rack-a/server00", "server00-chip01")]),
        HeldDevices("rack-a-node-0", [result("rack-z/server00", "server00-chip01")]),
    ],
    ids=["unknown device", "node outside the fleet", "unknown rack"],
)
def test_what_the_fleet_cannot_number_gives_no_places(held: HeldDevices) -> None:
    assert fleet().places([held]) is None


def test_a_claim_has_results_once_allocated() -> None:
    allocated = result("rack-a/server00", "server00-chip01")
    assert allocation_results({"metadata": {"name": "c"}, "status": {}}) == []
    claim = {
        "metadata": {"name": "c"},
        "status": {"allocation": {"devices": {"results": [allocated]}}},
    }
    assert allocation_results(claim) == [allocated]
