"""The busy fleet's held devices: the asked share of the cores, no core held twice."""

import pytest

from driver.devicemodel.layout import LayoutOptions, build_layout
from simdevice.topology import rack_spec
from testbed.fleetfill import (
    GENERATION,
    MAX_RESULTS,
    RACK_CORES,
    anchor_holds,
    fleet_fill,
    held_claims,
    held_cores,
)

CORES = {
    d.name: d.cores for d in build_layout(rack_spec(GENERATION), LayoutOptions("node")).devices
}


@pytest.mark.parametrize("fraction", [0.0, 0.5, 0.9])
def test_the_fill_holds_its_share_and_no_core_twice(fraction: float) -> None:
    held = fleet_fill(3, fraction, seed=5)
    assert abs(held_cores(held) - fraction * 3 * RACK_CORES) <= 3
    seen: set[tuple[int, int, int]] = set()
    for h in held:
        cores = {(h.rack, chip, core) for chip, core in CORES[h.device]}
        assert not cores & seen, f"{h.device} of rack {h.rack} overlaps a held device"
        seen |= cores
    if fraction:
        assert {h.kind for h in held} == {"server", "chip", "core"}


def test_the_anchor_holds_every_overlapping_device_in_claims_the_api_takes() -> None:
    server = next(h for h in fleet_fill(1, 0.9, seed=5) if h.kind == "server")
    parts = anchor_holds(server)
    names = [n for part in parts for n in part]
    assert all(len(part) <= MAX_RESULTS for part in parts)
    assert len(names) == 4 * 15 + 1  # every partition and chip of the server, and itself
    claims = held_claims([server], lambda h: "p", lambda h: "n", "ns", per_node=True)
    results = [r for _, status in claims for r in status["allocation"]["devices"]["results"]]
    assert sorted(r["device"] for r in results) == sorted(names)
    for claim, status in claims:
        count = claim["spec"]["devices"]["requests"][0]["exactly"]["count"]
        assert count == len(status["allocation"]["devices"]["results"])
