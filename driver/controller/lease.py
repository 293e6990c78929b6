"""One active controller per driver: a coordination.k8s.io Lease.

A replica writes only while it holds the Lease. It renews it every
`renew_seconds`; a replica that cannot renew before the Lease expires stops
(the caller exits, so nothing written later can race the new holder). A
replica that stops cleanly hands the Lease back at once.

Why not `kubernetes.leaderelection` with its `LeaseLock`: its `LeaseLock`
builds its own `CoordinationV1Api()` from the default configuration, not the
controller's; `LeaderElection.run` waits to acquire in a loop no
caller can stop (SIGTERM would wait forever in a standby); it never releases
the Lease, so a clean stop leaves standbys waiting a full lease duration.
This module is one attempt per call (`try_acquire`) plus `release`; the
runner owns the loop and its stop signal.

Expiry is judged by this replica's own monotonic clock, as client-go does: the
holder is gone once the Lease's spec has not changed for leaseDurationSeconds
since this replica saw it change. The holder's renewTime is the holder's wall
clock, and comparing it with ours would let a skewed clock on either side
hand the Lease over early or never.
"""

import datetime
import logging
import time
from collections.abc import Callable
from typing import Any

from driver.kubeapi.apiserver import ApiError
from driver.kubeapi.objects import Objects
from driver.kubeapi.resources import LEASES

log = logging.getLogger(__name__)
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class LeaseElector:
    def __init__(
        self,
        objects: Objects,
        *,
        namespace: str,
        name: str,
        identity: str,
        duration_seconds: int,
        clock: Callable[[], datetime.datetime] = _now,
    ) -> None:
        self.objects = objects
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.duration = duration_seconds
        self.clock = clock
        """Wall clock for the stamps written into the Lease (read by people, not by us)."""
        self.held_since: datetime.datetime | None = None
        self._observed: dict[str, Any] | None = None
        self._observed_at = 0.0

    def try_acquire(self) -> bool:
        """One attempt to take or renew the Lease; True while we hold it."""
        now = self.clock()
        stamp = now.strftime(TIME_FORMAT)
        lease = self.objects.get(LEASES, self.name, self.namespace)
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(stamp, stamp, 0),
            }
            try:
                self.objects.create(LEASES, body, self.namespace)
            except ApiError as err:
                if err.status == 409:
                    return False
                raise
            self.held_since = now
            log.info("acquired lease %s/%s as %s", self.namespace, self.name, self.identity)
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        mine = holder == self.identity
        if holder and not mine and not self._expired(spec):
            return False
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if mine else 1)
        acquired = spec.get("acquireTime") if mine else stamp
        lease["spec"] = self._spec(acquired or stamp, stamp, transitions)
        try:
            self.objects.replace(LEASES, self.name, lease, self.namespace)
        except ApiError as err:
            if err.status == 409:
                return False
            raise
        if not mine:
            self.held_since = now
            log.info("took over lease %s/%s from %r", self.namespace, self.name, holder)
        return True

    def _spec(self, acquired: str, renewed: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.duration,
            "acquireTime": acquired,
            "renewTime": renewed,
            "leaseTransitions": transitions,
        }

    def _expired(self, spec: dict[str, Any]) -> bool:
        """True once `spec` has stayed as it is for its duration, timed from when
        this replica first saw it so."""
        now = time.monotonic()
        if spec != self._observed:
            self._observed, self._observed_at = dict(spec), now
            return False
        duration = int(spec.get("leaseDurationSeconds") or self.duration)
        return now - self._observed_at >= duration

    def release(self) -> None:
        """Hand the Lease back if we hold it, so a standby takes over at once."""
        try:
            lease = self.objects.get(LEASES, self.name, self.namespace)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            lease["spec"]["holderIdentity"] = ""
            lease["spec"]["renewTime"] = None
            self.objects.replace(LEASES, self.name, lease, self.namespace)
            log.info("released lease %s/%s", self.namespace, self.name)
        except ApiError as err:
            log.warning("could not release lease %s/%s: %s", self.namespace, self.name, err.reason)
