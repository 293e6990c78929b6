"""The one work queue the controller and the local cluster's pod sync share."""

import threading
from pathlib import Path

from driver.claimendpoint import ClaimEndpoint
from driver.workqueue import WorkQueue
from localsim.standin.podsync import TICK, PodRecord, next_visit


def test_work_queue_dedups_serializes_and_requeues() -> None:
    q = WorkQueue()
    q.add("a")
    q.add("a")
    q.add("b", delay=0.2)
    assert q.get(timeout=0.1) == "a"
    q.add("a")  # requested again while in progress: not handed to a second worker
    assert q.get(timeout=0.05) is None
    assert q.pending() == 2  # "a" in progress and asked again, "b" delayed: two keys
    q.done("a")
    assert q.get(timeout=0.1) == "a"
    q.done("a")
    assert q.get(timeout=1) == "b"
    q.done("b")
    assert q.idle()
    q.add("c", delay=30)
    assert q.pending() == 1 and not q.idle()  # a delayed key counts: the work is promised
    got: list[str | None] = []
    waiter = threading.Thread(target=lambda: got.append(q.get()))
    waiter.start()
    q.close()
    waiter.join(1)
    assert got == [None]


def test_keyed_queue_never_hands_out_a_key_twice_at_once() -> None:
    queue = WorkQueue()
    queue.add("a")
    queue.add("a")
    queue.add("b")
    assert queue.get(0.1) == "a"
    queue.add("a")  # changed while being worked on: runs again after done()
    assert queue.get(0.1) == "b"
    assert queue.get(0.05) is None
    queue.done("a")
    assert queue.get(0.1) == "a"
    waiter = threading.Thread(target=lambda: queue.get(5.0))
    waiter.start()
    queue.close()
    waiter.join(1.0)
    assert not waiter.is_alive()


def test_pod_sync_visits_again_after_back_off_or_to_follow_workloads() -> None:
    assert next_visit(PodRecord("n"), 100.0) is None
    assert next_visit(PodRecord("n", last_error="x", retry_at=103.0), 100.0) == 3.0
    assert next_visit(PodRecord("n", last_error="x", retry_at=99.0), 100.0) == TICK
    running = PodRecord("n", running=True)
    assert next_visit(running, 100.0) is None
    running.jobs["main"] = (ClaimEndpoint("uid", Path("/no/socket"), "token"), "job-1")
    assert next_visit(running, 100.0) == TICK
