"""Collectives on a Trn2 UltraServer: 4 instances of 16 chips, each a 4x4
NeuronLink torus, joined by rings of the chips of the same coordinates.
Answers worked by hand from the fabric table (docs/simulator.md,
Collectives), and the limits every answer keeps.

Trn2 figures used by hand: intra-instance 1024e9 B/s a chip over 4 torus
links (256e9 each) and 1.5 us a step; inter-instance 256e9 B/s a chip over
the 2 links of the ring of 4 instances (128e9 each) and 2 us a step. Chips
are numbered instance-major, row-major on the torus (chips 0-3 a row)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdevice.collectives import OPERATIONS, time_collective
from simdevice.fabric import FABRIC_LEVELS, SERVER, FabricLevel, first_chips, rank_places
from simdevice.topology import TopologyError, rack_spec

TRN2 = rack_spec("trn2")
GiB, MiB = 1 << 30, 1 << 20
LEVELS = {level.name: level for level in FABRIC_LEVELS["trn2"]}


def test_the_tori_are_the_ultraservers() -> None:
    """The instance torus holds an instance's chips, the ring its instances;
    a torus side of 2 (one neighbour twice) is refused."""
    assert math.prod(LEVELS["intra-server"].torus) == TRN2.chips_per_server
    assert math.prod(LEVELS["inter-server"].torus) == TRN2.servers
    assert LEVELS["intra-server"].link_bandwidth == 256e9
    assert LEVELS["inter-server"].link_bandwidth == 128e9
    with pytest.raises(TopologyError, match=r"^torus: every side must be >= 3"):
        FabricLevel(SERVER, 1e9, 1e-6, "", "", "", torus=(2, 4))


def test_a_whole_instance_rides_every_torus_link() -> None:
    """All-reduce of S = 1 GiB on the 16 chips of instance 0. The torus has
    two rings through every chip with no link in common, each run both ways:
    a chip sends on its 4 links, 4 x 256e9 = 1024e9. Ring, per half:
      15 x 1.5 us + (15/16 S) / 1024e9 = 22.5e-6 + 983.04e-6 = 1005.54e-6 s
      (rdh 4 x 1.5 us + .../768e9 = 1316.72e-6; mesh 1.5 us + .../512e9: ring)
    t = 2.01108e-3 s; busbw = S / t x 2 x 15/16 = 1001.09e9 B/s."""
    t = time_collective("all-reduce", TRN2, first_chips(TRN2, 16), GiB)
    assert t.duration == pytest.approx(2.01108e-3)
    assert t.busbw == pytest.approx(1001.09e9, rel=1e-5)
    assert [(p.level, p.algorithm, p.bandwidth) for p in t.phases] == [
        ("intra-server", "ring", 1024e9)
    ]


def test_a_torus_row_rides_its_ring_both_ways() -> None:
    """All-reduce of S = 1 GiB on chips 0-3, one row of the torus: its ring
    of direct links, both ways: 2 links, 512e9. Ring, per half:
      3 x 1.5 us + (3/4 S) / 512e9 = 4.5e-6 + 1572.864e-6 = 1577.364e-6 s
      (rdh 2 steps + .../384e9 = 2100.152e-6; mesh .../256e9: ring)
    t = 3.154728e-3 s; busbw = S / t x 2 x 3/4 = 510.54e9 B/s: half the
    instance's figure."""
    t = time_collective("all-reduce", TRN2, first_chips(TRN2, 4), GiB)
    assert t.duration == pytest.approx(3.154728e-3)
    assert t.busbw == pytest.approx(510.54e9, rel=1e-5)
    assert t.phases[0].bandwidth == 512e9


def test_two_neighbours_share_one_link() -> None:
    """All-gather of S = 2 MiB on chips 0 and 1, torus neighbours: one
    link, 256e9: 1.5 us + 1 MiB / 256e9 = 1.5e-6 + 4.096e-6 = 5.596e-6 s.
    Chips 0 and 5 are no neighbours (diagonal): routed, still one link."""
    t = time_collective("all-gather", TRN2, first_chips(TRN2, 2), 2 * MiB)
    assert t.duration == pytest.approx(5.596e-6)
    apart = rank_places(TRN2, [(0, 0), (0, 5)])
    assert time_collective("all-gather", TRN2, apart, 2 * MiB).duration == pytest.approx(5.596e-6)


