"""The claim device status the controller writes (devicemodel.fabric and
controller.claimstatus): pure functions, no cluster."""

import datetime
import ipaddress

import pytest

from driver.controller.claimstatus import as_stored, desired_devices
from driver.devicemodel.fabric import FABRIC_FAILED, FABRIC_READY, DeviceStatus, device_status
from driver.devicemodel.layout import PlannedDevice, planned_devices
from driver.devicemodel.placement import NodePlace
from driver.devicemodel.ultraserver import FabricSpec, SpecError, parse_spec
from driver.jsontypes import JSON
from driver.node.devices import AllocatedDevice, ClaimGrant, fabric_of
from simdevice.topology import CoreRange, rack_spec

GEN2 = rack_spec("trn3-gen2")
DEVICES = {d.name: d for d in planned_devices(GEN2, "partitioned", "chip")}
T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
SECOND = datetime.timedelta(seconds=1)


def status(
    device: PlannedDevice, fabric: FabricSpec, now: datetime.datetime, old: JSON | None = None
) -> DeviceStatus:
    return device_status(
        "d.dev", "rack-a", device, fabric=fabric, allocated_at=T0, now=now, old=old
    )


def states(entry: JSON) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in entry["conditions"]}


def test_a_server_fabric_configures_then_comes_up() -> None:
    fabric = FabricSpec(setup_seconds=2.0)
    early = status(DEVICES["server07"], fabric, T0 + SECOND / 2)
    assert states(early.entry) == {
        FABRIC_READY: ("False", "Configuring"),
        FABRIC_FAILED: ("False", "Configuring"),
    }
    assert early.recheck_seconds == pytest.approx(1.5)
    up = status(DEVICES["server07"], fabric, T0 + 3 * SECOND, old=early.entry)
    assert states(up.entry) == {
        FABRIC_READY: ("True", "Configured"),
        FABRIC_FAILED: ("False", "Configured"),
    }
    assert up.recheck_seconds is None
    ready, failed = up.entry["conditions"]
    # FabricFailed stayed False, so its transition time is the first one.
    assert failed["lastTransitionTime"] == early.entry["conditions"][1]["lastTransitionTime"]
    assert ready["lastTransitionTime"] != early.entry["conditions"][0]["lastTransitionTime"]


def test_a_failed_server_fails_every_domain_that_includes_it() -> None:
    fabric = FabricSpec(failed_servers=frozenset({7}))
    for name in ("server07", "ultraserver"):
        out = status(DEVICES[name], fabric, T0 + 10 * SECOND)
        assert states(out.entry)[FABRIC_FAILED] == ("True", "LinkTrainingFailed")
        assert "server07" in out.entry["conditions"][1]["message"]
        assert out.recheck_seconds is None
    other = status(DEVICES["server08"], fabric, T0 + 10 * SECOND)
    assert states(other.entry)[FABRIC_READY] == ("True", "Configured")


def test_chips_and_cores_have_no_fabric_conditions_but_addresses() -> None:
    chip = status(DEVICES["server01-chip02"], FabricSpec(), T0).entry
    core = status(DEVICES["server01-chip02-cores4-7"], FabricSpec(), T0).entry
    assert chip["conditions"] == [] and core["conditions"] == []
    assert chip["networkData"]["ips"] == core["networkData"]["ips"]
    [ip] = chip["networkData"]["ips"]
    assert ipaddress.ip_interface(ip).network.prefixlen == 64
    assert chip["networkData"]["hardwareAddress"].startswith("02:")
    assert chip["data"]["ring"] == [6]


def test_no_binding_conditions_means_no_conditions() -> None:
    entry = status(DEVICES["server07"], FabricSpec(binding_conditions=False), T0).entry
    assert entry["conditions"] == []


