"""Whether Kueue has decided what it will for the replay's pods, read from an
informer of the namespace's Workloads. Kueue has settled when every pod it
gates belongs to a Workload it has not admitted (an admitted one's pods are
ungated next), no admitted Workload is left whose pods are all gone (its
quota is not free until Kueue finishes it), no waiting Workload that Kueue
tries fits the quota left (`admissible`: Kueue admits it once its own caches
and queues catch up, however long a loaded machine makes that take), and all
of this has stood still for a quiet spell (QUIET): a StrictFIFO head is
retried without end, so Kueue's own attempt counters never stand still and
cannot tell."""

import math
import threading
import time
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from driver.kubeapi.apiserver import ApiServer
from driver.kubeapi.informer import Informer
from driver.kubeapi.objects import Objects
from driver.kubeapi.resources import path_of
from whatif.kueue import (
    CLUSTER_QUEUES,
    FLAVORS,
    LOCAL_QUEUES,
    NAME,
    PRIORITY_CLASSES,
    WORKLOADS,
    KueueQueue,
    priority_class_name,
)

GATE: Final = "kueue.x-k8s.io/admission"
"""The scheduling gate Kueue holds a pod back with until it admits it."""
GONE_TIMEOUT: Final = 300.0
"""Wall seconds the replay's ClusterQueue and flavor may take to go, as its
namespace may (live.delete_namespace): Kueue finishes the last Workloads
first, which on a loaded machine takes minutes."""
LAST_QUIET: Final = 30.0
"""Wall seconds Kueue must stand still before a replay ends with jobs still
queued: ending too early loses those jobs (never run), not just a moment,
and a loaded machine's Kueue can take far longer than QUIET to move."""
QUIET: Final = 1.5
"""Wall seconds Kueue's decisions must stand still: longer than the second
Kueue 0.17 batches the requeue of inadmissible workloads by after quota
frees (BestEffortFIFO waits that long before trying them again)."""


SPACING_MARGIN: Final = 0.01
"""Wall seconds past a second's turn, so a creation lands in the next second."""


def created_at(obj: Mapping[str, Any]) -> float:
    """An object's creationTimestamp, seconds since the epoch (whole seconds:
    the apiserver keeps no finer)."""
    return datetime.fromisoformat(obj["metadata"]["creationTimestamp"]).timestamp()


def spacing(now: float, latest: float) -> float:
    """Wall seconds to wait at epoch time `now` before creating jobs that
    must queue behind every Workload created so far, the latest at epoch
    `latest`.

    Kueue orders a queue by priority, then by the Workload's creation time,
    then by its UID (Kueue 0.17, cache/queue's baseCompareFunc), and the
    apiserver keeps creation times to the second: two Workloads of one second
    are ordered by their random UIDs. A Workload is created after the pods it
    admits, so pods created in a wall second later than `latest`'s have
    Workloads ordered after every one so far. Once the second of `latest`
    has passed, no wait is needed: a settle through Kueue lasts more than its
    quiet spell, so a replay seldom waits at all."""
    return max(0.0, math.floor(latest) + 1.0 + SPACING_MARGIN - now)


@dataclass(frozen=True)
class WorkloadState:
    pods: frozenset[str]
    """The pods it owns."""
    admitted: bool
    finished: bool
    reserved: bool = False
    """Kueue has counted it against the quota (QuotaReserved)."""
    order: tuple[int, str, str] = (0, "", "")
    """Its place in a queue: minus its priority, creation time, UID (Kueue
    0.17's order for a ClusterQueue without fair sharing)."""


def workload_state(obj: Mapping[str, Any]) -> WorkloadState:
    meta, status = obj["metadata"], obj.get("status") or {}
    conditions = {c["type"]: c["status"] == "True" for c in status.get("conditions") or ()}
    return WorkloadState(
        frozenset(r["name"] for r in meta.get("ownerReferences") or () if r.get("kind") == "Pod"),
        conditions.get("Admitted", False),
        conditions.get("Finished", False),
        conditions.get("QuotaReserved", False),
        (
            -int((obj.get("spec") or {}).get("priority") or 0),
            meta.get("creationTimestamp", ""),
            meta.get("uid", ""),
        ),
    )


def gated(pod: Mapping[str, Any]) -> bool:
    return any(g.get("name") == GATE for g in (pod.get("spec") or {}).get("schedulingGates") or ())


def unsettled(
    workloads: Mapping[str, WorkloadState], queued: Collection[str], present: Collection[str]
) -> str | None:
    """Why Kueue may still change something for the `queued` pods (those it
    gates), given the pods `present`; None once it will not."""
    owner = {pod: name for name, w in workloads.items() for pod in w.pods}
    found = {
        "pods with no Workload yet": sum(1 for p in queued if p not in owner),
        "gated pods of admitted Workloads": sum(
            1 for p in queued if p in owner and workloads[owner[p]].admitted
        ),
        "admitted Workloads whose pods are gone": sum(
            1
            for w in workloads.values()
            if w.admitted and not w.finished and w.pods and not w.pods & set(present)
        ),
    }
    return ", ".join(f"{n} {what}" for what, n in found.items() if n) or None


@dataclass(frozen=True)
class Quota:
    """The replay's ClusterQueue: `cores` of quota, StrictFIFO or not."""

    cores: int
    strict: bool


