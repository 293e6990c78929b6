"""What each profile publishes of one rack (pure): the devices health is
judged on, the plan's input, the aliases of per-node devices and the devices
`order` publishing lists last."""

import pytest

from driver.devicemodel.layout import build_layout
from driver.devicemodel.nodemap import map_nodes
from driver.devicemodel.profilerack import (
    device_aliases,
    order_blocked,
    rack_devices,
    rack_input,
)
from driver.devicemodel.profiles import AWS, TRAINIUM, Profile
from driver.devicemodel.ultraserver import UltraServerSpec, parse_spec
from driver.names import driver_version

NAMES = ["a", "b", "c", "d"]
NODES = {n: {"kubernetes.io/hostname": n} for n in NAMES}


def spec(mode: str = "partitioned", pools: str = "rack") -> UltraServerSpec:
    return parse_spec(
        {
            "metadata": {"name": "r", "uid": "u", "generation": 1},
            "spec": {
                "generation": "trn2",
                "mode": mode,
                "pools": pools,
                "nodes": {"names": NAMES},
            },
        }
    )


def test_per_node_devices_are_judged_as_the_racks_whole_chips() -> None:
    rack = spec(pools="node")
    chips = rack_devices(rack, AWS)
    assert {d.kind for d in chips} == {"chip"}
    assert len(chips) == rack.rack.chips
    layout = rack_devices(rack, TRAINIUM)
    assert layout == build_layout(rack.rack, rack.layout).devices


def test_only_per_node_devices_carry_the_aws_input_and_workloads() -> None:
    rack = spec()
    mapping = map_nodes(rack, NODES)
    tags = {"b": "wl-1"}
    aws = rack_input(rack, AWS, mapping, {}, workloads=tags)
    assert aws.aws is not None and aws.aws.versions.dra_driver == driver_version()
    assert aws.aws.instance_type.name == "trn2u.48xlarge"
    assert aws.workloads == tags
    trainium = rack_input(rack, TRAINIUM, mapping, {}, workloads=tags)
    assert (trainium.aws, trainium.workloads) == (None, {})


def test_binding_conditions_need_the_apiserver_to_keep_them() -> None:
    rack = spec()
    mapping = map_nodes(rack, NODES)
    served = rack_input(rack, TRAINIUM, mapping, {})
    assert (served.binding_conditions, served.binding_served) == (True, True)
    dropped = rack_input(rack, TRAINIUM, mapping, {}, binding_served=False)
    assert (dropped.binding_conditions, dropped.binding_served) == (False, False)


def test_aliases_name_the_chips_of_per_node_devices_only() -> None:
    rack = spec()
    nodes = {1: "b"}
    assert device_aliases(rack.rack, TRAINIUM, nodes) == {}
    aliases = device_aliases(rack.rack, AWS, nodes)
    assert aliases[("b", "neurondevice3")] == ("server01-chip03",)
    assert aliases[("b", "efa3")] == ()
    assert aliases[("b", "neuronnode")] == tuple(f"server01-chip{c:02d}" for c in range(16))


@pytest.mark.parametrize(
    ("mode", "profile", "publishing", "blocked"),
    [
        ("partitioned", TRAINIUM, "order", True),
        ("partitioned", TRAINIUM, "plain", False),
        ("flat", TRAINIUM, "order", False),
        ("partitioned", AWS, "order", False),
    ],
)
def test_order_publishing_blocks_devices_of_a_partitioned_layout_only(
    mode: str, profile: Profile, publishing: str, blocked: bool
) -> None:
    rack = spec(mode)
    found = order_blocked(rack, profile, publishing, {"server00-chip00"})
    assert bool(found) == blocked
    if blocked:
        assert "server00" in found and "server00-chip00-core0" in found
