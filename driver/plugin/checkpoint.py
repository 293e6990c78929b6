"""The node daemon's record of prepared claims, one JSON file per node.

Written atomically and durably with a SHA-256 checksum over its claims so a
torn or edited file is refused instead of trusted. It is the only file a
prepare waits for the disk to hold: a claim is recorded `PrepareCompleted`
with everything its token and CDI spec are derived from, and those files are
rewritten from here at start-up. `PrepareStarted` is only read: earlier
releases wrote it before a claim's files, and start-up drops such records.
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
    token_nonce: str = ""  # with the node's token key, derives the token (see claimfiles)

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
    return encode_plain({uid: asdict(record) for uid, record in claims.items()})


def encode_plain(body: Mapping[str, Any]) -> bytes:
    """The file for claims already turned into plain dicts: one canonical JSON
    text serves both as the claims and for their checksum."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    return f'{{"checksum":"{digest}","claims":{canonical},"version":{FORMAT_VERSION}}}\n'.encode()


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
        return {
            uid: ClaimRecord(
                **{k: v for k, v in record.items() if k != "devices"},
                devices=[DeviceRecord(**d) for d in record["devices"]],
            )
            for uid, record in claims.items()
        }
    except (TypeError, KeyError) as err:
        raise CheckpointError(f"{path}: claims: malformed record ({err}); move it aside") from err


class Checkpoint:
    """The file plus its in-memory copy; callers serialise mutations."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.claims: dict[str, ClaimRecord] = {}
        self._stamp: tuple[int, int, int] | None = None
        self.writes = 0  # durable writes by this process, one per batch of changes
        self._plain: dict[str, tuple[ClaimRecord, dict[str, Any]]] = {}
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
        self.store({**self.claims, record.uid: record})

    def drop(self, uid: str) -> None:
        if uid in self.claims:
            self.store({k: v for k, v in self.claims.items() if k != uid})

    def _plain_body(self, claims: Mapping[str, ClaimRecord]) -> dict[str, dict[str, Any]]:
        """Claims as plain dicts, converting only records not converted before."""
        fresh = {}
        for uid, record in claims.items():
            cached = self._plain.get(uid)
            fresh[uid] = cached if cached and cached[0] is record else (record, asdict(record))
        self._plain = fresh
        return {uid: plain for uid, (_, plain) in fresh.items()}

    def store(self, claims: dict[str, ClaimRecord]) -> None:
        """Replace every record with `claims`, durably, in one write."""
        write_atomic(self.path, encode_plain(self._plain_body(claims)), mode=0o600)
        self.writes += 1
        self.claims = claims
        st = self.path.stat()
        self._stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
