"""A prepared claim's files, its token and its CDI spec, derived from its
checkpoint record.

The checkpoint is the one file a prepare waits for the disk to hold before
the kubelet gets its answer. The token and the spec are written by rename
without fsync: a SIGKILL cannot lose them (the kernel keeps them), and a
power loss that can also stops every container, so they only have to be
right again before the kubelet starts one. `restore` rewrites them from the
checkpoint when the daemon starts, before it registers. For that the token
must come out the same every time: it is an HMAC of the claim UID and a
per-prepare nonce under a node key kept beside the checkpoint, so the
checkpoint itself still holds no token, only its hash and the nonce.

Both are written only when they do not already hold what the record makes:
a repeated prepare (a kubelet restart, a retry) leaves the files a running
container may have mounted as they are, and still mends missing or damaged ones.
"""

import base64
import functools
import hashlib
import hmac
import os
import secrets
import shutil
from collections.abc import Mapping
from pathlib import Path

from driver.devicemodel.placement import NodePlace
from driver.node import cdi
from driver.node.devices import AllocatedDevice, ClaimGrant, fabric_of
from driver.node.durable.atomicfile import fsync_dir, remove, write_atomic, write_if_changed
from driver.node.durable.checkpoint import ClaimRecord
from driver.node.paths import NodePaths
from simdevice.topology import CoreRange

KEY_BYTES = 32


class TokenKeyError(RuntimeError):
    """The node's token key file is damaged."""


def load_or_create_key(path: Path) -> bytes:
    """The node's token key, created once and durably by the first daemon; a
    twin daemon starting at the same moment ends up with the same key."""
    if not path.exists():
        key = secrets.token_bytes(KEY_BYTES)
        tmp = path.with_name(f".{path.name}.new-{os.getpid()}")
        write_atomic(tmp, key, mode=0o600)
        try:
            os.link(tmp, path)  # unlike a rename, never replaces a key created meanwhile
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
        fsync_dir(path.parent)
    key = path.read_bytes()
    if len(key) != KEY_BYTES:
        raise TokenKeyError(
            f"{path}: holds {len(key)} bytes, not {KEY_BYTES}; it is damaged. Move it aside "
            "and unprepare the node's claims: their tokens derive from it"
        )
    return key


def new_nonce() -> str:
    return secrets.token_hex(16)


def derive_token(key: bytes, uid: str, nonce: str) -> str:
    mac = hmac.digest(key, f"{uid}:{nonce}".encode(), "sha256")
    return base64.urlsafe_b64encode(mac).rstrip(b"=").decode()


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def grant_of(record: ClaimRecord) -> ClaimGrant:
    """The record as the grant it was made from (what the CDI spec needs)."""
    devices = tuple(
        AllocatedDevice(
            d.request, d.pool, d.device, d.kind, tuple(d.core_ranges()), d.share_id, d.admin_access
        )
        for d in record.devices
    )
    return ClaimGrant(
        devices=devices,
        lnc=record.lnc,
        visible_cores=tuple(record.visible_cores),
        ultraserver=any(d.kind == "ultraserver" for d in devices),
        ultraserver_mode=record.ultraserver_mode,
    )


