"""What every benchmark shares before and around its run: the load check, the
rule that calls a run noisy, interleaved repetitions, and how the page shows
conditions, spread and tails."""

from typing import Any, Final

import pytest

from benchmarks.conditions import is_noisy, load_readings
from benchmarks.pages.common import (
    RECORDED,
    NotRecordedError,
    conditions_note,
    provenance,
    scaled,
    single_runs,
    spread,
    tail_name,
)
from benchmarks.report import admit, interleaved
from benchmarks.sim import middle_run
from tests.benchmarks.recorded import RUN


def test_a_quiet_machine_is_admitted() -> None:
    admit(1.5, 2, noisy=False)
    admit(2.0, 2, noisy=False)


def test_a_busy_machine_is_refused_naming_the_load_and_the_flag() -> None:
    with pytest.raises(SystemExit, match=r"load average 54\.3 exceeds the 2 CPUs.*--noisy"):
        admit(54.3, 2, noisy=False)


def test_noisy_flag_measures_anyway() -> None:
    admit(54.3, 2, noisy=True)


QUIET: Final = {
    "cpus": 2,
    "load_1min_before": 0.4,
    "load_during_1min": {"samples": 30, "max": 1.9, "mean": 1.2},
    "load_1min_after": 0.9,
}


@pytest.mark.parametrize(
    ("change", "noisy"),
    [
        ({}, False),
        ({"load_1min_before": 2.84}, True),
        ({"load_during_1min": {"samples": 30, "max": 220.0, "mean": 90.0}}, True),
        ({"load_1min_after": 7.58}, True),
        ({"load_1min_before": 2.0, "load_1min_after": 2.0}, False),
        ({"load_during_1min": {"samples": 0, "max": None, "mean": None}}, False),
        ({"load_during_1min": None}, False),
    ],
)
def test_a_run_is_noisy_when_any_reading_exceeds_the_cpus(
    change: dict[str, Any], noisy: bool
) -> None:
    assert is_noisy({**QUIET, **change}) is noisy


def test_a_run_recorded_before_sampling_is_judged_on_its_start_and_end() -> None:
    assert load_readings({"cpus": 2, "load_1min_before": 1.59, "load_1min_after": 75.35}) == [
        1.59,
        75.35,
    ]
    assert is_noisy({"cpus": 2, "load_1min_before": 1.59, "load_1min_after": 75.35})


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


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (18.75452233803927, "18.8"),
        (0.5, "0.500"),
        (999.4, "999"),
        (999.6, "1.00 k"),
        (36047.5, "36.0 k"),
        (465696.4, "466 k"),
        (5397274.6, "5.40 M"),
        (3.47e9, "3.47 G"),
    ],
)
def test_a_figure_keeps_three_digits_under_its_prefix(value: float, shown: str) -> None:
    assert scaled(value) == shown


def test_spread_is_the_median_and_the_range() -> None:
    assert spread([3.0, 1.0, 2.5]) == "2.50 (1.00\u20133.00)"
    assert spread([4.0]) == "4.00"


def test_a_table_says_which_of_its_figures_are_single_runs() -> None:
    assert single_runs([3, 3]) == []
    assert single_runs([1, 1, 0]) == ["", "Every figure of this table comes from a single run."]
    assert single_runs([3, 1]) == [
        "",
        "A figure without a range in brackets comes from a single run.",
    ]
    assert single_runs([]) == []


def test_a_tail_of_fewer_than_100_samples_is_the_max() -> None:
    assert tail_name(50) == "max"
    assert tail_name(99) == "max"
    assert tail_name(100) == "p99"


SOURCE: Final = "benchmarks/results/example.json"


def test_a_noisy_run_is_marked_loudly_with_every_reading() -> None:
    note = conditions_note({**RUN, "load_1min_after": 7.58}, SOURCE)
    assert note.startswith("> **NOISY RUN.**")
    assert "exceeded the 2 CPUs: 0.4 before, up to 1.9 during (30 samples) and 7.6 after" in note


def test_a_quiet_run_states_its_loads_release_and_commit_plainly() -> None:
    assert conditions_note(RUN, SOURCE) == (
        "1-minute load average 0.4 before, up to 1.9 during (30 samples) and 0.9 after the "
        "run, 2 CPUs.\n\nKubernetes v1.37.2; commit 0123456789."
    )
    dirty = conditions_note({**RUN, "git_dirty": True}, SOURCE)
    assert dirty.endswith("commit 0123456789, with uncommitted changes.")
    offline = {**RUN, "kubernetes_version": None}
    assert provenance(offline, SOURCE) == "Commit 0123456789."


@pytest.mark.parametrize("missing", RECORDED)
def test_a_run_that_did_not_record_a_condition_is_refused_naming_it(missing: str) -> None:
    older = {k: v for k, v in RUN.items() if k != missing}
    with pytest.raises(NotRecordedError, match=rf"^{SOURCE}: the run recorded no {missing},"):
        conditions_note(older, SOURCE)
    with pytest.raises(NotRecordedError, match=missing):
        provenance(older, SOURCE)


def test_a_run_that_recorded_no_conditions_is_refused_naming_its_file_and_date() -> None:
    with pytest.raises(NotRecordedError, match=r"example\.json \(run 2026-12-03\): the run"):
        conditions_note(None, SOURCE, "2026-12-03")


def test_the_recorded_flag_does_not_overrule_the_readings() -> None:
    started_quiet = {**RUN, "load_1min_before": 1.21, "load_1min_after": 7.58, "noisy": False}
    assert conditions_note(started_quiet, SOURCE).startswith("> **NOISY RUN.**")
