"""`make bench-scheduler`'s occupancy step says, before each run, which run
of how many it starts, on which fleet and layout: at 100 racks a run takes
minutes, and a step without lines looks hung."""

import pytest

from benchmarks.scheduler_busy import Occupancy, Runs, run_line


def test_a_run_line_names_its_place_fleet_occupancy_and_layout() -> None:
    at = Occupancy(1, 90, (), 100, None)
    assert run_line(3, 12, at, "node pools", 65.4) == (
        "bench-scheduler occupancy: run 3 of 12 (1 rack, 90% held): node pools; 65 s elapsed"
    )


def test_runs_count_across_occupancies_and_rounds_per_layout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    runs = Runs(total=8)
    rounds = []
    for percent in (0, 90):
        at = Occupancy(10, percent, (), 100, None)
        runs.rounds.clear()
        for _ in range(2):
            rounds += [runs.next(at, "rack pools"), runs.next(at, "node pools")]
    assert rounds == [1, 1, 2, 2, 1, 1, 2, 2]
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" (")[0] for line in lines] == [
        f"bench-scheduler occupancy: run {n} of 8" for n in range(1, 9)
    ]
    assert "(10 racks, 90% held): node pools;" in lines[-1]
