"""What the node daemon reads from the apiserver: claims and ResourceSlice devices.

Responses are read as plain JSON (no client models) because prepare only
needs a few fields and the models cost more than the request.
"""

import http.client
import json
import logging
import threading
import time
from typing import Any, Protocol

from kubernetes import client

from driver.names import API_GROUP, API_VERSION, rack_label
from driver.plugin.apiget import ApiGetter
from driver.plugin.devices import Attributes, device_attributes

log = logging.getLogger(__name__)

RESOURCE_API = "/apis/resource.k8s.io/v1"
ULTRASERVERS_API = f"/apis/{API_GROUP}/{API_VERSION}/ultraservers"


class ApiError(RuntimeError):
    """The apiserver refused a read."""


class ClusterReader(Protocol):
    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def attributes(self, keys: set[tuple[str, str]]) -> dict[tuple[str, str], Attributes]: ...

    def default_lnc(self, ultraserver: str) -> int | None: ...


class ApiReader:
    """Claims by GET; slice devices from a cache that a miss refreshes at once.

    A stale cache that holds every asked-for device answers from what it holds
    and refreshes in the background, so a prepare never waits for a list of
    the rack's slices it did not need (a device's attributes change only with
    its rack's layout; the next refresh brings that in).

    With `ultraserver` given, only that rack's slices are listed: a node's
    claims hold devices of its own rack only, and listing every rack's slices
    would cost each node a megabyte-sized read per rack on every refresh."""

    def __init__(
        self,
        api: client.ApiClient,
        driver: str,
        cache_seconds: float = 5.0,
        ultraserver: str | None = None,
    ) -> None:
        self.api = api
        self._getter = ApiGetter(api.configuration)
        self.driver = driver
        self.ultraserver = ultraserver
        self.cache_seconds = cache_seconds
        self._lock = threading.Lock()
        self._index: dict[tuple[str, str], Attributes] = {}
        self._listed_at = float("-inf")
        self._refreshing = False
        self._wake = threading.Event()
        self._refresher: threading.Thread | None = None
        self._lnc: dict[str, tuple[float, int | None]] = {}

    def _get(self, path: str, query: list[tuple[str, str]] | None = None) -> Any:
        """GET `path` as JSON; None on 404, ApiError on any other failure."""
        try:
            status, body = self._getter.get(path, query)
        except (OSError, http.client.HTTPException) as err:
            raise ApiError(f"GET {path}: {err}") from err
        if status == 404:
            return None
        if status >= 400:
            raise ApiError(f"GET {path}: HTTP {status}: {body[:300]!r}")
        return json.loads(body)

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        claim: dict[str, Any] | None = self._get(
            f"{RESOURCE_API}/namespaces/{namespace}/resourceclaims/{name}"
        )
        return claim

    def _list_index(self) -> dict[tuple[str, str], Attributes]:
        items: list[dict[str, Any]] = []
        cont = ""
        while True:
            query = [("fieldSelector", f"spec.driver={self.driver}"), ("limit", "500")]
            if self.ultraserver:
                query.append(("labelSelector", f"{rack_label(self.driver)}={self.ultraserver}"))
            if cont:
                query.append(("continue", cont))
            page = self._get(f"{RESOURCE_API}/resourceslices", query) or {}
            items.extend(page.get("items") or [])
            cont = (page.get("metadata") or {}).get("continue") or ""
            if not cont:
                break
        return device_attributes(items, self.driver)

    def attributes(self, keys: set[tuple[str, str]]) -> dict[tuple[str, str], Attributes]:
        """Attributes of the named (pool, device) pairs that exist."""
        with self._lock:
            if not keys <= self._index.keys():
                self._index = self._list_index()
                self._listed_at = time.monotonic()
            elif time.monotonic() - self._listed_at > self.cache_seconds and not self._refreshing:
                self._refreshing = True
                if self._refresher is None:
                    self._refresher = threading.Thread(
                        target=self._refresh_behind, name="slice-refresh", daemon=True
                    )
                    self._refresher.start()
                self._wake.set()
            return {key: self._index[key] for key in keys if key in self._index}

    def _refresh_behind(self) -> None:
        """Re-list outside the lock when woken, on one thread and its one connection;
        a failed list keeps the old index until the next try."""
        while self._wake.wait():
            self._wake.clear()
            index = None
            try:
                index = self._list_index()
            except (ApiError, ValueError) as err:
                log.warning("refreshing ResourceSlice attributes: %s", err)
            with self._lock:
                if index is not None:
                    self._index = index
                self._listed_at = time.monotonic()
                self._refreshing = False

    def default_lnc(self, ultraserver: str) -> int | None:
        """The UltraServer's spec.defaultLogicalNeuronCore, None when unset or absent."""
        with self._lock:
            read_at, value = self._lnc.get(ultraserver, (float("-inf"), None))
            if time.monotonic() - read_at <= self.cache_seconds:
                return value
        obj = self._get(f"{ULTRASERVERS_API}/{ultraserver}") or {}
        found = (obj.get("spec") or {}).get("defaultLogicalNeuronCore")
        value = int(found) if found else None
        with self._lock:
            self._lnc[ultraserver] = (time.monotonic(), value)
        return value
