"""The rack device's guard in the `node` pool layout, as pure logic: what the
claims hold, the taints that follow, and when a rack claim may bind."""

import datetime
from typing import Any

from driver.controller.claimstatus import confirmed_devices, desired_devices
from driver.controller.rackstate import desired_rack
from driver.devicemodel.fabric import fabric_ips, hardware_address
from driver.devicemodel.layout import LayoutOptions, build_layout
from driver.devicemodel.rackguard import (
    RACK_EXCLUSIVE,
    RACK_IN_USE,
    Occupancy,
    RackHold,
    advertised_racks,
    granted,
    guard_conditions,
    occupancies,
    occupancy,
    occupancy_taints,
    rack_claimed_key,
    rack_in_use_key,
)
from driver.devicemodel.ultraserver import UltraServerSpec, parse_spec
from simdevice.topology import rack_spec

DRIVER = "d.dev"
NOW = datetime.datetime(2026, 12, 4, 12, 0, tzinfo=datetime.UTC)


def status_of(conditions: list[dict[str, str]]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in conditions}


def test_occupancy_tells_the_rack_device_from_the_servers() -> None:
    rack = (DRIVER, "rack-a", "ultraserver")
    core = (DRIVER, "rack-a/server03", "server03-chip00-core0")
    other_rack = (DRIVER, "rack-b/server03", "server03-chip00-core0")
    other_driver = ("x.dev", "rack-a/server03", "server03")
    assert occupancy([frozenset({rack})], DRIVER, "rack-a") == Occupancy(True, False)
    assert occupancy([frozenset({core})], DRIVER, "rack-a") == Occupancy(False, True)
    assert occupancy([frozenset({other_rack, other_driver})], DRIVER, "rack-a") == Occupancy(
        False, False
    )
    assert occupancy([frozenset({rack}), frozenset({core})], DRIVER, "rack-a") == Occupancy(
        True, True
    )


def test_occupancies_of_many_racks_in_one_pass() -> None:
    claims = [
        frozenset({(DRIVER, "rack-a", "ultraserver")}),
        frozenset({(DRIVER, "rack-b/server01", "server01"), ("x.dev", "rack-c", "ultraserver")}),
    ]
    assert occupancies(claims, DRIVER, ["rack-a", "rack-b", "rack-c"]) == {
        "rack-a": Occupancy(True, False),
        "rack-b": Occupancy(False, True),
        "rack-c": Occupancy(False, False),
    }


def test_the_window_advertises_free_racks_by_name_and_every_held_one() -> None:
    free, used, held = Occupancy(False, False), Occupancy(False, True), Occupancy(True, False)
    racks = {
        "r5": free,
        "r1": used,
        "r2": free,
        "r3": held,
        "r4": free,
        "r0": Occupancy(True, True),
    }
    # A rack with something in use is never advertised unless its device is held.
    assert advertised_racks(racks, 0) == {"r0", "r2", "r3", "r4", "r5"}
    assert advertised_racks(racks, 1) == {"r0", "r2", "r3"}
    assert advertised_racks(racks, 2) == {"r0", "r2", "r3", "r4"}
    # r2 taken by a core claim: the window moves on to the next free rack.
    assert advertised_racks({**racks, "r2": used}, 1) == {"r0", "r3", "r4"}
    assert advertised_racks({}, 1) == frozenset()


def test_a_rack_out_of_the_window_publishes_no_rack_device() -> None:
    nodes = [f"n{i}" for i in range(4)]
    spec = parse_spec(
        {
            "metadata": {"name": "rack-a", "uid": "u"},
            "spec": {"generation": "trn3-gen1", "pools": "node", "nodes": {"names": nodes}},
        }
    )
    labels = {n: {"kubernetes.io/hostname": n} for n in nodes}

    def device_names(advertised: bool) -> set[str]:
        want = desired_rack(spec, labels, {}, DRIVER, advertised=advertised)
        return {d["name"] for s in want.slices for d in s["spec"].get("devices", [])}

    shown, hidden = device_names(True), device_names(False)
    assert shown - hidden == {"ultraserver"}
    assert len(hidden) == len(shown) - 1


def test_taints_follow_occupancy() -> None:
    devices = build_layout(rack_spec("trn3-gen1"), LayoutOptions("node")).devices
    free = occupancy_taints(devices, Occupancy(False, False), DRIVER)
    assert free == {}
    claimed = occupancy_taints(devices, Occupancy(True, False), DRIVER)
    assert set(claimed) == {d.name for d in devices if d.kind != "ultraserver"}
    assert all(
        t == [{"key": rack_claimed_key(DRIVER), "effect": "NoSchedule"}] for t in claimed.values()
    )
    in_use = occupancy_taints(devices, Occupancy(False, True), DRIVER)
    assert in_use == {"ultraserver": [{"key": rack_in_use_key(DRIVER), "effect": "NoSchedule"}]}


