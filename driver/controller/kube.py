"""The API calls the controller makes, on plain dicts (no typed models, so no
field the client library does not know is ever dropped)."""

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from driver.jsontypes import JSON
from driver.names import API_GROUP, API_VERSION

PAGE: Final = 500


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
        out: JSON = self.custom.create_cluster_custom_object(
            res.group, res.version, res.plural, body
        )
        return out

    def replace(self, res: Resource, name: str, body: Mapping[str, Any]) -> JSON:
        out: JSON = self.custom.replace_cluster_custom_object(
            res.group, res.version, res.plural, name, body
        )
        return out

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