@functools.lru_cache(maxsize=4096)
def device_fabric(
    place: NodePlace, kind: str, pool: str, local_chips: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Ring and fabric addresses of one device: they depend only on the node's
    place and the chips the device holds, so each is worked out once."""
    ranges = tuple(CoreRange(chip, 0, 1) for chip in local_chips)
    one = ClaimGrant((AllocatedDevice("", pool, "", kind, ranges),), 1, (), kind == "ultraserver")
    ring, ips = fabric_of(one, place)
    return tuple(ring), tuple(ips)


def claim_fabric(grant: ClaimGrant, place: NodePlace) -> tuple[list[int], list[str]]:
    """`fabric_of` for the whole claim: each device's ring and addresses in
    device order, without repeats."""
    ring: list[int] = []
    ips: list[str] = []
    for device in grant.devices:
        chips = tuple(sorted({r.chip for r in device.ranges}))
        device_ring, device_ips = device_fabric(place, device.kind, device.pool, chips)
        ring.extend(i for i in device_ring if i not in ring)
        ips.extend(ip for ip in device_ips if ip not in ips)
    return ring, ips


class ClaimFiles:
    """Writes, removes and restores the files of one node's claims."""

    def __init__(self, driver: str, place: NodePlace, paths: NodePaths, key: bytes) -> None:
        self.driver = driver
        self.place = place
        self.paths = paths
        self.key = key

    def token(self, record: ClaimRecord) -> str:
        return derive_token(self.key, record.uid, record.token_nonce)

    def token_path(self, record: ClaimRecord) -> Path:
        """Records of earlier releases (no nonce) keep their token where it was written."""
        if record.token_nonce:
            return self.paths.token_file(record.uid)
        return self.paths.legacy_token_file(record.uid)

    def edits(self, record: ClaimRecord, grant: ClaimGrant | None = None) -> cdi.ClaimEdits:
        """The spec's inputs; `grant` is the record's own grant when the caller has it."""
        ring, fabric_ips = claim_fabric(grant or grant_of(record), self.place)
        return cdi.ClaimEdits(
            claim_uid=record.uid,
            visible_cores=record.visible_cores,
            lnc=record.lnc,
            workload_socket=self.paths.workload_socket,
            token_file=self.token_path(record),
            node_name=self.place.node_name,
            ultraserver=self.place.ultraserver,
            server_index=self.place.server_index,
            generation=self.place.rack.generation,
            ring=ring,
            fabric_ips=fabric_ips,
            ultraserver_mode=record.ultraserver_mode,
        )

    def write_token(self, record: ClaimRecord) -> bool:
        """Write the token file unless it holds the token; True if written. Records
        of earlier releases have no nonce: their token file stays as it is."""
        if not record.token_nonce:
            return False
        token = self.token(record).encode()
        return write_if_changed(self.paths.token_file(record.uid), token, mode=0o644)

    def write_spec(self, record: ClaimRecord, grant: ClaimGrant | None = None) -> bool:
        """Write the CDI spec unless it holds what the record makes; True if written."""
        return cdi.write_spec(self.paths.cdi_dir, self.driver, self.edits(record, grant))

    def remove_spec(self, uid: str) -> None:
        cdi.remove_spec(self.paths.cdi_dir, self.driver, uid)

    def remove_token(self, uid: str) -> None:
        """The token file, or the claim directory an earlier release made for it."""
        remove(self.paths.token_file(uid))
        legacy = self.paths.legacy_token_file(uid).parent
        if legacy.is_dir():
            shutil.rmtree(legacy, ignore_errors=True)

    def restore(self, claims: Mapping[str, ClaimRecord]) -> tuple[list[str], list[str]]:
        """Make the files match `claims`: rewrite any that is missing or differs
        (lost or emptied by a power loss), remove those of claims not recorded
        (an unlink the disk never saw) and temp files of interrupted writes.
        Returns the UIDs whose files were rewritten and those removed."""
        rewritten = []
        for uid, record in sorted(claims.items()):
            token_written = self.write_token(record)
            if self.write_spec(record) or token_written:
                rewritten.append(uid)
        on_disk = cdi.spec_claim_uids(self.paths.cdi_dir, self.driver)
        on_disk |= {
            p.name.removesuffix(".token")
            for p in self.paths.claims_dir.iterdir()
            if p.is_dir() or (p.name.endswith(".token") and not p.name.startswith("."))
        }
        removed = sorted(on_disk - claims.keys())
        for uid in removed:
            self.remove_spec(uid)
            self.remove_token(uid)
        temps = self.paths.cdi_dir.glob(f".k8s.{self.driver}-{cdi.CDI_CLASS}_*.tmp-*")
        for temp in [*temps, *self.paths.claims_dir.glob(".*.token.tmp-*")]:
            remove(temp)
        return rewritten, removed
