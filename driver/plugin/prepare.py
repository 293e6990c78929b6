"""NodePrepareResources / NodeUnprepareResources for one node.

Order of a prepare: fetch the claim, check UID and allocation, validate config
and compute cores (all before any write), then under the node lock: refuse
cores held by another claim, checkpoint `PrepareStarted`, write the token file,
write the CDI spec, checkpoint `PrepareCompleted`. Unprepare undoes it in
reverse and tolerates any prefix having happened, so a daemon killed between
any two steps converges when the kubelet retries.
"""

import fcntl
import hashlib
import os
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from driver.devicemodel.ultraserver import DEFAULT_LNC
from driver.plugin import cdi, failpoints
from driver.plugin.atomicfile import fsync_dir, write_atomic
from driver.plugin.checkpoint import (
    PREPARE_COMPLETED,
    PREPARE_STARTED,
    Checkpoint,
    ClaimRecord,
    DeviceRecord,
)
from driver.plugin.cluster import ClusterReader
from driver.plugin.devices import ClaimPlan, NodePlace, fabric_of, plan_claim
from driver.plugin.metrics import DriverMetrics
from driver.plugin.paths import NodePaths


@dataclass(frozen=True)
class ClaimRef:
    namespace: str
    uid: str
    name: str


@dataclass(frozen=True)
class PreparedDevice:
    request: str
    pool: str
    device: str
    cdi_device_ids: tuple[str, ...]
    share_id: str | None = None


@dataclass(frozen=True)
class PrepareResult:
    devices: tuple[PreparedDevice, ...] = ()
    error: str = ""


