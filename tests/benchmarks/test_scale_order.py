"""`make bench-scale` measures the smallest fleet first and says where it is:
the order of its points, its progress line and what its page says of a cost
growing faster than the racks, as pure logic."""

import pytest

from benchmarks.pages.scale import growth_sentence
from benchmarks.scale import measuring_order, progress
from benchmarks.scalefit import PROJECTION_MIN_POINTS, SCHEDULER_RACKS, fit


def test_points_run_smallest_first_each_once() -> None:
    assert measuring_order([16, 1, 4, 4]) == [1, 4, 16]
    assert measuring_order(iter([100])) == [100]


@pytest.mark.parametrize("racks", [[], [0, 4], [-1]])
def test_a_fleet_of_no_racks_is_refused(racks: list[int]) -> None:
    with pytest.raises(ValueError, match="from 1 up"):
        measuring_order(racks)


def test_the_default_run_is_small_first_and_enough_to_project() -> None:
    assert list(SCHEDULER_RACKS) == measuring_order(SCHEDULER_RACKS)
    assert len(SCHEDULER_RACKS) >= PROJECTION_MIN_POINTS
    assert max(SCHEDULER_RACKS) < 100, "a 100-rack point is a run of its own"


def test_the_progress_line_names_the_point_of_how_many_what_and_the_time_so_far() -> None:
    assert progress(2, 3, 4, "run 1 of 3, binding 64 claims", 1234.4) == (
        "bench-scale: point 2 of 3 (4 racks): run 1 of 3, binding 64 claims; 1,234 s elapsed"
    )
    assert progress(1, 3, 1, "making 36 more nodes", 0.2).startswith(
        "bench-scale: point 1 of 3 (1 rack): making 36 more nodes; 0 s"
    )


def test_a_cost_growing_faster_than_the_racks_says_its_projection_is_a_floor() -> None:
    faster = growth_sentence(fit([(1, 100.0), (4, 900.0), (16, 9000.0)]))
    assert "It grew 90.0x for 16x the racks." in faster and "is a floor" in faster
    linear = growth_sentence(fit([(1, 100.0), (4, 400.0), (16, 1600.0)]))
    assert linear == " It grew 16.0x for 16x the racks."
    two_points = growth_sentence(fit([(1, 100.0), (16, 9000.0)]))
    assert "floor" not in two_points
