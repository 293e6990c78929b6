"""What every benchmark shares before and around its run: the load check,
interleaved repetitions, and how the page shows load, spread and tails."""

import pytest

from benchmarks.pages.common import load_conditions, load_note, spread, tail_name
from benchmarks.report import admit, interleaved
from benchmarks.sim import middle_run


def test_a_quiet_machine_is_admitted_and_not_noisy() -> None:
    assert admit(1.5, 2, noisy=False) is False
    assert admit(2.0, 2, noisy=False) is False


def test_a_busy_machine_is_refused_naming_the_load_and_the_flag() -> None:
    with pytest.raises(SystemExit, match=r"load average 54\.3 exceeds the 2 CPUs.*--noisy"):
        admit(54.3, 2, noisy=False)


def test_noisy_flag_measures_anyway_and_marks_the_run() -> None:
    assert admit(54.3, 2, noisy=True) is True


def test_repetitions_alternate_round_by_round() -> None:
    calls: list[str] = []

    def run(name: str) -> str:
        calls.append(name)
        return f"{name}{len(calls)}"

    out = interleaved({"a": lambda: run("a"), "b": lambda: run("b")}, 3)
    assert calls == ["a", "b", "a", "b", "a", "b"]
    assert out == {"a": ["a1", "a3", "a5"], "b": ["b2", "b4", "b6"]}


def test_the_median_run_keeps_every_run_beside_it() -> None:
    runs = [
        {"wall_s": 3.0, "cpu_s": 1.0},
        {"wall_s": 1.0, "cpu_s": 0.5},
        {"wall_s": 2.0, "cpu_s": 0.7},
    ]
    middle = middle_run(runs)
    assert middle["wall_s"] == 2.0 and middle["cpu_s"] == 0.7
    assert middle["wall_s_runs"] == [3.0, 1.0, 2.0]
    assert middle["cpu_s_runs"] == [1.0, 0.5, 0.7]


def test_spread_is_the_median_and_the_range() -> None:
    assert spread([3.0, 1.0, 2.5]) == "2.50 (1.00\u20133.00)"
    assert spread([4.0]) == "4.00"


def test_a_tail_of_fewer_than_100_samples_is_the_max() -> None:
    assert tail_name(50) == "max"
    assert tail_name(99) == "max"
    assert tail_name(100) == "p99"


def test_a_noisy_run_is_marked_loudly_with_its_loads() -> None:
    note = load_note({"cpus": 2, "load_1min_before": 54.34, "load_1min_after": 49.6, "noisy": True})
    assert note.startswith("> **NOISY RUN.**")
    assert "54.3 before and 49.6 after the run on 2 CPUs" in note


def test_a_quiet_run_states_its_loads_plainly() -> None:
    note = load_note({"cpus": 2, "load_1min_before": 0.4, "load_1min_after": 0.9, "noisy": False})
    assert note == "1-minute load average 0.4 before and 0.9 after the run, 2 CPUs."


def test_a_run_without_load_says_so_with_what_is_known() -> None:
    note = load_note(None, "It ran beside a build.")
    assert note.startswith("> **Load not recorded.**")
    assert note.endswith("It ran beside a build.")


def test_older_simulator_results_keep_their_own_load_reading() -> None:
    payload = {
        "machine": {"cpus": 2},
        "results": {"load_average_1min": {"before": 54.3, "after": 49.6}},
    }
    assert load_conditions(payload) == {
        "cpus": 2,
        "load_1min_before": 54.3,
        "load_1min_after": 49.6,
        "noisy": True,
    }
    assert load_conditions({"machine": {"cpus": 2}, "results": {}}) is None
