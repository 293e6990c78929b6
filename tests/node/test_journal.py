"""The checkpoint's journal: changes between rewrites, torn and damaged lines,
and a rewrite interrupted before the journal was emptied."""

from pathlib import Path

import pytest

from driver.node.durable.checkpoint import (
    PREPARE_COMPLETED,
    Checkpoint,
    CheckpointError,
    ClaimRecord,
    DeviceRecord,
)


def record(uid: str, chip: int = 0) -> ClaimRecord:
    device = DeviceRecord("req", "rack-a", f"s1-chip{chip}", "chip", [[chip, 0, 8]])
    return ClaimRecord(uid, "ns", uid, PREPARE_COMPLETED, 1, [chip], [device], "ab", "n")


def test_changes_after_the_first_write_go_to_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    cp = Checkpoint(path)
    cp.put(record("a"))
    base = path.read_bytes()
    cp.put(record("b", 1))
    cp.drop("a")
    assert path.read_bytes() == base  # the file was written once
    assert len(cp.journal.read_bytes().splitlines()) == 2
    assert Checkpoint(path).claims == {"b": record("b", 1)}
    cp.compact()
    assert cp.journal.read_bytes() == b""
    assert Checkpoint(path).claims == {"b": record("b", 1)}


def test_a_torn_last_line_is_skipped_and_then_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    cp = Checkpoint(path)
    cp.put(record("a"))
    cp.put(record("b", 1))
    whole = cp.journal.read_bytes()
    cp.journal.write_bytes(whole[:-7])  # the append of "b" never finished
    again = Checkpoint(path)
    assert again.claims == {"a": record("a")}
    again.put(record("c", 2))
    assert Checkpoint(path).claims == {"a": record("a"), "c": record("c", 2)}


def test_a_damaged_line_before_the_last_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    cp = Checkpoint(path)
    cp.put(record("a"))
    cp.put(record("b", 1))
    cp.put(record("c", 2))
    first, second = cp.journal.read_bytes().splitlines(keepends=True)
    cp.journal.write_bytes(first.replace(b'"b"', b'"x"', 1) + second)
    with pytest.raises(CheckpointError, match=r"checkpoint\.json\.journal: line 1 is damaged"):
        Checkpoint(path)


def test_rewrite_interrupted_before_the_journal_was_emptied_changes_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "checkpoint.json"
    cp = Checkpoint(path)
    cp.put(record("a"))
    cp.put(record("b", 1))
    cp.drop("a")
    cp.put(record("a", 2))
    journal = cp.journal.read_bytes()
    cp.compact()
    cp.journal.write_bytes(journal)  # the file was rewritten, the journal not yet emptied
    assert Checkpoint(path).claims == {"a": record("a", 2), "b": record("b", 1)}


def test_a_twin_sees_the_other_writers_journal_lines(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    old, new = Checkpoint(path), Checkpoint(path)
    old.put(record("a"))
    new.reload()
    new.put(record("b", 1))
    old.reload()
    assert old.claims == {"a": record("a"), "b": record("b", 1)}
    old.drop("b")
    new.reload()
    assert new.claims == {"a": record("a")}
