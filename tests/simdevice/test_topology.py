"""Topology specs, chip places and core numbering."""

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simdevice.topology import (
    GENERATIONS,
    VALID_LNC,
    ChipSpec,
    CoreRange,
    RackSpec,
    TopologyError,
    chip_places,
    rack_spec,
)

GiB = 1 << 30
MiB = 1 << 20


def test_trn3_gen2_is_36_servers_of_4_chips() -> None:
    spec = rack_spec("trn3-gen2")
    assert (spec.servers, spec.chips_per_server, spec.chips, spec.cores) == (36, 4, 144, 1152)
    chip = spec.chip
    assert chip.core_version == "neuroncore-v4"
    assert (chip.cores, chip.chiplets, chip.cores_per_chiplet) == (8, 2, 4)
    assert chip.hbm_bytes == 144 * GiB
    assert chip.hbm_bandwidth == pytest.approx(4.9e12)
    assert chip.dma_engines == 128 and chip.dma_engines_per_core == 16
    assert chip.sbuf_bytes_per_core == 32 * MiB and chip.psum_bytes_per_core == 2 * MiB
    assert chip.link_bandwidth == pytest.approx(2.56e12)


@pytest.mark.parametrize("generation", ["trn3-gen1", "trn2"])
def test_64_chip_racks_are_4_servers_of_16(generation: str) -> None:
    spec = rack_spec(generation)
    assert (spec.servers, spec.chips_per_server, spec.chips) == (4, 16, 64)


def test_trn2_chip_and_torus() -> None:
    spec = rack_spec("trn2")
    chip = spec.chip
    assert chip.core_version == "neuroncore-v3"
    assert chip.hbm_bytes == 96 * GiB
    assert chip.hbm_bandwidth == pytest.approx(2.9e12)
    assert chip.sbuf_bytes_per_core == 28 * MiB
    assert chip.link_bandwidth == pytest.approx(1.28e12)


def test_every_generation_has_a_spec() -> None:
    assert {rack_spec(g).generation for g in GENERATIONS} == set(GENERATIONS)


