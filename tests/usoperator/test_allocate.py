"""The operator's decisions on real slice JSON (the controller's AWS builder):
which nodes a workload gets, and what each failure strategy does (pure)."""

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest

from driver.controller.slices import build_slices
from driver.devicemodel.awsprofile import INSTANCE_TYPES, AwsVersions
from driver.devicemodel.naming import chip_name
from driver.devicemodel.poolplan import AwsRack, RackInput
from driver.devicemodel.profiles import AWS
from driver.usoperator.allocate import Decision, decide
from driver.usoperator.manifests import claim_template, ultraserver_status, workload_status
from driver.usoperator.model import (
    Held,
    UltraServer,
    Workload,
    WorkloadError,
    busy_nodes,
    discover,
    parse_workload,
    workload_id,
)
from simdevice.topology import rack_spec

DRIVER = "neuron.aws.com"
GEN1 = "trn3.48xlarge"
TAINT = {"key": "trainium.sim.dev/unhealthy", "value": "chip", "effect": "NoExecute"}


def rack_slices(rack: str, generation: str, itype: str, nodes: int, **taints: Any) -> list[Any]:
    return build_slices(
        RackInput(
            name=rack,
            rack=rack_spec(generation),
            mode="partitioned",
            flat_device="chip",
            nodes={i: f"{rack}-node-{i}" for i in range(nodes)},
            rack_nodes=None,
            taints=taints,
            binding_conditions=False,
            aws=AwsRack(INSTANCE_TYPES[itype], AwsVersions(dra_driver="0.1.0")),
        ),
        DRIVER,
    )


def node_objects(
    rack: str, generation: str, count: int, not_ready: Sequence[int] = ()
) -> dict[str, Any]:
    out = {}
    for i in range(count):
        name = f"{rack}-node-{i}"
        labels = AWS.node_labels(rack, generation, rack_spec(generation).servers, None, i)
        ready = "False" if i in not_ready else "True"
        out[name] = {
            "metadata": {"name": name, "labels": labels},
            "status": {"conditions": [{"type": "Ready", "status": ready, "reason": "KubeletDown"}]},
        }
    return out


def gen1_fleet(
    racks: int = 2,
    not_ready: Mapping[str, Sequence[int]] | None = None,
    taints: Mapping[str, Any] | None = None,
) -> dict[str, UltraServer]:
    """Trn3 Gen1 UltraServers rack-a, rack-b, ...; `taints` go to rack-a's chips."""
    slices: list[Any] = []
    nodes: dict[str, Any] = {}
    for r in range(racks):
        rack = f"rack-{'abcdefgh'[r]}"
        slices += rack_slices(rack, "trn3-gen1", GEN1, 4, **(dict(taints or {}) if r == 0 else {}))
        nodes |= node_objects(rack, "trn3-gen1", 4, (not_ready or {}).get(rack, ()))
    return discover(slices, nodes, (), DRIVER)


def workload(
    name: str, size: int, count: int = 1, strategy: str = "NoOp", created: str = ""
) -> Workload:
    return parse_workload(
        {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "uid": f"uid-{name}",
                "creationTimestamp": created or name,
            },
            "spec": {
                "instanceType": GEN1,
                "topologySize": size,
                "serverCount": count,
                "allocationPolicy": {"failureStrategy": strategy},
            },
        }
    )


def by_name(decisions: list[Decision]) -> dict[str, Decision]:
    return {d.workload.name: d for d in decisions}


def held_of(decisions: list[Decision]) -> list[Held]:
    return [h for d in decisions for h in d.held]


def test_ultraservers_are_found_by_their_capacity_block_with_their_nodes() -> None:
    fleet = gen1_fleet()
    assert len(fleet) == 2
    us = next(iter(fleet.values()))
    assert us.id.startswith("cr-") and us.instance_type == GEN1
    assert [m.name for m in us.nodes] == [f"rack-a-node-{i}" for i in range(4)] or [
        m.name for m in us.nodes
    ] == [f"rack-b-node-{i}" for i in range(4)]
    assert {m.groups[2] for m in us.nodes} == {
        f"{us.nodes[0].name[:6]}-0",
        f"{us.nodes[0].name[:6]}-1",
    }


