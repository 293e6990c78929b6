"""The ResourceSlices each layout of the scheduler benchmark publishes.

Pure: node names in, slice objects out. Our layouts come from the
controller's own builder (`build_slices`), so the scheduler sees exactly what
the controller would publish (partitioned in both pool layouts, and flat);
the other two are shapes other drivers use:

- per-node pools: the flat layout's devices regrouped the way the AWS Neuron
  driver publishes (one pool and one slice per node, `spec.nodeName`, no
  counters, topology in attributes only);
- calibration: the shape of upstream's scheduler_perf DRA tests (one pool per
  node of a few generic devices, a class that matches the driver only).
"""

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Final

from driver.controller.slices import build_slices
from driver.devicemodel.blocking import blocked_devices
from driver.devicemodel.layout import PARTITION_SIZES, LayoutOptions, build_layout
from driver.devicemodel.nodemap import HOSTNAME_LABEL, map_nodes
from driver.devicemodel.poolplan import RackInput
from driver.devicemodel.ultraserver import DEFAULT_SERVER_INDEX_LABEL, parse_spec
from driver.jsontypes import JSON
from driver.names import DEFAULT_DRIVER_NAME
from localsim.clusterspec import RACK_LABEL
from simdevice.topology import rack_spec

RACK: Final = "bench-sched"
GENERATION: Final = "trn3-gen2"
CALIBRATION_DRIVER: Final = "test-driver.cdi.k8s.io"
CALIBRATION_CLASS: Final = "test-class"
CALIBRATION_TEMPLATE: Final = "test-claim-template"


def rack_nodes(rack: int = 0) -> list[str]:
    """The node names of one rack, in server order."""
    return [f"bench-r{rack:03d}-s{s:02d}" for s in range(rack_spec(GENERATION).servers)]


def fleet_rack_name(rack: int) -> str:
    return RACK if rack == 0 else f"{RACK}-{rack:03d}"


def node_labels(rack: str, server: int) -> dict[str, str]:
    """The labels a benchmark node carries: its racks map nodes by label, as
    the local cluster's do, so the rack device selects its nodes by one label."""
    return {RACK_LABEL: rack, DEFAULT_SERVER_INDEX_LABEL: str(server)}


def _rack_input(
    nodes: Sequence[str],
    mode: str,
    pools: str = "rack",
    name: str = RACK,
    sizes: tuple[int, ...] = PARTITION_SIZES,
    *,
    advertised: bool = True,
    publishing: str = "plain",
    allocated: frozenset[str] = frozenset(),
    withheld: frozenset[str] = frozenset(),
) -> RackInput:
    obj = {
        "metadata": {"name": name},
        "spec": {
            "generation": GENERATION,
            "mode": mode,
            "nodes": {"selector": {"matchLabels": {RACK_LABEL: name}}},
        },
    }
    spec = parse_spec(obj)
    labels = {n: {HOSTNAME_LABEL: n, **node_labels(name, i)} for i, n in enumerate(nodes)}
    mapping = map_nodes(spec, labels)
    return RackInput(
        name=name,
        rack=spec.rack,
        mode=mode,
        flat_device="core",
        nodes=mapping.nodes,
        rack_nodes=mapping.rack_nodes,
        taints={},
        binding_conditions=spec.fabric.binding_conditions,
        layout=LayoutOptions(pools, sizes),
        rack_advertised=advertised,
        publishing=publishing,
        allocated=allocated,
        withheld=withheld,
    )


def _size(device: JSON) -> int:
    return int(device["attributes"]["coreCount"]["int"])


def _chip(device: JSON) -> int:
    """The device's chip on its node; whole-server devices sort after every chip."""
    chip = device["attributes"].get("chipIndex")
    return int(chip["int"]) if chip else 1 << 30


DeviceOrder = Callable[[list[JSON]], list[JSON]]

