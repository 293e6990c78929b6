"""What availability-aware publishing would withdraw, as the scheduler
benchmark's "(available)" arms publish it (the controller does not offer it:
docs/device-model.md, "Publishing order"): the blocked devices, never an
allocated one, and the slices built without them."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driver.controller.slices import build_slices
from driver.devicemodel.blocking import blocked_devices
from driver.devicemodel.layout import POOL_LAYOUTS, Layout, LayoutOptions, build_layout
from simdevice.topology import rack_spec
from tests.controller.rackinput import DRIVER, beside_devices, device_names, rack_input

RACK = rack_spec("trn3-gen1")
LAYOUTS = {pools: build_layout(RACK, LayoutOptions(pools)) for pools in POOL_LAYOUTS}
NAMES = {pools: [d.name for d in layout.devices] for pools, layout in LAYOUTS.items()}


def holdings(pools: str) -> st.SearchStrategy[tuple[str, frozenset[str]]]:
    """Any set of devices of the layout, overlapping or not."""
    return st.tuples(st.just(pools), st.frozensets(st.sampled_from(NAMES[pools]), max_size=12))


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(POOL_LAYOUTS).flatmap(holdings))
def test_an_allocated_device_is_never_withdrawn(view: tuple[str, frozenset[str]]) -> None:
    pools, allocated = view
    assert not allocated & blocked_devices(LAYOUTS[pools], allocated)


def layout(pools: str = "rack") -> Layout:
    return LAYOUTS[pools]


def test_a_held_chip_withdraws_what_it_blocks() -> None:
    blocked = blocked_devices(layout("node"), frozenset({"server01-chip03"}))
    assert "server01" in blocked and "server01-chip03" not in blocked
    assert "server01-chip03-core0" in blocked and "server01-chip02" not in blocked


@pytest.mark.parametrize("pools", POOL_LAYOUTS)
def test_withheld_devices_leave_their_slices_and_nothing_else_changes(pools: str) -> None:
    held = frozenset({"server00-chip02", "server03-chip09-core1"})
    withheld = blocked_devices(layout(pools), held)
    full = build_slices(rack_input(RACK, pools), DRIVER)
    hidden = build_slices(rack_input(RACK, pools, withheld=withheld), DRIVER)
    assert beside_devices(hidden) == beside_devices(full)  # counter sets, pool, node selection
    for f, h in zip(full, hidden, strict=True):
        assert device_names(h) == [n for n in device_names(f) if n not in withheld]
    assert held <= {n for s in hidden for n in device_names(s)}
