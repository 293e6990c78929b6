"""The live replays' block states each case beside the anchor and where its
CPU went, a table per clock headed with its cases' dates and commits, from
the results alone; a case that recorded no conditions or no date is refused."""

from typing import Any

import pytest

from benchmarks.pages import whatif_live
from benchmarks.pages.common import NotRecordedError
from tests.benchmarks.recorded import RUN


def run(policy: str, allocation: float, p50: float, queueing: str = "backfill") -> dict[str, Any]:
    return {
        "policy": policy,
        "queueing": queueing,
        "jobs_run": 30,
        "jobs_never_run": 1,
        "evictions": 2 if policy == "kube-scheduler" else 0,
        "allocation_rate_while_arriving": allocation,
        "queueing_delay_s": {"p50": p50, "p90": 2 * p50, "max": 3 * p50},
    }


CASE = {
    "what": "1 rack, a test",
    "date": "2026-12-05 00:20",
    "clock": "settle",
    "conditions": RUN,
    "wall_seconds": 200.0,
    "cpus": 2,
    "load_1min": {"before": 0.5, "after": 3.25},
    "bind_latency_wall_s": {"p50": 1.5},
    "runs": [run("kube-scheduler", 0.6, 40), run("first-fit", 0.61, 0), run("best-fit", 0.65, 0)],
    "diff": [{"anchor": "best-fit backfill", "jobs": 31, "alike": 29, "causes": {}}],
    "cpu_seconds_by_process": {"etcd": 5.0, "kube-scheduler": 150.0, "kube-apiserver": 90.0},
    "scheduler_attempts": {
        "scheduled": {"attempts": 31.0, "seconds": 3.0},
        "unschedulable": {"attempts": 9.0, "seconds": 1.0},
    },
}
PAGE = "before\n<!-- live:start -->\nold\n<!-- live:end -->\nafter\n"


def payload_of(cases: dict[str, Any]) -> dict[str, Any]:
    return {"command": "make x", "machine": {"cpus": 2, "date": "d"}, "results": {"cases": cases}}


def test_each_case_is_a_row_beside_the_anchor_with_where_its_cpu_went() -> None:
    page = whatif_live.render(PAGE, payload_of({"c": CASE}))
    assert page.startswith("before\n") and page.endswith("after\n") and "old" not in page
    assert (
        "| `c` | 30 / 1 | 200 | 60.0% / 61.0% / 65.0% | -5.0 "
        "| 40 / 80 / 120 | 0 / 0 / 0 | 29 of 31 alike | 1.5 | 2 |" in page
    )
    assert "- `c` (2026-12-05 00:20): 1 rack, a test. " in page
    assert "used 245 CPU seconds of the 400" in page
    assert "most: kube-scheduler 150, kube-apiserver 90, etcd 5" in page
    assert "scheduled 31, 75% of its attempt time; unschedulable 9, 25% of its attempt time" in page


def test_each_clock_has_its_table_headed_with_its_cases_dates_and_commits() -> None:
    wall = {
        **CASE,
        "clock": "wall",
        "speedup": 50.0,
        "date": "2026-12-06 10:00",
        "conditions": {**RUN, "git_commit": "fedcba9876543210"},
    }
    page = whatif_live.render(PAGE, payload_of({"s": CASE, "w": wall}))
    settle_at = page.index("On the settle clock: `s` (2026-12-05 00:20, commit 0123456789).")
    wall_at = page.index(
        "On the wall clock at 50.0 simulated seconds a wall second: "
        "`w` (2026-12-06 10:00, commit fedcba9876)."
    )
    tables = page[settle_at:].split("\n\n")
    settle_table = next(t for t in tables if t.startswith("| case |"))
    assert "| `s` |" in settle_table and "| `w` |" not in settle_table
    assert "| `w` |" in page[wall_at:]


@pytest.mark.parametrize("missing", ["conditions", "date"])
def test_a_case_without_its_conditions_or_its_date_is_refused(missing: str) -> None:
    unrecorded = {k: v for k, v in CASE.items() if k != missing}
    with pytest.raises(NotRecordedError, match=r"whatif-live\.json, case `old`"):
        whatif_live.render(PAGE, payload_of({"c": CASE, "old": unrecorded}))
    older = {**CASE, "conditions": {k: v for k, v in RUN.items() if k != "git_commit"}}
    with pytest.raises(NotRecordedError, match="recorded no git_commit"):
        whatif_live.render(PAGE, payload_of({"old": older}))


