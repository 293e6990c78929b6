"""Each fault kind, as the operator reads it (a device taint, a Node's Ready
condition, a silent heartbeat Lease, slices gone), makes its node unhealthy
and its UltraServer Degraded; each failure strategy then acts the same way
whatever the fault (pure)."""

import datetime
from dataclasses import replace
from typing import Any

import pytest

from driver.devicemodel.naming import chip_name
from driver.node.heartbeat import lease_object
from driver.usoperator.allocate import Decision, decide
from driver.usoperator.health import UNPUBLISHED, next_expiry, silent_daemons
from driver.usoperator.manifests import ultraserver_status, workload_status
from driver.usoperator.model import UltraServer, discover, known_members
from tests.usoperator.test_allocate import (
    DRIVER,
    GEN1,
    node_objects,
    rack_slices,
    workload,
)

NOW = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)
VICTIM = "rack-a-node-0"
UNHEALTHY_KEY = f"{DRIVER}/unhealthy"


def _taint(effect: str, value: str) -> dict[str, Any]:
    return {"key": UNHEALTHY_KEY, "value": value, "effect": effect}


def fleet(fault: str = "", heartbeat_age: float = 0.0) -> dict[str, UltraServer]:
    """rack-a and rack-b (Trn3 Gen1, four nodes each), `fault` on rack-a-node-0."""
    slices: list[Any] = []
    nodes: dict[str, Any] = {}
    for rack in ("rack-a", "rack-b"):
        taints = {}
        if rack == "rack-a" and fault == "chip":
            taints = {chip_name(0, 0): [_taint("NoExecute", "failed")]}
        if rack == "rack-a" and fault == "link-down":
            taints = {chip_name(0, 0): [_taint("NoSchedule", "degraded")]}
        slices += rack_slices(rack, "trn3-gen1", GEN1, 4, **taints)
        nodes |= node_objects(rack, "trn3-gen1", 4)
    known = known_members(
        [
            {"metadata": {"name": us.id}, "spec": {"instanceType": GEN1, "nodes": names}}
            for us, names in ((us, [m.name for m in us.nodes]) for us in _plain(slices, nodes))
        ]
    )
    if fault == "not-ready":
        nodes[VICTIM]["status"]["conditions"][0] |= {
            "status": "Unknown",
            "reason": "NodeStatusUnknown",
        }
    if fault == "slices-gone":
        slices = [s for s in slices if s["spec"].get("nodeName") != VICTIM]
    leases = [
        lease_object(name, "ns", 1.0, NOW - datetime.timedelta(seconds=0.5)) for name in nodes
    ]
    if fault == "daemon-killed":
        leases = [
            lease_object(name, "ns", 1.0, NOW - datetime.timedelta(seconds=heartbeat_age or 10))
            if name == VICTIM
            else lease
            for name, lease in zip(nodes, leases, strict=True)
        ]
    return discover(slices, nodes, (), DRIVER, known=known, silent=silent_daemons(leases, NOW))


def _plain(slices: list[Any], nodes: dict[str, Any]) -> list[UltraServer]:
    return list(discover(slices, nodes, (), DRIVER).values())


def rack_a(servers: dict[str, UltraServer]) -> UltraServer:
    return next(us for us in servers.values() if us.nodes[0].name.startswith("rack-a"))


FAULTS: dict[str, str] = {
    "chip": f"device neurondevice0 tainted {UNHEALTHY_KEY}=failed",
    "link-down": f"device neurondevice0 tainted {UNHEALTHY_KEY}=degraded",
    "not-ready": "node NotReady (Ready Unknown, NodeStatusUnknown)",
    "daemon-killed": "node daemon silent since",
    "slices-gone": UNPUBLISHED,
}
"""Fault kind -> how the victim's problem begins."""


