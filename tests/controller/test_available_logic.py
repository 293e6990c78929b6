"""Availability-aware publishing, pure parts (the controller does not offer
it, docs/device-model.md): which devices are withdrawn, what the two writes
of a pass publish, the slices built without them and the writes they take."""

import copy
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driver.controller.slices import RackInput, build_slices
from driver.controller.writeplan import Write, plan_writes
from driver.devicemodel.blocking import blocked_devices, published_devices, withdrawable
from driver.devicemodel.layout import POOL_LAYOUTS, Layout, LayoutOptions, build_layout
from driver.jsontypes import JSON
from simdevice.topology import rack_spec

RACK = rack_spec("trn3-gen1")
OWNER = {"apiVersion": "v", "kind": "UltraServer", "name": "r", "uid": "u", "controller": True}
LAYOUTS = {pools: build_layout(RACK, LayoutOptions(pools)) for pools in POOL_LAYOUTS}
NAMES = {pools: [d.name for d in layout.devices] for pools, layout in LAYOUTS.items()}


def holdings(pools: str) -> st.SearchStrategy[frozenset[str]]:
    """Any set of devices of the layout, overlapping or not: a live read may
    disagree with the watched claims in any way."""
    return st.frozensets(st.sampled_from(NAMES[pools]), max_size=12)


def every_view(pools: str) -> st.SearchStrategy[tuple[str, frozenset[str], frozenset[str]]]:
    return st.tuples(st.just(pools), holdings(pools), holdings(pools))


views = st.sampled_from(POOL_LAYOUTS).flatmap(every_view)


@settings(max_examples=60, deadline=None)
@given(views, st.frozensets(st.integers(0, 10_000), max_size=40))
def test_an_allocated_device_is_never_withdrawn(
    view: tuple[str, frozenset[str], frozenset[str]], picks: frozenset[int]
) -> None:
    pools, watched, live = view
    layout = LAYOUTS[pools]
    current = frozenset(NAMES[pools][i % len(NAMES[pools])] for i in picks)
    adds, final = published_devices(layout, watched, current, live)
    assert watched | live <= adds
    assert watched | live <= final
    assert not (watched | live) & withdrawable(layout, watched, live)


@settings(max_examples=60, deadline=None)
@given(views, st.frozensets(st.integers(0, 10_000), max_size=40))
def test_a_device_is_published_whenever_either_read_leaves_it_unblocked(
    view: tuple[str, frozenset[str], frozenset[str]], picks: frozenset[int]
) -> None:
    pools, watched, live = view
    layout = LAYOUTS[pools]
    current = frozenset(NAMES[pools][i % len(NAMES[pools])] for i in picks)
    free = set(NAMES[pools]) - (blocked_devices(layout, watched) & blocked_devices(layout, live))
    adds, final = published_devices(layout, watched, current, live)
    assert free <= final
    assert final <= adds  # the first write only adds, the second only withdraws
    assert current <= adds
    # Without a live read nothing is withdrawn, whatever the watched claims say.
    unread, same = published_devices(layout, watched, current)
    assert unread == same and current <= same
    assert set(NAMES[pools]) - blocked_devices(layout, watched) <= same


def layout(pools: str = "rack") -> Layout:
    return LAYOUTS[pools]


def test_a_held_chip_withdraws_what_it_blocks_once_both_reads_agree() -> None:
    held = frozenset({"server01-chip03"})
    everything = frozenset(NAMES["node"])
    blocked = blocked_devices(layout("node"), held)
    adds, final = published_devices(layout("node"), held, everything, held)
    assert adds == everything
    assert final == everything - blocked
    assert "server01" not in final and "server01-chip03" in final
    # Released in the live read: nothing of it is withdrawn.
    assert published_devices(layout("node"), held, everything, frozenset())[1] == everything
    # Only the due ones go.
    due = {"server01"}
    assert published_devices(layout("node"), held, everything, held, due)[1] == everything - due


