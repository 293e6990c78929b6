"""What the node daemon reads from the apiserver: claims by GET, and the rack's
ResourceSlice devices and UltraServer defaults from watch-fed caches, so the
only request a prepare makes is its claim's GET.

Responses are read as plain JSON (no client models) because prepare only
needs a few fields and the models cost more than the request.
"""

from collections.abc import Mapping
from typing import Any, Protocol

from driver.devicemodel.devicecores import Attributes
from driver.kubeapi.apiserver import ApiServer
from driver.kubeapi.informer import WatchedObjects
from driver.kubeapi.resources import CLAIMS, SLICES, ULTRASERVERS, path_of
from driver.names import rack_label
from driver.node.devices import device_attributes

DeviceIndex = dict[tuple[str, str], Attributes]
"""(pool, device) -> attributes."""


class ClusterReader(Protocol):
    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def attributes(self, keys: set[tuple[str, str]]) -> dict[tuple[str, str], Attributes]: ...

    def default_lnc(self, ultraserver: str) -> int | None: ...


def merge_devices(slices: Mapping[str, DeviceIndex]) -> DeviceIndex:
    return {key: attrs for index in slices.values() for key, attrs in index.items()}


def lnc_of(ultraserver: Mapping[str, Any]) -> int | None:
    """spec.defaultLogicalNeuronCore, None when unset."""
    found = (ultraserver.get("spec") or {}).get("defaultLogicalNeuronCore")
    return int(found) if found else None


class ApiReader:
    """Claims by GET; slice devices and rack defaults from watches.

    A device the slice watch has not brought yet is waited for up to
    `wait_seconds` (the claim may have been allocated from a slice written a
    moment ago); other prepares go on meanwhile.

    With `ultraserver` given, only that rack's slices and UltraServer are
    watched: a node's claims hold devices of its own rack only."""

    def __init__(
        self,
        server: ApiServer,
        driver: str,
        wait_seconds: float = 5.0,
        ultraserver: str | None = None,
    ) -> None:
        self._server = server
        self.wait_seconds = wait_seconds
        slice_query = {"fieldSelector": f"spec.driver={driver}"}
        rack_query = {}
        if ultraserver:
            slice_query["labelSelector"] = f"{rack_label(driver)}={ultraserver}"
            rack_query["fieldSelector"] = f"metadata.name={ultraserver}"
        self._slices = WatchedObjects(
            self._server,
            path_of(SLICES),
            slice_query,
            lambda item: device_attributes([item], driver),
            merge_devices,
        )
        self._racks = WatchedObjects(self._server, path_of(ULTRASERVERS), rack_query, lnc_of, dict)

    def start(self) -> None:
        self._slices.start()
        self._racks.start()

    def wait_synced(self, timeout: float) -> bool:
        """True once both caches hold their first list."""
        return self._slices.wait_synced(timeout) and self._racks.wait_synced(timeout)

    def close(self) -> None:
        self._slices.close()
        self._racks.close()

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        claim: dict[str, Any] | None = self._server.get_json(path_of(CLAIMS, name, namespace))
        return claim

    def attributes(self, keys: set[tuple[str, str]]) -> dict[tuple[str, str], Attributes]:
        """Attributes of the named (pool, device) pairs that exist."""
        index = self._slices.view(lambda devices: keys <= devices.keys(), self.wait_seconds)
        return {key: index[key] for key in keys if key in index}

    def default_lnc(self, ultraserver: str) -> int | None:
        """The UltraServer's spec.defaultLogicalNeuronCore, None when unset or absent."""
        return self._racks.view(timeout=self.wait_seconds).get(ultraserver)
