"""Collectives on the ranks' chips: answers worked by hand from the fabric
table (docs/simulator.md, Collectives), and the limits every answer keeps.

Trn3 figures used by hand: intra-server 256e9 B/s and 1 us a step,
inter-server 320e9 B/s and 2 us, inter-rack 128e9 B/s and 2 us; mesh keeps
half a level's bandwidth, rdh three quarters, ring all of it."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdevice.collectives import (
    LINK_USE,
    OPERATIONS,
    CollectiveError,
    CollectiveTiming,
    time_collective,
)
from simdevice.fabric import FABRIC_LEVELS, RankPlace, first_chips, rank_places
from simdevice.topology import TopologyError, rack_spec

GEN2 = rack_spec("trn3-gen2")
TRN2 = rack_spec("trn2")
GiB, MiB, KiB = 1 << 30, 1 << 20, 1 << 10
BANDWIDTH = {level.name: level.bandwidth for level in FABRIC_LEVELS["trn3-gen2"]}


def test_two_ranks_in_one_server() -> None:
    """All-reduce of S = 1 GiB on chips 0 and 1 (server 0). Ring: a
    reduce-scatter of 1 step sending S/2, then an all-gather the same:
    t = 2 x (1 us + (S/2) / 256e9) = 2e-6 + 1073741824 / 256e9
      = 2e-6 + 4.194304e-3 = 4.196304e-3 s;
    busbw = algbw x 2(2-1)/2 = S / t = 255.878e9 B/s."""
    t = time_collective("all-reduce", GEN2, first_chips(GEN2, 2), GiB)
    assert t.duration == pytest.approx(4.196304e-3)
    assert t.busbw == pytest.approx(GiB / 4.196304e-3)
    assert t.busbw == pytest.approx(255.878e9, rel=1e-5)
    assert [(p.level, p.algorithm, p.steps) for p in t.phases] == [("intra-server", "ring", 2)]


def test_eight_ranks_across_two_servers() -> None:
    """All-gather of S = 8 MiB (the gathered output) on chips 0-7: servers 0
    and 1, four ranks each; ring forced. Each rank's chunk C = S/8 = 1 MiB.
    Outer level first: inter-server, n = 2, sends 1 x C in 1 step:
      2 us + 1048576 / 320e9 = 2e-6 + 3.2768e-6 = 5.2768e-6 s;
    then intra-server, n = 4, each chunk now 2C, 3 steps:
      3 x 1 us + 3 x 2097152 / 256e9 = 3e-6 + 24.576e-6 = 27.576e-6 s.
    t = 32.8528e-6 s; each rank sent 7 MiB = 7/8 S;
    busbw = algbw x 7/8 = 7340032 / 32.8528e-6 = 223.42e9 B/s."""
    t = time_collective("all-gather", GEN2, first_chips(GEN2, 8), 8 * MiB, "ring")
    assert t.duration == pytest.approx(32.8528e-6)
    assert t.bytes_per_chip == pytest.approx(7 * MiB)
    assert t.busbw == pytest.approx(7 * MiB / 32.8528e-6)
    assert t.algorithm == "hier"
    assert {p.level: p.ranks for p in t.phases} == {"intra-server": 4, "inter-server": 2}


def test_two_ranks_across_racks() -> None:
    """All-reduce of S = 1 MiB between chip 5 of rack 0 and chip 5 of rack 1
    (the same place: the direct link). Ring, 2 steps of S/2:
      t = 2 x (2 us + 524288 / 128e9) = 2 x (2e-6 + 4.096e-6) = 12.192e-6 s.
    From chip 0 of rack 0 to chip 5 of rack 1 a step also crosses the far
    rack's servers: latency 2 + 2 us, bandwidth still 128e9:
      t = 2 x (4e-6 + 4.096e-6) = 16.192e-6 s."""
    same = rank_places(GEN2, [(0, 5), (1, 5)])
    t = time_collective("all-reduce", GEN2, same, MiB)
    assert t.duration == pytest.approx(12.192e-6)
    assert t.busbw == pytest.approx(MiB / 12.192e-6)
    assert t.phases[0].level == "inter-rack"
    apart = rank_places(GEN2, [(0, 0), (1, 5)])
    assert time_collective("all-reduce", GEN2, apart, MiB).duration == pytest.approx(16.192e-6)


def test_a_whole_rack_all_reduce() -> None:
    """All-reduce of S = 1 GiB over all 144 Gen2 chips (36 servers of 4),
    the default choice. C = S/144.
    intra-server, n = 4, chunk 36C = S/4, 3/4 S sent per half:
      ring 3 us + 805306368 / 256e9 = 3.148728e-3 s
      (mesh 1 us + 805306368 / 128e9 = 6.29e-3, rdh 2 us + .../192e9 = 4.19e-3: ring)
    inter-server, n = 36, chunk C, 35C = 260978915.6 B sent per half:
      ring 35 x 2 us + 260978915.6 / 320e9 = 70e-6 + 815.559e-6 = 885.559e-6 s
      (mesh 2 us + .../160e9 = 1.633e-3; rdh needs a power of two: ring)
    t = 2 x (3.148728e-3 + 0.885559e-3) = 8.068574e-3 s;
    sent 2 x (3/4 + 35/144) S = 2 x 143/144 S;
    busbw = 2 x 143/144 x S / t = 264.30e9 B/s: above the slowest level
    crossed (256e9) and below the fastest (320e9), since the inter-server
    phase carries a quarter of the data."""
    t = time_collective("all-reduce", GEN2, first_chips(GEN2, 144), GiB)
    assert t.duration == pytest.approx(8.068574e-3, rel=1e-6)
    assert t.bytes_per_chip == pytest.approx(2 * 143 / 144 * GiB)
    assert t.busbw == pytest.approx(264.30e9, rel=1e-4)
    assert [(p.level, p.algorithm) for p in t.phases] == [
        ("intra-server", "ring"),
        ("inter-server", "ring"),
    ]


def test_small_messages_pick_mesh_large_ones_ring() -> None:
    """1 KiB over 144 ranks: mesh on both levels, 2 x (1 us + 2 us) of
    latency and a few bytes: just over 6 us."""
    small = time_collective("all-reduce", GEN2, first_chips(GEN2, 144), KiB)
    assert [p.algorithm for p in small.phases] == ["mesh", "mesh"]
    assert small.duration == pytest.approx(6e-6, rel=0.01)
    assert {
        p.algorithm for p in time_collective("all-reduce", GEN2, first_chips(GEN2, 16), GiB).phases
    } == {"ring"}


def _harmonic_bound(t: CollectiveTiming) -> float:
    """What a rank's bytes could reach if every phase moved at its level's
    full bandwidth with no latency."""
    return t.bytes_per_chip / sum(p.bytes_sent / p.bandwidth for p in t.phases)


SIZES = st.integers(min_value=10, max_value=32).map(lambda e: 1 << e)  # 1 KiB .. 4 GiB
RANKS = st.integers(min_value=2, max_value=144)


@settings(max_examples=300, deadline=None)
@given(operation=st.sampled_from(OPERATIONS), ranks=RANKS, size=SIZES)
def test_busbw_stays_within_the_levels_crossed(operation: str, ranks: int, size: int) -> None:
    if operation == "send-receive" and ranks % 2:
        ranks += 1
    t = time_collective(operation, GEN2, first_chips(GEN2, min(ranks, 144)), size)
    crossed = [p.bandwidth for p in t.phases]
    assert t.busbw <= max(crossed) * (1 + 1e-9)
    assert t.busbw <= _harmonic_bound(t) * (1 + 1e-9)
    if len(t.phases) == 1:  # one level (or one flat phase): never above its bandwidth
        assert t.busbw <= min(crossed) * (1 + 1e-9)


@settings(max_examples=200, deadline=None)
@given(operation=st.sampled_from(OPERATIONS[:4]), ranks=RANKS)
def test_large_messages_are_bandwidth_bound_small_ones_latency_bound(
    operation: str, ranks: int
) -> None:
    places = first_chips(GEN2, ranks)
    large = time_collective(operation, GEN2, places, 4 * GiB)
    small = time_collective(operation, GEN2, places, KiB)
    # worst: a ring over ~140 ranks or peers, ~280 steps of 2 us: about 2% of the time
    assert sum(p.latency for p in large.phases) / large.duration < 0.05
    assert sum(p.latency for p in small.phases) / small.duration > 0.9
    assert large.busbw > 100 * small.busbw


@settings(max_examples=100, deadline=None)
@given(
    chips=st.lists(st.integers(0, 143), min_size=2, max_size=40, unique=True),
    size=SIZES,
    operation=st.sampled_from(OPERATIONS[:4]),
)
def test_any_chips_time_positive_and_grow_with_size(
    chips: list[int], size: int, operation: str
) -> None:
    """Ranks on any chips, evenly spread or not."""
    places = rank_places(GEN2, [(0, c) for c in chips])
    t = time_collective(operation, GEN2, places, size)
    assert t.duration > 0
    assert time_collective(operation, GEN2, places, 2 * size).duration > t.duration
    assert t.busbw <= max(p.bandwidth for p in t.phases) * (1 + 1e-9)


def test_uneven_ranks_run_flat_at_the_slowest_level() -> None:
    """Five ranks: four on server 0, one on server 1: one ring of 5 at
    min(256e9, 320e9) and the longer step (2 us)."""
    t = time_collective("all-gather", GEN2, first_chips(GEN2, 5), 5 * MiB, "ring")
    assert [(p.level, p.ranks, p.bandwidth) for p in t.phases] == [("inter-server", 5, 256e9)]
    assert t.duration == pytest.approx(4 * 2e-6 + 4 * MiB / 256e9)


def test_forced_algorithms_and_their_shares() -> None:
    places = first_chips(GEN2, 4)
    mesh = time_collective("reduce-scatter", GEN2, places, 4 * MiB, "mesh")
    assert mesh.duration == pytest.approx(1e-6 + 3 * MiB / (256e9 * LINK_USE["mesh"]))
    rdh = time_collective("reduce-scatter", GEN2, places, 4 * MiB, "rdh")
    assert rdh.duration == pytest.approx(2e-6 + 3 * MiB / (256e9 * LINK_USE["rdh"]))
    with pytest.raises(CollectiveError, match=r"^algorithm: rdh does not apply"):
        time_collective("all-reduce", GEN2, first_chips(GEN2, 12), MiB, "rdh")
    with pytest.raises(CollectiveError, match=r"^algorithm: send-receive goes point to point"):
        time_collective("send-receive", GEN2, places, MiB, "ring")


def test_point_to_point() -> None:
    """Send-receive pairs 0-1 and 2-3 (one server): 1 us + S / 256e9.
    Permute over chips 3, 4 (two servers) shifts across the inter-server
    level: 2 us + S / 320e9."""
    sr = time_collective("send-receive", GEN2, first_chips(GEN2, 4), MiB)
    assert sr.duration == pytest.approx(1e-6 + MiB / 256e9)
    assert sr.busbw == pytest.approx(sr.algbw)
    shift = time_collective("permute", GEN2, rank_places(GEN2, [(0, 3), (0, 4)]), MiB)
    assert shift.duration == pytest.approx(2e-6 + MiB / 320e9)
    with pytest.raises(CollectiveError, match=r"^chips: send-receive pairs"):
        time_collective("send-receive", GEN2, first_chips(GEN2, 3), MiB)


def test_bad_input_names_the_field() -> None:
    places = first_chips(GEN2, 2)
    with pytest.raises(CollectiveError, match=r"^operation: 'broadcast'"):
        time_collective("broadcast", GEN2, places, MiB)
    with pytest.raises(CollectiveError, match=r"^algorithm: 'tree'"):
        time_collective("all-reduce", GEN2, places, MiB, "tree")
    with pytest.raises(CollectiveError, match=r"^bytes: "):
        time_collective("all-reduce", GEN2, places, -1)
    with pytest.raises(CollectiveError, match=r"^chips: the ranks span racks, and trn2"):
        time_collective("all-reduce", TRN2, [RankPlace(0, 0, 0), RankPlace(1, 0, 0)], MiB)
    with pytest.raises(TopologyError, match=r"^chips: rack 0 chip 3 is given twice"):
        rank_places(GEN2, [(0, 3), (0, 3)])
    with pytest.raises(TopologyError, match=r"^chips: chip 144 is not in"):
        rank_places(GEN2, [(0, 144)])


def test_one_rank_takes_no_time() -> None:
    t = time_collective("all-reduce", GEN2, first_chips(GEN2, 1), GiB)
    assert (t.duration, t.algbw, t.busbw, t.phases) == (0.0, 0.0, 0.0, ())