def test_addresses_are_unique_and_valid_across_the_rack() -> None:
    chips = [d for d in DEVICES.values() if d.kind == "chip"]
    ips = [status(d, FabricSpec(), T0).entry["networkData"]["ips"][0] for d in chips]
    macs = {status(d, FabricSpec(), T0).entry["networkData"]["hardwareAddress"] for d in chips}
    assert len(set(ips)) == len(chips) == len(macs) == 144
    # The apiserver takes only the canonical (RFC 5952) spelling.
    assert all(ipaddress.ip_interface(ip).compressed == ip for ip in ips)
    rack = status(DEVICES["ultraserver"], FabricSpec(), T0 + 5 * SECOND).entry
    [prefix] = rack["networkData"]["ips"]
    network = ipaddress.ip_network(prefix)
    assert all(ipaddress.ip_interface(ip).ip in network for ip in ips)
    assert rack["data"]["ring"] == list(range(144))


def rack_object(**fabric: object) -> JSON:
    return {
        "metadata": {"name": "rack-a", "uid": "u", "generation": 1},
        "spec": {
            "generation": "trn3-gen2",
            "nodes": {"selector": {"matchLabels": {"r": "a"}}},
            "fabric": fabric,
        },
    }


@pytest.mark.parametrize(
    ("fabric", "field"),
    [
        ({"setupSeconds": -1}, "spec.fabric.setupSeconds"),
        ({"setupSeconds": "soon"}, "spec.fabric.setupSeconds"),
        ({"failedServers": [36]}, "spec.fabric.failedServers"),
    ],
)
def test_bad_fabric_specs_name_the_field(fabric: JSON, field: str) -> None:
    with pytest.raises(SpecError, match=field):
        parse_spec(rack_object(**fabric))


def test_an_entry_without_conditions_equals_its_stored_form() -> None:
    wanted = {"driver": "d.dev", "pool": "p", "device": "x", "conditions": [], "data": {"a": 1}}
    stored = {**wanted, "conditions": None}
    assert as_stored([wanted]) == as_stored([stored])
    assert as_stored([wanted]) != as_stored([{**stored, "data": {"a": 2}}])
    ready = {**wanted, "conditions": [{"type": FABRIC_READY, "status": "True"}]}
    assert as_stored([ready]) != as_stored([stored])


def test_desired_devices_keeps_other_drivers_and_skips_unknown_pools() -> None:
    spec = parse_spec(rack_object(setupSeconds=0))
    foreign = {"driver": "other.dev", "pool": "p", "device": "x", "conditions": []}
    claim = {
        "status": {
            "allocation": {
                "allocationTimestamp": "2026-01-01T00:00:00Z",
                "devices": {
                    "results": [
                        {"driver": "d.dev", "pool": "rack-a", "device": "server03"},
                        {"driver": "d.dev", "pool": "gone", "device": "server03"},
                        {"driver": "other.dev", "pool": "p", "device": "x"},
                    ]
                },
            },
            "devices": [foreign],
        }
    }
    devices, recheck = desired_devices(claim, {"rack-a": spec}, "d.dev", T0 + SECOND)
    assert devices[0] == foreign
    assert [(d["pool"], d["device"]) for d in devices[1:]] == [("rack-a", "server03")]
    assert recheck is None


@pytest.mark.parametrize(
    "name", ["server07", "ultraserver", "server07-chip02", "server07-chip02-cores4-7"]
)
def test_the_container_sees_the_ring_and_addresses_the_claim_status_shows(name: str) -> None:
    """The node daemon (CDI environment) and the controller (claim status)
    compute a device's fabric from the same chips."""
    device = DEVICES[name]
    on_server7 = [c for c in device.chips if c.server == 7]
    ranges = tuple(
        CoreRange(c.local_index, device.core_start, device.core_count // len(device.chips))
        for c in on_server7
    )
    grant = ClaimGrant(
        devices=(AllocatedDevice("r", "rack-a", name, device.kind, ranges),),
        visible_cores=(),
        lnc=1,
        ultraserver=device.kind == "ultraserver",
    )
    ring, ips = fabric_of(grant, NodePlace("node-7", "rack-a", 7, GEN2))
    entry = status(device, FabricSpec(), T0 + 5 * SECOND).entry
    assert ring == entry["data"]["ring"]
    assert ips == entry["networkData"]["ips"]
