"""Device health and the NodeDeviceHealth object (pure)."""

import datetime

from driver.kubeletplugin.healthstream import DeviceState, HealthMonitor
from driver.node.durable.checkpoint import PREPARE_COMPLETED, ClaimRecord, DeviceRecord
from driver.node.health import Place, PlaceState, device_health
from driver.node.healthreport import reason_word, report_object

RECORD = ClaimRecord(
    "u1",
    "ns",
    "c",
    PREPARE_COMPLETED,
    1,
    [],
    [
        DeviceRecord("a", "rack", "chip0", "chip", [[0, 0, 8]]),
        DeviceRecord("a", "rack", "server", "server", [[0, 0, 8], [1, 0, 8]]),
        DeviceRecord("a", "rack", "chip1", "chip", [[1, 0, 8]]),
    ],
)


def test_a_failed_chip_makes_every_device_using_it_unhealthy() -> None:
    chips: dict[Place, PlaceState] = {
        (0, None): PlaceState("healthy"),
        (1, None): PlaceState("failed", "ecc-uncorrected-hbm on chip 1"),
    }
    states = {d.device: d for d in device_health([RECORD], chips, {}, now=10.0)}
    assert {name: s.healthy for name, s in states.items()} == {
        "chip0": True,
        "chip1": False,
        "server": False,
    }
    assert "chip 1 failed: ecc-uncorrected-hbm" in states["server"].message


def test_degraded_chips_stay_healthy_with_a_message_and_since_is_kept() -> None:
    chips: dict[Place, PlaceState] = {(1, None): PlaceState("degraded", "core 3 hangs")}
    first = device_health([RECORD], chips, {}, now=10.0)
    again = device_health([RECORD], chips, {(d.pool, d.device): d for d in first}, now=20.0)
    assert all(d.healthy for d in again)
    assert {d.device: d.since for d in again} == {"chip0": 10.0, "chip1": 10.0, "server": 10.0}
    assert next(d for d in again if d.device == "chip1").message == "chip 1 degraded: core 3 hangs"


def test_a_failed_core_fails_only_the_devices_over_it() -> None:
    record = ClaimRecord(
        "u2",
        "ns",
        "c",
        PREPARE_COMPLETED,
        1,
        [],
        [
            DeviceRecord("a", "rack", "c0-3", "core", [[2, 0, 4]]),
            DeviceRecord("a", "rack", "c4-7", "core", [[2, 4, 4]]),
            DeviceRecord("a", "rack", "chip2", "chip", [[2, 0, 8]]),
        ],
    )
    places: dict[Place, PlaceState] = {
        (2, 6): PlaceState("failed", "uncorrected SRAM ECC error (core 6)")
    }
    states = {d.device: d for d in device_health([record], places, {}, now=1.0)}
    assert {name: s.healthy for name, s in states.items()} == {
        "c0-3": True,
        "c4-7": False,
        "chip2": False,
    }
    assert states["c4-7"].message == "chip 2 core 6 failed: uncorrected SRAM ECC error (core 6)"


def test_monitor_wakes_waiters_only_on_change() -> None:
    monitor = HealthMonitor(timeout_seconds=30)
    state = [DeviceState("rack", "chip0", True, "", 1.0)]
    assert monitor.update(state)
    version, devices = monitor.wait_change(0, timeout=0.1)
    assert (version, devices) == (1, state)
    assert not monitor.update(list(state))
    assert monitor.wait_change(version, timeout=0.05) == (version, None)


def test_report_lists_unhealthy_chips_only() -> None:
    now = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    chips = {
        (0, None): PlaceState("healthy"),
        (2, None): PlaceState("failed", "ecc-uncorrected-hbm on chip 2"),
        (1, None): PlaceState("degraded", "link-down"),
        (1, 5): PlaceState("failed", "uncorrected SRAM ECC error (core 5)"),
    }
    obj = report_object("node-a", chips, now)
    assert obj["metadata"] == {"name": "node-a"}
    assert obj["spec"]["reportedAt"] == "2026-01-02T03:04:05Z"
    assert obj["spec"]["devices"] == [
        {"chip": 1, "state": "degraded", "reason": "LinkDown", "message": "link-down"},
        {
            "chip": 1,
            "core": 5,
            "state": "failed",
            "reason": "UncorrectedSRAMECCErrorCore5",
            "message": "uncorrected SRAM ECC error (core 5)",
        },
        {
            "chip": 2,
            "state": "failed",
            "reason": "EccUncorrectedHbmOnChip2",
            "message": "ecc-uncorrected-hbm on chip 2",
        },
    ]
    assert len(reason_word("x" * 100, "failed")) == 63
    assert reason_word("", "failed") == "Failed"
