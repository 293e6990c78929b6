"""One rack's reconcile: read the UltraServer and the stores, compute the
desired slices and status with the pure functions, write only differences."""

import datetime
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.exceptions import ApiException

from driver.controller.healthtaints import (
    Report,
    device_health,
    parse_reports,
    taints,
    unhealthy_cores,
)
from driver.controller.kube import SLICES, ULTRASERVERS, Kube
from driver.controller.metrics import ControllerMetrics
from driver.controller.slices import RackInput, build_slices, planned_devices, rack_label
from driver.controller.stores import Store
from driver.controller.ultraserverstatus import Observed, compute_status
from driver.controller.writeplan import Plan, plan_writes
from driver.devicemodel.nodemap import map_nodes
from driver.devicemodel.ultraserver import SpecError, parse_spec
from driver.jsontypes import JSON
from driver.names import API_GROUP, API_VERSION

log = logging.getLogger(__name__)
Allocation = tuple[str, str, str]  # driver, pool, device


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


class ConflictError(RuntimeError):
    """Someone changed a slice between our read and our write; retry the rack."""


class CountersDroppedError(RuntimeError):
    """The apiserver stored a slice without its counters: DRAPartitionableDevices is off."""


PARTITIONING_OFF = (
    "spec.mode: the apiserver drops shared counters (feature gate DRAPartitionableDevices "
    "is off), so partitioned devices would not be exclusive; set spec.mode to flat"
)


@dataclass(frozen=True)
class Outcome:
    rack: str
    writes: int
    pool_generation: int


class Reconciler:
    def __init__(
        self,
        kube: Kube,
        stores: Stores,
        driver: str,
        metrics: ControllerMetrics,
        clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        self.kube = kube
        self.stores = stores
        self.driver = driver
        self.metrics = metrics
        self.clock = clock
        # (uid, generation) of specs whose partitioned slices the apiserver refused
        self.refused: dict[str, tuple[str, int]] = {}

    def reconcile(self, name: str) -> Outcome:
        obj = self.kube.get(ULTRASERVERS, name)
        existing = self.kube.list_all(
            SLICES, labels=f"{rack_label(self.driver)}={name}", fields=f"spec.driver={self.driver}"
        )
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            for s in existing:
                self._delete_slice(s["metadata"]["name"])
            self.metrics.racks.forget(name)
            if existing:
                log.info("rack %s: deleted %d slices", name, len(existing))
            return Outcome(name, len(existing), 0)
        try:
            spec = parse_spec(obj)
        except SpecError as err:
            invalid = Observed(
                generation=int(obj["metadata"].get("generation", 0)),
                servers=0,
                mapping=None,
                published=(),
                pool_generation=0,
                slices=len(existing),
                health=(),
                allocated=(),
                unhealthy_cores=0,
                error=str(err),
                error_reason="InvalidSpec",
            )
            self._write_status(obj, invalid)
            return Outcome(name, 0, 0)
        mapping = map_nodes(spec, self.stores.nodes.items())
        devices = planned_devices(spec.rack, spec.mode, spec.flat_device)
        reports = self.stores.health.items()
        health = device_health(devices, mapping.nodes, reports)
        desired = build_slices(
            RackInput(
                name=spec.name,
                rack=spec.rack,
                mode=spec.mode,
                flat_device=spec.flat_device,
                nodes=mapping.nodes,
                rack_nodes=mapping.rack_nodes,
                driver=self.driver,
                taints=taints(health, self.driver),
            )
        )
        owner = {
            "apiVersion": f"{API_GROUP}/{API_VERSION}",
            "kind": "UltraServer",
            "name": spec.name,
            "uid": spec.uid,
            "controller": True,
        }
        plan = plan_writes(desired, existing, owner)
        error, reason = None, "PublishFailed"
        try:
            if self.refused.get(name) == (spec.uid, spec.generation):
                raise CountersDroppedError(PARTITIONING_OFF)
            self._execute(plan)
        except ApiException as err:
            if err.status == 409:
                raise ConflictError(f"rack {name}: {err.reason}") from err
            error = f"{err.status} {err.reason}: {(err.body or '')[:300]}"
        except CountersDroppedError:
            self.refused[name] = (spec.uid, spec.generation)
            for s in self.kube.list_all(SLICES, labels=f"{rack_label(self.driver)}={name}"):
                self._delete_slice(s["metadata"]["name"])
            error, reason, desired = PARTITIONING_OFF, "PartitionableDevicesOff", []
            plan = Plan(0, plan.writes)
        published_names = {d["name"] for s in desired for d in s["spec"].get("devices") or []}
        published = [d for d in devices if d.name in published_names]
        allocated = {
            device
            for allocations in self.stores.claims.items().values()
            for drv, pool, device in allocations
            if drv == self.driver and pool == name
        }
        observed = Observed(
            generation=spec.generation,
            servers=spec.rack.servers,
            mapping=mapping,
            published=published,
            pool_generation=plan.generation,
            slices=len(desired),
            health=health,
            allocated=allocated,
            unhealthy_cores=unhealthy_cores(mapping.nodes, reports, spec.rack.chip.cores),
            error=error,
            error_reason=reason,
        )
        self._write_status(obj, observed)
        if plan.writes:
            log.info(
                "rack %s: %d writes (%s), pool generation %d",
                name,
                len(plan.writes),
                ", ".join(sorted({w.verb for w in plan.writes})),
                plan.generation,
            )
        return Outcome(name, len(plan.writes), plan.generation)

    def _execute(self, plan: Plan) -> None:
        for w in plan.writes:
            if w.verb == "delete":
                self._delete_slice(w.name, w.resource_version)
            else:
                assert w.body is not None
                write = self.kube.replace if w.verb == "update" else None
                stored = (
                    write(SLICES, w.name, w.body) if write else self.kube.create(SLICES, w.body)
                )
                self.metrics.wrote(SLICES.plural, w.verb)
                if _has_counters(w.body["spec"]) and not _has_counters(stored["spec"]):
                    raise CountersDroppedError(PARTITIONING_OFF)

    def _delete_slice(self, name: str, resource_version: str | None = None) -> None:
        self.kube.delete(SLICES, name, resource_version)
        self.metrics.wrote(SLICES.plural, "delete")

    def _write_status(self, obj: JSON, observed: Observed) -> None:
        previous = obj.get("status")
        name = obj["metadata"]["name"]
        status = compute_status(observed, previous, self.clock())
        if status != previous:
            self.kube.patch_status(ULTRASERVERS, name, status)
            self.metrics.wrote(f"{ULTRASERVERS.plural}/status", "patch")
        self.metrics.racks.record(name, status)


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


def racks_of_claim(driver: str, allocations: Sequence[frozenset[Allocation] | None]) -> set[str]:
    return {pool for a in allocations if a for drv, pool, _ in a if drv == driver}