class NodeState:
    """The node's checkpoint and the lock that serialises changes to it.

    The lock is a thread lock plus an flock on `<checkpoint>.lock`, so the old
    and the new daemon of a rolling update (same state dir, different pod UID)
    never interleave; the checkpoint is re-read whenever the lock is taken.
    """

    def __init__(self, checkpoint: Checkpoint) -> None:
        self.checkpoint = checkpoint
        self._thread_lock = threading.Lock()
        self._lock_file = checkpoint.path.with_name(checkpoint.path.name + ".lock")

    @contextmanager
    def locked(self) -> Iterator[Checkpoint]:
        with self._thread_lock:
            fd = os.open(self._lock_file, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                self.checkpoint.reload()
                yield self.checkpoint
            finally:
                os.close(fd)

    def held_cores(self, except_uid: str = "") -> dict[tuple[int, int], str]:
        return {
            core: uid
            for uid, record in self.checkpoint.claims.items()
            if uid != except_uid
            for core in record.exclusive_cores()
        }


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def records_of(plan: ClaimPlan) -> list[DeviceRecord]:
    return [
        DeviceRecord(
            request=d.request,
            pool=d.pool,
            device=d.device,
            kind=d.kind,
            ranges=[[r.chip, r.start, r.count] for r in d.ranges],
            share_id=d.share_id,
            admin_access=d.admin_access,
        )
        for d in plan.devices
    ]


class Preparer:
    def __init__(
        self,
        *,
        driver: str,
        place: NodePlace,
        paths: NodePaths,
        reader: ClusterReader,
        state: NodeState,
        metrics: DriverMetrics,
        release_claim: Callable[[str], None],
    ) -> None:
        self.driver = driver
        self.place = place
        self.paths = paths
        self.reader = reader
        self.state = state
        self.metrics = metrics
        self.release_claim = release_claim  # cancels the claim's simulated jobs

    def prepare(self, claims: Iterable[ClaimRef]) -> dict[str, PrepareResult]:
        """Per-claim results; one claim's failure never affects another's."""
        results: dict[str, PrepareResult] = {}
        for ref in claims:
            started = time.perf_counter()
            try:
                result = self._prepare_one(ref)
            except Exception as err:
                result = PrepareResult(error=f"claim {ref.namespace}/{ref.name}: {err}")
            self._observe("prepare", started, not result.error)
            results[ref.uid] = result
        return results

    def unprepare(self, claims: Iterable[ClaimRef]) -> dict[str, str]:
        """Per-claim errors ("" on success); unpreparing an unknown claim succeeds."""
        errors: dict[str, str] = {}
        for ref in claims:
            started = time.perf_counter()
            try:
                self._unprepare_one(ref.uid)
                error = ""
            except Exception as err:
                error = f"claim {ref.namespace}/{ref.name}: {err}"
            self._observe("unprepare", started, not error)
            errors[ref.uid] = error
        return errors

    def reconcile(self) -> list[str]:
        """Unprepare checkpointed claims that were deleted, recreated or deallocated
        while the daemon was down; returns their UIDs."""
        gone = []
        for uid, record in list(self.state.checkpoint.claims.items()):
            claim = self.reader.get_claim(record.namespace, record.name)
            alive = (
                claim is not None
                and (claim.get("metadata") or {}).get("uid") == uid
                and (claim.get("status") or {}).get("allocation")
            )
            if not alive:
                self._unprepare_one(uid)
                gone.append(uid)
        return gone

    def _observe(self, op: str, started: float, ok: bool) -> None:
        node = self.place.node_name
        self.metrics.observe(node, op, time.perf_counter() - started, ok)
        self.metrics.set_prepared(node, len(self.state.checkpoint.claims))

    def _result(self, record: ClaimRecord) -> PrepareResult:
        ids = (cdi.cdi_device_id(self.driver, record.uid),)
        return PrepareResult(
            devices=tuple(
                PreparedDevice(d.request, d.pool, d.device, ids, d.share_id) for d in record.devices
            )
        )

    def _prepare_one(self, ref: ClaimRef) -> PrepareResult:
        claim = self.reader.get_claim(ref.namespace, ref.name)
        if claim is None:
            return PrepareResult(error=f"claim {ref.namespace}/{ref.name} not found")
        uid = (claim.get("metadata") or {}).get("uid")
        if uid != ref.uid:
            return PrepareResult(
                error=f"claim {ref.namespace}/{ref.name}: metadata.uid is {uid}, the kubelet "
                f"asked for {ref.uid}; the claim was recreated, retry with the new pod"
            )
        results = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
        keys = {
            (r.get("pool", ""), r.get("device", ""))
            for r in results.get("results") or []
            if r.get("driver") == self.driver
        }
        chip = self.place.rack.chip.name
        default = self.reader.default_lnc(self.place.ultraserver) or DEFAULT_LNC.get(chip, 1)
        plan = plan_claim(claim, self.reader.attributes(keys), self.place, self.driver, default)
        with self.state.locked():
            return self._write(ref, plan)

    def _write(self, ref: ClaimRef, plan: ClaimPlan) -> PrepareResult:
        checkpoint = self.state.checkpoint
        devices = records_of(plan)
        existing = checkpoint.claims.get(ref.uid)
        if existing and existing.state == PREPARE_COMPLETED and existing.devices == devices:
            return self._result(existing)
        held = self.state.held_cores(except_uid=ref.uid)
        record = ClaimRecord(
            uid=ref.uid,
            namespace=ref.namespace,
            name=ref.name,
            state=PREPARE_STARTED,
            lnc=plan.lnc,
            visible_cores=list(plan.visible_cores),
            devices=devices,
        )
        clash = sorted(core for core in record.exclusive_cores() if core in held)
        if clash:
            chip, core = clash[0]
            return PrepareResult(
                error=f"status.allocation.devices.results: chip {chip} core {core} is still "
                f"prepared for claim {held[clash[0]]}; unprepare that claim first"
            )
        token = secrets.token_urlsafe(32)
        record = replace(record, token_sha256=hash_token(token))
        checkpoint.put(record)
        failpoints.reached("prepare-after-checkpoint-started")
        token_file = self.paths.token_file(ref.uid)
        token_file.parent.mkdir(mode=0o711, parents=True, exist_ok=True)
        write_atomic(token_file, token.encode(), mode=0o644)
        failpoints.reached("prepare-after-token")
        ring, fabric_ips = fabric_of(plan, self.place)
        cdi.write_spec(
            self.paths.cdi_dir,
            self.driver,
            cdi.ClaimEdits(
                claim_uid=ref.uid,
                visible_cores=plan.visible_cores,
                lnc=plan.lnc,
                workload_socket=self.paths.workload_socket,
                token_file=token_file,
                node_name=self.place.node_name,
                ultraserver=self.place.ultraserver,
                server_index=self.place.server_index,
                ring=ring,
                fabric_ips=fabric_ips,
            ),
        )
        failpoints.reached("prepare-after-cdi")
        done = replace(record, state=PREPARE_COMPLETED)
        checkpoint.put(done)
        failpoints.reached("prepare-after-checkpoint-completed")
        return self._result(done)

    def _unprepare_one(self, uid: str) -> None:
        with self.state.locked():
            self.release_claim(uid)
            failpoints.reached("unprepare-after-jobs-cancelled")
            cdi.remove_spec(self.paths.cdi_dir, self.driver, uid)
            failpoints.reached("unprepare-after-cdi-removed")
            claim_dir = self.paths.token_file(uid).parent
            if claim_dir.exists():
                shutil.rmtree(claim_dir)
                fsync_dir(claim_dir.parent)
            failpoints.reached("unprepare-after-token-removed")
            self.state.checkpoint.drop(uid)
            failpoints.reached("unprepare-after-checkpoint-dropped")


def ensure_dirs(paths: NodePaths) -> None:
    """The node's private state dir (0750) and the CDI dir the runtime reads."""
    paths.state_dir.mkdir(mode=0o750, parents=True, exist_ok=True)
    os.chmod(paths.state_dir, 0o750)
    paths.claims_dir.mkdir(mode=0o711, exist_ok=True)
    paths.cdi_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