def test_unknown_generation_lists_the_valid_ones() -> None:
    with pytest.raises(TopologyError, match=r"^generation: .*trn3-gen2, trn3-gen1, trn2"):
        rack_spec("trn4")
    with pytest.raises(TopologyError, match=r"^generation: "):
        RackSpec("trn1", servers=1, chips_per_server=1, chip=rack_spec("trn2").chip)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"servers": 0}, "servers"),
        ({"chips_per_server": -1}, "chips_per_server"),
    ],
)
def test_nonsense_rack_is_refused_naming_the_field(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(TopologyError, match=rf"^{field}: "):
        dataclasses.replace(rack_spec("trn3-gen2"), **changes)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"cores": 6, "chiplets": 4}, "cores"),
        ({"cores": 0}, "cores"),
        ({"chiplets": 0}, "chiplets"),
        ({"hbm_bytes": 0}, "hbm_bytes"),
        ({"hbm_bandwidth": -1.0}, "hbm_bandwidth"),
        ({"link_bandwidth": 0.0}, "link_bandwidth"),
        ({"dma_engines": 100}, "dma_engines"),
        ({"sbuf_bytes_per_core": 0}, "sbuf_bytes_per_core"),
        ({"psum_bytes_per_core": 0}, "psum_bytes_per_core"),
        ({"name": ""}, "name"),
    ],
)
def test_nonsense_chip_is_refused_naming_the_field(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(TopologyError, match=rf"^{field}: "):
        dataclasses.replace(rack_spec("trn3-gen2").chip, **changes)


def test_chiplet_of_core() -> None:
    chip: ChipSpec = rack_spec("trn3-gen2").chip
    assert [chip.chiplet_of(c) for c in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]
    with pytest.raises(TopologyError, match=r"^core: "):
        chip.chiplet_of(8)


@pytest.mark.parametrize("generation", GENERATIONS)
def test_chip_places_are_server_major(generation: str) -> None:
    spec = rack_spec(generation)
    places = chip_places(spec)
    assert [p.index for p in places] == list(range(spec.chips))
    for p in places:
        assert p.server * spec.chips_per_server + p.local_index == p.index
        assert 0 <= p.local_index < spec.chips_per_server
        assert set(p.group_ids) == {1, 4, 8, 16}
        assert p.network_node_layers[0] == "rack"


@pytest.mark.parametrize("generation", GENERATIONS)
def test_device_groups_partition_the_rack_into_connected_sets(generation: str) -> None:
    spec = rack_spec(generation)
    places = chip_places(spec)
    for size in (1, 4, 8, 16):
        groups: dict[int, list[int]] = {}
        for p in places:
            groups.setdefault(p.group_ids[size], []).append(p.index)
        assert all(len(members) == size for members in groups.values())
        # Members of a group are consecutive chips; groups nest (4 inside 8 inside 16).
        for members in groups.values():
            assert members == list(range(members[0], members[0] + size))
    for p in places:
        assert p.group_ids[4] // 2 == p.group_ids[8]
        assert p.group_ids[8] // 2 == p.group_ids[16]


def test_trn3_gen2_group_of_4_is_one_server_and_16_is_four_servers() -> None:
    places = chip_places(rack_spec("trn3-gen2"))
    by_group4: dict[int, set[int]] = {}
    by_group16: dict[int, set[int]] = {}
    for p in places:
        by_group4.setdefault(p.group_ids[4], set()).add(p.server)
        by_group16.setdefault(p.group_ids[16], set()).add(p.server)
    assert all(len(servers) == 1 for servers in by_group4.values())
    assert all(len(servers) == 4 for servers in by_group16.values())


def test_trn2_group_of_16_is_one_server_and_layers_name_the_torus_row() -> None:
    places = chip_places(rack_spec("trn2"))
    assert {p.group_ids[16] for p in places if p.server == 2} == {2}
    assert places[16 + 5].network_node_layers == ("rack", "server-1", "server-1-quad-1")


@pytest.mark.parametrize(
    ("core_range", "lnc", "expected"),
    [
        (CoreRange(chip=0, start=0, count=8), 1, [0, 1, 2, 3, 4, 5, 6, 7]),
        (CoreRange(chip=0, start=0, count=8), 2, [0, 1, 2, 3]),
        (CoreRange(chip=1, start=2, count=2), 2, [5]),
        (CoreRange(chip=3, start=4, count=4), 4, [7]),
        (CoreRange(chip=2, start=3, count=1), 1, [19]),
    ],
)
def test_visible_cores(core_range: CoreRange, lnc: int, expected: list[int]) -> None:
    assert core_range.visible_cores(lnc, 8) == expected


@pytest.mark.parametrize(
    ("core_range", "lnc", "field"),
    [
        (CoreRange(chip=0, start=1, count=2), 2, "start"),
        (CoreRange(chip=0, start=0, count=2), 4, "count"),
        (CoreRange(chip=0, start=6, count=4), 1, "count"),
        (CoreRange(chip=0, start=0, count=1), 3, "lnc"),
    ],
)
def test_misaligned_core_range_is_refused(core_range: CoreRange, lnc: int, field: str) -> None:
    with pytest.raises(TopologyError, match=rf"^{field}: "):
        core_range.visible_cores(lnc, 8)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"chip": -1, "start": 0, "count": 1}, "chip"),
        ({"chip": 0, "start": -1, "count": 1}, "start"),
        ({"chip": 0, "start": 0, "count": 0}, "count"),
    ],
)
def test_core_range_fields_are_checked(kwargs: dict[str, int], field: str) -> None:
    with pytest.raises(TopologyError, match=rf"^{field}: "):
        CoreRange(**kwargs)


@given(
    chip=st.integers(0, 15),
    lnc=st.sampled_from(VALID_LNC),
    data=st.data(),
)
def test_visible_cores_are_the_chips_logical_block(
    chip: int, lnc: int, data: st.DataObject
) -> None:
    per_chip = 8 // lnc
    first = data.draw(st.integers(0, per_chip - 1))
    n = data.draw(st.integers(1, per_chip - first))
    ids = CoreRange(chip=chip, start=first * lnc, count=n * lnc).visible_cores(lnc, 8)
    assert ids == list(range(chip * per_chip + first, chip * per_chip + first + n))
    assert all(i // per_chip == chip for i in ids)
    assert CoreRange(chip=chip, start=first * lnc, count=n * lnc).physical() == range(
        first * lnc, (first + n) * lnc
    )