def test_workloads_pack_pairs_into_one_ultraserver_and_keep_the_other_whole() -> None:
    fleet = gen1_fleet()
    found = by_name(decide([workload("a", 2), workload("b", 2), workload("c", 4)], fleet, []))
    assert {d.state for d in found.values()} == {"Allocated"}
    assert found["a"].held[0].ultraserver == found["b"].held[0].ultraserver
    assert set(found["a"].nodes).isdisjoint(found["b"].nodes)
    assert found["c"].held[0].ultraserver != found["a"].held[0].ultraserver
    assert len(found["c"].nodes) == 4


def test_a_first_allocation_is_all_or_nothing_and_waits() -> None:
    fleet = gen1_fleet()
    first = by_name(decide([workload("a", 4), workload("b", 4, count=2, created="b")], fleet, []))
    assert first["a"].state == "Allocated"
    assert first["b"].state == "Pending" and first["b"].held == ()
    assert "no 2 UltraServers" in first["b"].message


@pytest.mark.parametrize(
    ("size", "count", "field"),
    [(4, 3, "spec.serverCount"), (4, 2, None)],
)
def test_a_request_no_state_of_the_cluster_can_hold_fails_naming_the_field(
    size: int, count: int, field: str | None
) -> None:
    (d,) = decide([workload("a", size, count)], gen1_fleet(), [])
    if field is None:
        assert d.state == "Allocated"
    else:
        assert d.state == "Failed" and d.message.startswith(field)


def test_nodes_holding_plain_claims_are_left_alone() -> None:
    claim = {
        "metadata": {"name": "plain", "namespace": "ns"},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"driver": DRIVER, "pool": "rack-a-node-0", "device": "neurondevice0"}
                    ]
                }
            }
        },
    }
    busy = busy_nodes([claim], DRIVER)
    assert busy == {"rack-a-node-0"}
    slices = rack_slices("rack-a", "trn3-gen1", GEN1, 4)
    fleet = discover(slices, node_objects("rack-a", "trn3-gen1", 4), busy, DRIVER)
    (d,) = decide([workload("a", 2)], fleet, [])
    assert d.nodes == ("rack-a-node-2", "rack-a-node-3")
    (whole,) = decide([workload("w", 4)], fleet, [])
    assert whole.state == "Pending"


def allocate_then_fail(
    strategy: str, size: int, count: int = 1, **fail: Any
) -> tuple[Decision, Decision]:
    first = decide([workload("a", size, count, strategy)], gen1_fleet(), [])
    node = first[0].nodes[0]
    rack, index = node.rsplit("-node-", 1)
    fleet = gen1_fleet(not_ready={rack: [int(index)]})
    (after,) = decide([replace_status(first[0])], fleet, held_of(first))
    return first[0], after


def replace_status(d: Decision) -> Workload:
    return replace(d.workload, status=workload_status(d, "2026-01-01T00:00:00Z"))


def test_noop_keeps_every_node_and_reports_the_failure() -> None:
    before, after = allocate_then_fail("NoOp", 2)
    assert after.nodes == before.nodes
    assert after.state == "Allocated" and after.reason == "Degraded"
    assert after.failed_nodes == (before.nodes[0],) and "NotReady" in after.message


def test_restart_all_gives_everything_back_and_allocates_again_on_healthy_nodes() -> None:
    before, after = allocate_then_fail("RestartAll", 4)
    assert after.restarted and after.state == "Allocated" and after.reason == "Restarted"
    assert set(after.nodes).isdisjoint(before.nodes)
    assert len(after.nodes) == 4
    status = workload_status(after, "t1")
    assert status["lastFailure"]["nodes"] == [before.nodes[0]]
    assert status["restartedAt"] == "t1" and status["lastFailure"]["reallocatedAt"] == "t1"
    (later,) = decide([replace_status(after)], gen1_fleet(), list(after.held))
    assert later.reason == "Restarted" and not later.restarted, "the news stays until nodes change"


