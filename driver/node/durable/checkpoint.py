"""The node daemon's record of prepared claims: a JSON file per node and its journal.

The file is rewritten atomically and durably, with a SHA-256 checksum over
its claims so a torn or edited file is refused instead of trusted; between
rewrites each batch of changes is appended to `<file>.journal` (see
journal.py), which costs one fdatasync. These are the only files a prepare
waits for the disk to hold: a claim is recorded `PrepareCompleted` with
everything its token and CDI spec are derived from, and those files are
rewritten from here at start-up. `PrepareStarted` is only read: earlier
releases wrote it before a claim's files, and start-up drops such records.
"""

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from driver.node.durable.atomicfile import fsync_dir, write_atomic
from driver.node.durable.journal import JournalError, encode_line, read_entries, replay
from simdevice.topology import CoreRange

FORMAT_VERSION = 1
COMPACT_BYTES = 64 * 1024
"""The journal is folded into a rewritten checkpoint once it is this long."""
PREPARE_STARTED = "PrepareStarted"
PREPARE_COMPLETED = "PrepareCompleted"


class CheckpointError(RuntimeError):
    """The checkpoint file is unreadable, of an unknown version or fails its checksum."""


@dataclass(frozen=True)
class DeviceRecord:
    request: str
    pool: str
    device: str
    kind: str
    ranges: list[list[int]]  # [chip, start, count] per range
    share_id: str | None = None
    admin_access: bool = False

    def core_ranges(self) -> list[CoreRange]:
        return [CoreRange(chip, start, count) for chip, start, count in self.ranges]


@dataclass(frozen=True)
class ClaimRecord:
    uid: str
    namespace: str
    name: str
    state: str
    lnc: int
    visible_cores: list[int]
    devices: list[DeviceRecord]
    token_sha256: str = ""
    token_nonce: str = ""  # with the node's token key, derives the token (see claimfiles)
    ultraserver_mode: int | None = None  # AWS's UltraServerConfig; absent from the file when None

    def plain(self) -> dict[str, Any]:
        """The record as the file keeps it: a claim without an UltraServer mode is
        written exactly as releases before the mode wrote it."""
        out = asdict(self)
        if self.ultraserver_mode is None:
            del out["ultraserver_mode"]
        return out

    def physical_cores(self) -> set[tuple[int, int]]:
        return {
            (r.chip, core) for d in self.devices for r in d.core_ranges() for core in r.physical()
        }

    def exclusive_cores(self) -> set[tuple[int, int]]:
        """Cores this claim holds; admin-access devices observe cores without holding them."""
        return {
            (r.chip, core)
            for d in self.devices
            if not d.admin_access
            for r in d.core_ranges()
            for core in r.physical()
        }


def checksum(claims: Mapping[str, Any]) -> str:
    canonical = json.dumps(claims, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def encode_plain(body: Mapping[str, Any]) -> bytes:
    """The file for claims already turned into plain dicts: one canonical JSON
    text serves both as the claims and for their checksum."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    return f'{{"checksum":"{digest}","claims":{canonical},"version":{FORMAT_VERSION}}}\n'.encode()


def decode_plain(data: bytes, path: Path) -> dict[str, Any]:
    """The file's claims as plain dicts, once version and checksum are right."""
    try:
        doc = json.loads(data)
    except ValueError as err:
        raise CheckpointError(f"{path}: not JSON ({err}); move it aside to start empty") from err
    if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: version must be {FORMAT_VERSION}; written by another release?"
        )
    claims = doc.get("claims")
    if not isinstance(claims, dict) or doc.get("checksum") != checksum(claims):
        raise CheckpointError(f"{path}: checksum mismatch, the file is damaged; move it aside")
    return claims


def records(claims: Mapping[str, Any], path: Path) -> dict[str, ClaimRecord]:
    try:
        out = {uid: _record(record) for uid, record in claims.items()}
    except (TypeError, KeyError, AttributeError, ValueError) as err:
        raise CheckpointError(f"{path}: claims: malformed record ({err}); move it aside") from err
    for uid, record in out.items():
        if record.uid != uid:  # its files would be written under the other UID
            raise CheckpointError(
                f"{path}: claims.{uid}.uid: is {record.uid!r}, must be its key; move it aside"
            )
    return out


def decode(data: bytes, path: Path) -> dict[str, ClaimRecord]:
    return records(decode_plain(data, path), path)


Stamp = tuple[int, int, int] | None


