"""docs/scale.md's counters-first section: the committed patch shown, and the
figures only from runs that have the arm; the benchmark runs the arm only
when asked to."""

from typing import Any

from benchmarks.pages.countersfirst import (
    PATCH,
    SHOWN_FILE,
    STOCK_ARM,
    file_diff,
    patch_hash,
    section,
)
from benchmarks.pages.scheduler import BUSY_ANCHOR
from benchmarks.scheduler import busy_arms, default_busy_layouts
from benchmarks.scheduler_busy import BUSY_LAYOUTS, STOCK
from testbed.countersfirst import ARM as COUNTERS_FIRST_ARM
from testbed.countersfirst import NAME as COUNTERS_FIRST
from tests.benchmarks.recorded import RUN


def run(ms: float, bound: int = 100, build: str = "") -> dict[str, Any]:
    return {"scheduler_cpu_ms_per_pod": ms, "bound": bound, "scheduler_build": build}


def payload(occupancy: dict[str, Any]) -> dict[str, Any]:
    return {"results": {"occupancy": occupancy, "loads": {"occupancy": RUN}}}


def test_without_the_arm_the_section_says_it_was_not_measured() -> None:
    busy = {"10": {"90": {STOCK_ARM: [run(270.0)], BUSY_ANCHOR: [run(30.0)]}}}
    for scheduler in (None, payload(busy)):
        text = "\n".join(section(scheduler))
        assert "Not measured yet" in text
        assert "| racks |" not in text


def test_the_arm_is_divided_by_the_stock_run_of_its_round() -> None:
    build = f"v1.37.2-{patch_hash()}"
    layouts = {
        STOCK_ARM: [run(200.0), run(300.0)],
        COUNTERS_FIRST_ARM: [run(50.0, build=build), run(60.0, build=build)],
        BUSY_ANCHOR: [run(25.0), run(30.0)],
    }
    text = "\n".join(section(payload({"10": {"90": layouts}})))
    to = "\N{EN DASH}"
    ratios = f"0.23 (0.20{to}0.25)"  # the median of 50/200 and 60/300
    figures = f"250.00 (200.00{to}300.00) | 55.00 (50.00{to}60.00)"
    assert f"| 10 | 90% | {figures} | {ratios} |" in text
    assert "| 100 / 100 |" in text
    assert "Not measured yet" not in text
    assert "other than the committed one" not in text


def test_a_run_of_another_patch_or_other_bound_counts_is_flagged() -> None:
    layouts = {
        STOCK_ARM: [run(200.0)],
        COUNTERS_FIRST_ARM: [run(50.0, bound=99, build="v1.37.2-000000000000")],
    }
    text = "\n".join(section(payload({"1": {"50": layouts}})))
    assert "| 100 / 99 (differ) |" in text
    assert "v1.37.2-000000000000" in text


def test_the_shown_diff_is_the_committed_patch_of_the_variant_the_scheduler_runs() -> None:
    shown = file_diff(PATCH.read_text(), SHOWN_FILE)
    assert shown.startswith(f"diff --git a/{SHOWN_FILE} b/{SHOWN_FILE}")
    assert shown in PATCH.read_text()
    assert "countersFit" in shown
    assert "diff --git" not in shown[1:]


def test_the_arm_runs_only_when_asked_for() -> None:
    stock = default_busy_layouts(1)
    assert COUNTERS_FIRST_ARM not in stock and "node pools" in stock
    assert busy_arms(stock, STOCK) == stock
    assert busy_arms(stock, COUNTERS_FIRST) == [*stock, COUNTERS_FIRST_ARM]
    assert busy_arms([COUNTERS_FIRST_ARM], COUNTERS_FIRST) == [COUNTERS_FIRST_ARM]
    assert BUSY_LAYOUTS[COUNTERS_FIRST_ARM].scheduler == COUNTERS_FIRST
