"""The two readings of a published device agree (pure): the controller looks
it up in the rack's layout by name (`profilerack.rack_devices`, through the
aliases of per-node devices), the node daemon reads its attributes
(`devicecores.device_ranges`). For every device each layout and profile
publishes, both must give each node the same cores."""

import pytest

from driver.devicemodel.devicecores import AllocationError, device_ranges
from driver.devicemodel.nodemap import map_nodes
from driver.devicemodel.placement import NodePlace
from driver.devicemodel.poolplan import plan_pools
from driver.devicemodel.profilerack import device_aliases, rack_devices, rack_input
from driver.devicemodel.profiles import AWS, TRAINIUM, Profile
from driver.devicemodel.ultraserver import UltraServerSpec, parse_spec
from driver.jsontypes import JSON
from simdevice.topology import chip_places, rack_spec

LAYOUTS = [
    ("partitioned", "chip", "rack"),
    ("partitioned", "chip", "node"),
    ("partitioned", "chip", "server"),
    ("flat", "chip", "rack"),
    ("flat", "core", "rack"),
]
CASES = [
    *(
        (generation, TRAINIUM, *layout)
        for generation in ("trn2", "trn3-gen2")
        for layout in LAYOUTS
    ),
    *((generation, AWS, "partitioned", "chip", "rack") for generation in ("trn2", "trn3-gen2")),
]


def spec(generation: str, mode: str, flat_device: str, pools: str) -> UltraServerSpec:
    names = [f"n{s}" for s in range(rack_spec(generation).servers)]
    return parse_spec(
        {
            "metadata": {"name": "r", "uid": "u", "generation": 1},
            "spec": {
                "generation": generation,
                "mode": mode,
                "flatDevice": flat_device,
                "pools": pools,
                "nodes": {"names": names},
            },
        }
    )


def node_reading(attrs: JSON, place: NodePlace, pool: str) -> set[tuple[int, int]]:
    """(local chip, core) the device gives the node, read from its attributes;
    none where the node refuses it as another node's."""
    plain = {name: next(iter(value.values())) for name, value in attrs.items()}
    try:
        ranges = device_ranges(plain, place, "device", pool)
    except AllocationError:
        return set()
    return {(r.chip, core) for r in ranges for core in r.physical()}


@pytest.mark.parametrize(
    ("generation", "profile", "mode", "flat_device", "pools"),
    CASES,
    ids=[f"{c[0]}-{c[1].name}-{c[2]}-{c[3]}-{c[4]}" for c in CASES],
)
def test_the_layout_and_the_attributes_give_each_node_the_same_cores(
    generation: str, profile: Profile, mode: str, flat_device: str, pools: str
) -> None:
    rack = spec(generation, mode, flat_device, pools)
    mapping = map_nodes(rack, {n: {} for n in rack.node_names or ()})
    assert len(mapping.nodes) == rack.rack.servers
    places = chip_places(rack.rack)
    by_name = {d.name: d for d in rack_devices(rack, profile)}
    aliases = device_aliases(rack.rack, profile, mapping.nodes)
    servers = range(rack.rack.servers) if rack.rack.servers <= 4 else (0, 1, rack.rack.servers - 1)
    checked = 0
    for pool in plan_pools(rack_input(rack, profile, mapping, {})):
        for planned in pool.slices:
            for entry in planned.spec.get("devices", []):
                held = [
                    by_name[n] for n in aliases.get((pool.name, entry["name"]), (entry["name"],))
                ]
                for server in servers:
                    place = NodePlace(mapping.nodes[server], rack.name, server, rack.rack)
                    layout = {
                        (places[chip].local_index, core)
                        for device in held
                        for chip, core in device.cores
                        if places[chip].server == server
                    }
                    assert node_reading(entry["attributes"], place, pool.name) == layout, (
                        pool.name,
                        entry["name"],
                        server,
                    )
                    checked += 1
    assert checked, "the rack published no device"
