"""Group commit of checkpoint changes: changes that queue behind the node lock
while a checkpoint is being written go to disk together, in one write."""

import threading
from functools import partial
from pathlib import Path

from driver.node.durable.checkpoint import PREPARE_COMPLETED, Checkpoint, ClaimRecord, DeviceRecord
from driver.node.durable.groupcommit import Change, NodeState
from testbed.waiting import wait_for


def record(uid: str, chip: int) -> ClaimRecord:
    device = DeviceRecord("req", "rack-a", f"s1-chip{chip}", "chip", [[chip, 0, 8]])
    return ClaimRecord(uid, "ns", uid, PREPARE_COMPLETED, 1, [], [device])


class Put(Change):
    """Adds a record, refusing one that clashes with a record already there."""

    def __init__(self, new: ClaimRecord) -> None:
        super().__init__()
        self.new = new
        self.durable_when_after_ran = False
        self.checkpoint_path: Path | None = None

    def apply(self, claims: dict[str, ClaimRecord]) -> bool:
        taken = {core for r in claims.values() for core in r.exclusive_cores()}
        if taken & self.new.exclusive_cores():
            raise ValueError(f"{self.new.uid}: cores taken")
        claims[self.new.uid] = self.new
        return True

    def after(self) -> None:
        assert self.checkpoint_path is not None
        self.durable_when_after_ran = self.new.uid in Checkpoint(self.checkpoint_path).claims


def queue_holds(state: NodeState, count: int) -> bool:
    return len(state._queue) == count


def test_changes_queued_behind_the_lock_share_one_write(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    state = NodeState(Checkpoint(path))
    changes = [Put(record("a", 0)), Put(record("b", 1)), Put(record("c", 1))]
    for change in changes:
        change.checkpoint_path = path
    threads = [threading.Thread(target=state.commit, args=([c],)) for c in changes]
    with state.locked():  # a write in progress: everyone queues behind it, in this order
        for queued, thread in enumerate(threads, start=1):
            thread.start()
            wait_for(f"{queued} queued changes", partial(queue_holds, state, queued))
    for thread in threads:
        thread.join()
    assert state.checkpoint.writes == 1
    assert set(Checkpoint(path).claims) == {"a", "b"}
    assert all(c.done for c in changes)
    assert [c.error is None for c in changes] == [True, True, False]
    assert "c: cores taken" in str(changes[2].error)
    assert [c.durable_when_after_ran for c in changes[:2]] == [True, True]


def test_a_batch_that_changes_nothing_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    state = NodeState(Checkpoint(path))
    first = Put(record("a", 0))
    first.checkpoint_path = path
    state.commit([first])
    clash = Put(record("b", 0))
    clash.checkpoint_path = path
    state.commit([clash])
    assert state.checkpoint.writes == 1
    assert clash.error is not None and not clash.durable_when_after_ran
