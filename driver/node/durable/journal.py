"""The checkpoint's journal: one checksummed line per batch of changes.

Appending a line and one `fdatasync` makes a batch durable without the temp
file, rename and directory fsync a whole-file rewrite needs. Each line names
the records it puts (whole) and the claims it drops, so replaying lines a
rewritten checkpoint already holds changes nothing. A crash while appending
leaves at most a torn last line, which is skipped: nobody was answered for it.
"""

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class JournalError(RuntimeError):
    """A journal line other than the last is damaged."""


@dataclass(frozen=True)
class Entry:
    put: dict[str, dict[str, Any]]  # uid -> the record as a plain dict
    drop: list[str]


def encode_line(put: Mapping[str, Mapping[str, Any]], drop: Sequence[str]) -> bytes:
    """`<sha256 of the JSON> <JSON>` and a newline."""
    body = json.dumps({"drop": list(drop), "put": put}, sort_keys=True, separators=(",", ":"))
    return f"{hashlib.sha256(body.encode()).hexdigest()} {body}\n".encode()


def _decode_line(line: bytes) -> Entry | None:
    digest, _, body = line.rstrip(b"\n").partition(b" ")
    if not line.endswith(b"\n") or hashlib.sha256(body).hexdigest().encode() != digest:
        return None
    try:
        doc = json.loads(body)
        return Entry(put=dict(doc["put"]), drop=list(doc["drop"]))
    except (ValueError, KeyError, TypeError):
        return None


def read_entries(data: bytes, path: Path) -> tuple[list[Entry], int]:
    """The entries of a journal's content and the length they span (a torn
    last line is left out of both)."""
    entries: list[Entry] = []
    offset = 0
    lines = data.splitlines(keepends=True)
    for number, line in enumerate(lines, start=1):
        entry = _decode_line(line)
        if entry is None:
            if number == len(lines):
                break
            raise JournalError(
                f"{path}: line {number} is damaged; move the journal aside "
                "(the claims it recorded are then forgotten)"
            )
        entries.append(entry)
        offset += len(line)
    return entries, offset


def replay(
    base: Mapping[str, dict[str, Any]], entries: Sequence[Entry]
) -> dict[str, dict[str, Any]]:
    claims = dict(base)
    for entry in entries:
        for uid in entry.drop:
            claims.pop(uid, None)
        claims.update(entry.put)
    return claims