def test_migrate_affected_replaces_one_node_by_a_spare_of_the_same_ultraserver() -> None:
    before, after = allocate_then_fail("MigrateAffected", 1)
    assert before.nodes == ("rack-a-node-3",) or before.nodes
    assert after.reason == "Migrated" and after.state == "Allocated"
    assert after.held[0].ultraserver == before.held[0].ultraserver
    assert after.replaced == {before.nodes[0]: after.nodes[0]}


def test_migrate_affected_moves_a_group_with_no_spare_to_another_ultraserver() -> None:
    before, after = allocate_then_fail("MigrateAffected", 4)
    assert after.state == "Allocated"
    assert after.held[0].ultraserver != before.held[0].ultraserver


def test_migrate_affected_keeps_the_healthy_group_while_nothing_fits() -> None:
    before, after = allocate_then_fail("MigrateAffected", 4, count=2)
    assert before.state == "Allocated" and len(before.held) == 2
    assert after.state == "PartiallyAllocated" and len(after.held) == 1
    assert after.held[0].nodes in {h.nodes for h in before.held}


def test_a_failed_chip_makes_its_node_unhealthy() -> None:
    fleet = gen1_fleet(taints={chip_name(1, 0): [TAINT]})
    rack_a = next(us for us in fleet.values() if us.nodes[0].name.startswith("rack-a"))
    assert not rack_a.healthy
    assert [m.problem for m in rack_a.nodes][1].startswith("device neurondevice0 tainted")


def test_a_deleted_workload_holds_nothing() -> None:
    first = decide([workload("a", 2)], gen1_fleet(), [])
    (d,) = decide([replace(first[0].workload, deleting=True)], gen1_fleet(), held_of(first))
    assert d.state == "Deallocating" and d.held == ()


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"topologySize": 3}, "spec.topologySize"),
        ({"serverCount": 0}, "spec.serverCount"),
        (
            {"allocationPolicy": {"failureStrategy": "Pray"}},
            "spec.allocationPolicy.failureStrategy",
        ),
        ({"instanceType": "trn2.48xlarge"}, "spec.instanceType"),
    ],
)
def test_bad_input_names_the_field(spec: dict[str, Any], field: str) -> None:
    good = {"instanceType": GEN1, "topologySize": 2, "serverCount": 1}
    with pytest.raises(WorkloadError, match=f"^{field}"):
        parse_workload({"metadata": {"name": "w", "namespace": "ns"}, "spec": {**good, **spec}})


def test_the_template_pins_each_claim_to_a_node_device_of_the_workload() -> None:
    w = workload("a", 2)
    template = claim_template(w, DRIVER)
    assert template["spec"]["metadata"]["labels"] == {"neuron.aws.com/workload-id": "ns.a"}
    request = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    expression = request["selectors"][0]["cel"]["expression"]
    assert "resourceType == 'neuron_node'" in expression
    assert "workloadId == 'ns.a'" in expression
    assert template["spec"]["spec"]["devices"]["config"][0]["opaque"]["parameters"] == {
        "apiVersion": "neuron.aws.com/v1",
        "kind": "UltraServerConfig",
        "ultraserverMode": 2,
    }


def test_an_ultraserver_status_counts_free_groups_and_allocations() -> None:
    fleet = gen1_fleet(racks=1)
    decisions = decide([workload("a", 2)], fleet, [])
    (us,) = fleet.values()
    status = ultraserver_status(us, held_of(decisions), {}, "t")
    assert status["state"] == "PartiallyAllocated" and status["health"] == "Ready"
    assert status["availableConfigurations"] == [
        {"topologySize": 1, "free": 2},
        {"topologySize": 2, "free": 1},
        {"topologySize": 4, "free": 0},
    ]
    assert status["allocations"] == [
        {"workload": "ns/a", "workloadId": "ns.a", "nodes": list(decisions[0].nodes)}
    ]


def test_a_long_workload_id_is_cut_to_a_label_value_and_stays_unique() -> None:
    long_ns, long_name = "n" * 40, "w" * 60
    first = workload_id(long_ns, long_name)
    second = workload_id(long_ns, long_name[:-1] + "x")
    assert len(first) == 63 and first[-1].isalnum() and first != second
    assert workload_id("ns", "a") == "ns.a"
