"""NodePrepareResources / NodeUnprepareResources for one node.

Order of a prepare: fetch the claim, check UID and allocation, validate config
and compute cores, and (AWS profile) check the claim's workload label against
its devices' `workloadId` (all before any write), then under the node lock:
refuse cores held by another claim (`double_use`) and record the claim `PrepareCompleted` in the
checkpoint, durably; then write its token and CDI spec without waiting for the
disk (they are derived from the record and restored from it at start-up), and
answer. A repeated prepare of a claim recorded with the same devices keeps
the record, and its files unless they are missing or differ. Unprepare
cancels the claim's jobs, drops the record durably, then removes the files.
Both are `Change`s of the node's group commit (groupcommit.py).
"""

import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from driver.devicemodel.placement import NodePlace
from driver.devicemodel.profiles import TRAINIUM, ConfigDialect
from driver.devicemodel.ultraserver import DEFAULT_LNC
from driver.kubeletplugin.interface import ClaimRef, PreparedDevice, PrepareResult
from driver.node import cdi
from driver.node.apireader import ClusterReader
from driver.node.devices import ClaimGrant, claim_grant
from driver.node.durable import failpoints
from driver.node.durable.checkpoint import (
    PREPARE_COMPLETED,
    ClaimRecord,
    DeviceRecord,
)
from driver.node.durable.claimfiles import ClaimFiles, hash_token, load_or_create_key, new_nonce
from driver.node.durable.groupcommit import Change, NodeState
from driver.node.metrics import DriverMetrics
from driver.node.paths import NodePaths
from driver.node.workloadcheck import ClaimDevice, check_workload


def double_use(claims: Mapping[str, ClaimRecord], new: ClaimRecord) -> str | None:
    """Why `new` must not be prepared, or None: the first of its devices with a
    core that a device of another prepared claim holds. The scheduler should
    never allocate a core twice; this is the node's backstop when it does (a
    race, a forged or stale allocation), and what keeps a claim off cores whose
    earlier claim the kubelet has not unprepared yet."""
    holders = {
        (r.chip, core): (record, device)
        for record in claims.values()
        if record.uid != new.uid
        for device in record.devices
        if not device.admin_access
        for r in device.core_ranges()
        for core in r.physical()
    }
    for device in new.devices:
        if device.admin_access:
            continue
        clash = sorted(
            (r.chip, core)
            for r in device.core_ranges()
            for core in r.physical()
            if (r.chip, core) in holders
        )
        if clash:
            chip, core = clash[0]
            holder, held_by = holders[clash[0]]
            return (
                f"status.allocation.devices.results: device {device.pool}/{device.device} of "
                f"claim {new.namespace}/{new.name} covers chip {chip} core {core}, which device "
                f"{held_by.pool}/{held_by.device} of claim {holder.namespace}/{holder.name} "
                f"(uid {holder.uid}) already holds on this node ({len(clash)} cores overlap); "
                "nothing was prepared: unprepare that claim first, or, if both claims are "
                "allocated, one core was allocated twice"
            )
    return None


def records_of(grant: ClaimGrant) -> list[DeviceRecord]:
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
        for d in grant.devices
    ]


class PrepareChange(Change):
    """Record the claim (unless recorded with the same devices), then write those
    of its files that do not already hold what the record makes."""

    def __init__(self, preparer: "Preparer", ref: ClaimRef, grant: ClaimGrant) -> None:
        super().__init__()
        self.preparer, self.ref, self.grant = preparer, ref, grant
        self.record: ClaimRecord | None = None
        self.result = PrepareResult(error=f"claim {ref.namespace}/{ref.name}: not prepared")

    def apply(self, claims: dict[str, ClaimRecord]) -> bool:
        ref, grant = self.ref, self.grant
        devices = records_of(grant)
        existing = claims.get(ref.uid)
        if (
            existing
            and existing.state == PREPARE_COMPLETED
            and existing.devices == devices
            and existing.ultraserver_mode == grant.ultraserver_mode
        ):
            self.record = existing
            return False
        record = ClaimRecord(
            uid=ref.uid,
            namespace=ref.namespace,
            name=ref.name,
            state=PREPARE_COMPLETED,
            lnc=grant.lnc,
            visible_cores=list(grant.visible_cores),
            devices=devices,
            token_nonce=new_nonce(),
            ultraserver_mode=grant.ultraserver_mode,
        )
        refused = double_use(claims, record)
        if refused is not None:
            self.result = PrepareResult(error=refused)
            return False
        token = self.preparer.files.token(record)
        self.record = replace(record, token_sha256=hash_token(token))
        claims[ref.uid] = self.record
        return True

    def after(self) -> None:
        record, files = self.record, self.preparer.files
        if record is None:
            return
        failpoints.reached("prepare-after-checkpoint")
        files.write_token(record)
        failpoints.reached("prepare-after-token")
        files.write_spec(record, self.grant)
        failpoints.reached("prepare-after-cdi")
        self.result = self.preparer.result_of(record)


