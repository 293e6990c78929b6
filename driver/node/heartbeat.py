"""The node daemon's heartbeat: one Lease per node, renewed every
`--heartbeat-seconds`, as the kubelet renews its node's Lease. What reads it
(the UltraServer operator) tells a daemon that stopped (killed, hung) from one
with nothing to say: the Lease's renewTime stops moving. Off unless asked for
(the chart and `trainium-dra up` ask when the UltraServer operator runs)."""

import datetime
import logging
import math
import threading

from driver.jsontypes import JSON
from driver.kubeapi.apiserver import MERGE_PATCH, ApiError
from driver.kubeapi.objects import Objects
from driver.kubeapi.resources import LEASES, path_of
from driver.names import HEARTBEAT_LABEL, HEARTBEAT_MISSES, heartbeat_lease

log = logging.getLogger(__name__)


def micro_time(now: datetime.datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_object(node: str, namespace: str, seconds: float, now: datetime.datetime) -> JSON:
    """The whole Lease of `node` (pure): held by the node, lasting HEARTBEAT_MISSES renewals."""
    key, value = HEARTBEAT_LABEL.split("=", 1)
    stamp = micro_time(now)
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": heartbeat_lease(node), "namespace": namespace, "labels": {key: value}},
        "spec": {
            "holderIdentity": node,
            "leaseDurationSeconds": max(1, math.ceil(seconds * HEARTBEAT_MISSES)),
            "acquireTime": stamp,
            "renewTime": stamp,
        },
    }


class Heartbeat:
    """Renews one node's Lease every `seconds` until stopped; a failed write is
    logged once and tried again at the next beat."""

    def __init__(self, objects: Objects, node: str, namespace: str, seconds: float) -> None:
        self.objects = objects
        self.node = node
        self.namespace = namespace
        self.seconds = seconds
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name=f"{node}-heartbeat", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        if self.thread.is_alive():
            self.thread.join(timeout=5)

    def beat(self) -> None:
        now = datetime.datetime.now(datetime.UTC)
        path = path_of(LEASES, heartbeat_lease(self.node), self.namespace)
        whole = lease_object(self.node, self.namespace, self.seconds, now)
        renew = {"spec": {k: v for k, v in whole["spec"].items() if k != "acquireTime"}}
        try:
            self.objects.server.call("PATCH", path, body=renew, content_type=MERGE_PATCH)
        except ApiError as err:
            if err.status != 404:
                raise
            self.objects.create(LEASES, whole, self.namespace)

    def _loop(self) -> None:
        failed = ""
        while not self.stopping.is_set():
            try:
                self.beat()
                failed = ""
            except (ApiError, OSError) as err:
                if str(err) != failed:
                    log.warning("node %s: heartbeat Lease not renewed: %s", self.node, err)
                failed = str(err)
            self.stopping.wait(self.seconds)