def test_rack_device_binds_only_after_settling_with_no_server_claim() -> None:
    since = NOW - datetime.timedelta(seconds=0.5)
    unknown, wait = guard_conditions(None, settle=2.0, now=NOW, old=[])
    assert status_of(unknown) == {RACK_EXCLUSIVE: "False", RACK_IN_USE: "False"} and wait == 2.0
    settling, wait = guard_conditions(RackHold(since, False), settle=2.0, now=NOW, old=[])
    assert status_of(settling) == {RACK_EXCLUSIVE: "False", RACK_IN_USE: "False"}
    assert wait is not None and abs(wait - 1.5) < 1e-9
    later = NOW + datetime.timedelta(seconds=2)
    granted, wait = guard_conditions(RackHold(since, False), settle=2.0, now=later, old=[])
    assert status_of(granted) == {RACK_EXCLUSIVE: "True", RACK_IN_USE: "False"} and wait is None
    refused, wait = guard_conditions(RackHold(since, True), settle=2.0, now=later, old=[])
    assert status_of(refused) == {RACK_EXCLUSIVE: "False", RACK_IN_USE: "True"} and wait is None
    # Granted once, granted for good: after a controller restart (no hold yet) too.
    kept, wait = guard_conditions(None, settle=2.0, now=later, old=granted, allocated_at=since)
    assert kept == granted and wait is None
    # A grant older than the allocation is a former allocation's: judged again.
    again, _ = guard_conditions(
        None, settle=2.0, now=later, old=granted, allocated_at=later + datetime.timedelta(seconds=5)
    )
    assert status_of(again)[RACK_EXCLUSIVE] == "False"


def test_claim_status_carries_the_guard_only_for_node_pool_rack_devices() -> None:
    objects = {
        pools: parse_spec(
            {
                "metadata": {"name": "rack-a"},
                "spec": {
                    "generation": "trn3-gen1",
                    "pools": pools,
                    "nodes": {"names": [f"n{i}" for i in range(4)]},
                    "fabric": {"setupSeconds": 0},
                },
            }
        )
        for pools in ("rack", "node")
    }
    claim = {
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "driver": DRIVER,
                            "pool": "rack-a",
                            "device": "ultraserver",
                            "request": "r",
                        }
                    ]
                }
            }
        }
    }
    hold = {"rack-a": RackHold(NOW - datetime.timedelta(seconds=5), False)}
    node, _ = desired_devices(claim, {"rack-a": objects["node"]}, DRIVER, NOW, hold_of=hold.get)
    rack, _ = desired_devices(claim, {"rack-a": objects["rack"]}, DRIVER, NOW, hold_of=hold.get)
    assert status_of(node[0]["conditions"])[RACK_EXCLUSIVE] == "True"
    assert RACK_EXCLUSIVE not in status_of(rack[0]["conditions"])
    assert node[0]["data"]["ultraserver"] == rack[0]["data"]["ultraserver"] == "rack-a"


def test_fabric_addresses_belong_to_the_rack_in_either_pool_layout() -> None:

    places = build_layout(rack_spec("trn3-gen1"), LayoutOptions("node")).devices[0].chips
    assert fabric_ips("rack-a/server00", places) == fabric_ips("rack-a", places)
    assert hardware_address("rack-a/server00", 3) == hardware_address("rack-a", 3)
    assert fabric_ips("rack-b/server00", places) != fabric_ips("rack-a", places)


def node_rack_claim() -> tuple[dict[str, UltraServerSpec], dict[str, Any]]:
    """A `node` pool rack's spec and a claim holding its rack device."""
    spec = parse_spec(
        {
            "metadata": {"name": "rack-a"},
            "spec": {
                "generation": "trn3-gen1",
                "pools": "node",
                "nodes": {"names": [f"n{i}" for i in range(4)]},
                "fabric": {"setupSeconds": 0},
            },
        }
    )
    result = {"driver": DRIVER, "pool": "rack-a", "device": "ultraserver", "request": "r"}
    return {"rack-a": spec}, {"status": {"allocation": {"devices": {"results": [result]}}}}


def test_a_grant_rests_on_the_apiserver_not_on_the_watch() -> None:
    racks, claim = node_rack_claim()
    settled = NOW - datetime.timedelta(seconds=5)
    watched = {"rack-a": RackHold(settled, False)}
    listed = {"rack-a": RackHold(settled, True)}
    devices, _ = confirmed_devices(
        claim, racks, DRIVER, NOW, hold_of=watched.get, confirmed_hold_of=listed.get
    )
    # The watch has not yet seen the server claim the apiserver holds: refused.
    assert status_of(devices[0]["conditions"])[RACK_IN_USE] == "True"
    assert granted(devices) == set()
    both, _ = confirmed_devices(
        claim, racks, DRIVER, NOW, hold_of=watched.get, confirmed_hold_of=watched.get
    )
    assert granted(both) == {("rack-a", "ultraserver")}


def test_a_grant_already_written_is_not_read_again() -> None:
    racks, claim = node_rack_claim()
    settled = NOW - datetime.timedelta(seconds=5)
    watched = {"rack-a": RackHold(settled, False)}
    first, _ = desired_devices(claim, racks, DRIVER, NOW, hold_of=watched.get)
    claim["status"]["devices"] = first

    def unread(rack: str) -> RackHold:
        raise AssertionError(f"{rack}: the apiserver read again for a grant already written")

    again, _ = confirmed_devices(
        claim, racks, DRIVER, NOW, hold_of=watched.get, confirmed_hold_of=unread
    )
    assert granted(again) == {("rack-a", "ultraserver")}
