"""`order` publishing: which devices the allocated ones block, the order that
lists them last, and the slices and writes it makes."""

import copy
import random
from collections.abc import Sequence

import pytest

from driver.controller.slices import build_slices
from driver.controller.writeplan import Write, plan_writes
from driver.devicemodel.blocking import blocked_devices, device_order
from driver.devicemodel.layout import POOL_LAYOUTS, Layout, LayoutOptions, build_layout
from driver.jsontypes import JSON
from simdevice.topology import rack_spec
from tests.controller.rackinput import DRIVER, beside_devices, device_names, rack_input

RACK = rack_spec("trn3-gen2")
OWNER = {"apiVersion": "v", "kind": "UltraServer", "name": "r", "uid": "u", "controller": True}


def layout(pools: str = "rack") -> Layout:
    return build_layout(RACK, LayoutOptions(pools))


def test_a_held_core_blocks_what_covers_it_and_nothing_beside_it() -> None:
    blocked = blocked_devices(layout(), {"server00-chip01-core2"})
    assert {
        "server00-chip01-cores2-3",
        "server00-chip01-cores0-3",
        "server00-chip01",
        "server00",
        "ultraserver",
    } == blocked
    assert "server00-chip01-core3" not in blocked  # its pair's counter has a core left


def test_a_held_chip_blocks_its_partitions_its_server_and_the_rack() -> None:
    blocked = blocked_devices(layout("node"), {"server02-chip00"})
    partitions = {d.name for d in layout("node").devices if d.name.startswith("server02-chip00-")}
    assert blocked == partitions | {"server02"}  # the node layout's rack device counts nothing


@pytest.mark.parametrize("pools", POOL_LAYOUTS)
def test_blocked_is_exactly_overlapping_cores_for_random_holdings(pools: str) -> None:
    """The counters are exact: a free device is blocked iff its cores overlap
    an allocated device's (the node layout's rack device aside: the guard
    keeps it apart, not counters)."""
    rng = random.Random(pools)
    devices = [d for d in layout(pools).devices if d.kind != "ultraserver"]
    for _ in range(30):
        held: dict[str, frozenset[tuple[int, int]]] = {}
        taken: set[tuple[int, int]] = set()
        for d in rng.sample(devices, 40):
            if not d.cores & taken:
                held[d.name] = d.cores
                taken |= d.cores
        expected = {d.name for d in devices if d.name not in held and d.cores & taken}
        if pools == "rack" and held:
            expected.add("ultraserver")
        assert blocked_devices(layout(pools), set(held)) == expected


def test_the_order_lists_free_devices_first_keeping_each_parts_order() -> None:
    plain = layout().devices
    held = {"server00-chip00", "server05-chip03-cores4-7"}
    ordered = device_order(layout(), held)
    blocked = blocked_devices(layout(), held)
    assert sorted(d.name for d in ordered) == sorted(d.name for d in plain)
    first = [d.name for d in ordered[: len(plain) - len(blocked)]]
    assert first == [d.name for d in plain if d.name not in blocked]
    assert "server00-chip00" in first  # allocated devices keep their place
    assert [d.name for d in ordered[len(first) :]] == [d.name for d in plain if d.name in blocked]
    assert device_order(layout(), set()) == plain


@pytest.mark.parametrize("pools", POOL_LAYOUTS)
def test_ordered_slices_hold_the_same_devices_blocked_ones_last(pools: str) -> None:
    held = frozenset({"server03-chip02-core0", "server07-chip00"})
    plain = build_slices(rack_input(RACK, pools, allocated=held), DRIVER)
    ordered = build_slices(rack_input(RACK, pools, publishing="order", allocated=held), DRIVER)
    blocked = blocked_devices(layout(pools), held)
    assert beside_devices(ordered) == beside_devices(plain)
    moved = 0
    for p, o in zip(plain, ordered, strict=True):
        assert sorted(device_names(p)) == sorted(device_names(o))
        flags = [n in blocked for n in device_names(o)]
        assert flags == sorted(flags)  # no free device after a blocked one
        moved += device_names(p) != device_names(o)
    assert moved == 2  # the two held servers' device slices
    assert build_slices(rack_input(RACK, pools, publishing="order"), DRIVER) == build_slices(
        rack_input(RACK, pools), DRIVER
    )


def stored(writes: Sequence[Write]) -> list[JSON]:
    out = []
    for i, w in enumerate(writes):
        body = copy.deepcopy(w.body)
        assert body is not None
        body["metadata"]["resourceVersion"] = str(100 + i)
        out.append(body)
    return out


def test_reordering_several_slices_is_updates_at_the_same_generation() -> None:
    """Each device stays in its slice: a consumer reading between the updates
    sees every device once, so the pool keeps its generation."""
    existing = stored(
        plan_writes(
            build_slices(rack_input(RACK, "rack", publishing="order"), DRIVER), [], OWNER
        ).writes
    )
    held = frozenset({"server01-chip00-core0", "server04-chip03", "server09-chip01-cores4-5"})
    ordered = rack_input(RACK, "rack", publishing="order", allocated=held)
    write_plan = plan_writes(build_slices(ordered, DRIVER), existing, OWNER)
    assert write_plan.generation == 1
    assert sorted((w.verb, w.name) for w in write_plan.writes) == [
        ("update", "r.server01.d.dev"),
        ("update", "r.server04.d.dev"),
        ("update", "r.server09.d.dev"),
    ]