def case_rows(payload: dict[str, Any]) -> dict[str, str]:
    """The live table's rows of the rendered page, by their first cell."""
    return {
        line.split(" | ")[0]: line
        for line in whatif_live.render(PAGE, payload).splitlines()
        if line.startswith("| `")
    }


def test_a_case_is_marked_noisy_when_any_reading_exceeded_the_cpus() -> None:
    started_busy = {**CASE, "conditions": {**RUN, "load_1min_before": 2.84}}
    sampled = {
        **CASE,
        "conditions": {**RUN, "load_during_1min": {"samples": 40, "max": 4.0, "mean": 1.7}},
    }
    unsampled = {**CASE, "conditions": {**RUN, "load_during_1min": None}}
    cases = {"quiet": CASE, "busy": started_busy, "sampled": sampled, "unsampled": unsampled}
    rows = case_rows(payload_of(cases))
    assert rows["| `quiet`"].endswith("| 0.4 \u2192 up to 1.9 \u2192 0.9 |")
    assert rows["| `busy`"].endswith("| **noisy**: 2.84 \u2192 up to 1.9 \u2192 0.9 |")
    assert rows["| `sampled`"].endswith("| **noisy**: 0.4 \u2192 up to 4 \u2192 0.9 |")
    assert rows["| `unsampled`"].endswith("| 0.4 \u2192 0.9 (not sampled during) |")


def test_the_anchor_queueing_alike_is_compared_with_its_maxima_and_the_jobs_that_part() -> None:
    anchor = run("best-fit", 0.65, 0)
    anchor["queueing_delay_s"] = {"p50": 0, "p90": 0, "max": 990}
    fifo = {**anchor, "queueing": "fifo", "allocation_rate_while_arriving": 0.1}
    live = run("kube-scheduler", 0.6, 40)
    live["queueing_delay_s"]["max"] = 1200
    case = {
        **CASE,
        "runs": [live, run("first-fit", 0.61, 0), anchor, fifo],
        "diff": [
            {"anchor": "best-fit fifo", "jobs": 31, "alike": 1, "causes": {"spread": 30}},
            {
                "anchor": "best-fit backfill",
                "jobs": 31,
                "alike": 28,
                "causes": {"later-fragmented": 2, "live-only": 1},
            },
        ],
    }
    page = whatif_live.render(PAGE, payload_of({"c": case}))
    # The backfill anchor is the one compared: the FIFO row's 10% is not shown.
    assert "| 200 | 60.0% / 61.0% / 65.0% | -5.0 | 40 / 80 / 1,200 | 0 / 0 / 990 " in page
    assert "| 28 of 31 alike; most: 2 started later: enough cores were free" in page


def test_a_repeated_trace_shows_how_far_its_replays_part() -> None:
    repeats = [
        {"hog": False, "allocation_rate_while_arriving": 0.40, "same_start_share": 1.0,
         "wall_seconds": 300.0, "load_1min_after": 1.5},
        {"hog": False, "allocation_rate_while_arriving": 0.405, "same_start_share": 0.97,
         "wall_seconds": 310.0, "load_1min_after": 1.5},
        {"hog": True, "allocation_rate_while_arriving": 0.395, "same_start_share": 0.95,
         "wall_seconds": 500.0, "load_1min_after": 4.25},
    ]  # fmt: skip
    payload = {
        "command": "make x",
        "machine": {"cpus": 2, "date": "d"},
        "results": {"cases": {"r": {**CASE, "repeats": repeats}}},
    }
    page = whatif_live.render(PAGE, payload)
    assert "Allocation while jobs arrive, live: 40.0% / 40.5% / 39.5% (1.0 points apart)" in page
    assert "same simulated second as in the first replay: 97% / 95%." in page
    assert "(load 4.25 after it) and took 500 s of wall time against 300 s." in page


def kueue_runs() -> tuple[dict[str, Any], dict[str, Any]]:
    """A live replay through Kueue StrictFIFO and its best-fit anchor alike."""
    live = {
        **run("kube-scheduler", 0.5, 100),
        "queueing": "kueue-strict",
        "gangs": True,
        "allocation_rate_while_waiting": 0.7,
        "makespan_s": 9000.0,
    }
    live["queueing_delay_s"]["max"] = 4000
    return live, {**run("best-fit", 0.55, 50), "queueing": "kueue-strict"}