def test_four_instances_at_the_same_coordinates_ride_their_ring() -> None:
    """All-reduce of S = 1 GiB on chips 0, 16, 32, 48: coordinates (0, 0) of
    each instance, the ring of the 4 instances, both ways: 2 x 128e9. Ring,
    per half: 3 x 2 us + (3/4 S) / 256e9 = 6e-6 + 3145.728e-6 = 3151.728e-6 s
    (rdh 2 x 2 us + .../192e9; mesh .../128e9: ring);
    t = 6.303456e-3 s; busbw = S / t x 3/2 = 255.513e9 B/s."""
    ring = rank_places(TRN2, [(0, 0), (0, 16), (0, 32), (0, 48)])
    t = time_collective("all-reduce", TRN2, ring, GiB)
    assert t.duration == pytest.approx(6.303456e-3)
    assert t.busbw == pytest.approx(255.513e9, rel=1e-5)
    assert [(p.level, p.ranks, p.bandwidth) for p in t.phases] == [("inter-server", 4, 256e9)]


def test_two_instances_share_one_ring_link() -> None:
    """All-reduce of S = 1 MiB on chip 0 and chip 16 (instances 0 and 1, the
    same coordinates): one link of the ring, 128e9. Ring, 2 steps of S/2:
      t = 2 x (2 us + 524288 / 128e9) = 2 x 6.096e-6 = 12.192e-6 s.
    Chip 0 and chip 17 (coordinates (0, 1) of instance 1): no ring joins
    them, so a step also crosses a torus link: 2 + 1.5 us, still 128e9:
      t = 2 x (3.5e-6 + 4.096e-6) = 15.192e-6 s."""
    same = rank_places(TRN2, [(0, 0), (0, 16)])
    assert time_collective("all-reduce", TRN2, same, MiB).duration == pytest.approx(12.192e-6)
    apart = rank_places(TRN2, [(0, 0), (0, 17)])
    assert time_collective("all-reduce", TRN2, apart, MiB).duration == pytest.approx(15.192e-6)


def test_the_whole_ultraserver() -> None:
    """All-reduce of S = 1 GiB on all 64 chips, C = S/64.
    intra-instance, n = 16, chunk 4C = S/16: per half 1005.54e-6 s (as on one
    instance); inter-instance, n = 4, chunk C, 3C = 50331648 B per half, the
    whole ring of instances at 256e9:
      ring 3 x 2 us + 50331648 / 256e9 = 6e-6 + 196.608e-6 = 202.608e-6 s
      (rdh 4e-6 + .../192e9 = 266.144e-6; mesh 2e-6 + .../128e9: ring)
    t = 2 x (1005.54e-6 + 202.608e-6) = 2.416296e-3 s; sent 2 x 63/64 S;
    busbw = S / t x 2 x 63/64 = 874.86e9 B/s: above the inter-instance
    figure, as the outer phase carries a quarter of the data."""
    t = time_collective("all-reduce", TRN2, first_chips(TRN2, 64), GiB)
    assert t.duration == pytest.approx(2.416296e-3)
    assert t.bytes_per_chip == pytest.approx(2 * 63 / 64 * GiB)
    assert t.busbw == pytest.approx(874.86e9, rel=1e-5)
    assert [(p.level, p.ranks, p.bandwidth) for p in t.phases] == [
        ("intra-server", 16, 1024e9),
        ("inter-server", 4, 256e9),
    ]


def test_point_to_point_on_the_torus() -> None:
    """Permute over chips 0-3 (a row): each shift to a neighbour, one link:
    1.5 us + S / 256e9. Send-receive between chip 0 and chip 16: one link of
    the ring of instances: 2 us + S / 128e9."""
    shift = time_collective("permute", TRN2, first_chips(TRN2, 4), MiB)
    assert shift.duration == pytest.approx(1.5e-6 + MiB / 256e9)
    pair = time_collective("send-receive", TRN2, rank_places(TRN2, [(0, 0), (0, 16)]), MiB)
    assert pair.duration == pytest.approx(2e-6 + MiB / 128e9)


SIZES = st.integers(min_value=10, max_value=32).map(lambda e: 1 << e)  # 1 KiB .. 4 GiB


@settings(max_examples=150, deadline=None)
@given(
    chips=st.lists(st.integers(0, 63), min_size=2, max_size=64, unique=True),
    size=SIZES,
    operation=st.sampled_from(OPERATIONS),
)
def test_busbw_never_above_the_levels_figures(chips: list[int], size: int, operation: str) -> None:
    """A phase rides at most its level's per-chip figure; busbw stays under
    the fastest level crossed, and under the one level of a one-phase run."""
    if operation == "send-receive" and len(chips) % 2:
        chips = chips[:-1]
    t = time_collective(operation, TRN2, rank_places(TRN2, [(0, c) for c in chips]), size)
    for phase in t.phases:
        figure = LEVELS[phase.level].bandwidth
        assert phase.bandwidth <= figure
        assert phase.bandwidth >= min(level.link_bandwidth for level in LEVELS.values())
    assert t.busbw <= max(p.bandwidth for p in t.phases) * (1 + 1e-9)
    if len(t.phases) == 1:
        assert t.busbw <= LEVELS[t.phases[0].level].bandwidth * (1 + 1e-9)
