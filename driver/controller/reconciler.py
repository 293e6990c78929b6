"""One rack's reconcile: read the UltraServer and the stores, compute the
desired slices and status with the pure functions of `rackstate`, write only
differences, and map API failures to what the status says.

After a rack is published the reconciler remembers the digest of its inputs
and the resourceVersions of its slices. A later reconcile whose digest is the
same, and whose slices the watch still sees at those versions, rebuilds
nothing and lists nothing: it only recomputes the status."""

import datetime
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from driver.controller.healthtaints import Report, parse_reports
from driver.controller.metrics import ControllerMetrics
from driver.controller.rackstate import (
    NO_OCCUPANCY,
    DesiredRack,
    Published,
    allocated_devices,
    aws_aliases,
    desired_rack,
    inputs_key,
    invalid_spec,
    observe_rack,
    owner_reference,
)
from driver.controller.sliceindex import SliceIndex
from driver.controller.stores import Store, key_of
from driver.controller.ultraserverstatus import Observed, compute_status
from driver.controller.workloadtags import Allocations, allocations_of, node_workloads, rack_tags
from driver.controller.writeplan import Plan, Write, plan_writes
from driver.devicemodel.awsprofile import AwsVersions
from driver.devicemodel.blocking import blocked_devices, published_devices, withdrawable
from driver.devicemodel.layout import Layout, build_layout
from driver.devicemodel.naming import rack_of_pool
from driver.devicemodel.nodemap import map_nodes
from driver.devicemodel.profiles import TRAINIUM, Profile
from driver.devicemodel.rackguard import (
    Allocation,
    Occupancy,
    RackHold,
    advertised_racks,
    occupancies,
)
from driver.devicemodel.ultraserver import SpecError, UltraServerSpec, parse_spec
from driver.jsontypes import JSON
from driver.kubeapi.apiserver import ApiError
from driver.kubeapi.objects import Objects
from driver.kubeapi.resources import CLAIMS, SLICES, ULTRASERVERS
from driver.names import rack_label

log = logging.getLogger(__name__)
WITHDRAW_AFTER = 1.0
"""`available` publishing: seconds a device stays blocked before it is
withdrawn, so a chip held for a moment does not cost two slice writes."""