def test_a_case_through_kueue_is_compared_with_the_anchor_queueing_alike_and_policies_part() -> (
    None
):
    live, strict = kueue_runs()
    backfill = {**run("best-fit", 0.9, 0), "queueing": "backfill"}
    first = {**run("first-fit", 0.54, 50), "queueing": "kueue-strict"}
    waits = {
        "rack": {"jobs": 3, "never_ran": 1, "wait_mean_s": 1500.0, "wait_max_s": 2500.0},
        "server": {"jobs": 5, "never_ran": 0, "wait_mean_s": 10.0, "wait_max_s": 30.0},
    }
    case = {
        **CASE,
        "what": "1 rack through Kueue",
        "runs": [live, first, backfill, strict],
        "by_shape": {"kube-scheduler, gangs on": waits},
        "diff": [{"anchor": "best-fit kueue-strict", "jobs": 31, "alike": 30, "causes": {}}],
    }
    chips = {"chips-1": {"jobs": 3, "never_ran": 0, "wait_mean_s": 0.0, "wait_max_s": 0.0}}
    small = {**case, "what": "only chips", "by_shape": {"kube-scheduler, gangs on": chips}}
    payload = {
        "command": "make x",
        "machine": {"cpus": 2, "date": "d"},
        "results": {"cases": {"k": case, "c": CASE, "small": small}},
    }
    page = whatif_live.render(PAGE, payload)
    assert "| `k` | 30 / 1 | 200 | 50.0% / 54.0% / 55.0% | -5.0 |" in page
    assert (
        "| `k` | 1 rack through Kueue | 50.0% | 70.0% | 100 / 200 / 4,000 | 9,000 "
        "| 1,500 / 2,500 (1 never ran) | 10 / 30 |" in page
    )
    assert "| `c` | 1 rack, a test |" not in page, "a case without waits by shape is no policy row"
    assert "| `small` | only chips |" not in page, "nor one without whole racks or gangs"


def test_the_queues_page_shows_the_kueue_cases_beside_the_bare_scheduler() -> None:
    live, strict = kueue_runs()
    waits = {"rack": {"jobs": 3, "never_ran": 0, "wait_mean_s": 1500.0, "wait_max_s": 2500.0}}
    case = {
        **CASE,
        "what": "through Kueue",
        "runs": [live, {**run("first-fit", 0.5, 0), "queueing": "kueue-strict"}, strict],
        "by_shape": {"kube-scheduler, gangs on": waits},
        "diff": [{"anchor": "best-fit kueue-strict", "jobs": 31, "alike": 30, "causes": {}}],
    }
    payload = {"command": "make x", "machine": {"cpus": 2, "date": "d"}}
    page = "a\n<!-- kueue:start -->\nold\n<!-- kueue:end -->\nb\n"
    shown = whatif_live.queues(page, {**payload, "results": {"cases": {"kueue-strict": case}}})
    assert "\nold\n" not in shown
    assert "cases `kueue-strict` (2026-12-05 00:20, commit 0123456789)" in shown
    assert (
        "| `kueue-strict` | through Kueue | 50.0% | 70.0% | 100 / 200 / 4,000 | 9,000 "
        "| 1,500 / 2,500 |  | 30 of 31 alike |" in shown
    )
    empty = whatif_live.queues(page, {**payload, "results": {"cases": {"c": CASE}}})
    assert "Not measured yet: `make bench-whatif-live BENCH_ARGS='--cases" in empty


def test_a_case_of_jobs_with_work_shows_the_job_seconds_each_replay_lost_to_spread() -> None:
    def lost(total: float) -> dict[str, Any]:
        return {
            "spread_lost_job_s": {"total": total, "p50": total / 4, "p90": total / 2, "jobs": 36}
        }

    live = {**run("kube-scheduler", 0.6, 40), **lost(1200.0)}
    first = {**run("first-fit", 0.61, 0), **lost(0.0)}
    best = {**run("best-fit", 0.65, 0), **lost(-40.0)}
    payload = {
        "command": "make x",
        "machine": {"cpus": 2, "date": "d"},
        "results": {"cases": {"w": {**CASE, "runs": [live, first, best]}, "c": CASE}},
    }
    page = whatif_live.render(PAGE, payload)
    assert "| `w` | kube-scheduler | 36 | 1,200 / 300 / 600 |" in page
    assert "| `w` | first-fit | 36 | 0 / 0 / 0 |" in page
    assert "| `w` | best-fit | 36 | -40 / -10 / -20 |" in page
    assert "| `c` | kube-scheduler | 36" not in page
    assert "lost to spread" not in whatif_live.render(
        PAGE, {**payload, "results": {"cases": {"c": CASE}}}
    )