def admissible(
    workloads: Mapping[str, WorkloadState],
    queued: Collection[str],
    cores_of: Mapping[str, int],
    quota: Quota,
) -> str | None:
    """The waiting Workload Kueue admits next, if one fits the quota that
    reserved, unfinished Workloads leave: under StrictFIFO only the head of
    the queue is tried, otherwise any. None when none fits, or when a pod's
    cores are not known (the replay's pods of this run, `cores_of`), as
    then what is left cannot be told."""

    def cores(w: WorkloadState) -> int | None:
        known = [cores_of.get(p) for p in w.pods]
        return None if None in known else sum(c for c in known if c is not None)

    holding = [cores(w) for w in workloads.values() if w.reserved and not w.finished]
    waiting = sorted(
        (w.order, name, cores(w))
        for name, w in workloads.items()
        if not w.reserved and not w.finished and w.pods and w.pods <= set(queued)
    )
    if None in holding:
        return None
    left = quota.cores - sum(c for c in holding if c is not None)
    for _, name, need in waiting[:1] if quota.strict else waiting:
        if need is not None and need <= left:
            return name
    return None


class KueueWatch:
    """The namespace's Workloads, since when Kueue's decisions have stood
    still, and when the latest of them was created."""

    def __init__(self, server: ApiServer, namespace: str, quota: Quota) -> None:
        self.quota = quota
        self.lock = threading.Lock()
        self.workloads: dict[str, WorkloadState] = {}
        self.changed = time.monotonic()
        self.latest: float | None = None
        """The latest creation time of any Workload seen, deleted ones too (epoch seconds)."""
        self.informer: Informer[Mapping[str, Any]] = Informer(
            server,
            path_of(WORKLOADS, namespace=namespace),
            {},
            lambda obj: obj,
            on_list=self._listed,
            on_event=self._event,
        )

    def start(self) -> None:
        self.informer.start()

    def close(self) -> None:
        self.informer.close()

    def why(
        self, queued: Collection[str], present: Collection[str], cores_of: Mapping[str, int]
    ) -> str | None:
        """Why Kueue may still admit one of the `queued` pods (None once it
        will not); `cores_of`: the cores each pod of the replay's runs holds."""
        with self.lock:
            why = unsettled(self.workloads, queued, present)
            if why is None and (fits := admissible(self.workloads, queued, cores_of, self.quota)):
                why = f"Workload {fits} fits the quota left: Kueue admits it next"
            if why is None and time.monotonic() - self.changed < QUIET:
                why = "Kueue decided something a moment ago"
            return why

    def moves_within(self, seconds: float) -> bool:
        """Whether a Workload changes within `seconds` wall seconds from now."""
        with self.lock:
            mark = self.changed
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with self.lock:
                if self.changed != mark:
                    return True
            time.sleep(0.2)
        return False

    def latest_created(self) -> float | None:
        with self.lock:
            return self.latest

    def _created(self, obj: Mapping[str, Any]) -> None:
        self.latest = max(created_at(obj), self.latest or 0.0)

    def _listed(self, objs: list[Mapping[str, Any]]) -> None:
        with self.lock:
            self.workloads = {o["metadata"]["name"]: workload_state(o) for o in objs}
            self.changed = time.monotonic()
            for obj in objs:
                self._created(obj)

    def _event(self, kind: str, obj: Mapping[str, Any]) -> None:
        name = obj["metadata"]["name"]
        with self.lock:
            self._created(obj)
            before = self.workloads.get(name)
            if kind == "DELETED":
                self.workloads.pop(name, None)
            else:
                self.workloads[name] = workload_state(obj)
            if self.workloads.get(name) != before:
                self.changed = time.monotonic()


@contextmanager
def through_kueue(objects: Objects, queue: KueueQueue, namespace: str) -> Iterator[KueueWatch]:
    """The replay's queue in `namespace` (which exists), watched while the
    replay runs; the ClusterQueue, flavor and priority classes are deleted
    after (the LocalQueue goes with the namespace)."""
    kinds = {
        "WorkloadPriorityClass": PRIORITY_CLASSES,
        "ResourceFlavor": FLAVORS,
        "ClusterQueue": CLUSTER_QUEUES,
        "LocalQueue": LOCAL_QUEUES,
    }
    for obj in queue.objects(namespace):
        objects.create(kinds[obj["kind"]], obj, namespace=obj["metadata"].get("namespace"))
    watch = KueueWatch(objects.server, namespace, Quota(queue.cores, queue.strategy == "strict"))
    watch.start()
    try:
        yield watch
    finally:
        watch.close()
        objects.delete(LOCAL_QUEUES, NAME, namespace=namespace)
        for res in (CLUSTER_QUEUES, FLAVORS):
            objects.delete(res, NAME)
        for priority in queue.priorities:
            objects.delete(PRIORITY_CLASSES, priority_class_name(priority))
        deadline = time.monotonic() + GONE_TIMEOUT
        while objects.get(CLUSTER_QUEUES, NAME) or objects.get(FLAVORS, NAME):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"ClusterQueue/ResourceFlavor {NAME}: still there {GONE_TIMEOUT:.0f} s "
                    "after their deletion (Kueue keeps them while a Workload uses them)"
                )
            time.sleep(0.2)