DEVICE_ORDERS: Final[dict[str, DeviceOrder]] = {
    "chip-major-small-first": lambda ds: sorted(ds, key=lambda d: (_chip(d), _size(d))),
    "size-major": lambda ds: sorted(ds, key=lambda d: (_size(d), _chip(d))),
    "chip-major-large-first": lambda ds: sorted(ds, key=lambda d: (_chip(d), -_size(d))),
}
"""Device orders tried inside each server slice (sorts are stable, so devices
of one size on one chip keep their core order)."""
DRIVER_ORDER: Final = "chip-major-small-first"
"""The order `build_layout` publishes; the others are tried against it."""


def partitioned_slices(nodes: Sequence[str], order: str | None = None) -> list[JSON]:
    """The controller's partitioned slices; `order` re-sorts each server slice's devices."""
    slices = build_slices(_rack_input(nodes, "partitioned"), DEFAULT_DRIVER_NAME)
    if order is not None:
        for s in slices:
            devices = s["spec"].get("devices")
            if devices and len(devices) > 1:
                s["spec"]["devices"] = DEVICE_ORDERS[order](devices)
    return slices


def node_pool_slices(
    nodes: Sequence[str], name: str = RACK, *, advertised: bool = True
) -> list[JSON]:
    """The controller's partitioned slices in the `node` pool layout; without
    the rack device unless `advertised`."""
    return build_slices(
        _rack_input(nodes, "partitioned", "node", name, advertised=advertised), DEFAULT_DRIVER_NAME
    )


def server_pool_slices(nodes: Sequence[str], name: str = RACK) -> list[JSON]:
    """The controller's partitioned slices in the `server` pool layout (no rack device)."""
    return build_slices(_rack_input(nodes, "partitioned", "server", name), DEFAULT_DRIVER_NAME)


def ordered_slices(
    nodes: Sequence[str],
    name: str,
    pools: str,
    allocated: frozenset[str],
    *,
    advertised: bool = True,
) -> list[JSON]:
    """The controller's partitioned slices in `pools` as `--publishing order`
    writes them while `allocated` are held: the builder orders each slice with
    `blocking.device_order`, blocked devices after the free ones."""
    return build_slices(
        _rack_input(
            nodes,
            "partitioned",
            pools,
            name,
            advertised=advertised,
            publishing="order",
            allocated=allocated,
        ),
        DEFAULT_DRIVER_NAME,
    )


def available_slices(
    nodes: Sequence[str],
    name: str,
    pools: str,
    allocated: frozenset[str],
    *,
    advertised: bool = True,
) -> list[JSON]:
    """The controller's partitioned slices in `pools` with every device the
    `allocated` ones block withdrawn (`blocking.blocked_devices`): what
    availability-aware publishing would show the scheduler once settled."""
    inp = _rack_input(nodes, "partitioned", pools, name, advertised=advertised)
    return build_slices(
        replace(inp, withheld=blocked_devices(build_layout(inp.rack, inp.layout), allocated)),
        DEFAULT_DRIVER_NAME,
    )


def flat_slices(nodes: Sequence[str], name: str = RACK) -> list[JSON]:
    """The controller's flat slices of single-core devices: one rack-wide pool."""
    return build_slices(_rack_input(nodes, "flat", name=name), DEFAULT_DRIVER_NAME)


