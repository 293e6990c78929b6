"""The node's backstop against a core allocated twice: `double_use` refuses a
claim whose devices cover a core another prepared claim's devices hold, and
names both claims and both devices."""

from driver.node.durable.checkpoint import PREPARE_COMPLETED, ClaimRecord, DeviceRecord
from driver.node.prepare import double_use


def device(name: str, chip: int, start: int, count: int, admin: bool = False) -> DeviceRecord:
    kind = "chip" if count == 8 else "core"
    return DeviceRecord("req", "rack-a", name, kind, [[chip, start, count]], admin_access=admin)


def claim(uid: str, *devices: DeviceRecord) -> ClaimRecord:
    return ClaimRecord(uid, "ns", f"claim-{uid}", PREPARE_COMPLETED, 1, [], list(devices))


def test_a_core_inside_a_prepared_chip_is_refused_naming_both_claims_and_devices() -> None:
    prepared = {"a": claim("a", device("s0-chip1", 1, 0, 8))}
    error = double_use(prepared, claim("b", device("s0-c1-cores4-2", 1, 4, 2)))
    assert error is not None
    assert "device rack-a/s0-c1-cores4-2 of claim ns/claim-b" in error
    assert "chip 1 core 4" in error
    assert "device rack-a/s0-chip1 of claim ns/claim-a (uid a)" in error
    assert "(2 cores overlap)" in error and "nothing was prepared" in error


def test_the_first_overlapping_device_of_several_is_named() -> None:
    prepared = {"a": claim("a", device("s0-c0-cores6-1", 0, 6, 1))}
    new = claim("b", device("s0-c1-cores0-1", 1, 0, 1), device("s0-c0-cores4-4", 0, 4, 4))
    error = double_use(prepared, new)
    assert error is not None and "device rack-a/s0-c0-cores4-4 of claim" in error
    assert "chip 0 core 6" in error and "(1 cores overlap)" in error


def test_disjoint_cores_and_the_claims_own_record_pass() -> None:
    prepared = {
        "a": claim("a", device("s0-c0-cores0-4", 0, 0, 4)),
        "b": claim("b", device("s0-c0-cores4-2", 0, 4, 2)),
    }
    assert double_use(prepared, claim("c", device("s0-c0-cores6-2", 0, 6, 2))) is None
    assert double_use(prepared, claim("a", device("s0-c0-cores0-4", 0, 0, 4))) is None
    assert double_use({}, claim("a", device("s0-chip0", 0, 0, 8))) is None


def test_admin_access_observes_cores_without_holding_them() -> None:
    watcher = {"a": claim("a", device("s0-chip0", 0, 0, 8, admin=True))}
    assert double_use(watcher, claim("b", device("s0-c0-cores0-1", 0, 0, 1))) is None
    held = {"a": claim("a", device("s0-chip0", 0, 0, 8))}
    assert double_use(held, claim("b", device("s0-chip0", 0, 0, 8, admin=True))) is None
