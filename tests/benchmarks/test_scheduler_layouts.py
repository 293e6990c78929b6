"""The slices the scheduler benchmark publishes: each layout holds the devices
it claims to, and the orders it tries only reorder them."""

import random
from collections import Counter

import pytest

from benchmarks.scheduler import SIZES, random_mix
from benchmarks.scheduler_busy import BUSY_LAYOUTS
from benchmarks.scheduler_layouts import (
    DEVICE_ORDERS,
    DRIVER_ORDER,
    calibration_nodes,
    calibration_slices,
    flat_slices,
    fleet_rack_name,
    partitioned_slices,
    per_node_pool_slices,
    rack_nodes,
)
from driver.devicemodel.blocking import blocked_devices
from driver.devicemodel.layout import LayoutOptions, build_layout
from driver.jsontypes import JSON
from simdevice.topology import rack_spec
from testbed.fleetfill import GENERATION, fleet_fill

ORDERED_ARMS = {"rack pools": "rack", "node pools": "node", "server pools": "server"}


def names(slices: list[JSON]) -> list[list[str]]:
    return [[d["name"] for d in s["spec"].get("devices") or []] for s in slices]


def test_the_driver_order_is_what_the_controller_publishes() -> None:
    nodes = rack_nodes()
    assert names(partitioned_slices(nodes, DRIVER_ORDER)) == names(partitioned_slices(nodes))


@pytest.mark.parametrize("order", sorted(DEVICE_ORDERS))
def test_an_order_keeps_every_device_in_its_slice(order: str) -> None:
    nodes = rack_nodes()
    mine, theirs = names(partitioned_slices(nodes, order)), names(partitioned_slices(nodes))
    assert [sorted(s) for s in mine] == [sorted(s) for s in theirs]
    assert sum(map(len, mine)) == 2197


def test_size_major_puts_every_single_core_of_a_node_first() -> None:
    server = partitioned_slices(rack_nodes(), "size-major")[5]["spec"]["devices"]
    sizes = [d["attributes"]["coreCount"]["int"] for d in server]
    assert sizes[:32] == [1] * 32
    assert sizes == sorted(sizes)


def test_per_node_pools_hold_the_flat_devices_one_pool_per_node() -> None:
    nodes = rack_nodes()
    pools = per_node_pool_slices(nodes)
    assert [s["spec"]["nodeName"] for s in pools] == nodes
    assert [s["spec"]["pool"]["name"] for s in pools] == nodes
    assert all(s["spec"]["pool"]["resourceSliceCount"] == 1 for s in pools)
    assert names(pools) == names(flat_slices(nodes))
    assert not any("consumesCounters" in d for s in pools for d in s["spec"]["devices"])


def test_calibration_has_the_requested_devices_on_every_node() -> None:
    nodes = calibration_nodes(3)
    slices = calibration_slices(nodes, 10)
    assert [len(s["spec"]["devices"]) for s in slices] == [10, 10, 10]
    assert {s["spec"]["pool"]["name"] for s in slices} == set(nodes)


@pytest.mark.parametrize("seed", [7, 8, 9])
def test_a_random_mix_asks_for_exactly_the_rack(seed: int) -> None:
    mix = random_mix(random.Random(seed), 1152)
    assert sum(mix) == 1152
    assert set(Counter(mix)) <= set(SIZES)


@pytest.mark.parametrize("plain,ordered", [(p, f"{p} (ordered)") for p in ORDERED_ARMS])
def test_an_ordered_arm_holds_its_layouts_devices_blocked_last(plain: str, ordered: str) -> None:
    """The occupancy step's ordered arms: the same slices and devices as the
    plain arm, each slice with the devices the held ones block after the free
    ones (as `blocking.device_order` makes them for the controller)."""
    held = fleet_fill(2, 0.5, seed=5)
    mine, theirs = BUSY_LAYOUTS[ordered].slices(2, held), BUSY_LAYOUTS[plain].slices(2, held)
    assert [s["metadata"]["name"] for s in mine] == [s["metadata"]["name"] for s in theirs]
    assert [sorted(s) for s in names(mine)] == [sorted(s) for s in names(theirs)]
    layout = build_layout(rack_spec(GENERATION), LayoutOptions(ORDERED_ARMS[plain]))
    allocated = {rack: {h.device for h in held if h.rack == rack} for rack in (0, 1)}
    blocked = {rack: blocked_devices(layout, allocated[rack]) for rack in (0, 1)}
    moved = 0
    for s, before in zip(mine, names(theirs), strict=True):
        rack = 0 if s["metadata"]["name"].startswith(f"{fleet_rack_name(0)}.") else 1
        free = [d["name"] for d in s["spec"].get("devices") or []]
        flags = [n in blocked[rack] for n in free if n not in allocated[rack]]
        assert flags == sorted(flags)  # allocated devices keep their place
        moved += [d["name"] for d in s["spec"].get("devices") or []] != before
    assert moved > 0
