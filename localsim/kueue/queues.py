"""The queues `trainium-dra up --with-kueue` installs: one ResourceFlavor, one
ClusterQueue whose quota is the whole cluster, and a LocalQueue in `default`
that submits to it. Pure functions of the cluster's spec."""

import re
from collections.abc import Mapping
from typing import Any

from localsim.clusterspec import ClusterRack, ClusterSpec
from localsim.controlplane.plane import fake_node_status
from simdevice.topology import rack_spec

API_VERSION = "kueue.x-k8s.io/v1beta2"
RESOURCE_FLAVOR = "trainium"
CLUSTER_QUEUE = "trainium"
LOCAL_QUEUE = "trainium"
LOCAL_QUEUE_NAMESPACE = "default"
"""Stable names: docs/queues.md states them and other tools submit to them."""

NODE_RESOURCES = ("cpu", "memory")
"""What every pod asks for besides devices; a queue must cover what pods request."""


class QueueSpecError(ValueError):
    """A DeviceClass's extended resource has no count on this cluster."""


def devices_of(kind: str, rack: ClusterRack) -> int:
    """How many devices of `kind` the rack's Nodes hold: an extended resource of
    that kind's DeviceClass is counted in these."""
    spec = rack_spec(rack.generation)
    chips = rack.nodes * spec.chips_per_server
    counts = {
        "neuroncore": chips * spec.chip.cores,
        "chip": chips,
        "server": rack.nodes,
        "ultraserver": 1 if rack.nodes == rack.servers else 0,
    }
    if kind not in counts:
        raise QueueSpecError(
            f"DeviceClass kind {kind!r}: no quota for its extended resource; give only the "
            f"classes {', '.join(counts)} an extendedResourceName (chart value extendedResources)"
        )
    return counts[kind]


def cores_per_device(kind: str, generation: str) -> int:
    """The cores one device of `kind` holds on racks of `generation`."""
    spec = rack_spec(generation)
    per_kind = {
        "neuroncore": 1,
        "chip": spec.chip.cores,
        "server": spec.chips_per_server * spec.chip.cores,
        "ultraserver": spec.cores,
    }
    if kind not in per_kind:
        raise QueueSpecError(
            f"DeviceClass kind {kind!r}: its devices hold no whole number of cores to count"
        )
    return per_kind[kind]


def in_cores(
    spec: ClusterSpec, mappings: list[dict[str, Any]], driver: str
) -> tuple[str, dict[str, int]]:
    """For `--kueue-quota cores`: the single core's extended resource, and
    every mapped resource -> the cores one unit of it holds."""
    generations = {rack.generation for rack in spec.racks}
    if len(generations) != 1:
        raise QueueSpecError(
            "--kueue-quota cores: the racks are of generations "
            f"{', '.join(sorted(generations))}, whose servers hold different cores; "
            "use racks of one generation or --kueue-quota devices"
        )
    [generation] = generations
    cores: dict[str, int] = {}
    for mapping in mappings:
        for device_class in mapping["deviceClassNames"]:
            kind = device_class.removesuffix(f".{driver}")
            cores[mapping["name"]] = cores_per_device(kind, generation)
    single = [name for name, n in cores.items() if n == 1]
    if len(single) != 1:
        raise QueueSpecError(
            "--kueue-quota cores: no DeviceClass of single cores names an extended resource "
            "to count in; set the chart value extendedResources.core"
        )
    return single[0], cores


def scale_quantity(quantity: str, times: int) -> str:
    """`512Gi` x 36 -> `18432Gi`: a whole-number quantity with its suffix."""
    match = re.fullmatch(r"(\d+)([A-Za-z]*)", quantity)
    if match is None:
        raise QueueSpecError(f"quantity {quantity!r}: expected a whole number and a suffix")
    return f"{int(match.group(1)) * times}{match.group(2)}"


def quotas(
    spec: ClusterSpec,
    mappings: list[dict[str, Any]],
    driver: str,
    allocatable: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Resource name -> the cluster's whole amount: the devices each mapped
    DeviceClass (`<kind>.<driver>`) selects, and the Nodes' cpu and memory,
    each Node's `allocatable` (default: a stand-in Node's)."""
    nodes = sum(rack.nodes for rack in spec.racks)
    allocatable = allocatable or fake_node_status()["allocatable"]
    found = {name: scale_quantity(allocatable[name], nodes) for name in NODE_RESOURCES}
    for mapping in mappings:
        counts = set()
        for device_class in mapping["deviceClassNames"]:
            kind = device_class.removesuffix(f".{driver}")
            counts.add(sum(devices_of(kind, rack) for rack in spec.racks))
        if len(counts) != 1:
            raise QueueSpecError(
                f"extended resource {mapping['name']}: its DeviceClasses "
                f"{', '.join(mapping['deviceClassNames'])} count different devices; "
                "give each resource name to one DeviceClass"
            )
        found[mapping["name"]] = str(counts.pop())
    return found


def queue_objects(quota: Mapping[str, str]) -> list[dict[str, Any]]:
    """ResourceFlavor, ClusterQueue (every namespace, lower priority preempted
    within it) and the LocalQueue, in the order they can be created."""
    resources = sorted(quota)
    return [
        {
            "apiVersion": API_VERSION,
            "kind": "ResourceFlavor",
            "metadata": {"name": RESOURCE_FLAVOR},
        },
        {
            "apiVersion": API_VERSION,
            "kind": "ClusterQueue",
            "metadata": {"name": CLUSTER_QUEUE},
            "spec": {
                "namespaceSelector": {},
                "queueingStrategy": "BestEffortFIFO",
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": resources,
                        "flavors": [
                            {
                                "name": RESOURCE_FLAVOR,
                                "resources": [
                                    {"name": name, "nominalQuota": quota[name]}
                                    for name in resources
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": API_VERSION,
            "kind": "LocalQueue",
            "metadata": {"name": LOCAL_QUEUE, "namespace": LOCAL_QUEUE_NAMESPACE},
            "spec": {"clusterQueue": CLUSTER_QUEUE},
        },
    ]
