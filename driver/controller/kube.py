"""The API calls the controller makes, on plain dicts (no typed models, so no
field the client library does not know is ever dropped).

Writes send JSON encoded here in one C call instead of the client library's
recursive walk over the body, which cost more than the apiserver's own work
for a rack's 2 MB of slices."""

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlencode

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from driver.jsontypes import JSON
from driver.names import API_GROUP, API_VERSION

PAGE: Final = 500
WRITE_TIMEOUT: Final = 60.0
JSON_MEDIA: Final = "application/json"
METADATA_LIST: Final = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA_ONLY: Final = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str


SLICES: Final = Resource("resource.k8s.io", "v1", "resourceslices")
CLAIMS: Final = Resource("resource.k8s.io", "v1", "resourceclaims")
ULTRASERVERS: Final = Resource(API_GROUP, API_VERSION, "ultraservers")
HEALTH: Final = Resource(API_GROUP, API_VERSION, "nodedevicehealths")
LEASES: Final = Resource("coordination.k8s.io", "v1", "leases")


def path_of(res: Resource, name: str | None = None) -> str:
    base = f"/apis/{res.group}/{res.version}/{res.plural}"
    return f"{base}/{name}" if name else base


def _encode(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def api_client(kubeconfig: Path | None) -> client.ApiClient:
    """A client from `kubeconfig`, or the in-cluster service account when None."""
    if kubeconfig is None:
        config.load_incluster_config()
        return client.ApiClient()
    return config.new_client_from_config(config_file=str(kubeconfig))


class Kube:
    """Cluster-scoped reads and writes used by the reconciler."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)

    def list_all(
        self, res: Resource, labels: str | None = None, fields: str | None = None
    ) -> list[JSON]:
        items: list[JSON] = []
        token: str | None = None
        while True:
            page = self.custom.list_cluster_custom_object(
                res.group,
                res.version,
                res.plural,
                label_selector=labels,
                field_selector=fields,
                limit=PAGE,
                _continue=token,
            )
            items += page.get("items") or []
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items

    def list_nodes(self) -> list[JSON]:
        items: list[JSON] = []
        token: str | None = None
        while True:
            resp = self.core.list_node(limit=PAGE, _continue=token, _preload_content=False)
            page = json.loads(resp.data)
            items += page.get("items") or []
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items

    def get(self, res: Resource, name: str) -> JSON | None:
        try:
            obj: JSON = self.custom.get_cluster_custom_object(
                res.group, res.version, res.plural, name
            )
        except ApiException as err:
            if err.status == 404:
                return None
            raise
        return obj

    def create(self, res: Resource, body: Mapping[str, Any]) -> JSON:
        return self.request("POST", path_of(res), _encode(body))

    def replace(self, res: Resource, name: str, body: Mapping[str, Any]) -> JSON:
        return self.request("PUT", path_of(res, name), _encode(body))

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        query: Mapping[str, str] | None = None,
        accept: str = JSON_MEDIA,
    ) -> JSON:
        """One call with a body already encoded; non-2xx answers raise ApiException."""
        resp = self._send(
            method, path=path, body=body, query=query, accept=accept, timeout=WRITE_TIMEOUT
        )
        try:
            data = resp.read()
        finally:
            resp.release_conn()
        out: JSON = json.loads(data)
        return out

    def stream(
        self, path: str, query: Mapping[str, str], accept: str, timeout: float
    ) -> Iterator[JSON]:
        """The events of a watch, one decoded line at a time, until the server ends it."""
        resp = self._send("GET", path=path, body=None, query=query, accept=accept, timeout=timeout)
        try:
            pending = b""
            for chunk in resp.stream(64 * 1024):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield json.loads(line)
        finally:
            resp.release_conn()

    def _send(
        self,
        method: str,
        *,
        path: str,
        body: bytes | None,
        query: Mapping[str, str] | None,
        accept: str,
        timeout: float,
    ) -> Any:
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = JSON_MEDIA
        self.api.update_params_for_auth(headers, [], ["BearerToken"], path, method, body)
        url = self.api.configuration.host + path
        if query:
            url += "?" + urlencode(query)
        resp = self.api.rest_client.pool_manager.request(
            method, url, body=body, headers=headers, preload_content=False, timeout=timeout
        )
        if not 200 <= resp.status < 300:
            data = resp.read()
            resp.release_conn()
            raise ApiException(status=resp.status, reason=resp.reason, body=data.decode())
        return resp

    def delete(self, res: Resource, name: str, resource_version: str | None = None) -> None:
        """Delete; an object already gone is fine."""
        pre = {"resourceVersion": resource_version} if resource_version else None
        body = {"preconditions": pre} if pre else None
        try:
            self.custom.delete_cluster_custom_object(
                res.group, res.version, res.plural, name, body=body
            )
        except ApiException as err:
            if err.status != 404:
                raise

    def patch_status(self, res: Resource, name: str, status: Mapping[str, Any]) -> None:
        """Merge `status` in; an object deleted meanwhile needs no status."""
        try:
            self.custom.patch_cluster_custom_object_status(
                res.group, res.version, res.plural, name, {"status": status}
            )
        except ApiException as err:
            if err.status != 404:
                raise
