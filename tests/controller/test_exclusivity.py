"""Exact exclusivity of the counter scheme: two devices of a rack can be
allocated together iff their cores do not overlap, for every pair of devices
of every generation. Checked on the published slices, as the scheduler sees
them: each counter's capacity against what the pair consumes, counters being
named within their pool. In the `node` pool layout the rack device consumes
nothing: every pair but those with the rack device is the scheduler's to
refuse, and those are the controller's (tests/controller/test_rack_guard*.py)."""

import dataclasses
from collections import defaultdict
from itertools import combinations
from typing import Any

import pytest

from driver.controller.slices import build_slices
from driver.devicemodel.layout import LayoutError, LayoutOptions, build_layout
from driver.devicemodel.poolplan import RackInput
from simdevice.topology import GENERATIONS, rack_spec

Counter = tuple[str, str, str]  # pool, counter set, counter
POOL_LAYOUTS = ("rack", "node")


def published(
    generation: str, pools: str = "rack"
) -> tuple[dict[Counter, int], list[dict[str, Any]]]:
    """Counter capacities, and every device with its pool under `_pool`."""
    rack = rack_spec(generation)
    nodes = {s: f"n{s}" for s in range(rack.servers)}
    inp = RackInput(
        "rack",
        rack,
        "partitioned",
        "chip",
        nodes,
        {"nodeSelectorTerms": []},
        {},
        False,
        LayoutOptions(pools),
    )
    capacity: dict[Counter, int] = {}
    devices: list[dict[str, Any]] = []
    for s in build_slices(inp, "d.dev"):
        pool = s["spec"]["pool"]["name"]
        for counter_set in s["spec"].get("sharedCounters", []):
            for name, c in counter_set["counters"].items():
                capacity[(pool, counter_set["name"], name)] = int(c["value"])
        devices += [{**d, "_pool": pool} for d in s["spec"].get("devices", [])]
    return capacity, devices


def cores_of(device: dict[str, Any], cores_per_chip: int, chips: int) -> set[tuple[int, int]]:
    a = device["attributes"]
    start, count = a["coreStart"]["int"], a["coreCount"]["int"]
    if "rackChipIndex" in a:
        return {(a["rackChipIndex"]["int"], c) for c in range(start, start + count)}
    first = a["serverIndex"]["int"] * (count // cores_per_chip) if "serverIndex" in a else 0
    return {
        (chip, c)
        for chip in range(first, first + count // cores_per_chip)
        for c in range(cores_per_chip)
    }


@pytest.mark.parametrize("pools", POOL_LAYOUTS)
@pytest.mark.parametrize("generation", GENERATIONS)
def test_devices_conflict_iff_cores_overlap(generation: str, pools: str) -> None:
    rack = rack_spec(generation)
    capacity, devices = published(generation, pools)
    use: list[dict[Counter, int]] = []
    for d in devices:
        use.append(
            {
                (d["_pool"], c["counterSet"], name): int(v["value"])
                for c in d.get("consumesCounters", [])
                for name, v in c["counters"].items()
            }
        )
        assert all(key in capacity for key in use[-1]), d["name"]
        assert all(v <= capacity[k] for k, v in use[-1].items()), d["name"]
    by_counter: dict[Counter, list[int]] = defaultdict(list)
    for i, u in enumerate(use):
        for key in u:
            by_counter[key].append(i)
    conflicts = set()
    for key, users in by_counter.items():
        for i, j in combinations(users, 2):
            if use[i][key] + use[j][key] > capacity[key]:
                conflicts.add((i, j))
    cores = [cores_of(d, rack.chip.cores, rack.chips) for d in devices]
    by_core: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, cs in enumerate(cores):
        for c in cs:
            by_core[c].append(i)
    overlaps = {pair for users in by_core.values() for pair in combinations(users, 2)}
    assert len(overlaps) > len(devices)
    if pools == "node":
        rack_device = next(i for i, d in enumerate(devices) if d["name"] == "ultraserver")
        assert not use[rack_device]
        overlaps = {pair for pair in overlaps if rack_device not in pair}
    assert conflicts == overlaps


@pytest.mark.parametrize("pools", POOL_LAYOUTS)
@pytest.mark.parametrize("generation", GENERATIONS)
def test_whole_rack_is_the_sum_of_its_cores(generation: str, pools: str) -> None:
    rack = rack_spec(generation)
    _, devices = published(generation, pools)
    singles = [
        d
        for d in devices
        if d["attributes"]["resourceType"]["string"] == "core"
        and d["attributes"]["coreCount"]["int"] == 1
    ]
    assert len(singles) == rack.cores
    racks = [d for d in devices if d["attributes"]["resourceType"]["string"] == "ultraserver"]
    if pools == "server":
        assert racks == []  # a whole rack is a gang of server claims
        return
    assert racks[0]["capacity"]["cores"]["value"] == str(rack.cores)


def test_fine_counters_count_core_pairs() -> None:
    rack = rack_spec("trn3-gen2")
    layout = build_layout(rack)
    fine = dict(layout.counter_sets())["cores-server00"]
    assert len(fine) == rack.chips_per_server * rack.chip.cores // 2
    assert set(fine.values()) == {2}
    by_name = {d.name: d for d in layout.devices}
    single = by_name["server00-chip01-core5"].consumes[0].counters
    assert dict(single) == {"chip01-cores4-5": 1}
    quad = by_name["server00-chip01-cores4-7"].consumes[0].counters
    assert dict(quad) == {"chip01-cores4-5": 2, "chip01-cores6-7": 2}


def test_chips_with_an_odd_core_count_are_refused_by_name() -> None:
    rack = rack_spec("trn3-gen2")
    odd = dataclasses.replace(
        rack, chip=dataclasses.replace(rack.chip, cores=3, chiplets=1, dma_engines=3)
    )
    with pytest.raises(LayoutError, match=r"chip\.cores: 3 .* even number"):
        build_layout(odd)
