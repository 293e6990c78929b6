"""The failure-strategy table: medians with their range, and what never happens."""

from typing import Any

from benchmarks.pages.usoperator import faults_of, table


def run(
    degraded: float, acted: float, running: float | None, replaced: int | None
) -> dict[str, Any]:
    return {
        "seconds": {"degraded": degraded, "acted": acted, "running": running},
        "pods": 2,
        "pods_replaced": replaced,
        "claims_made": replaced,
    }


def test_each_strategy_is_a_row_of_medians_and_ranges() -> None:
    strategies = {
        "NoOp": [run(0.5, 0.6, None, None)] * 3,
        "RestartAll": [run(0.4, 0.5, 1.0, 2), run(0.6, 0.7, 2.0, 2), run(0.5, 0.6, 1.5, 2)],
        "MigrateAffected": [run(0.5, 0.5, 1.1, 1)] * 3,
    }
    text = table({"chip": {"what": "a chip", "strategies": strategies}})
    lines = text.splitlines()
    assert lines[0].startswith("| fault | strategy | seconds to `Degraded` |")
    never = "never: nothing moved"
    noop = ("0.5 (0.5\u20130.5)", "0.6 (0.6\u20130.6)", never, "—", "—")
    assert row("`chip`", "`NoOp`", *noop) in lines
    restart = ("0.5 (0.4\u20130.6)", "0.6 (0.5\u20130.7)", "1.5 (1.0\u20132.0)", "2 of 2", "2")
    assert row("`chip`", "`RestartAll`", *restart) in lines
    migrate = ("0.5 (0.5\u20130.5)", "0.5 (0.5\u20130.5)", "1.1 (1.1\u20131.1)", "1 of 2", "1")
    assert row("`chip`", "`MigrateAffected`", *migrate) in lines


def test_each_fault_kind_has_its_rows_and_the_first_format_is_a_chip() -> None:
    strategies = {"NoOp": [run(0.5, 0.6, None, None)]}
    faults = faults_of({"faults": {"not-ready": {"what": "x", "strategies": strategies}}})
    assert table(faults).splitlines()[2].startswith("| `not-ready` | `NoOp` |")
    assert list(faults_of({"strategies": strategies})) == ["chip"]


def row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"
