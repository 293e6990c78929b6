"""What the replay learns of its namespace from two informers: when each pod
was first seen bound (and where), when each went away, which pods the
scheduler has reported unschedulable, and which claims still exist and
what they were allocated. A pod
that goes without the replay deleting it was evicted (a failed device's taint
does that). The settle clock reads the rest (`PodWatch.view`)."""

import queue
import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from driver.kubeapi.apiserver import ApiServer
from driver.kubeapi.informer import Informer
from driver.kubeapi.resources import CLAIMS, PODS, path_of
from whatif.claimplaces import allocation_results
from whatif.jobobjects import JOB_LABEL, claim_pod
from whatif.kueuewatch import gated


@dataclass(frozen=True)
class PodEvent:
    wall: float
    """time.monotonic() when the watch saw it."""
    kind: Literal["bound", "gone"]
    job: str
    pod: str
    node: str = ""
    """Where a bound pod runs."""


@dataclass(frozen=True)
class NamespaceView:
    """Why the replay's namespace is not yet what the replay wrote, as counts;
    all zero once it is."""

    missing: int
    """Pods the replay created that the watch has not seen."""
    lingering: int
    """Pods the replay deleted that are still there."""
    orphan_claims: int
    """Claims whose pod is gone: their devices are not free yet."""
    undecided: int
    """Pods neither bound nor reported unschedulable by the scheduler."""
    waiting: int
    """Pods reported unschedulable, not bound."""
    queued: int = 0
    """Pods Kueue holds back (its scheduling gate): the scheduler does not try them."""

    def unsettled(self) -> str | None:
        counts = {
            "pods not yet seen": self.missing,
            "deleted pods still there": self.lingering,
            "claims of deleted pods": self.orphan_claims,
            "pods the scheduler has not decided": self.undecided,
        }
        found = [f"{n} {what}" for what, n in counts.items() if n]
        return ", ".join(found) or None


def _unschedulable(pod: Mapping[str, Any]) -> bool:
    """The scheduler tried the pod and found no room (a gated pod was not tried)."""
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled":
            tried = condition.get("reason") != "SchedulingGated"
            return bool(tried and condition.get("status") == "False")
    return False