def test_withdrawn_devices_come_back_when_their_counters_free() -> None:
    held = frozenset({"server02-chip00"})
    withdrawn = blocked_devices(layout(), held)
    current = frozenset(NAMES["rack"]) - withdrawn
    adds, final = published_devices(layout(), frozenset(), current, frozenset())
    assert adds == final == frozenset(NAMES["rack"])
    # Still held by the watched claims but allocated, not blocked, in the live read:
    # the allocated device comes back in the write that only adds.
    core = "server02-chip00-core3"
    adds, _ = published_devices(layout(), held, current - {core}, {core})
    assert core in adds


def rack_input(pools: str, withheld: frozenset[str]) -> RackInput:
    nodes = {s: f"n{s}" for s in range(RACK.servers)}
    sel = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Exists"}]}]}
    return RackInput(
        "r",
        RACK,
        "partitioned",
        "chip",
        nodes,
        sel,
        "d.dev",
        {},
        False,
        layout=LayoutOptions(pools),
        withheld=withheld,
    )


def names(s: JSON) -> list[str]:
    return [d["name"] for d in s["spec"].get("devices") or []]


@pytest.mark.parametrize("pools", POOL_LAYOUTS)
def test_withheld_devices_leave_their_slices_and_nothing_else_changes(pools: str) -> None:
    held = frozenset({"server00-chip02", "server03-chip09-core1"})
    withheld = blocked_devices(layout(pools), held)
    full = build_slices(rack_input(pools, frozenset()))
    hidden = build_slices(rack_input(pools, withheld))
    assert [s["metadata"]["name"] for s in full] == [s["metadata"]["name"] for s in hidden]
    for f, h in zip(full, hidden, strict=True):
        assert names(h) == [n for n in names(f) if n not in withheld]
        assert {k: v for k, v in f["spec"].items() if k != "devices"} == {
            k: v for k, v in h["spec"].items() if k != "devices"
        }  # counter sets, pool and node selection stay
    assert held <= {n for s in hidden for n in names(s)}


def stored(writes: Sequence[Write]) -> list[JSON]:
    out = []
    for i, w in enumerate(writes):
        body = copy.deepcopy(w.body)
        assert body is not None
        body["metadata"]["resourceVersion"] = str(100 + i)
        out.append(body)
    return out


@pytest.mark.parametrize("pools", POOL_LAYOUTS)
def test_withdrawing_and_putting_back_in_several_slices_keeps_the_pool_generation(
    pools: str,
) -> None:
    """Each device stays in its slice or leaves it: the pool keeps its
    generation and its slices, whatever number of slices change."""
    first = plan_writes(build_slices(rack_input(pools, frozenset())), [], OWNER)
    existing = stored(first.writes)
    generations = {s["metadata"]["name"]: s["spec"]["pool"]["generation"] for s in existing}
    held = frozenset({"server00-chip01", "server01-chip04-core0", "server02-chip15-cores4-5"})
    withheld = blocked_devices(layout(pools), held)
    plan = plan_writes(build_slices(rack_input(pools, withheld)), existing, OWNER)
    assert {w.verb for w in plan.writes} == {"update"}
    assert len(plan.writes) >= 3
    for w in plan.writes:
        assert w.body is not None
        assert w.body["spec"]["pool"]["generation"] == generations[w.name]
    after = {s["metadata"]["name"]: s for s in [*existing, *stored(plan.writes)]}
    back = plan_writes(build_slices(rack_input(pools, frozenset())), list(after.values()), OWNER)
    assert {w.verb for w in back.writes} == {"update"}
    assert back.generation == plan.generation


def test_a_device_moving_between_slices_still_moves_the_generation() -> None:
    existing = stored(plan_writes(build_slices(rack_input("rack", frozenset())), [], OWNER).writes)
    moved = copy.deepcopy(existing)
    a, b = [s for s in moved if s["spec"].get("devices")][:2]
    b["spec"]["devices"].append(a["spec"]["devices"].pop())
    for s in moved:
        del s["metadata"]["resourceVersion"]
    plan = plan_writes(moved, existing, OWNER)
    assert plan.generation == 1 + max(s["spec"]["pool"]["generation"] for s in existing)
