"""Claims and pods a chaos run keeps on a rack, created and read through the API."""

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress

from kubernetes import client

from driver.names import device_class_name
from testbed.controlplane import delete_collection
from testbed.waiting import wait_for

WRITERS = 16


def ensure_namespace(api: client.ApiClient, namespace: str) -> None:
    with suppress(client.ApiException):
        client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})


def claim_body(name: str, kind: str) -> dict[str, object]:
    request = {"name": "dev", "exactly": {"deviceClassName": device_class_name(kind)}}
    return {"metadata": {"name": name}, "spec": {"devices": {"requests": [request]}}}


def pod_body(name: str, claim: str) -> dict[str, object]:
    return {
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/chaos:none",
                    "resources": {"claims": [{"name": "dev"}]},
                }
            ],
            "resourceClaims": [{"name": "dev", "resourceClaimName": claim}],
            "terminationGracePeriodSeconds": 0,
        },
    }


def create_one(api: client.ApiClient, namespace: str, name: str, kind: str) -> None:
    """A claim for one device of `kind` and a pod using it, both named `name`."""
    client.ResourceV1Api(api).create_namespaced_resource_claim(namespace, claim_body(name, kind))
    client.CoreV1Api(api).create_namespaced_pod(namespace, pod_body(name, name))


def create_many(api: client.ApiClient, namespace: str, names: Iterable[str], kind: str) -> None:
    """All at once, from WRITERS threads."""
    ensure_namespace(api, namespace)
    with ThreadPoolExecutor(WRITERS) as pool:
        list(pool.map(lambda n: create_one(api, namespace, n, kind), names))


def pods(api: client.ApiClient, namespace: str) -> dict[str, client.V1Pod]:
    items = client.CoreV1Api(api).list_namespaced_pod(namespace).items
    return {p.metadata.name: p for p in items}


def running(api: client.ApiClient, namespace: str) -> dict[str, str]:
    """Name -> uid of the namespace's Running pods."""
    return {
        name: p.metadata.uid
        for name, p in pods(api, namespace).items()
        if p.status.phase == "Running" and not p.metadata.deletion_timestamp
    }


def wait_running(
    api: client.ApiClient, namespace: str, names: Iterable[str], timeout: float = 300.0
) -> dict[str, str]:
    wanted = set(names)

    def probe() -> dict[str, str] | None:
        now = running(api, namespace)
        return now if wanted <= set(now) else None

    return wait_for(f"{len(wanted)} pods Running in {namespace}", probe, timeout, interval=0.5)


def delete_all(api: client.ApiClient, namespace: str, timeout: float = 300.0) -> None:
    """Delete every pod and then every claim of the namespace, and wait until all are gone."""
    core, resource = client.CoreV1Api(api), client.ResourceV1Api(api)
    delete_collection(
        f"pods of {namespace}", lambda: core.delete_collection_namespaced_pod(namespace), timeout
    )
    wait_for(f"pods of {namespace} gone", lambda: not pods(api, namespace), timeout, interval=0.5)
    delete_collection(
        f"claims of {namespace}",
        lambda: resource.delete_collection_namespaced_resource_claim(namespace),
        timeout,
    )
    wait_for(
        f"claims of {namespace} gone",
        lambda: not resource.list_namespaced_resource_claim(namespace).items,
        timeout,
        interval=0.5,
    )


def live_claims(api: client.ApiClient) -> dict[str, str]:
    """uid -> namespace/name of every ResourceClaim in the cluster."""
    items = client.ResourceV1Api(api).list_resource_claim_for_all_namespaces().items
    return {c.metadata.uid: f"{c.metadata.namespace}/{c.metadata.name}" for c in items}
