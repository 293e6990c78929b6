"""Names shared by the controller and the node daemon."""

import importlib.metadata
from typing import Final

DEFAULT_DRIVER_NAME: Final = "trainium.sim.dev"
"""DRA driver name; configurable so the simulator can run beside a real driver."""

API_GROUP: Final = "trainium.sim.dev"
"""Group of the UltraServer CRD and of the opaque claim configuration."""

API_VERSION: Final = "v1alpha1"

DEVICE_KINDS: Final = ("core", "chip", "server", "ultraserver")
"""Device kinds published per rack, smallest first."""

WHOLE_BY_NAME: Final = {
    "extendedResources.server": "trainium.sim.dev/server",
    "extendedResources.ultraserver": "trainium.sim.dev/ultraserver",
}
"""Chart values naming a whole server and a whole UltraServer as extended
resources, which the local cluster sets when Kueue runs: Kueue counts what
pods request, and a claim by name is no request."""


def rack_label(driver: str) -> str:
    """The label on every ResourceSlice of a rack; its value is the UltraServer's name."""
    return f"{driver}/ultraserver"


def device_class_name(kind: str | None = None, driver: str = DEFAULT_DRIVER_NAME) -> str:
    """`<kind>.<driver>` for one kind, or the driver name itself for any device."""
    return driver if kind is None else f"{kind}.{driver}"


def driver_version() -> str:
    """This driver's own version, the installed package's."""
    return importlib.metadata.version("trainium-dra")


HEARTBEAT_LABEL: Final = "app.kubernetes.io/component=node-heartbeat"
"""The label (key=value) on each node daemon's heartbeat Lease."""
HEARTBEAT_MISSES: Final = 4
"""A heartbeat Lease lasts this many renewals: one late write is no silence."""


def heartbeat_lease(node: str) -> str:
    """The name of `node`'s heartbeat Lease, in the daemon's namespace."""
    return f"trainium-dra-node.{node}"
