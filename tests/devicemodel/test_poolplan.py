"""The device model's plan of a rack's pools (pure): which pools each layout
and profile has, and that the plan is plain data."""

import json
from dataclasses import replace

import pytest

from driver.devicemodel.awsprofile import INSTANCE_TYPES, AwsVersions
from driver.devicemodel.layout import POOL_LAYOUTS, LayoutOptions
from driver.devicemodel.poolplan import AwsRack, RackInput, plan_pools
from simdevice.topology import rack_spec

RACK = rack_spec("trn2")
NODES = {s: f"n{s}" for s in range(RACK.servers)}
SELECTOR = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Exists"}]}]}


def rack_input(pools: str = "rack", mode: str = "partitioned") -> RackInput:
    return RackInput(
        "r", RACK, mode, "chip", NODES, SELECTOR, {}, True, layout=LayoutOptions(pools)
    )


AWS = replace(
    rack_input(), aws=AwsRack(INSTANCE_TYPES["trn2u.48xlarge"], AwsVersions(dra_driver="0.1.0"))
)


@pytest.mark.parametrize(
    ("inp", "pools"),
    [
        (rack_input("rack"), ["r"]),
        (rack_input("node"), [*(f"r/server{s:02d}" for s in NODES), "r"]),
        (rack_input("server"), [f"r/server{s:02d}" for s in NODES]),
        (rack_input(mode="flat"), ["r"]),
        (AWS, list(NODES.values())),
    ],
)
def test_each_layout_and_profile_has_its_pools(inp: RackInput, pools: list[str]) -> None:
    assert [p.name for p in plan_pools(inp)] == pools


def test_a_flat_rack_without_nodes_has_no_pool() -> None:
    assert plan_pools(replace(rack_input(mode="flat"), nodes={})) == []


@pytest.mark.parametrize("inp", [*(rack_input(p) for p in POOL_LAYOUTS), AWS])
def test_the_plan_is_plain_data(inp: RackInput) -> None:
    specs = [s.spec for p in plan_pools(inp) for s in p.slices]
    assert json.loads(json.dumps(specs)) == specs