def node_labels(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict(obj.get("metadata", {}).get("labels") or {})


def claim_devices(obj: Mapping[str, Any]) -> frozenset[Allocation]:
    """(driver, pool, device) of every device allocated to a ResourceClaim."""
    allocation = (obj.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    return frozenset((str(r["driver"]), str(r["pool"]), str(r["device"])) for r in results)


@dataclass
class Stores:
    """Watched state shared by handlers and workers."""

    nodes: Store[dict[str, str]] = field(default_factory=lambda: Store(node_labels))
    health: Store[list[Report]] = field(default_factory=lambda: Store(parse_reports))
    claims: Store[frozenset[Allocation]] = field(default_factory=lambda: Store(claim_devices))
    racks: Store[JSON] = field(default_factory=lambda: Store(dict))
    workloads: Store[Allocations] = field(default_factory=lambda: Store(allocations_of))
    """NeuronUltraServers (AWS profile): the allocations of each; empty when not served."""


class ConflictError(RuntimeError):
    """Someone changed a slice between our read and our write; retry the rack."""


class CountersDroppedError(RuntimeError):
    """The apiserver stored a slice without its counters: DRAPartitionableDevices is off."""


PARTITIONING_OFF = (
    "spec.mode: the apiserver drops shared counters (feature gate DRAPartitionableDevices "
    "is off), so partitioned devices would not be exclusive; set spec.mode to flat"
)


BINDING_CONDITIONS_OFF = (
    "the apiserver drops bindingConditions from ResourceSlices (feature gates "
    "DRADeviceBindingConditions and DRAResourceClaimDeviceStatus are off): publishing server "
    "and rack devices without fabric readiness, so pods bind without waiting for the fabric"
)


@dataclass(frozen=True)
class Outcome:
    rack: str
    writes: int
    pool_generation: int


@dataclass(frozen=True)
class Memo:
    """A rack as last published: enough to recompute its status without its slices."""

    key: str  # inputs_key of what was published
    versions: dict[str, str]  # slice name -> resourceVersion we left it at
    observed: Observed  # status facts; `allocated` is refreshed on every reconcile
    status: JSON | None = None  # the status last computed from `observed`


@dataclass(frozen=True)
class AvailableStep:
    """What one `available` publishing pass left: the rack as last written."""

    want: DesiredRack
    published: Published
    versions: dict[str, str] | None
    writes: list[Write]
    withheld: frozenset[str]
    settled: bool  # nothing blocked is left to withdraw later


class Reconciler:
    def __init__(
        self,
        kube: Objects,
        stores: Stores,
        driver: str,
        metrics: ControllerMetrics,
        index: SliceIndex,
        *,
        clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
        on_guard: Callable[[str], None] = lambda _: None,
        advertised_racks: int = 0,
        on_advertised: Callable[[Collection[str]], None] = lambda _: None,
        profile: Profile = TRAINIUM,
        versions: AwsVersions | None = None,
        publishing: str = "plain",
        on_later: Callable[[str, float], None] = lambda _, __: None,
        withdraw_after: float = WITHDRAW_AFTER,
        withdraw_lag: float = 0.0,
    ) -> None:
        """`on_guard(rack)`: the rack's guard (`holds`) changed; its rack claims need a look.
        `advertised_racks`: the window of free racks whose rack device is published
        (`node` pools; 0: every free rack); `on_advertised(racks)`: racks that
        entered or left it, to reconcile. `profile`: the vocabulary to publish
        in; `versions`: the ones a profile of per-node devices says (None: the
        package's). `publishing`: the order of each partitioned slice's devices
        (blocking.py); with `available`, `on_later(rack, delay)` asks for the rack
        again when withdrawals wait, `withdraw_after`: seconds a device stays
        blocked before it is withdrawn, `withdraw_lag`: seconds slept between
        deciding withdrawals and re-reading the claims (a test's hook; 0)."""
        self.publishing = publishing
        self.on_later = on_later
        self.withdraw_after = withdraw_after
        self.withdraw_lag = withdraw_lag
        # rack -> device -> when (monotonic) it was first seen blocked and published
        self.blocked_since: dict[str, dict[str, float]] = {}
        self.withheld: dict[str, frozenset[str]] = {}
        self._withheld_lock = threading.Lock()
        self.profile = profile
        self.versions = versions
        self.kube = kube
        self.stores = stores
        self.driver = driver
        self.metrics = metrics
        self.index = index
        self.clock = clock
        self.memos: dict[str, Memo] = {}
        # slice name -> resourceVersion of our last write to it: its watch echo is no news
        self._written: dict[str, str] = {}
        self._written_lock = threading.Lock()
        # (uid, generation) of specs whose partitioned slices the apiserver refused
        self.refused: dict[str, tuple[str, int]] = {}
        # False once the apiserver was seen dropping binding conditions
        self.binding_conditions_served = True
        # rack -> its rack device's guard as published (`node` pool layout only)
        self.holds: dict[str, RackHold] = {}
        self.on_guard = on_guard
        self.window = advertised_racks
        self.on_advertised = on_advertised
        self.advertised: frozenset[str] = frozenset()
        self.whole: set[str] = set()  # node-pool racks last seen with every node
        self._advertised_lock = threading.Lock()

    def reconcile(self, name: str) -> Outcome:
        """Read the rack, compute its slices and status, write only differences."""
        obj = self.kube.get(ULTRASERVERS, name)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            self.memos.pop(name, None)
            self.holds.pop(name, None)
            self.blocked_since.pop(name, None)
            with self._withheld_lock:
                self.withheld.pop(name, None)
            return self._remove(name, self._list_slices(name))
        try:
            spec = parse_spec(obj)
        except SpecError as err:
            self.memos.pop(name, None)
            generation = int(obj["metadata"].get("generation", 0))
            count = len(self._list_slices(name))
            self._write_status(obj, invalid_spec(generation, count, str(err)))
            return Outcome(name, 0, 0)
        nodes, reports = self.stores.nodes.items(), self.stores.health.items()
        mapping = map_nodes(spec, nodes)
        aliases = aws_aliases(spec.rack, mapping.nodes) if self.profile.per_node_devices else None
        allocated = allocated_devices(self.stores.claims.items(), self.driver, name, aliases)
        occupied, advertised = (
            self._occupancy(name, mapping.rack_nodes is not None and not mapping.missing)
            if spec.layout.pools == "node"
            else (NO_OCCUPANCY, True)
        )
        workloads = (
            rack_tags(node_workloads(self.stores.workloads.items()).nodes, mapping.nodes.values())
            if self.profile.workload_tags
            else {}
        )
        counted = spec.mode == "partitioned" and not self.profile.per_node_devices
        layout = build_layout(spec.rack, spec.layout) if counted else None
        available = self.publishing == "available" and layout is not None
        blocked = (
            blocked_devices(layout, allocated)
            if layout is not None and self.publishing != "plain"
            else ()
        )
        key = inputs_key(
            obj,
            mapping,
            reports,
            self.driver,
            self.binding_conditions_served,
            occupied=occupied,
            advertised=advertised,
            profile=self.profile,
            versions=self.versions,
            workloads=workloads,
            blocked=blocked,
        )
        memo = self.memos.get(name)
        if memo is not None and memo.key == key and memo.versions == self.index.versions(name):
            observed = replace(memo.observed, allocated=frozenset(allocated))
            if observed != memo.observed or obj.get("status") != memo.status:
                # Computing a status walks every device; skipped when its inputs stand still.
                status = self._write_status(obj, observed)
                self.memos[name] = replace(memo, observed=observed, status=status)
            self.metrics.paths.labels("unchanged").inc()
            return Outcome(name, 0, memo.observed.pool_generation)
        self.memos.pop(name, None)
        self.metrics.paths.labels("rebuilt").inc()
        # No slice of the rack in the watch: nothing to list (a slice the watch has
        # not shown yet makes a create conflict, and the rack is retried).
        existing = self._list_slices(name) if self.index.versions(name) else []

        def build(withheld: Collection[str]) -> DesiredRack:
            return desired_rack(
                spec,
                nodes,
                reports,
                self.driver,
                binding_conditions=self.binding_conditions_served,
                mapping=mapping,
                occupied=occupied,
                advertised=advertised,
                profile=self.profile,
                versions=self.versions,
                workloads=workloads,
                publishing=self.publishing,
                allocated=allocated,
                withheld=withheld,
            )

        if available:
            assert layout is not None
            step = self._publish_available(
                spec, layout, build, existing, allocated=allocated, aliases=aliases
            )
            want, published, versions = step.want, step.published, step.versions
            writes, withheld, settled = step.writes, step.withheld, step.settled
        else:
            want = build(())
            plan = plan_writes(want.slices, existing, owner_reference(spec))
            published, versions = self._apply(spec, plan, want.slices, existing)
            writes, withheld, settled = list(plan.writes), frozenset[str](), True
        if spec.layout.pools == "node" and published.error is None:
            self._hold(name, occupied)
        observed = observe_rack(
            spec, want, published, reports, frozenset(allocated), withheld=withheld
        )
        status = self._write_status(obj, observed)
        if published.error is None and versions is not None and settled:
            self.memos[name] = Memo(key, versions, observed, status)
        if writes:
            log.info(
                "rack %s: %d writes (%s), pool generation %d",
                name,
                len(writes),
                ", ".join(sorted({w.verb for w in writes})),
                published.pool_generation,
            )
        return Outcome(name, len(writes), published.pool_generation)

    def _publish_available(
        self,
        spec: UltraServerSpec,
        layout: Layout,
        build: Callable[[Collection[str]], DesiredRack],
        existing: Sequence[JSON],
        *,
        allocated: Collection[str],
        aliases: Mapping[tuple[str, str], tuple[str, ...]] | None,
    ) -> "AvailableStep":
        """`available` publishing (blocking.py `published_devices`): first a
        write that only puts devices back, then, for devices blocked at least
        `withdraw_after` seconds and only once the claims were listed, the
        withdrawals, each re-checked against a live list of the claims just
        before it is written. Returns the rack as last written, the writes,
        the devices withheld and whether nothing is left to withdraw later."""
        name = spec.name
        full = build(())
        names = _device_names(full.slices)
        current = names - _withheld_in(full.slices, existing)
        first, _ = published_devices(layout, allocated, current)
        want = build(names - first)
        plan = plan_writes(want.slices, existing, owner_reference(spec))
        published, versions = self._apply(spec, plan, want.slices, existing)
        writes = list(plan.writes)
        withheld = frozenset(names - first)
        if published.error is not None:
            return AvailableStep(want, published, versions, writes, withheld, False)
        pending = first & withdrawable(layout, allocated)
        due, wait = self._due(name, pending)
        synced = self.stores.claims.synced
        if due and synced:
            if self.withdraw_lag:
                time.sleep(self.withdraw_lag)  # a test's window: decided, not yet re-checked
            live = self._live_allocated(name, aliases)
            adds, final = published_devices(layout, allocated, first, live, due)
            kept = due & final
            if kept:
                log.info(
                    "rack %s: %d withdrawals refused: the claims listed now do not block them",
                    name,
                    len(kept),
                )
            for target in (adds & names, final & names):
                if names - target == withheld:
                    continue
                existing = self._list_slices(name)
                want = build(names - target)
                plan = plan_writes(want.slices, existing, owner_reference(spec))
                published, versions = self._apply(spec, plan, want.slices, existing)
                writes += plan.writes
                withheld = frozenset(names - target)
                if published.error is not None:
                    return AvailableStep(want, published, versions, writes, withheld, False)
        elif pending and not synced:
            wait = WITHDRAW_AFTER
        with self._withheld_lock:
            self.withheld[name] = withheld
        if wait is not None:
            self.on_later(name, wait)
        settled = not pending - withheld
        return AvailableStep(want, published, versions, writes, withheld, settled)

    def _due(self, rack: str, pending: frozenset[str]) -> tuple[frozenset[str], float | None]:
        """Of the devices `pending` withdrawal, those blocked for `withdraw_after`
        seconds or more, and how long until the next of the others is (None: none)."""
        now = time.monotonic()
        seen = self.blocked_since.get(rack, {})
        since = {d: seen.get(d, now) for d in pending}
        self.blocked_since[rack] = since
        due = frozenset(d for d, t in since.items() if now - t >= self.withdraw_after)
        later = [t + self.withdraw_after - now for d, t in since.items() if d not in due]
        return due, (max(min(later), 0.05) if later else None)

    def _live_allocated(
        self, rack: str, aliases: Mapping[tuple[str, str], tuple[str, ...]] | None
    ) -> set[str]:
        """The rack's allocated devices as the apiserver has them now, not as watched."""
        self.metrics.claim_lists.inc()
        claims = {key_of(c): claim_devices(c) for c in self.kube.list_all(CLAIMS)}
        return allocated_devices(claims, self.driver, rack, aliases)

    def withheld_of(self, rack: str) -> frozenset[str]:
        """The devices `available` publishing last left out of the rack's slices."""
        with self._withheld_lock:
            return self.withheld.get(rack, frozenset())

    def _occupancy(self, name: str, whole: bool) -> tuple[Occupancy, bool]:
        """What the claims hold of rack `name` and whether its rack device is
        advertised; `whole`: every server of the rack has its node, so the rack
        device can be published at all. Racks that entered or left the window
        go to `on_advertised`."""
        racks = {
            rack
            for rack, obj in self.stores.racks.items().items()
            if (obj.get("spec") or {}).get("pools") == "node"
        }
        occupied = occupancies(self.stores.claims.items().values(), self.driver, racks | {name})
        with self._advertised_lock:
            if whole:
                self.whole.add(name)
            else:
                self.whole.discard(name)
            self.whole &= racks | {name}
            window = advertised_racks({r: occupied[r] for r in self.whole}, self.window)
            moved = (window ^ self.advertised) - {name}
            self.advertised = window
        if moved:
            self.on_advertised(moved)
        return occupied[name], name in window

    def _hold(self, name: str, occupied: Occupancy) -> None:
        """Record the guard as now published: since when the rack-claimed taints stand."""
        old = self.holds.get(name)
        since = None
        if occupied.rack_claimed:
            since = old.claimed_since if old and old.claimed_since else self.clock()
        hold = RackHold(since, occupied.servers_in_use)
        self.holds[name] = hold
        if hold != old:
            self.on_guard(name)

    def is_own_write(self, name: str, resource_version: str) -> bool:
        """The watch event of slice `name` at this version is the echo of our write."""
        with self._written_lock:
            return self._written.get(name) == resource_version

    def _list_slices(self, rack: str) -> list[JSON]:
        self.metrics.slice_lists.inc()
        return self.kube.list_all(
            SLICES, labels=f"{rack_label(self.driver)}={rack}", fields=f"spec.driver={self.driver}"
        )

    def _remove(self, name: str, existing: Sequence[JSON]) -> Outcome:
        """The UltraServer is gone or going: delete its slices and forget it."""
        for s in existing:
            self._delete_slice(s["metadata"]["name"])
        self.metrics.racks.forget(name)
        if existing:
            log.info("rack %s: deleted %d slices", name, len(existing))
        return Outcome(name, len(existing), 0)

    def _apply(
        self, spec: UltraServerSpec, plan: Plan, desired: list[JSON], existing: Sequence[JSON]
    ) -> tuple[Published, dict[str, str] | None]:
        """Execute the plan; map API failures to what the status should say.
        Also returns the resourceVersion of every slice left, when all went well."""
        name = spec.name
        versions = {
            str(s["metadata"]["name"]): str(s["metadata"].get("resourceVersion", ""))
            for s in existing
        }
        try:
            if self.refused.get(name) == (spec.uid, spec.generation):
                raise CountersDroppedError(PARTITIONING_OFF)
            self._execute(plan, versions)
        except ApiError as err:
            if err.status == 409:
                raise ConflictError(f"rack {name}: {err.reason}") from err
            error = f"{err.status} {err.reason}: {(err.body or '')[:300]}"
            return Published(desired, plan.generation, error), None
        except CountersDroppedError:
            self.refused[name] = (spec.uid, spec.generation)
            for s in self.kube.list_all(SLICES, labels=f"{rack_label(self.driver)}={name}"):
                self._delete_slice(s["metadata"]["name"])
            return Published([], 0, PARTITIONING_OFF, "PartitionableDevicesOff"), None
        return Published(desired, plan.generation), versions

    def _execute(self, plan: Plan, versions: dict[str, str]) -> None:
        """Write in plan order, keeping `versions` (name -> resourceVersion) current."""
        for w in plan.writes:
            if w.verb == "delete":
                self._delete_slice(w.name, w.resource_version)
                versions.pop(w.name, None)
            else:
                assert w.body is not None
                write = self.kube.replace if w.verb == "update" else None
                stored = write(SLICES, w.name, w.body) if write else self._create_slice(w.body)
                self.metrics.wrote(SLICES.plural, w.verb)
                version = str(stored["metadata"].get("resourceVersion", ""))
                versions[w.name] = version
                with self._written_lock:
                    self._written[w.name] = version
                if _has_counters(w.body["spec"]) and not _has_counters(stored["spec"]):
                    raise CountersDroppedError(PARTITIONING_OFF)
                if _has_binding_conditions(w.body["spec"]) and not _has_binding_conditions(
                    stored["spec"]
                ):
                    # Publishing them again would rewrite the slices on every reconcile.
                    self.binding_conditions_served = False
                    log.warning(BINDING_CONDITIONS_OFF)
                    raise ConflictError(f"slice {w.name}: republishing without binding conditions")

    def _create_slice(self, body: JSON) -> JSON:
        """Create; a slice of that name that the list missed (someone removed our
        labels) is taken back by a replace, or the create would fail forever."""
        try:
            return self.kube.create(SLICES, body)
        except ApiError as err:
            if err.status != 409:
                raise
        name = body["metadata"]["name"]
        current = self.kube.get(SLICES, name)
        if current is None:
            raise ConflictError(f"slice {name}: deleted while being taken back")
        meta = {**body["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}
        return self.kube.replace(SLICES, name, {**body, "metadata": meta})

    def _delete_slice(self, name: str, resource_version: str | None = None) -> None:
        self.kube.delete(SLICES, name, resource_version)
        self.metrics.wrote(SLICES.plural, "delete")
        with self._written_lock:
            self._written.pop(name, None)

    def _write_status(self, obj: JSON, observed: Observed) -> JSON:
        previous = obj.get("status")
        name = obj["metadata"]["name"]
        status = compute_status(observed, previous, self.clock())
        if status != previous:
            self.kube.patch_status(ULTRASERVERS, name, status)
            self.metrics.wrote(f"{ULTRASERVERS.plural}/status", "patch")
        self.metrics.racks.record(name, status)
        return status


def _has_binding_conditions(spec: Mapping[str, Any]) -> bool:
    return any(d.get("bindingConditions") for d in spec.get("devices") or [])


def _has_counters(spec: Mapping[str, Any]) -> bool:
    return bool(spec.get("sharedCounters")) or any(
        d.get("consumesCounters") for d in spec.get("devices") or []
    )


def racks_for_node(racks: Mapping[str, JSON], node: str) -> list[str]:
    """Racks that map `node` by name, or that map nodes by labels."""
    out = []
    for name, obj in racks.items():
        nodes = (obj.get("spec") or {}).get("nodes") or {}
        if "selector" in nodes or node in (nodes.get("names") or []):
            out.append(name)
    return out


def racks_for_nodes(racks: Mapping[str, JSON], nodes: Iterable[str]) -> set[str]:
    """Racks that may hold any of `nodes` (`racks_for_node` of each)."""
    return {rack for node in sorted(set(nodes)) for rack in racks_for_node(racks, node)}


def racks_of_claim(driver: str, allocations: Sequence[frozenset[Allocation] | None]) -> set[str]:
    return {rack_of_pool(pool) for a in allocations if a for drv, pool, _ in a if drv == driver}


def _device_names(slices: Sequence[JSON]) -> frozenset[str]:
    return frozenset(str(d["name"]) for s in slices for d in s["spec"].get("devices") or [])


def _withheld_in(desired: Sequence[JSON], existing: Sequence[JSON]) -> frozenset[str]:
    """Devices of `desired` slices missing from the existing slice of the same
    name; a slice not written yet withholds nothing (its devices count as
    published, so only a re-checked withdrawal ever leaves them out)."""
    present = {
        str(s["metadata"]["name"]): {str(d["name"]) for d in s["spec"].get("devices") or []}
        for s in existing
    }
    return frozenset(
        str(d["name"])
        for s in desired
        if str(s["metadata"]["name"]) in present
        for d in s["spec"].get("devices") or []
        if str(d["name"]) not in present[str(s["metadata"]["name"])]
    )
