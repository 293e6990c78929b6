"""The replay's writes: it creates and deletes its objects from a few
threads, and injects and clears the simulated faults."""

import http.client
import logging
import time
from collections.abc import Callable, Iterable
from functools import partial

import httpx

from driver.jsontypes import JSON
from driver.kubeapi.apiserver import ApiError, ApiUnreachableError
from driver.kubeapi.objects import Objects
from driver.kubeapi.resources import CLAIMS, PODS, Resource, path_of

log = logging.getLogger(__name__)
FAULTS_PATH = "/sim/v1/faults"
MERGE_PATCH = "application/merge-patch+json"
PLURALS = {"Pod": "pods", "ResourceClaim": "resourceclaims", "PodGroup": "podgroups"}


def resource_of(obj: JSON) -> Resource:
    """The resource of a replay object, from its apiVersion and kind."""
    group, _, version = obj["apiVersion"].rpartition("/")
    return Resource(group, version, PLURALS[obj["kind"]])


class Writer:
    """The replay's creates and deletes, from a few threads through the one
    pooled client; a call that fails is retried, and one that keeps failing is
    logged."""

    ATTEMPTS = 5

    def __init__(self, objects: Objects) -> None:
        self.objects = objects

    def _retry(self, what: str, call: Callable[[], object]) -> None:
        for attempt in range(self.ATTEMPTS):
            try:
                call()
                return
            except ApiError as err:
                if err.status in (404, 409):
                    return
                failure = f"{err.status} {err.reason}"
            except (ApiUnreachableError, OSError, http.client.HTTPException) as err:
                failure = repr(err)
            time.sleep(0.2 * (attempt + 1))
        log.warning("%s: failed %d times, last: %s", what, self.ATTEMPTS, failure)

    def create(self, objects: list[JSON]) -> None:
        for obj in objects:
            meta = obj["metadata"]
            call = partial(self.objects.create, resource_of(obj), obj, meta["namespace"])
            self._retry(f"create {obj['kind']} {meta['name']}", call)

    def delete(
        self, namespace: str, pods: Iterable[str], claims: bool = True, *, release: bool = False
    ) -> None:
        """Pods (at once: the kubelet unprepares) and, with `claims`, their
        claims, named alike. With `release`, also the finalizers on the pods:
        Kueue keeps a deleted pod group's pods until they have run to
        completion, which the replay's pods never do."""
        for name in pods:
            pod = partial(self.objects.delete, PODS, name, namespace=namespace, grace_seconds=0)
            self._retry(f"delete pod {namespace}/{name}", pod)
            if release:
                path = path_of(PODS, name, namespace)
                drop = partial(
                    self.objects.server.call,
                    "PATCH",
                    path,
                    body={"metadata": {"finalizers": None}},
                    content_type=MERGE_PATCH,
                )
                self._retry(f"release pod {namespace}/{name}", drop)
            if claims:
                claim = partial(self.objects.delete, CLAIMS, name, namespace=namespace)
                self._retry(f"delete claim {namespace}/{name}", claim)


def set_fault(sim_control: str, body: JSON, inject: bool) -> None:
    """POST (inject) or DELETE (clear) a fault on a node daemon's simulator-control
    socket; a failure is logged, as the replay goes on without it."""
    try:
        with httpx.Client(transport=httpx.HTTPTransport(uds=sim_control), timeout=10.0) as http:
            method = "POST" if inject else "DELETE"
            http.request(method, f"http://sim{FAULTS_PATH}", json=body).raise_for_status()
    except httpx.HTTPError as err:
        what = "inject" if inject else "clear"
        log.warning("%s fault %s on %s: %s", what, body, sim_control, err)
