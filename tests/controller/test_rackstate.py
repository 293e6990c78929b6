"""The pure half of a reconcile: desired slices and the facts for status."""

from driver.controller.healthtaints import Report
from driver.controller.rackstate import (
    Published,
    allocated_devices,
    desired_rack,
    invalid_spec,
    observe_rack,
    owner_reference,
)
from driver.devicemodel.ultraserver import parse_spec

NODES = {n: {"kubernetes.io/hostname": n} for n in ("a", "b", "c", "d")}
SPEC = parse_spec(
    {
        "metadata": {"name": "r", "uid": "u", "generation": 3},
        "spec": {"generation": "trn2", "nodes": {"names": ["a", "b", "c", "d"]}},
    }
)


def test_a_full_rack_publishes_every_device_and_counts_its_reports() -> None:
    reports = {"b": [Report(chip=0, core=None, state="failed", reason="CoreHang")]}
    want = desired_rack(SPEC, NODES, reports, "d.example")
    assert len(want.mapping.nodes) == 4
    assert {h.device for h in want.health} >= {"server01-chip00", "server01", "ultraserver"}
    seen = observe_rack(SPEC, want, Published(want.slices, 7), reports, {"server00"})
    assert (seen.pool_generation, seen.slices, seen.error) == (7, len(want.slices), None)
    assert len(seen.published) == len(want.devices)
    assert seen.unhealthy_cores == 8


def test_a_refused_publish_reports_nothing_published() -> None:
    want = desired_rack(SPEC, NODES, {}, "d.example")
    seen = observe_rack(SPEC, want, Published([], 0, "off", "PartitionableDevicesOff"), {}, ())
    assert (seen.published, seen.slices, seen.error_reason) == ([], 0, "PartitionableDevicesOff")


def test_helpers() -> None:
    claims = {"c1": frozenset({("d.example", "r", "server00"), ("other", "r", "server01")})}
    assert allocated_devices(claims, "d.example", "r") == {"server00"}
    assert owner_reference(SPEC)["uid"] == "u"
    assert invalid_spec(3, 2, "spec.mode: bad").error_reason == "InvalidSpec"
