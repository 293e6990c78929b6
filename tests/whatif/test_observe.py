"""Reading what a replay cost: the scheduler's attempts from its metrics text,
and CPU seconds from /proc."""

import os

from driver.whatif.observe import attempts_by_result, attempts_spent, cpu_seconds, cpu_spent

METRICS = """\
# HELP scheduler_schedule_attempts_total Number of attempts to schedule pods
# TYPE scheduler_schedule_attempts_total counter
scheduler_schedule_attempts_total{profile="default",result="scheduled"} 40
scheduler_schedule_attempts_total{profile="default",result="unschedulable"} 7
scheduler_schedule_attempts_total{profile="trainium-dra-binpack",result="scheduled"} 2
# HELP scheduler_scheduling_attempt_duration_seconds Scheduling attempt latency
# TYPE scheduler_scheduling_attempt_duration_seconds histogram
scheduler_scheduling_attempt_duration_seconds_bucket{profile="a",result="scheduled",le="+Inf"} 40
scheduler_scheduling_attempt_duration_seconds_sum{profile="default",result="scheduled"} 1.5
scheduler_scheduling_attempt_duration_seconds_count{profile="default",result="scheduled"} 40
scheduler_scheduling_attempt_duration_seconds_sum{profile="default",result="unschedulable"} 3.25
"""


def test_attempts_are_summed_over_profiles_by_result() -> None:
    found = attempts_by_result(METRICS)
    assert found == {
        "scheduled": {"attempts": 42.0, "seconds": 1.5},
        "unschedulable": {"attempts": 7.0, "seconds": 3.25},
    }
    later = {"scheduled": {"attempts": 50.0, "seconds": 2.0}, "error": {"attempts": 1.0}}
    assert attempts_spent(found, later) == {
        "scheduled": {"attempts": 8.0, "seconds": 0.5},
        "error": {"attempts": 1.0},
    }


def test_cpu_seconds_of_live_processes_only() -> None:
    before = cpu_seconds({"me": os.getpid(), "gone": 2**22 + 1})
    assert set(before) == {"me"} and before["me"] > 0
    sum(i * i for i in range(2_000_000))
    spent = cpu_spent(before, cpu_seconds({"me": os.getpid()}))
    assert spent["me"] >= 0
