"""The pure counts of the daemon-kill trial under the real kubelet."""

from driver.node.durable.checkpoint import PREPARE_COMPLETED, ClaimRecord, DeviceRecord
from testbed.chaos.realkubelet import (
    CDI_PREFIX,
    cdi_claims,
    count_cores_handed_twice,
    count_off,
    count_other_devices,
    count_replaced,
    disturbed,
    visible_cores,
)


def chip(uid: str, index: int) -> ClaimRecord:
    device = DeviceRecord(
        "neuron", "rack-a-node-0", f"node0-chip{index:02d}", "chip", [[index, 0, 8]]
    )
    return ClaimRecord(uid, "ns", uid, PREPARE_COMPLETED, 1, [], [device])


def test_cores_held_or_shown_twice_are_counted() -> None:
    records = {"a": chip("a", 0), "b": chip("b", 1)}
    assert count_cores_handed_twice(records, {"a": [0, 1], "b": [8, 9]}) == 0
    assert count_cores_handed_twice({**records, "c": chip("c", 1)}, {}) == 8
    assert count_cores_handed_twice(records, {"a": [0, 1], "b": [1, 9]}) == 1


def test_a_record_with_other_devices_than_allocated_is_counted() -> None:
    records = {"a": chip("a", 0), "b": chip("b", 1)}
    allocated = {"a": {"node0-chip00"}, "b": {"node0-chip02"}, "gone": {"x"}}
    assert count_other_devices(records, allocated) == 1


def test_leaked_and_lost_records_both_count() -> None:
    assert count_off({"a", "b"}, {"a", "b"}) == 0
    assert count_off({"a", "leaked"}, {"a", "lost"}) == 2


def test_pods_gone_replaced_or_restarted_are_disturbed() -> None:
    before = {"ns/a": ("u1", 0), "ns/b": ("u2", 0), "ns/c": ("u3", 0), "ns/d": ("u4", 1)}
    after = {"ns/a": ("u1", 0), "ns/b": ("u9", 0), "ns/d": ("u4", 2), "ns/new": ("u5", 0)}
    assert disturbed(before, after) == ["ns/b replaced", "ns/c gone", "ns/d restarted 1x"]


def test_slices_replaced_counts_both_sides_of_a_change() -> None:
    assert count_replaced({"s1": "u1"}, {"s1": "u1"}) == 0
    assert count_replaced({"s1": "u1", "s2": "u2"}, {"s1": "u1", "s2": "u3"}) == 2


def test_cdi_file_names_give_claim_uids() -> None:
    names = [f"{CDI_PREFIX}abc.json", f"{CDI_PREFIX}def.json", "other.json", f"{CDI_PREFIX}x.tmp"]
    assert cdi_claims(names) == {"abc", "def"}


def test_visible_cores_come_from_the_spec_env() -> None:
    spec = {"devices": [{"containerEdits": {"env": ["A=1", "NEURON_RT_VISIBLE_CORES=8,9,10"]}}]}
    assert visible_cores(spec) == [8, 9, 10]
    assert visible_cores({"devices": []}) == []
