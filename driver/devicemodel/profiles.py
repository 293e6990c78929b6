"""The driver's profiles: the vocabularies in which it describes the same
simulated hardware. A profile is chosen once, by name (`--profile`, the
chart's `profile` value), and every part that differs by profile asks the
chosen `Profile` instead of comparing names.

`trainium`: this project's own model: core partitions, chips, servers and
whole racks as devices, one pool a rack (or a server), configs in
`trainium.sim.dev/v1alpha1`. `aws`: AWS's Neuron DRA vocabulary: whole chips,
an UltraServer node's `neuron_node` device and EFA interfaces, one pool a
node, configs in `neuron.aws.com/v1` (driver/devicemodel/awsprofile.py).
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from driver.devicemodel import awsprofile
from driver.names import API_GROUP, API_VERSION, DEFAULT_DRIVER_NAME

NEURON_CONFIG: Final = "NeuronConfig"
ULTRASERVER_CONFIG: Final = "UltraServerConfig"
CONFIG_KINDS: Final = (NEURON_CONFIG, ULTRASERVER_CONFIG)


@dataclass(frozen=True)
class ConfigDialect:
    """The claim-config format a profile accepts: the apiVersion of the opaque
    configs in a claim's `devices.config`, and the fields each kind may have."""

    api_version: str
    fields: Mapping[str, tuple[str, ...]]


NodeLabels = Callable[[str, str, int, str | None, int], dict[str, str]]
"""(rack name, generation, servers in the rack, instance type or None, server)
-> the labels a profile adds to that server's Node."""


@dataclass(frozen=True)
class Profile:
    name: str
    default_driver: str
    """The DRA driver name when none is given."""
    dialect: ConfigDialect
    per_node_devices: bool
    """True: whole chips (and node and EFA devices) in a pool per node, tainted
    by health as whole chips; False: the rack's layout of partitions."""
    takes_instance_types: bool
    """Whether racks name an EC2 instance type (`--instance-type`, `spec.instanceType`)."""
    names_extended_resources: bool
    """Whether its DeviceClasses carry extended resource names, which Kueue's quotas count."""
    node_labels: NodeLabels
    leader_worker_set: bool
    """Whether `trainium-dra up` runs LeaderWorkerSet's manager unless told
    `--without-lws`: the profile's UltraServer manifests are LeaderWorkerSets."""
    workload_tags: bool
    """True: the controller tags the devices of a node that AWS's UltraServer
    operator allocated (its NeuronUltraServers) with the allocation's
    `workloadId`, and the node daemon refuses a claim whose
    `neuron.aws.com/workload-id` label does not match the tag of its chips or
    node devices (EFA interfaces carry the tag but are not checked)."""


def _no_labels(
    rack: str, generation: str, servers: int, itype: str | None, server: int
) -> dict[str, str]:
    return {}


def _aws_labels(
    rack: str, generation: str, servers: int, itype: str | None, server: int
) -> dict[str, str]:
    """The labels AWS puts on an UltraServer's nodes, by which LeaderWorkerSet's
    exclusive topology keeps a group of 2 or 4 nodes in one UltraServer: the
    value names the node's pair or quad."""
    if not awsprofile.instance_type(generation, itype).ultraserver:
        return {}
    return {
        f"{awsprofile.ULTRASERVER_LABEL_PREFIX}{size}": f"{rack}-{server // size}"
        for size in (2, 4)
        if size <= servers
    }


TRAINIUM: Final = Profile(
    name="trainium",
    default_driver=DEFAULT_DRIVER_NAME,
    dialect=ConfigDialect(
        f"{API_GROUP}/{API_VERSION}",
        MappingProxyType(
            {
                NEURON_CONFIG: ("apiVersion", "kind", "logicalNeuronCore"),
                ULTRASERVER_CONFIG: ("apiVersion", "kind", "logicalNeuronCore"),
            }
        ),
    ),
    per_node_devices=False,
    takes_instance_types=False,
    names_extended_resources=True,
    node_labels=_no_labels,
    leader_worker_set=False,
    workload_tags=False,
)
AWS: Final = Profile(
    name="aws",
    default_driver=awsprofile.AWS_DRIVER,
    dialect=ConfigDialect(
        awsprofile.AWS_CONFIG_API,
        MappingProxyType(
            {
                NEURON_CONFIG: ("apiVersion", "kind", "logicalNeuronCore"),
                ULTRASERVER_CONFIG: ("apiVersion", "kind", "ultraserverMode"),
            }
        ),
    ),
    per_node_devices=True,
    takes_instance_types=True,
    names_extended_resources=False,
    node_labels=_aws_labels,
    leader_worker_set=True,
    workload_tags=True,
)
PROFILES: Final = MappingProxyType({p.name: p for p in (TRAINIUM, AWS)})
"""Profile name -> profile; the names `--profile` takes."""
