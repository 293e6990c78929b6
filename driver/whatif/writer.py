"""The replay's writes: it creates and deletes its objects from a few
threads, and injects and clears the simulated faults."""

import logging
import threading
import time
from collections.abc import Callable, Iterable
from functools import partial

import httpx
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from driver.jsontypes import JSON

log = logging.getLogger(__name__)
FAULTS_PATH = "/sim/v1/faults"


class Writer:
    """Each thread has an API client of its own (one client's connections
    shared by threads break); a call that fails is retried, and one that keeps
    failing is logged."""

    ATTEMPTS = 5

    def __init__(self, api: client.ApiClient) -> None:
        self.configuration = api.configuration
        self.local = threading.local()

    def _api(self) -> client.ApiClient:
        if not hasattr(self.local, "api"):
            self.local.api = client.ApiClient(self.configuration)
        api: client.ApiClient = self.local.api
        return api

    def _retry(self, what: str, call: Callable[[client.ApiClient], object]) -> None:
        for attempt in range(self.ATTEMPTS):
            try:
                call(self._api())
                return
            except ApiException as err:
                if err.status in (404, 409):
                    return
                failure = f"{err.status} {err.reason}"
            except Exception as err:  # a broken connection: a new client, then again
                failure = repr(err)
                self.local.__dict__.pop("api", None)
            time.sleep(0.2 * (attempt + 1))
        log.warning("%s: failed %d times, last: %s", what, self.ATTEMPTS, failure)

    def create(self, objects: list[JSON]) -> None:
        for obj in objects:
            self._retry(f"create {obj['kind']} {obj['metadata']['name']}", partial(_post, obj=obj))

    def delete(self, namespace: str, pods: Iterable[str], claims: bool = True) -> None:
        """Pods (at once: the kubelet unprepares) and, with `claims`, their
        claims, named alike."""
        for name in pods:
            where = {"name": name, "namespace": namespace}
            self._retry(f"delete pod {namespace}/{name}", partial(_delete_pod, **where))
            if claims:
                self._retry(f"delete claim {namespace}/{name}", partial(_delete_claim, **where))


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


def _delete_pod(api: client.ApiClient, name: str, namespace: str) -> None:
    client.CoreV1Api(api).delete_namespaced_pod(name, namespace, grace_period_seconds=0)


def _delete_claim(api: client.ApiClient, name: str, namespace: str) -> None:
    client.CustomObjectsApi(api).delete_namespaced_custom_object(
        "resource.k8s.io", "v1", namespace, "resourceclaims", name
    )


def _post(api: client.ApiClient, obj: JSON) -> None:
    ns = obj["metadata"]["namespace"]
    if obj["kind"] == "Pod":
        client.CoreV1Api(api).create_namespaced_pod(ns, obj)
        return
    group, version = obj["apiVersion"].split("/")
    plural = {"ResourceClaim": "resourceclaims", "PodGroup": "podgroups"}[obj["kind"]]
    client.CustomObjectsApi(api).create_namespaced_custom_object(group, version, ns, plural, obj)
