"""The tests' shared wait (testbed/waiting.py): its timeout stretches on an
overloaded machine, by the share of a CPU a process got, at most
STRETCH_LIMIT times; it is exact on a machine with a CPU to spare."""

import os
import time

import pytest

from testbed.waiting import STRETCH_LIMIT, machine_seconds, wait_for


@pytest.mark.parametrize(
    ("load", "counted"),
    [(0.0, 10.0), (1.5, 10.0), (2.0, 10.0), (4.0, 5.0), (8.0, 10.0 / STRETCH_LIMIT)],
)
def test_a_second_counts_by_the_share_of_a_cpu_a_process_got(load: float, counted: float) -> None:
    assert machine_seconds(10.0, load, cpus=2) == pytest.approx(counted)


def test_no_load_stretches_a_wait_beyond_the_limit() -> None:
    assert machine_seconds(10.0, 1000.0, cpus=2) == pytest.approx(10.0 / STRETCH_LIMIT)


class Clock:
    """A monotonic clock and a load average the test sets."""

    def __init__(self, load: float) -> None:
        self.now, self.load = 0.0, load

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def getloadavg(self) -> tuple[float, float, float]:
        return (self.load, self.load, self.load)


@pytest.mark.parametrize(("load", "wall"), [(1.0, 10.0), (4.0, 20.0), (50.0, 40.0)])
def test_a_probe_that_never_answers_fails_after_the_stretched_timeout(
    monkeypatch: pytest.MonkeyPatch, load: float, wall: float
) -> None:
    clock = Clock(load)
    monkeypatch.setattr(time, "monotonic", clock.monotonic)
    monkeypatch.setattr(time, "sleep", clock.sleep)
    monkeypatch.setattr(os, "getloadavg", clock.getloadavg)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    timed_out = r"timed out after 10s \(.*\) waiting for nothing"
    with pytest.raises(AssertionError, match=timed_out) as err:
        wait_for("nothing", lambda: None, timeout=10.0, interval=1.0)
    assert clock.now == pytest.approx(wall + 1.0)
    assert f"load up to {load:.1f} on 2 CPUs" in str(err.value)


def test_the_first_truthy_answer_is_returned() -> None:
    answers = iter([None, 0, "", "ready"])
    assert wait_for("an answer", lambda: next(answers), timeout=5.0, interval=0.01) == "ready"
