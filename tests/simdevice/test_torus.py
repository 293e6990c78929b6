"""The links a ring keeps busy on a torus: worked by hand on a Trn2
instance's 4x4 torus (positions row-major: 0-3 the first row) and on the
ring of an UltraServer's 4 instances."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdevice.torus import neighbours, ring_links

TORUS, RING = (4, 4), (4,)


def test_neighbours_wrap_around() -> None:
    assert neighbours(TORUS, 0) == {1, 3, 4, 12}
    assert neighbours(TORUS, 5) == {1, 4, 6, 9}
    assert neighbours(RING, 0) == {1, 3}


@pytest.mark.parametrize(
    ("members", "links"),
    [
        (range(16), 4),  # the whole torus: two rings with no link in common, both ways
        (range(4), 2),  # a row: its ring, both ways
        (range(8), 2),  # two rows: one ring through all 8, both ways
        ((0, 1, 4, 5), 2),  # a 2x2 block: 0-1-5-4-0
        ((0, 1, 2, 3, 4, 5), 2),  # a row and two below it: 0-4-5-1-2-3-0
        ((0, 1), 1),  # neighbours: one link
        ((0, 5), 1),  # diagonal: routed, one link
        ((0, 1, 2), 1),  # three in a row: no cycle of direct links
        (range(15), 1),  # odd count on an even torus: no cycle passes them all once
        ((0, 2, 8, 10), 1),  # no two of them neighbours
    ],
)
def test_rings_on_the_instance_torus(members: range | tuple[int, ...], links: int) -> None:
    assert ring_links(TORUS, frozenset(members)) == links


def test_rings_of_instances() -> None:
    assert ring_links(RING, frozenset(range(4))) == 2
    assert ring_links(RING, frozenset({0, 1})) == 1
    assert ring_links(RING, frozenset({0, 2})) == 1
    assert ring_links(RING, frozenset({0, 1, 2})) == 1


@settings(max_examples=300, deadline=None)
@given(st.sets(st.integers(0, 15), min_size=2, max_size=16))
def test_never_more_links_than_a_chip_has(members: set[int]) -> None:
    links = ring_links(TORUS, frozenset(members))
    assert links in (1, 2, 4)
    assert (links == 4) == (len(members) == 16)
