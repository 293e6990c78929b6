"""Max-min fair sharing of a chip's HBM bandwidth."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simdevice.sharing import fair_share

HBM = 2.9e12


def test_no_cap_when_everyone_fits() -> None:
    assert fair_share([1e11] * 8, HBM) is None
    assert fair_share([], HBM) is None


def test_equal_streamers_get_an_equal_share() -> None:
    assert fair_share([4.35e11] * 8, HBM) == pytest.approx(HBM / 8)


def test_small_demands_are_served_first() -> None:
    # one light core (0.1 TB/s) and seven heavy ones: the heavy split the rest,
    # rounded down to HBM / j for a whole j
    cap = fair_share([1e11] + [5e11] * 7, HBM)
    assert cap is not None
    assert cap <= (HBM - 1e11) / 7
    assert cap == pytest.approx(HBM / 8)


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match=r"^capacity: "):
        fair_share([1.0], 0.0)


@given(st.lists(st.floats(0, 1e12), min_size=1, max_size=16))
def test_fair_share_never_oversubscribes(demands: list[float]) -> None:
    cap = fair_share(demands, HBM)
    if cap is None:
        assert sum(demands) <= HBM
        return
    served = sum(min(d, cap) for d in demands)
    assert served <= HBM * (1 + 1e-9)
    assert HBM / cap == pytest.approx(round(HBM / cap))  # HBM / j for a whole j
    # every core that is capped gets at least what any uncapped core gets
    assert all(d <= cap for d in demands if d < cap)
    assert cap >= HBM / (2 * len(demands))
