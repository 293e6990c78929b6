"""What the kubelet stand-in writes about pods: status, Events, the final delete.

Status and Event failures are logged, not raised: the next sync writes again.
"""

import logging

from driver.jsontypes import JSON
from driver.kubeapi.apiserver import ApiError
from driver.kubeapi.objects import Objects
from driver.kubeapi.resources import EVENTS, PODS
from localsim.standin import podstatus

log = logging.getLogger(__name__)


def api_reason(err: ApiError) -> str:
    return f"{err.status} {err.reason}: {(err.body or '')[:300]}"


class PodWrites:
    def __init__(self, objects: Objects) -> None:
        self.objects = objects

    def patch_status(self, pod: JSON, status: JSON) -> None:
        meta = pod["metadata"]
        try:
            self.objects.patch_status(PODS, meta["name"], status, meta["namespace"])
        except ApiError as err:
            log.warning("pod %s: status update failed: %s", meta["name"], api_reason(err))

    def event(self, pod: JSON, node: str, kind: str, reason: str, message: str) -> None:
        body = podstatus.event(pod, node, kind, reason, message)
        try:
            self.objects.create(EVENTS, body, pod["metadata"]["namespace"])
        except ApiError as err:
            log.warning("event for pod %s failed: %s", pod["metadata"]["name"], api_reason(err))

    def delete(self, pod: JSON) -> None:
        """Delete with grace period 0, only this very pod (uid precondition)."""
        meta = pod["metadata"]
        try:
            self.objects.delete(
                PODS, meta["name"], namespace=meta["namespace"], uid=meta["uid"], grace_seconds=0
            )
        except ApiError as err:
            if err.status != 409:
                raise