def per_node_slice(node: str, devices: list[JSON]) -> JSON:
    """A pool of its own for `node`, in one `spec.nodeName` slice."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}.{DEFAULT_DRIVER_NAME}"},
        "spec": {
            "driver": DEFAULT_DRIVER_NAME,
            "pool": {"name": node, "generation": 0, "resourceSliceCount": 1},
            "nodeName": node,
            "devices": devices,
        },
    }


def per_node_pool_slices(nodes: Sequence[str], name: str = RACK) -> list[JSON]:
    """The flat devices, one pool and one `spec.nodeName` slice per node."""
    return [
        per_node_slice(
            s["spec"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"][0],
            s["spec"]["devices"],
        )
        for s in flat_slices(nodes, name)
    ]


KEEPING_APART: Final = ("consumesCounters", "bindingConditions", "bindingFailureConditions")


def advertised_rack_slices(nodes: Sequence[str], name: str = RACK) -> list[JSON]:
    """The `node` pool layout with a window of one advertised rack: only the
    fleet's first rack publishes its rack device, as the controller does when
    every rack is free."""
    return [s for s in node_pool_slices(nodes, name) if name == RACK or "nodeName" in s["spec"]]


def same_device_pool_slices(nodes: Sequence[str], name: str = RACK) -> list[JSON]:
    """The node pool layout's server devices in the per-node shape, without
    what keeps them apart (counters, binding conditions) and without the rack
    device: what our devices would cost the scheduler if nothing had to."""
    return [
        per_node_slice(
            s["spec"]["nodeName"],
            [{k: v for k, v in d.items() if k not in KEEPING_APART} for d in s["spec"]["devices"]],
        )
        for s in node_pool_slices(nodes, name)
        if "nodeName" in s["spec"] and "devices" in s["spec"]
    ]


FLEET_LAYOUTS: Final[dict[str, Callable[[Sequence[str], str], list[JSON]]]] = {
    "rack pools": lambda nodes, name: build_slices(
        _rack_input(nodes, "partitioned", "rack", name), DEFAULT_DRIVER_NAME
    ),
    "node pools": node_pool_slices,
    "node pools (one rack advertised)": advertised_rack_slices,
    "node pools (1-core)": lambda nodes, name: build_slices(
        _rack_input(nodes, "partitioned", "node", name, (1,)), DEFAULT_DRIVER_NAME
    ),
    "server pools": server_pool_slices,
    "per-node pools": per_node_pool_slices,
    "per-node pools (same devices)": same_device_pool_slices,
}
"""The layouts measured at 1, 10 and 100 racks: ours in the three pool
layouts, node pools with single-core partitions only (besides chips and
servers), and two per-node anchors: the same single cores, and the same devices as the node
pools without counters."""


def fleet_slices(racks: int, layout: str) -> list[JSON]:
    """Every slice of `racks` racks in one layout."""
    return [
        s for r in range(racks) for s in FLEET_LAYOUTS[layout](rack_nodes(r), fleet_rack_name(r))
    ]


def calibration_nodes(count: int) -> list[str]:
    return [f"scheduler-perf-dra-{i:04d}" for i in range(count)]


def calibration_slices(nodes: Sequence[str], devices_per_node: int) -> list[JSON]:
    """One pool per node of `devices_per_node` generic devices with four
    attributes and one capacity, as upstream's scheduler_perf driver publishes."""
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": node},
            "spec": {
                "driver": CALIBRATION_DRIVER,
                "pool": {"name": node, "generation": 0, "resourceSliceCount": 1},
                "nodeName": node,
                "devices": [
                    {
                        "name": f"instance-{i}",
                        "attributes": {
                            "model": {"string": "A100"},
                            "family": {"string": "GPU"},
                            "driverVersion": {"version": "1.2.3"},
                            "dra.example.com/numa": {"int": i},
                        },
                        "capacity": {"memory": {"value": "1Gi"}},
                    }
                    for i in range(devices_per_node)
                ],
            },
        }
        for node in nodes
    ]


def calibration_objects() -> list[JSON]:
    """The class and claim template the calibration pods use (namespace set by the caller)."""
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": CALIBRATION_CLASS},
            "spec": {
                "selectors": [{"cel": {"expression": f'device.driver == "{CALIBRATION_DRIVER}"'}}]
            },
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": CALIBRATION_TEMPLATE},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "req-0", "exactly": {"deviceClassName": CALIBRATION_CLASS}}
                        ]
                    }
                }
            },
        },
    ]