class UnprepareChange(Change):
    """Cancel the claim's jobs and drop its record, then remove its files."""

    def __init__(self, preparer: "Preparer", uid: str) -> None:
        super().__init__()
        self.preparer, self.uid = preparer, uid

    def apply(self, claims: dict[str, ClaimRecord]) -> bool:
        self.preparer.release_claim(self.uid)
        failpoints.reached("unprepare-after-jobs-cancelled")
        return claims.pop(self.uid, None) is not None

    def after(self) -> None:
        files = self.preparer.files
        failpoints.reached("unprepare-after-checkpoint-dropped")
        files.remove_spec(self.uid)
        failpoints.reached("unprepare-after-cdi-removed")
        files.remove_token(self.uid)
        failpoints.reached("unprepare-after-token-removed")


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
        dialect: ConfigDialect = TRAINIUM.dialect,
        workload_tags: bool = False,
    ) -> None:
        """`workload_tags`: refuse a claim whose `neuron.aws.com/workload-id`
        label and its devices' `workloadId` disagree (workloadcheck.py)."""
        self.driver = driver
        self.dialect = dialect
        self.workload_tags = workload_tags
        self.place = place
        self.paths = paths
        self.reader = reader
        self.state = state
        self.metrics = metrics
        self.release_claim = release_claim  # cancels the claim's simulated jobs
        self.files = ClaimFiles(driver, place, paths, load_or_create_key(paths.token_key))

    def restore(self) -> tuple[list[str], list[str]]:
        """At start, before registering: drop records of prepares an earlier
        release left unfinished, fold the journal into the checkpoint, then
        make every claim's files match it. Returns the UIDs whose files were
        rewritten and removed."""
        with self.state.locked() as checkpoint:
            claims = checkpoint.claims
            finished = {u: r for u, r in claims.items() if r.state == PREPARE_COMPLETED}
            if finished.keys() != claims.keys():
                checkpoint.store(finished)
            checkpoint.compact()
            return self.files.restore(finished)

    def prepare(self, claims: Iterable[ClaimRef]) -> dict[str, PrepareResult]:
        """Per-claim results; one claim's failure never affects another's. The
        claims of one call share one checkpoint write."""
        started = time.perf_counter()
        results: dict[str, PrepareResult] = {}
        changes: list[PrepareChange] = []
        for ref in claims:
            try:
                grant = self._grant(ref)
            except Exception as err:
                results[ref.uid] = PrepareResult(error=f"claim {ref.namespace}/{ref.name}: {err}")
                continue
            if isinstance(grant, PrepareResult):
                results[ref.uid] = grant
            else:
                changes.append(PrepareChange(self, ref, grant))
        self.state.commit(changes)
        for change in changes:
            ref = change.ref
            error = change.error
            results[ref.uid] = (
                change.result
                if error is None
                else PrepareResult(error=f"claim {ref.namespace}/{ref.name}: {error}")
            )
        for result in results.values():
            self._observe("prepare", started, not result.error)
        return results

    def unprepare(self, claims: Iterable[ClaimRef]) -> dict[str, str]:
        """Per-claim errors ("" on success); unpreparing an unknown claim succeeds."""
        started = time.perf_counter()
        refs = list(claims)
        changes = [UnprepareChange(self, ref.uid) for ref in refs]
        self.state.commit(changes)
        errors = {
            ref.uid: f"claim {ref.namespace}/{ref.name}: {change.error}" if change.error else ""
            for ref, change in zip(refs, changes, strict=True)
        }
        for error in errors.values():
            self._observe("unprepare", started, not error)
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
                change = UnprepareChange(self, uid)
                self.state.commit([change])
                if change.error is not None:
                    raise change.error
                gone.append(uid)
        return gone

    def _observe(self, op: str, started: float, ok: bool) -> None:
        node = self.place.node_name
        self.metrics.observe(node, op, time.perf_counter() - started, ok)
        self.metrics.set_prepared(node, len(self.state.checkpoint.claims))

    def result_of(self, record: ClaimRecord) -> PrepareResult:
        ids = (cdi.cdi_device_id(self.driver, record.uid),)
        return PrepareResult(
            devices=tuple(
                PreparedDevice(d.request, d.pool, d.device, ids, d.share_id) for d in record.devices
            )
        )

    def _grant(self, ref: ClaimRef) -> ClaimGrant | PrepareResult:
        """The claim's cores, or the error that stops it before anything is written."""
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
        attributes = self.reader.attributes(keys)
        grant = claim_grant(
            claim,
            attributes,
            self.place,
            self.driver,
            default,
            dialect=self.dialect,
        )
        if self.workload_tags:
            devices = [
                ClaimDevice(d.pool, d.device, attributes[(d.pool, d.device)]) for d in grant.devices
            ]
            check_workload(claim, devices, self.place.node_name)
        return grant


def ensure_dirs(paths: NodePaths) -> None:
    """The node's private state dir (0750) and the CDI dir the runtime reads."""
    paths.state_dir.mkdir(mode=0o750, parents=True, exist_ok=True)
    os.chmod(paths.state_dir, 0o750)
    paths.claims_dir.mkdir(mode=0o711, exist_ok=True)
    paths.workload_dir.mkdir(mode=0o711, exist_ok=True)
    paths.cdi_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