def _stamp(path: Path) -> Stamp:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _record(raw: Any) -> ClaimRecord:
    """One claim record, every field of the type the daemon relies on (TypeError if not)."""
    record = ClaimRecord(
        **{k: v for k, v in raw.items() if k != "devices"},
        devices=[DeviceRecord(**d) for d in raw["devices"]],
    )
    texts = (record.uid, record.namespace, record.name, record.state, record.token_sha256)
    ok = all(isinstance(t, str) for t in texts) and _ints(record.visible_cores)
    ok = ok and type(record.lnc) is int
    ok = ok and (record.ultraserver_mode is None or type(record.ultraserver_mode) is int)
    for d in record.devices:
        ok = ok and all(isinstance(t, str) for t in (d.request, d.pool, d.device, d.kind))
        ok = ok and isinstance(d.ranges, list) and all(_ints(r) and len(r) == 3 for r in d.ranges)
        ok = ok and isinstance(d.share_id, str | None) and isinstance(d.admin_access, bool)
    if not ok:
        raise TypeError(f"claim {record.uid!r} has a field of the wrong type")
    return record


def _ints(values: Any) -> bool:
    return isinstance(values, list) and all(type(v) is int for v in values)


class Checkpoint:
    """The file and its journal plus their in-memory copy; callers serialise mutations."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.journal = path.with_name(path.name + ".journal")
        self.claims: dict[str, ClaimRecord] = {}
        self._stamps: tuple[Stamp, Stamp] | None = None
        self._journal_len = 0  # what this process last read or wrote of the journal
        self.writes = 0  # durable writes by this process, one per batch of changes
        self._plain: dict[str, tuple[ClaimRecord, dict[str, Any]]] = {}
        self.reload()

    def reload(self) -> None:
        """Re-read file and journal if another writer (a rolling-update twin) changed them."""
        stamps = (_stamp(self.path), _stamp(self.journal))
        if stamps == self._stamps:
            return
        base = decode_plain(self.path.read_bytes(), self.path) if stamps[0] else {}
        try:
            data = self.journal.read_bytes() if stamps[1] else b""
            entries, self._journal_len = read_entries(data, self.journal)
        except JournalError as err:
            raise CheckpointError(str(err)) from err
        self.claims = records(replay(base, entries), self.path)
        self._plain = {}
        self._stamps = stamps

    def put(self, record: ClaimRecord) -> None:
        self.store({**self.claims, record.uid: record})

    def drop(self, uid: str) -> None:
        if uid in self.claims:
            self.store({k: v for k, v in self.claims.items() if k != uid})

    def _plain_body(self, claims: Mapping[str, ClaimRecord]) -> dict[str, dict[str, Any]]:
        """Claims as plain dicts, converting only records not converted before."""
        fresh = {}
        for uid, record in claims.items():
            cached = self._plain.get(uid)
            fresh[uid] = cached if cached and cached[0] is record else (record, record.plain())
        self._plain = fresh
        return {uid: plain for uid, (_, plain) in fresh.items()}

    def store(self, claims: dict[str, ClaimRecord]) -> None:
        """Replace every record with `claims`, durably: one journal line for the
        records that changed, or a rewrite when there is no file yet or the
        journal has grown long."""
        put = [uid for uid, record in claims.items() if self.claims.get(uid) is not record]
        drop = [uid for uid in self.claims if uid not in claims]
        plain = self._plain_body(claims)
        appended = False
        if self._stamps and self._stamps[0] and self._journal_len < COMPACT_BYTES:
            appended = self._append(encode_line({uid: plain[uid] for uid in put}, drop))
        if not appended:
            self._rewrite(plain)
        self.writes += 1
        self.claims = claims
        self._stamps = (_stamp(self.path), _stamp(self.journal))

    def compact(self) -> None:
        """Fold the journal into a rewritten file (at start-up, under the node lock)."""
        self._rewrite(self._plain_body(self.claims))
        self._stamps = (_stamp(self.path), _stamp(self.journal))

    def _append(self, line: bytes) -> bool:
        """Append and fdatasync; False when the journal is missing (then rewrite)."""
        try:
            fd = os.open(self.journal, os.O_WRONLY | os.O_APPEND)
        except FileNotFoundError:
            return False
        try:
            if os.fstat(fd).st_size != self._journal_len:
                os.ftruncate(fd, self._journal_len)  # a torn line must not precede this one
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view) :]
            os.fdatasync(fd)
        finally:
            os.close(fd)
        self._journal_len += len(line)
        return True

    def _rewrite(self, plain: Mapping[str, Any]) -> None:
        """The file first, durably, then an empty journal: a crash between the
        two replays lines the file already holds, which changes nothing."""
        write_atomic(self.path, encode_plain(plain), mode=0o600)
        created = not self.journal.exists()
        fd = os.open(self.journal, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            os.ftruncate(fd, 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            fsync_dir(self.journal.parent)
        self._journal_len = 0
