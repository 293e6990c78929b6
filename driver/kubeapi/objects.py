"""Whole objects read and written as plain dicts (no typed models, so no field
a client library does not know is ever dropped)."""

from collections.abc import Mapping
from typing import Any

from driver.jsontypes import JSON
from driver.kubeapi.apiserver import MERGE_PATCH, ApiError, ApiServer
from driver.kubeapi.listwatch import list_items
from driver.kubeapi.resources import Resource, path_of


class Objects:
    """Reads and writes of one apiserver's objects; failures raise ApiError."""

    def __init__(self, server: ApiServer) -> None:
        self.server = server

    def list_all(
        self,
        res: Resource,
        labels: str | None = None,
        fields: str | None = None,
        namespace: str | None = None,
    ) -> list[JSON]:
        """Every object (of `namespace` when given) matching the selectors."""
        query = {}
        if labels:
            query["labelSelector"] = labels
        if fields:
            query["fieldSelector"] = fields
        path = path_of(res, namespace=namespace)
        items, _ = list_items(self.server, path, query, lambda item: item)
        return items

    def get(self, res: Resource, name: str, namespace: str | None = None) -> JSON | None:
        """The object, None when there is none."""
        found: JSON | None = self.server.get_json(path_of(res, name, namespace))
        return found

    def create(self, res: Resource, body: Mapping[str, Any], namespace: str | None = None) -> JSON:
        created: JSON = self.server.call("POST", path_of(res, namespace=namespace), body=body)
        return created

    def replace(
        self, res: Resource, name: str, body: Mapping[str, Any], namespace: str | None = None
    ) -> JSON:
        stored: JSON = self.server.call("PUT", path_of(res, name, namespace), body=body)
        return stored

    def delete(
        self,
        res: Resource,
        name: str,
        resource_version: str | None = None,
        *,
        namespace: str | None = None,
        uid: str | None = None,
        grace_seconds: int | None = None,
    ) -> None:
        """Delete, only the object of `resource_version` or `uid` when given (a
        precondition that fails raises 409), after `grace_seconds` when given;
        an object already gone is fine."""
        preconditions = {
            k: v for k, v in (("resourceVersion", resource_version), ("uid", uid)) if v
        }
        options: dict[str, Any] = {"preconditions": preconditions} if preconditions else {}
        if grace_seconds is not None:
            options["gracePeriodSeconds"] = grace_seconds
        try:
            self.server.call("DELETE", path_of(res, name, namespace), body=options or None)
        except ApiError as err:
            if err.status != 404:
                raise

    def patch_status(
        self, res: Resource, name: str, status: Mapping[str, Any], namespace: str | None = None
    ) -> None:
        """Merge `status` in; an object deleted meanwhile needs no status."""
        path = path_of(res, name, namespace) + "/status"
        try:
            self.server.call("PATCH", path, body={"status": status}, content_type=MERGE_PATCH)
        except ApiError as err:
            if err.status != 404:
                raise
