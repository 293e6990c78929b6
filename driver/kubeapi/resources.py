"""The resources the driver reads and writes, and where the apiserver serves them."""

from dataclasses import dataclass
from typing import Final

from driver.names import API_GROUP, API_VERSION


@dataclass(frozen=True)
class Resource:
    group: str
    """"" for the core group, served under /api."""
    version: str
    plural: str


SLICES: Final = Resource("resource.k8s.io", "v1", "resourceslices")
CLAIMS: Final = Resource("resource.k8s.io", "v1", "resourceclaims")
DEVICE_CLASSES: Final = Resource("resource.k8s.io", "v1", "deviceclasses")
ULTRASERVERS: Final = Resource(API_GROUP, API_VERSION, "ultraservers")
HEALTH: Final = Resource(API_GROUP, API_VERSION, "nodedevicehealths")
LEASES: Final = Resource("coordination.k8s.io", "v1", "leases")
NODES: Final = Resource("", "v1", "nodes")
PODS: Final = Resource("", "v1", "pods")
EVENTS: Final = Resource("", "v1", "events")
NAMESPACES: Final = Resource("", "v1", "namespaces")
CRDS: Final = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")


def path_of(res: Resource, name: str | None = None, namespace: str | None = None) -> str:
    """The collection's path (of `namespace`, else cluster-wide), or its object `name`'s."""
    base = f"/apis/{res.group}/{res.version}" if res.group else f"/api/{res.version}"
    if namespace:
        base += f"/namespaces/{namespace}"
    base += f"/{res.plural}"
    return f"{base}/{name}" if name else base