@pytest.mark.parametrize(("fault", "problem"), FAULTS.items())
def test_each_fault_makes_its_node_unhealthy_and_its_ultraserver_degraded(
    fault: str, problem: str
) -> None:
    us = rack_a(fleet(fault))
    victim = next(m for m in us.nodes if m.name == VICTIM)
    assert victim.problem.startswith(problem), victim.problem
    assert [m.name for m in us.nodes if m.problem] == [VICTIM]
    status = ultraserver_status(us, [], {"health": "Ready"}, "t")
    assert status["health"] == "Degraded" and status["healthChangedAt"] == "t"
    assert status["message"].startswith(f"{VICTIM}: {problem}")


def test_a_healthy_fleet_is_ready_and_says_so() -> None:
    us = rack_a(fleet())
    assert us.healthy
    status = ultraserver_status(us, [], {}, "t")
    assert status["health"] == "Ready" and status["message"] == "all 4 nodes healthy"


def test_a_link_down_taint_marks_the_device_and_a_prefer_taint_does_not() -> None:
    slices = rack_slices(
        "rack-a",
        "trn3-gen1",
        GEN1,
        4,
        **{chip_name(0, 0): [_taint("PreferNoSchedule", "degraded")]},
    )
    (us,) = discover(slices, node_objects("rack-a", "trn3-gen1", 4), (), DRIVER).values()
    assert us.healthy


def test_a_heartbeat_within_its_lease_is_not_silence() -> None:
    leases = [lease_object(VICTIM, "ns", 1.0, NOW - datetime.timedelta(seconds=3.5))]
    assert silent_daemons(leases, NOW) == {}
    assert next_expiry(leases, NOW) == pytest.approx(0.5)
    late = [lease_object(VICTIM, "ns", 1.0, NOW - datetime.timedelta(seconds=4.5))]
    assert VICTIM in silent_daemons(late, NOW) and next_expiry(late, NOW) is None


def test_a_node_gone_with_its_devices_leaves_its_ultraserver() -> None:
    slices = rack_slices("rack-a", "trn3-gen1", GEN1, 4)
    nodes = node_objects("rack-a", "trn3-gen1", 4)
    (us,) = discover(slices, nodes, (), DRIVER).values()
    known = {us.id: (GEN1, [m.name for m in us.nodes])}
    remaining = [s for s in slices if s["spec"].get("nodeName") != VICTIM]
    del nodes[VICTIM]
    (after,) = discover(remaining, nodes, (), DRIVER, known=known).values()
    assert after.healthy and VICTIM not in [m.name for m in after.nodes]


def _allocate_then(fault: str, strategy: str) -> tuple[Decision, Decision]:
    """A pair on rack-a-node-0/1 (the fullest-first pick), then `fault` on rack-a-node-0."""
    (first,) = decide([workload("a", 2, strategy=strategy)], fleet(), [])
    assert VICTIM in first.nodes, first.nodes
    again = replace(first.workload, status=workload_status(first, "t0"))
    (after,) = decide([again], fleet(fault), list(first.held))
    return first, after


@pytest.mark.parametrize("fault", FAULTS)
def test_noop_reports_every_fault_and_moves_nothing(fault: str) -> None:
    before, after = _allocate_then(fault, "NoOp")
    assert after.nodes == before.nodes and after.reason == "Degraded"
    assert after.failed_nodes == (VICTIM,) and after.message.startswith(f"{VICTIM}: ")
    assert "nothing moved" in after.message


@pytest.mark.parametrize("fault", FAULTS)
def test_restart_all_gives_back_every_node_on_every_fault(fault: str) -> None:
    _, after = _allocate_then(fault, "RestartAll")
    assert after.restarted and after.reason == "Restarted" and after.state == "Allocated"
    assert VICTIM not in after.nodes and len(after.nodes) == 2
    assert workload_status(after, "t1")["restartedAt"] == "t1"


@pytest.mark.parametrize("fault", FAULTS)
def test_migrate_affected_replaces_only_the_failed_node_on_every_fault(fault: str) -> None:
    before, after = _allocate_then(fault, "MigrateAffected")
    assert after.reason == "Migrated" and after.state == "Allocated"
    kept = [n for n in before.nodes if n != VICTIM]
    assert set(kept) <= set(after.nodes) and VICTIM not in after.nodes
    assert list(after.replaced) == [VICTIM]
