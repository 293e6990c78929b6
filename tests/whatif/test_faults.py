"""Failures in the offline anchor: the jobs on a failed chip or core are
evicted whole and run again from the start; the failed cores stay out of
service until repaired."""

import pytest

from simdevice.topology import TRAINIUM3, RackSpec, rack_spec
from whatif.faults import Failure, FaultRates, RandomFailures, ScriptedFailures
from whatif.figures import summarize
from whatif.jobs import Job, PodShape
from whatif.offline import replay

TWO_CHIPS = RackSpec("trn3-gen2", servers=1, chips_per_server=2, chip=TRAINIUM3)
CHIP = 0xFF


Outcome = tuple[float | None, float | None, int, float]
"""A job's last start and end, its evictions and the core-seconds they cost."""


def runs(jobs: list[Job], *failures: Failure, repair: float = 50.0) -> dict[str, Outcome]:
    run = replay(
        jobs,
        TWO_CHIPS,
        1,
        policy="first-fit",
        failures=ScriptedFailures(failures, repair),
    )
    figures = summarize(run)
    assert figures["failures"] == run.failures
    return {r.job.name: (r.start, r.end, r.evictions, r.lost_core_seconds) for r in run.records}


def test_a_chip_failure_evicts_its_job_which_runs_again_elsewhere() -> None:
    jobs = [Job("train", 0, 1, PodShape("chips", 1), 100)]
    got = runs(jobs, Failure(30, (0, 0, 0), CHIP))
    # Evicted at 30 after 30 s on 8 cores; chip 1 is free at once.
    assert got["train"] == (30, 130, 1, 30 * 8)


def test_a_failed_chip_stays_out_until_repaired() -> None:
    jobs = [
        Job("a", 0, 1, PodShape("chips", 1), 100),
        Job("b", 0, 1, PodShape("chips", 1), 200),
    ]
    got = runs(jobs, Failure(30, (0, 0, 0), CHIP), repair=50)
    # a loses chip 0 at 30; chip 1 is b's; chip 0 comes back at 80.
    assert got["a"] == (80, 180, 1, 240)
    assert got["b"] == (0, 200, 0, 0)


def test_a_core_failure_evicts_only_the_job_on_that_core() -> None:
    jobs = [
        Job("a-low", 0, 1, PodShape("cores", 4), 100),  # cores 0-3 of chip 0
        Job("b-high", 0, 1, PodShape("cores", 4), 100),  # cores 4-7 of chip 0
    ]
    got = runs(jobs, Failure(10, (0, 0, 0), 1 << 5))
    assert got["a-low"] == (0, 100, 0, 0)
    # b-high moves to chip 1 at once.
    assert got["b-high"] == (10, 110, 1, 40)


def test_a_gang_is_evicted_whole() -> None:
    jobs = [Job("gang", 0, 2, PodShape("chips", 1), 100)]
    got = runs(jobs, Failure(20, (0, 0, 1), CHIP), repair=30)
    # Both pods go at 20 (16 cores for 20 s); the gang needs both chips back: 50.
    assert got["gang"] == (50, 150, 1, 20 * 16)


def test_random_failures_follow_their_rates_and_seed() -> None:
    gen2 = rack_spec("trn3-gen2")
    never = RandomFailures(FaultRates(), gen2, 10, seed=1)
    assert never.after(0.0) is None
    often = FaultRates(chip_mtbf_hours=1000.0, core_mtbf_hours=500.0)
    first = [RandomFailures(often, gen2, 10, seed=3).after(0.0) for _ in range(2)]
    assert first[0] == first[1]
    source = RandomFailures(often, gen2, 10, seed=3)
    times, now = [], 0.0
    for _ in range(2000):
        failure = source.after(now)
        assert failure is not None
        times.append(failure.time - now)
        now = failure.time
    # 1,440 chips and 11,520 cores: one failure every 1 / (1440/1000 + 11520/500) hours.
    expected = 3600 / (1440 / 1000 + 11520 / 500)
    assert sum(times) / len(times) == pytest.approx(expected, rel=0.1)


def test_bad_rates_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="chip_mtbf_hours"):
        FaultRates(chip_mtbf_hours=0)
    with pytest.raises(ValueError, match="repair_hours"):
        FaultRates(repair_hours=-1)
