"""What the kubelet stand-in writes about pods: status, Events, the final delete.

Status and Event failures are logged, not raised: the next sync writes again.
"""

import logging

from kubernetes import client
from kubernetes.client.rest import ApiException

from driver.jsontypes import JSON
from driver.localsim.standin import podstatus

log = logging.getLogger(__name__)


def api_reason(err: ApiException) -> str:
    return f"{err.status} {err.reason}: {(err.body or '')[:300]}"


class PodWrites:
    def __init__(self, api: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api)

    def patch_status(self, pod: JSON, status: JSON) -> None:
        meta = pod["metadata"]
        try:
            self.core.patch_namespaced_pod_status(
                meta["name"], meta["namespace"], {"status": status}
            )
        except ApiException as err:
            if err.status != 404:
                log.warning("pod %s: status update failed: %s", meta["name"], api_reason(err))

    def event(self, pod: JSON, node: str, kind: str, reason: str, message: str) -> None:
        body = podstatus.event(pod, node, kind, reason, message)
        try:
            self.core.create_namespaced_event(pod["metadata"]["namespace"], body)
        except ApiException as err:
            log.warning("event for pod %s failed: %s", pod["metadata"]["name"], api_reason(err))

    def delete(self, pod: JSON) -> None:
        """Delete with grace period 0, only this very pod (uid precondition)."""
        meta = pod["metadata"]
        try:
            self.core.delete_namespaced_pod(
                meta["name"],
                meta["namespace"],
                body={"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}},
            )
        except ApiException as err:
            if err.status not in (404, 409):
                raise
