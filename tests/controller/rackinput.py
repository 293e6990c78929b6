"""A whole rack's input to the slice builder, for the tests of what busy-fleet
publishing (blocked devices ordered last or withheld) changes in its slices."""

from driver.devicemodel.layout import LayoutOptions
from driver.devicemodel.poolplan import RackInput
from driver.jsontypes import JSON
from simdevice.topology import RackSpec

DRIVER = "d.dev"
SELECTOR = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Exists"}]}]}


def rack_input(
    rack: RackSpec,
    pools: str,
    *,
    publishing: str = "plain",
    allocated: frozenset[str] = frozenset(),
    withheld: frozenset[str] = frozenset(),
) -> RackInput:
    """Every server with a node, partitioned in the `pools` layout; no taints,
    no binding conditions."""
    return RackInput(
        "r",
        rack,
        "partitioned",
        "chip",
        {s: f"n{s}" for s in range(rack.servers)},
        SELECTOR,
        {},
        False,
        layout=LayoutOptions(pools),
        publishing=publishing,
        allocated=allocated,
        withheld=withheld,
    )


def device_names(s: JSON) -> list[str]:
    return [d["name"] for d in s["spec"].get("devices") or []]


def beside_devices(slices: list[JSON]) -> list[tuple[str, JSON]]:
    """Each slice's name and spec but its devices: what ordering or
    withholding devices leaves as it was."""
    return [
        (s["metadata"]["name"], {k: v for k, v in s["spec"].items() if k != "devices"})
        for s in slices
    ]
