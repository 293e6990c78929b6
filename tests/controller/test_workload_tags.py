"""Node -> workloadId from the UltraServer operator's NeuronUltraServers, and the
AWS slices with and without those tags (pure)."""

import itertools
from typing import Any

import pytest

from driver.controller.handlers import racks_for_nodes
from driver.controller.rackstate import desired_rack, inputs_key
from driver.controller.slices import build_slices
from driver.controller.workloadtags import (
    WorkloadAllocation,
    allocations_of,
    node_workloads,
    nodes_named,
    rack_tags,
)
from driver.devicemodel.awsprofile import INSTANCE_TYPES, AwsVersions
from driver.devicemodel.nodemap import map_nodes
from driver.devicemodel.poolplan import AwsRack, RackInput
from driver.devicemodel.profiles import AWS, TRAINIUM
from driver.devicemodel.ultraserver import parse_spec
from simdevice.topology import rack_spec

DRIVER = "neuron.aws.com"
VERSIONS = AwsVersions(dra_driver="0.1.0")
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_STRING_ATTRIBUTE = 64


def nus(name: str, *allocations: dict[str, Any], namespace: str = "neuron") -> dict[str, Any]:
    return {
        "apiVersion": "neuron.aws.com/v1",
        "kind": "NeuronUltraServer",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"instanceType": "trn2u.48xlarge"},
        "status": {"allocations": list(allocations), "state": "Ready"},
    }


def allocation(workload: str, wid: str, *nodes: str) -> dict[str, Any]:
    return {"workload": workload, "workloadId": wid, "nodes": list(nodes)}


def projected(*objects: dict[str, Any]) -> dict[str, tuple[WorkloadAllocation, ...]]:
    return {
        f"{o['metadata']['namespace']}/{o['metadata']['name']}": allocations_of(o) for o in objects
    }


def test_each_allocated_node_gets_its_workloads_id() -> None:
    tags = node_workloads(
        projected(
            nus("us-a", allocation("team/train", "wl-1", "n0", "n1"), allocation("t/b", "wl-2")),
            nus("us-b", allocation("team/eval", "wl-3", "n4")),
            nus("us-c"),
        )
    )
    assert tags.nodes == {"n0": "wl-1", "n1": "wl-1", "n4": "wl-3"}
    assert tags.problems == ()


def test_the_store_keeps_only_the_allocations() -> None:
    obj = nus("us-a", allocation("team/train", "wl-1", "n0"))
    same = {**obj, "status": {**obj["status"], "state": "Degraded", "health": "Unhealthy"}}
    assert allocations_of(obj) == allocations_of(same)
    assert allocations_of({"metadata": {"name": "x"}}) == ()
    assert allocations_of({"status": {"allocations": "bogus"}}) == ()
    odd = {"status": {"allocations": ["x", {"workloadId": 7, "nodes": ["n0", 3, ""]}]}}
    assert allocations_of(odd) == (WorkloadAllocation("", "", ("n0",)),)


def test_a_node_of_two_workloads_gets_no_tag_and_the_reason() -> None:
    tags = node_workloads(
        projected(
            nus("us-a", allocation("team/a", "wl-1", "n0", "n1")),
            nus("us-b", allocation("team/b", "wl-2", "n1", "n2")),
            nus("us-c", allocation("team/a", "wl-1", "n0")),  # the same id twice is no clash
        )
    )
    assert tags.nodes == {"n0": "wl-1", "n2": "wl-2"}
    assert tags.problems == (
        "node n1 is allocated to more than one workload: team/a (wl-1), team/b (wl-2); a node "
        "belongs to one workload at most, so its devices are not tagged",
    )


def test_an_id_a_slice_cannot_carry_tags_nothing() -> None:
    long_id = "w" * 65
    tags = node_workloads(
        projected(
            nus("us-a", allocation("team/a", "", "n0")),
            nus("us-b", allocation("team/b", long_id, "n1")),
            nus("us-c", allocation("team/c", "w" * 64, "n2")),
        )
    )
    assert tags.nodes == {"n2": "w" * 64}
    assert tags.problems == (
        "NeuronUltraServer neuron/us-a: the allocation of workload team/a has no workloadId; "
        "its nodes n0 are not tagged",
        f"NeuronUltraServer neuron/us-b: workloadId {long_id!r} of workload team/b is longer "
        "than the 64 characters a ResourceSlice attribute takes; its nodes n1 are not tagged",
    )


def test_a_change_names_the_nodes_of_before_and_after() -> None:
    before = allocations_of(nus("us-a", allocation("t/a", "wl-1", "n0", "n1")))
    after = allocations_of(nus("us-a", allocation("t/a", "wl-1", "n1", "n2")))
    assert nodes_named([before, after]) == {"n0", "n1", "n2"}
    assert nodes_named([None, ()]) == set()
    assert rack_tags({"n0": "a", "n9": "b"}, ["n0", "n1"]) == {"n0": "a"}