class PodWatch:
    """Feeds `events` from an informer of the namespace's replay pods, reporting
    each binding once, and keeps the pods' and claims' state for `view`. After
    a list (the first, or one after the watch's version expired), a pod it
    knew that the list lacks went away in between."""

    def __init__(self, server: ApiServer, namespace: str) -> None:
        self.events: queue.Queue[PodEvent] = queue.Queue()
        self.lock = threading.Lock()
        self.bound: set[str] = set()
        self.present: dict[str, str] = {}
        """Pod -> its job, for every pod seen and not seen go."""
        self.unschedulable: set[str] = set()
        self.gated: set[str] = set()
        """Pods Kueue holds back."""
        self.claims: dict[str, str] = {}
        """Claim -> the pod it serves."""
        self.results: dict[str, list[Mapping[str, Any]]] = {}
        """Claim -> its allocation results, once allocated."""
        self.allocated = threading.Condition(self.lock)
        """Notified on every claim event, for `allocations`."""
        self.changed = threading.Event()
        """Set on every pod or claim event: a `view` taken since may differ."""
        self.pods: Informer[Mapping[str, Any]] = Informer(
            server,
            path_of(PODS, namespace=namespace),
            {"labelSelector": JOB_LABEL},
            lambda pod: pod,
            on_list=self._listed,
            on_event=lambda kind, pod: self._see(pod, deleted=kind == "DELETED"),
        )
        self.claim_informer: Informer[Mapping[str, Any]] = Informer(
            server,
            path_of(CLAIMS, namespace=namespace),
            {},
            lambda claim: claim,
            on_list=self._claims_listed,
            on_event=lambda kind, claim: self._claim(claim, deleted=kind == "DELETED"),
        )

    def start(self) -> None:
        self.pods.start()
        self.claim_informer.start()

    def close(self) -> None:
        self.pods.close()
        self.claim_informer.close()

    def view(self, wanted: Collection[str], deleted: Collection[str]) -> NamespaceView:
        """The namespace against what the replay wrote: `wanted` pods exist,
        `deleted` ones are gone."""
        with self.lock:
            seen = [p for p in wanted if p in self.present]
            return NamespaceView(
                missing=len(wanted) - len(seen),
                lingering=sum(1 for p in deleted if p in self.present),
                orphan_claims=sum(1 for pod in self.claims.values() if pod not in self.present),
                undecided=sum(
                    1
                    for p in seen
                    if p not in self.bound and p not in self.unschedulable and p not in self.gated
                ),
                waiting=sum(1 for p in seen if p not in self.bound and p in self.unschedulable),
                queued=sum(1 for p in seen if p in self.gated),
            )

    def mark(self) -> None:
        """From now on, `wait_change` waits for an event; call it before
        taking a `view`, so no event after the view is missed."""
        self.changed.clear()

    def wait_change(self, timeout: float) -> bool:
        """Wait up to `timeout` wall seconds for a pod or claim event since
        `mark`, so a settle waiting on the namespace wakes when it changes
        rather than on a fixed poll; True if one came."""
        return self.changed.wait(timeout)

    def allocations(
        self, pods: Collection[str], timeout: float
    ) -> dict[str, list[Mapping[str, Any]]] | None:
        """Each pod's claims' allocation results, waiting up to `timeout` wall
        seconds until every pod has an allocated claim; None if one has not.
        The scheduler writes a claim's allocation before it binds the pod, but
        the claims' watch may deliver it after the pods' watch the binding."""
        with self.allocated:
            found: dict[str, list[Mapping[str, Any]]] = {}

            def complete() -> bool:
                found.clear()
                for claim, results in self.results.items():
                    pod = self.claims.get(claim, "")
                    if pod in pods:
                        found.setdefault(pod, []).extend(results)
                return len(found) == len(pods)

            return found if self.allocated.wait_for(complete, timeout) else None

    def queued_and_present(self) -> tuple[set[str], set[str]]:
        """The pods Kueue holds back, and every pod present."""
        with self.lock:
            return set(self.gated), set(self.present)

    def any_present(self, names: Collection[str]) -> bool:
        with self.lock:
            return any(name in self.present for name in names)

    def _listed(self, pods: list[Mapping[str, Any]]) -> None:
        self.changed.set()
        names = {pod["metadata"]["name"] for pod in pods}
        with self.lock:
            for name, job in list(self.present.items()):
                if name not in names:
                    del self.present[name]
                    self.gated.discard(name)
                    self.events.put(PodEvent(time.monotonic(), "gone", job, name))
        for pod in pods:
            self._see(pod, deleted=False)

    def _see(self, pod: Mapping[str, Any], deleted: bool) -> None:
        meta = pod["metadata"]
        name, job = meta["name"], meta["labels"][JOB_LABEL]
        with self.lock:
            self.changed.set()
            if deleted:
                self.present.pop(name, None)
                self.unschedulable.discard(name)
                self.gated.discard(name)
                self.events.put(PodEvent(time.monotonic(), "gone", job, name))
                return
            self.present[name] = job
            if gated(pod):
                self.gated.add(name)
            else:
                self.gated.discard(name)
            if _unschedulable(pod):
                self.unschedulable.add(name)
            node = (pod.get("spec") or {}).get("nodeName")
            if node and name not in self.bound:
                self.bound.add(name)
                self.events.put(PodEvent(time.monotonic(), "bound", job, name, node))

    def _claims_listed(self, claims: list[Mapping[str, Any]]) -> None:
        with self.lock:
            self.changed.set()
            self.claims = {c["metadata"]["name"]: claim_pod(c) for c in claims}
            self.results = {
                c["metadata"]["name"]: allocation_results(c)
                for c in claims
                if allocation_results(c)
            }
            self.allocated.notify_all()

    def _claim(self, claim: Mapping[str, Any], deleted: bool) -> None:
        with self.lock:
            self.changed.set()
            name = claim["metadata"]["name"]
            results = allocation_results(claim)
            if deleted:
                self.claims.pop(name, None)
            else:
                self.claims[name] = claim_pod(claim)
            if results and not deleted:
                self.results[name] = results
            else:
                self.results.pop(name, None)
            self.allocated.notify_all()
