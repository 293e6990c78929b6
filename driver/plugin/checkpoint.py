"""The node daemon's record of prepared claims, one JSON file per node.

Written atomically with a SHA-256 checksum over its claims so a torn or edited
file is refused instead of trusted. Each claim is recorded as
`PrepareStarted` before any file is written for it and `PrepareCompleted`
after, so a daemon killed between any two steps knows which cores it holds
and which files may exist.
"""

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from driver.plugin.atomicfile import write_atomic
from simdevice.topology import CoreRange

FORMAT_VERSION = 1
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


def encode(claims: Mapping[str, ClaimRecord]) -> bytes:
    body = {uid: asdict(record) for uid, record in sorted(claims.items())}
    doc = {"version": FORMAT_VERSION, "checksum": checksum(body), "claims": body}
    return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()


def decode(data: bytes, path: Path) -> dict[str, ClaimRecord]:
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
    try:
        return {uid: _record(record) for uid, record in claims.items()}
    except (TypeError, KeyError, AttributeError, ValueError) as err:
        raise CheckpointError(f"{path}: claims: malformed record ({err}); move it aside") from err


def _record(raw: Any) -> ClaimRecord:
    """One claim record, every field of the type the daemon relies on (TypeError if not)."""
    record = ClaimRecord(
        **{k: v for k, v in raw.items() if k != "devices"},
        devices=[DeviceRecord(**d) for d in raw["devices"]],
    )
    texts = (record.uid, record.namespace, record.name, record.state, record.token_sha256)
    ok = all(isinstance(t, str) for t in texts) and _ints(record.visible_cores)
    ok = ok and type(record.lnc) is int
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
    """The file plus its in-memory copy; callers serialise mutations."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.claims: dict[str, ClaimRecord] = {}
        self._stamp: tuple[int, int, int] | None = None
        self.reload()

    def reload(self) -> None:
        """Re-read the file if another writer (a rolling-update twin) replaced it."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self.claims, self._stamp = {}, None
            return
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            self.claims = decode(self.path.read_bytes(), self.path)
            self._stamp = stamp

    def put(self, record: ClaimRecord) -> None:
        self._store({**self.claims, record.uid: record})

    def drop(self, uid: str) -> None:
        if uid in self.claims:
            self._store({k: v for k, v in self.claims.items() if k != uid})

    def _store(self, claims: dict[str, ClaimRecord]) -> None:
        write_atomic(self.path, encode(claims), mode=0o600)
        self.claims = claims
        st = self.path.stat()
        self._stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
