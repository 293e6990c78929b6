"""Reading what a replay cost: the scheduler's attempts from its metrics text,
and CPU seconds from /proc; and what the settle clock reads of the scheduler
and the controller."""

import os
from dataclasses import replace

from whatif.observe import (
    attempts_by_result,
    attempts_spent,
    controller_work,
    cpu_seconds,
    cpu_spent,
    scheduler_work,
)

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


SCHEDULER = """\
scheduler_pending_pods{queue="active"} 2
scheduler_pending_pods{queue="backoff"} 3
scheduler_pending_pods{queue="unschedulable"} 40
scheduler_pending_pods{queue="gated"} 1
scheduler_cache_size{type="assumed_pods"} 1
scheduler_inflight_events{event="PodPopped"} 1
scheduler_inflight_events{event="AssignedPodDelete"} 4
scheduler_goroutines{operation="binding"} 1
scheduler_goroutines{operation="Filter"} 2
scheduler_cache_size{type="pods"} 90
scheduler_schedule_attempts_total{profile="default",result="scheduled"} 40
scheduler_schedule_attempts_total{profile="default",result="unschedulable"} 7
scheduler_event_handling_duration_seconds_count{event="AssignedPodDelete"} 5
scheduler_event_handling_duration_seconds_sum{event="AssignedPodDelete"} 0.5
"""
CONTROLLER = """\
trainium_dra_controller_pending_work 2.0
trainium_dra_controller_reconciles_total{result="ok"} 10.0
trainium_dra_controller_reconciles_total{result="conflict"} 1.0
trainium_dra_controller_reconciles_created{result="ok"} 1.7e+09
"""


def test_the_settle_clock_reads_queues_binding_and_progress_by_line() -> None:
    state = scheduler_work(SCHEDULER)
    # Unschedulable and gated pods wait for a change; they are not work in hand.
    # In hand: one assumed, one popped, one binding; not the other events or goroutines.
    assert (state.active, state.backoff, state.binding) == (2, 3, 3)
    assert state.progress == 40 + 7 + 5 and state.failed == 7
    assert state.busy(controller=False)
    idle = scheduler_work(SCHEDULER.replace("} 2\n", "} 0\n").replace("} 1\n", "} 0\n"))
    assert not idle.busy(controller=True) and idle.backoff == 3
    assert controller_work(CONTROLLER) == (2, 11.0)
    assert controller_work("") == (0, 0.0)
    waiting = replace(idle, controller=2)
    assert waiting.busy(controller=True) and not waiting.busy(controller=False)
