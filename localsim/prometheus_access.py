"""What the host's Prometheus may read in a real-node cluster, and its token.

Prometheus gets its own ServiceAccount instead of the admin token: a Role in
the chart's namespace to discover the driver's pods (get, list, watch pods)
and a ClusterRole for the kubelets' `/metrics` (`nodes/metrics`, which the
kubelet's webhook authorizer checks) and the control plane's `/metrics` (a
non-resource URL). Nothing else: no secrets, no proxy, no writes.

The token is a bound token from the TokenRequest API, written to a file only
its owner reads (0600, in a 0700 directory) and renewed well before it expires;
Prometheus reads the file again on every request.
"""

import os
import threading
from pathlib import Path
from typing import Any

from kubernetes import client, utils
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from localsim.controlplane.chart import NAMESPACE as DRIVER_NAMESPACE

NAMESPACE = "trainium-dra-monitoring"
SERVICE_ACCOUNT = "prometheus"
ROLE = "trainium-dra-prometheus"
TOKEN_LIFETIME = 24 * 3600
RENEW_EVERY = 3600.0
"""A renewal an hour keeps 23 hours of margin on a 24-hour token."""


def access_objects(driver_namespace: str = DRIVER_NAMESPACE) -> list[dict[str, Any]]:
    """The namespace, ServiceAccount and RBAC objects Prometheus scrapes with."""
    subject = {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}
    rbac = "rbac.authorization.k8s.io/v1"
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE},
            "automountServiceAccountToken": False,
        },
        {
            "apiVersion": rbac,
            "kind": "Role",
            "metadata": {"name": ROLE, "namespace": driver_namespace},
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
            ],
        },
        {
            "apiVersion": rbac,
            "kind": "RoleBinding",
            "metadata": {"name": ROLE, "namespace": driver_namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE},
            "subjects": [subject],
        },
        {
            "apiVersion": rbac,
            "kind": "ClusterRole",
            "metadata": {"name": ROLE},
            "rules": [
                {"apiGroups": [""], "resources": ["nodes/metrics"], "verbs": ["get"]},
                {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
            ],
        },
        {
            "apiVersion": rbac,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": ROLE},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": ROLE,
            },
            "subjects": [subject],
        },
    ]


def grant_access(api: client.ApiClient) -> None:
    """Create the objects of `access_objects`; ones already there are kept."""
    for document in access_objects():
        try:
            utils.create_from_dict(api, document)
        except utils.FailToCreateError as err:
            if any(e.status != 409 for e in err.api_exceptions):
                raise


def request_token(api: client.ApiClient, lifetime: int = TOKEN_LIFETIME) -> str:
    body = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=lifetime)
    )
    answer = client.CoreV1Api(api).create_namespaced_service_account_token(
        SERVICE_ACCOUNT, NAMESPACE, body
    )
    token: str = answer.status.token
    return token


def write_private(path: Path, text: str) -> None:
    """Replace `path` with `text`, readable by its owner only from the start."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    staging = path.with_name(f".{path.name}.new")
    staging.unlink(missing_ok=True)
    descriptor = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(text)
    os.replace(staging, path)


class TokenRenewal:
    """Writes a fresh token to `path` now and every `every` seconds until stopped;
    owns (and closes) `api`."""

    def __init__(self, api: client.ApiClient, path: Path, every: float = RENEW_EVERY) -> None:
        self.api = api
        self.path = path
        self.every = every
        self._stop = threading.Event()
        write_private(path, request_token(api))
        self._thread = threading.Thread(target=self._run, name="prometheus-token", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                write_private(self.path, request_token(self.api))
            except (ApiException, HTTPError):
                continue  # the old token holds for hours; the next round retries

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.api.close()
