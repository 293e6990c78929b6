"""The AWS profile's slices: a pool per node in AWS's vocabulary (pure)."""

from typing import Any

import pytest

from driver.controller.rackstate import allocated_devices
from driver.controller.slices import build_slices
from driver.devicemodel.awsprofile import (
    INSTANCE_TYPES,
    AwsVersions,
    ProfileError,
    instance_type,
    rack_chip_aliases,
)
from driver.devicemodel.poolplan import AwsRack, RackInput
from simdevice.topology import rack_spec

VERSIONS = AwsVersions(dra_driver="0.1.0")
DRIVER = "neuron.aws.com"


def slices(generation: str, itype: str, nodes: dict[int, str], **taints: Any) -> list[Any]:
    rack = rack_spec(generation)
    return build_slices(
        RackInput(
            name="rack-a",
            rack=rack,
            mode="partitioned",
            flat_device="chip",
            nodes=nodes,
            rack_nodes=None,
            taints=taints,
            binding_conditions=False,
            aws=AwsRack(INSTANCE_TYPES[itype], VERSIONS),
        ),
        DRIVER,
    )


def devices_of(found: list[Any], pool: str) -> dict[str, Any]:
    return {
        d["name"]: d
        for s in found
        if s["spec"]["pool"]["name"] == pool
        for d in s["spec"].get("devices", [])
    }


def test_a_standalone_trn2_instance_publishes_16_chips_and_16_efas_in_its_node_pool() -> None:
    found = slices("trn2", "trn2.48xlarge", {0: "node-a"})
    assert {s["spec"]["pool"]["name"] for s in found} == {"node-a"}
    assert all(s["spec"]["nodeName"] == "node-a" for s in found)
    assert not any("sharedCounters" in s["spec"] for s in found)
    devices = devices_of(found, "node-a")
    assert sorted(devices) == sorted(
        [f"neurondevice{i}" for i in range(16)] + [f"efa{i}" for i in range(16)]
    )
    chip5 = devices["neurondevice5"]["attributes"]
    assert chip5["deviceId"] == {"int": 5}
    assert chip5["instanceType"] == {"string": "trn2.48xlarge"}
    assert chip5["resourceType"] == {"string": "neuron_device"}
    assert chip5["neuronDriverVersion"] == {"string": "2.25.4.0"}
    assert chip5["draDriverVersion"] == {"version": "0.1.0"}
    assert (chip5["topology_x"], chip5["topology_y"]) == ({"int": 1}, {"int": 1})
    assert chip5["topology4_id"] == {"int": 1} and chip5["topology8_id"] == {"int": 0}
    assert "capacityBlockId" not in chip5
    assert {f"networkNodeLayer{i}" for i in (1, 2, 3)} <= set(chip5)
    assert all(len(d["attributes"]) <= 32 for d in devices.values())


def test_chips_and_their_efas_share_group_ids_by_fours_eights_and_the_node() -> None:
    devices = devices_of(slices("trn2", "trn2.48xlarge", {0: "node-a"}), "node-a")

    def group(name: str, size: int) -> str:
        value: str = devices[name]["attributes"][f"resource.aws.com/devicegroup{size}_id"]["string"]
        return value

    assert group("neurondevice0", 4) == group("neurondevice3", 4) == group("efa2", 4)
    assert group("neurondevice3", 4) != group("neurondevice4", 4)
    assert group("neurondevice7", 8) == group("efa0", 8) != group("neurondevice8", 8)
    assert len({group(f"neurondevice{i}", 16) for i in range(16)}) == 1
    assert group("neurondevice2", 1) == group("efa2", 1) != group("neurondevice1", 1)


def test_an_ultraserver_node_adds_a_node_device_that_consumes_every_chip() -> None:
    found = slices("trn2", "trn2u.48xlarge", {0: "node-a", 1: "node-b"})
    assert {s["spec"]["pool"]["name"] for s in found} == {"node-a", "node-b"}
    devices = devices_of(found, "node-b")
    node = devices["neuronnode"]
    assert node["attributes"]["resourceType"] == {"string": "neuron_node"}
    assert node["attributes"]["instanceType"] == {"string": "trn2u.48xlarge"}
    [consumed] = node["consumesCounters"]
    assert sorted(consumed["counters"]) == sorted(f"neurondevice{i}" for i in range(16))
    [chip_consumes] = devices["neurondevice3"]["consumesCounters"]
    assert chip_consumes["counters"] == {"neurondevice3": {"value": "1"}}
    assert "capacityBlockId" in devices["neurondevice3"]["attributes"]
    assert "topology_x" not in devices["neurondevice3"]["attributes"]
    counters = [s for s in found if "sharedCounters" in s["spec"]]
    assert len(counters) == 2


def test_a_gen2_node_groups_only_what_fits_its_four_chips() -> None:
    devices = devices_of(slices("trn3-gen2", "trn3pd98.48xlarge", {7: "n7"}), "n7")
    attrs = devices["neurondevice0"]["attributes"]
    assert "resource.aws.com/devicegroup4_id" in attrs
    assert "resource.aws.com/devicegroup8_id" not in attrs
    assert sorted(d for d in devices if d.startswith("neuron")) == [
        "neurondevice0",
        "neurondevice1",
        "neurondevice2",
        "neurondevice3",
        "neuronnode",
    ]


def test_a_failed_chip_taints_its_device_and_the_node_device_over_it() -> None:
    taint = {"key": "neuron.aws.com/unhealthy", "value": "failed", "effect": "NoExecute"}
    devices = devices_of(
        slices("trn2", "trn2u.48xlarge", {1: "node-b"}, **{"server01-chip02": [taint]}),
        "node-b",
    )
    assert devices["neurondevice2"]["taints"] == [taint]
    assert devices["neuronnode"]["taints"] == [taint]
    assert "taints" not in devices["neurondevice1"]


@pytest.mark.parametrize(
    ("generation", "name", "message"),
    [
        ("trn2", "trn9.48xlarge", "spec.instanceType: 'trn9.48xlarge' is not simulated"),
        ("trn3-gen2", "trn2.48xlarge", "trn2.48xlarge is a trn2 instance"),
    ],
)
def test_instance_types_are_checked_against_the_generation(
    generation: str, name: str, message: str
) -> None:
    with pytest.raises(ProfileError, match=message):
        instance_type(generation, name)
    assert instance_type(generation, None).generation == generation


def test_status_counts_aws_devices_as_the_chips_they_hold() -> None:
    rack = rack_spec("trn2")
    aliases = rack_chip_aliases(rack, {1: "node-b"})
    claims = {
        "ns/a": frozenset({(DRIVER, "node-b", "neurondevice3"), (DRIVER, "node-b", "efa3")}),
        "ns/b": frozenset({(DRIVER, "node-b", "neuronnode")}),
        "ns/c": frozenset({("other.driver", "node-b", "neurondevice0")}),
    }
    assert allocated_devices({"ns/a": claims["ns/a"]}, DRIVER, "rack-a", aliases) == {
        "server01-chip03"
    }
    held = allocated_devices(claims, DRIVER, "rack-a", aliases)
    assert held == {f"server01-chip{c:02d}" for c in range(16)}