def test_a_change_requeues_the_racks_of_its_nodes() -> None:
    racks: dict[str, dict[str, Any]] = {
        "rack-a": {"spec": {"nodes": {"names": ["n0", "n1"]}}},
        "rack-b": {"spec": {"nodes": {"names": ["n4"]}}},
        "rack-c": {"spec": {"nodes": {"selector": {}}}},
    }
    assert racks_for_nodes(racks, {"n1"}) == {"rack-a", "rack-c"}
    assert racks_for_nodes(racks, ["n0", "n4"]) == {"rack-a", "rack-b", "rack-c"}
    assert racks_for_nodes({"rack-a": racks["rack-a"]}, set()) == set()


def aws_slices(
    generation: str, itype: str, nodes: dict[int, str], workloads: dict[str, str] | None = None
) -> Any:
    return build_slices(
        RackInput(
            name="rack-a",
            rack=rack_spec(generation),
            mode="partitioned",
            flat_device="chip",
            nodes=nodes,
            rack_nodes=None,
            taints={},
            binding_conditions=False,
            aws=AwsRack(INSTANCE_TYPES[itype], VERSIONS),
            workloads=workloads or {},
        ),
        DRIVER,
    )


def devices_by_node(found: list[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for s in found:
        for d in s["spec"].get("devices", []):
            out.setdefault(s["spec"]["pool"]["name"], []).append(d)
    return out


def test_every_device_of_a_tagged_node_carries_workload_id_and_no_other_does() -> None:
    nodes = {0: "node-a", 1: "node-b"}
    untagged = devices_by_node(aws_slices("trn2", "trn2u.48xlarge", nodes))
    tagged = devices_by_node(aws_slices("trn2", "trn2u.48xlarge", nodes, {"node-a": "wl-1"}))
    assert len(tagged["node-a"]) == 16 + 1 + 16  # chips, the node device, EFA interfaces
    for device in tagged["node-a"]:
        assert device["attributes"]["workloadId"] == {"string": "wl-1"}
    for device in tagged["node-b"] + untagged["node-a"] + untagged["node-b"]:
        assert "workloadId" not in device["attributes"]
    # The tag is the only difference.
    for before, after in zip(untagged["node-a"], tagged["node-a"], strict=True):
        del after["attributes"]["workloadId"]
        assert before == after
    assert tagged["node-b"] == untagged["node-b"]


@pytest.mark.parametrize(
    ("generation", "itype"),
    [(t.generation, name) for name, t in INSTANCE_TYPES.items()],
)
def test_tags_keep_every_device_within_the_attribute_limits(generation: str, itype: str) -> None:
    rack = rack_spec(generation)
    nodes = {s: f"node-{s:03d}-" + "n" * 50 for s in range(rack.servers)}
    tags = {n: "w" * MAX_STRING_ATTRIBUTE for n in nodes.values()}
    found = aws_slices(generation, itype, nodes, tags)
    devices = list(itertools.chain.from_iterable(devices_by_node(found).values()))
    assert devices and all("workloadId" in d["attributes"] for d in devices)
    for d in devices:
        assert len(d["attributes"]) + len(d.get("capacity") or {}) <= MAX_ATTRIBUTES_AND_CAPACITIES
        for value in d["attributes"].values():
            assert len(str(value.get("string", ""))) <= MAX_STRING_ATTRIBUTE


def rack_obj() -> dict[str, Any]:
    return {
        "metadata": {"name": "rack-a", "uid": "u1", "generation": 1},
        "spec": {"generation": "trn2", "nodes": {"names": ["node-a", "node-b", "node-c", "n-d"]}},
    }


NODES: dict[str, dict[str, str]] = {n: {} for n in ("node-a", "node-b", "node-c", "n-d")}


def test_the_digest_moves_with_the_tags_and_only_then() -> None:
    obj = rack_obj()
    mapping = map_nodes(parse_spec(obj), NODES)

    def key(workloads: dict[str, str]) -> str:
        return inputs_key(
            obj, mapping, {}, DRIVER, True, profile=AWS, versions=VERSIONS, workloads=workloads
        )

    assert key({}) == key({})
    assert key({"node-a": "wl-1", "node-b": "wl-1"}) == key({"node-b": "wl-1", "node-a": "wl-1"})
    keys = [key({}), key({"node-a": "wl-1"}), key({"node-a": "wl-2"}), key({"node-b": "wl-1"})]
    assert len(set(keys)) == 4
    assert inputs_key(obj, mapping, {}, DRIVER, True, profile=AWS, versions=VERSIONS) == key({})


def test_desired_rack_tags_per_node_devices_only() -> None:
    spec = parse_spec(rack_obj())
    tags = {"node-b": "wl-1"}
    aws = desired_rack(spec, NODES, {}, DRIVER, profile=AWS, versions=VERSIONS, workloads=tags)
    tagged = {
        s["spec"]["pool"]["name"]
        for s in aws.slices
        for d in s["spec"].get("devices", [])
        if "workloadId" in d["attributes"]
    }
    assert tagged == {"node-b"}
    trainium = desired_rack(spec, NODES, {}, "trainium.sim.dev", profile=TRAINIUM, workloads=tags)
    assert not any(
        "workloadId" in d["attributes"]
        for s in trainium.slices
        for d in s["spec"].get("devices", [])
    )
