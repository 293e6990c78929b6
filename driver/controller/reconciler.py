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
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from driver.controller.metrics import ControllerMetrics
from driver.controller.rackstate import (
    NO_OCCUPANCY,
    Published,
    allocated_devices,
    desired_rack,
    inputs_key,
    invalid_spec,
    observe_rack,
    owner_reference,
)
from driver.controller.sliceindex import SliceIndex
from driver.controller.stores import Stores
from driver.controller.ultraserverstatus import Observed, compute_status
from driver.controller.workloadtags import node_workloads, rack_tags
from driver.controller.writeplan import WritePlan, plan_writes
from driver.devicemodel.awsprofile import AwsVersions
from driver.devicemodel.nodemap import map_nodes
from driver.devicemodel.profilerack import device_aliases, order_blocked
from driver.devicemodel.profiles import TRAINIUM, Profile
from driver.devicemodel.rackguard import (
    Occupancy,
    RackHold,
    advertised_racks,
    occupancies,
)
from driver.devicemodel.ultraserver import SpecError, UltraServerSpec, parse_spec
from driver.jsontypes import JSON
from driver.kubeapi.apiserver import ApiError
from driver.kubeapi.objects import Objects
from driver.kubeapi.resources import SLICES, ULTRASERVERS
from driver.names import rack_label

log = logging.getLogger(__name__)


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
    ) -> None:
        """`on_guard(rack)`: the rack's guard (`holds`) changed; its rack claims need a look.
        `advertised_racks`: the window of free racks whose rack device is published
        (`node` pools; 0: every free rack); `on_advertised(racks)`: racks that
        entered or left it, to reconcile. `profile`: the vocabulary to publish
        in; `versions`: the ones a profile of per-node devices says (None: the
        package's). `publishing`: the order of each partitioned slice's devices
        (blocking.py)."""
        self.publishing = publishing
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
        aliases = device_aliases(spec.rack, self.profile, mapping.nodes)
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
        blocked = order_blocked(spec, self.profile, self.publishing, allocated)
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
        want = desired_rack(
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
            aliases=aliases,
        )
        write_plan = plan_writes(want.slices, existing, owner_reference(spec))
        published, versions = self._apply(spec, write_plan, want.slices, existing)
        if spec.layout.pools == "node" and published.error is None:
            self._hold(name, occupied)
        observed = observe_rack(spec, want, published, reports, frozenset(allocated))
        status = self._write_status(obj, observed)
        if published.error is None and versions is not None:
            self.memos[name] = Memo(key, versions, observed, status)
        if write_plan.writes:
            log.info(
                "rack %s: %d writes (%s), pool generation %d",
                name,
                len(write_plan.writes),
                ", ".join(sorted({w.verb for w in write_plan.writes})),
                published.pool_generation,
            )
        return Outcome(name, len(write_plan.writes), published.pool_generation)

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
        self,
        spec: UltraServerSpec,
        write_plan: WritePlan,
        desired: list[JSON],
        existing: Sequence[JSON],
    ) -> tuple[Published, dict[str, str] | None]:
        """Execute the write plan; map API failures to what the status should say.
        Also returns the resourceVersion of every slice left, when all went well."""
        name = spec.name
        versions = {
            str(s["metadata"]["name"]): str(s["metadata"].get("resourceVersion", ""))
            for s in existing
        }
        try:
            if self.refused.get(name) == (spec.uid, spec.object_generation):
                raise CountersDroppedError(PARTITIONING_OFF)
            self._execute(write_plan, versions)
        except ApiError as err:
            if err.status == 409:
                raise ConflictError(f"rack {name}: {err.reason}") from err
            error = f"{err.status} {err.reason}: {(err.body or '')[:300]}"
            return Published(desired, write_plan.generation, error), None
        except CountersDroppedError:
            self.refused[name] = (spec.uid, spec.object_generation)
            for s in self.kube.list_all(SLICES, labels=f"{rack_label(self.driver)}={name}"):
                self._delete_slice(s["metadata"]["name"])
            return Published([], 0, PARTITIONING_OFF, "PartitionableDevicesOff"), None
        return Published(desired, write_plan.generation), versions

    def _execute(self, write_plan: WritePlan, versions: dict[str, str]) -> None:
        """Write in plan order, keeping `versions` (name -> resourceVersion) current."""
        for w in write_plan.writes:
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
