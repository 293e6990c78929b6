"""The settle clock's decision, as data: it never calls a step settled while
the scheduler has not taken up the step's writes, has work in hand, is
retrying pods in backoff, moved across the quiet spell, or while the
controller has not taken up released claims; it reads the controller's
/metrics only when a decision needs them; and it skips the reading before a
step's writes only when no pod waited then."""

from collections.abc import Iterator

import pytest

from whatif.observe import WorkState
from whatif.podwatch import NamespaceView
from whatif.settleclock import Deciders, SettleClock, needs_baseline
from whatif.settlecost import PARTS, SettleCosts

CLOCK = SettleClock("https://scheduler/metrics", "", "http://controller/metrics", quiet=0.0)
IDLE = WorkState(active=0, backoff=0, binding=0, controller=0, progress=10.0, failed=2.0)


class Readings:
    """The deciders' states in turn, and whether each read asked for the controller."""

    def __init__(self, *states: WorkState) -> None:
        self.states: Iterator[WorkState] = iter(states)
        self.asked: list[bool] = []

    def __call__(self, controller: bool) -> WorkState:
        self.asked.append(controller)
        return next(self.states)


def deciders(readings: Readings, before: WorkState | None = IDLE) -> Deciders:
    return Deciders(readings, CLOCK, before, costs=SettleCosts())


def moved(state: WorkState, **change: float) -> WorkState:
    return WorkState(**{**state.__dict__, **change})


def test_not_settled_until_the_scheduler_has_taken_up_the_writes() -> None:
    later = moved(IDLE, progress=12.0)
    d = deciders(Readings(IDLE, later, later))
    why = d.moving(wrote=True, controller=False, waiting=1)
    assert why == "the scheduler has not yet taken up this step's writes"
    assert d.moving(wrote=True, controller=False, waiting=1) == ""


def test_no_baseline_means_the_waiting_pods_were_tried_after_the_writes() -> None:
    assert (
        deciders(Readings(IDLE, IDLE), before=None).moving(wrote=True, controller=False, waiting=1)
        == ""
    )


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (moved(IDLE, active=1), IDLE),
        (moved(IDLE, binding=1), IDLE),
        (IDLE, moved(IDLE, progress=11.0)),
        (IDLE, moved(IDLE, active=1)),
        (IDLE, moved(IDLE, backoff=1)),
    ],
    ids=["active", "binding", "moved-in-the-quiet-spell", "busy-after", "backoff-after"],
)
def test_not_settled_while_the_scheduler_works_or_moves(
    first: WorkState, second: WorkState
) -> None:
    why = deciders(Readings(first, second)).moving(wrote=False, controller=False, waiting=1)
    assert why


def test_pods_in_backoff_must_each_have_failed_twice_since_the_writes_showed() -> None:
    once = moved(IDLE, backoff=1, failed=IDLE.failed + 1)
    twice = moved(IDLE, backoff=1, failed=IDLE.failed + 2)
    d = deciders(Readings(moved(IDLE, backoff=1), once, twice))
    assert d.moving(wrote=False, controller=False, waiting=1)
    assert d.moving(wrote=False, controller=False, waiting=1)
    assert d.moving(wrote=False, controller=False, waiting=1) == ""
    other = deciders(Readings(moved(IDLE, backoff=2, failed=IDLE.failed + 9)))
    assert other.moving(wrote=False, controller=False, waiting=1), "backoff holds others' pods"


def test_the_controller_is_read_only_when_a_release_may_let_a_rack_job_in() -> None:
    readings = Readings(IDLE, IDLE)
    assert deciders(readings).moving(wrote=False, controller=False, waiting=1) == ""
    assert readings.asked == [False, False]
    reconciled = moved(IDLE, reconciled=1.0)
    readings = Readings(IDLE, IDLE, reconciled)
    d = deciders(readings)
    assert d.moving(wrote=False, controller=True, waiting=1) == (
        "the controller has not yet taken up the released claims"
    )
    assert d.moving(wrote=False, controller=True, waiting=1) == (
        "the controller has not yet taken up the released claims"
    )
    assert d.moving(wrote=False, controller=True, waiting=1) == (
        "the scheduler has not yet taken up the controller's writes"
    )
    assert readings.asked == [True, True, True]


def test_a_baseline_is_read_only_when_a_pod_waits_before_the_writes() -> None:
    settled = NamespaceView(missing=0, lingering=0, orphan_claims=0, undecided=0, waiting=0)
    assert not needs_baseline(settled)
    for field in ("missing", "lingering", "orphan_claims", "undecided", "waiting", "queued"):
        assert needs_baseline(NamespaceView(**{**settled.__dict__, field: 1})), field


def test_costs_are_per_event_time_and_refuse_an_unknown_part() -> None:
    costs = SettleCosts()
    costs.add("quiet", 0.5)
    costs.read(1000)
    costs.read(3000)
    got = costs.summary(events=2, wall=2.0)
    assert got["quiet_s"] == 0.25 and got["own_s"] == 0.75
    assert got["metrics_reads"] == 1 and got["metrics_bytes"] == 2000
    assert set(got) == {f"{p}_s" for p in (*PARTS, "own")} | {"metrics_reads", "metrics_bytes"}
    with pytest.raises(ValueError, match="part 'nap'"):
        costs.add("nap", 1.0)
