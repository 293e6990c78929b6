"""What a local cluster consists of, as plain data: racks, their nodes and
the UltraServer objects.

Pure: flags in, a `ClusterSpec` out, and from it names, labels and objects.
`standin/serve.py` and `realnodes/serve.py` do the I/O. Where the cluster
lives on disk is in `paths.py`; the command lines the stand-in runs the
driver's processes with are in `standin/argv.py`.
"""

import string
from dataclasses import dataclass
from typing import Any

from driver.devicemodel import awsprofile
from driver.devicemodel.layout import PARTITION_SIZES, POOL_LAYOUTS
from driver.devicemodel.profiles import PROFILES
from driver.devicemodel.ultraserver import DEFAULT_SERVER_INDEX_LABEL, DEVICE_MODES
from driver.names import API_GROUP, API_VERSION, DEFAULT_DRIVER_NAME
from simdevice.topology import GENERATIONS, TopologyError, rack_spec

RACK_LABEL = f"{API_GROUP}/ultraserver"
"""Node label the UltraServer's node selector reads; the server index label is
the spec's default one."""

MAX_RACKS = len(string.ascii_lowercase)


class ClusterSpecError(ValueError):
    """A flag value the cluster cannot be built from; names the flag and the fix."""


@dataclass(frozen=True)
class ClusterRack:
    """One rack the local cluster creates: its UltraServer's name, the
    generation and how many of its servers get a Node."""

    name: str
    generation: str
    servers: int  # servers in the rack
    nodes: int  # servers that get a Node (the first `nodes`)
    instance_type: str | None = None  # the aws profile's EC2 instance type; None: the default

    def node_name(self, server: int) -> str:
        return f"{self.name}-node-{server}"

    def node_names(self) -> list[str]:
        return [self.node_name(i) for i in range(self.nodes)]


def check_partition_sizes(sizes: tuple[int, ...]) -> None:
    """ClusterSpecError unless `sizes` are distinct partition sizes a rack can
    publish; `up` and `whatif` check --partition-sizes with this."""
    if not sizes or len(set(sizes)) != len(sizes) or not set(sizes) <= set(PARTITION_SIZES):
        raise ClusterSpecError(
            f"--partition-sizes: {','.join(map(str, sizes))} must be distinct sizes out of "
            f"{','.join(map(str, PARTITION_SIZES))}, e.g. 1,2"
        )


@dataclass(frozen=True)
class ClusterSpec:
    racks: tuple[ClusterRack, ...]
    device_mode: str = "partitioned"
    """The UltraServers' `spec.mode`: `partitioned` or `flat` (`--mode`)."""
    driver: str = DEFAULT_DRIVER_NAME
    pools: str = "rack"  # partitioned mode's pool layout
    partition_sizes: tuple[int, ...] | None = None
    """Core partitions the racks publish besides whole chips; None: every size."""
    profile: str = "trainium"

    @classmethod
    def build(
        cls,
        racks: int = 1,
        generation: str = "trn3-gen2",
        nodes_per_rack: int | None = None,
        device_mode: str = "partitioned",
        driver: str = DEFAULT_DRIVER_NAME,
        *,
        pools: str = "rack",
        partition_sizes: tuple[int, ...] | None = None,
        profile: str = "trainium",
        instance_types: tuple[str, ...] = (),
    ) -> "ClusterSpec":
        """Racks named rack-a, rack-b, ...; ClusterSpecError names the bad flag."""
        if generation not in GENERATIONS:
            raise ClusterSpecError(
                f"--generation: {generation!r} is not one of {', '.join(GENERATIONS)}"
            )
        if not 1 <= racks <= MAX_RACKS:
            raise ClusterSpecError(f"--racks: must be between 1 and {MAX_RACKS}, got {racks}")
        if device_mode not in DEVICE_MODES:
            raise ClusterSpecError(f"--mode: {device_mode!r} is not partitioned or flat")
        if pools not in POOL_LAYOUTS:
            raise ClusterSpecError(f"--pools: {pools!r} is not one of {', '.join(POOL_LAYOUTS)}")
        if pools != "rack" and device_mode != "partitioned":
            raise ClusterSpecError(f"--pools: {pools} needs --mode partitioned")
        if partition_sizes is not None:
            check_partition_sizes(partition_sizes)
            if device_mode != "partitioned":
                raise ClusterSpecError("--partition-sizes: needs --mode partitioned")
        try:
            servers = rack_spec(generation).servers
        except TopologyError as err:
            raise ClusterSpecError(f"--generation: {err}") from err
        if instance_types and not PROFILES[profile].takes_instance_types:
            takers = [p.name for p in PROFILES.values() if p.takes_instance_types]
            raise ClusterSpecError(f"--instance-type: needs --profile {' or '.join(takers)}")
        if len(instance_types) not in (0, 1, racks):
            raise ClusterSpecError(
                f"--instance-type: give one for every rack or one for all; {racks} racks, "
                f"{len(instance_types)} instance types"
            )
        for name in instance_types:
            try:
                awsprofile.instance_type(generation, name)
            except awsprofile.ProfileError as err:
                raise ClusterSpecError(
                    str(err).replace("spec.instanceType", "--instance-type")
                ) from err
        per_rack = list(instance_types) * racks if len(instance_types) == 1 else instance_types
        nodes = servers if nodes_per_rack is None else nodes_per_rack
        if not 1 <= nodes <= servers:
            raise ClusterSpecError(
                f"--nodes-per-rack: {generation} has {servers} servers; choose 1..{servers}, "
                f"got {nodes}"
            )
        cluster_racks = tuple(
            ClusterRack(
                f"rack-{string.ascii_lowercase[i]}",
                generation,
                servers,
                nodes,
                per_rack[i] if per_rack else None,
            )
            for i in range(racks)
        )
        return cls(cluster_racks, device_mode, driver, pools, partition_sizes, profile)

    def node_count(self) -> int:
        return sum(r.nodes for r in self.racks)

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.device_mode,
            "driver": self.driver,
            "pools": self.pools,
            "partitionSizes": list(self.partition_sizes) if self.partition_sizes else None,
            "profile": self.profile,
            "racks": [
                {
                    "name": r.name,
                    "generation": r.generation,
                    "servers": r.servers,
                    "nodes": r.nodes,
                    "instanceType": r.instance_type,
                }
                for r in self.racks
            ],
        }

    @property
    def ultraserver_operator(self) -> bool:
        """Whether the cluster runs AWS's UltraServer operator, simulated (its profile's)."""
        return PROFILES[self.profile].workload_tags

    def profile_labels(self, rack: ClusterRack, server: int) -> dict[str, str]:
        """The labels the cluster's profile adds to a server's Node."""
        return PROFILES[self.profile].node_labels(
            rack.name, rack.generation, rack.servers, rack.instance_type, server
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ClusterSpec":
        racks = tuple(
            ClusterRack(
                r["name"],
                r["generation"],
                int(r["servers"]),
                int(r["nodes"]),
                r.get("instanceType"),
            )
            for r in data["racks"]
        )
        sizes = data.get("partitionSizes")
        return cls(
            racks,
            str(data["mode"]),
            str(data["driver"]),
            str(data.get("pools", "rack")),
            tuple(int(n) for n in sizes) if sizes else None,
            str(data.get("profile", "trainium")),
        )


def node_labels(rack: ClusterRack, server: int) -> dict[str, str]:
    return {RACK_LABEL: rack.name, DEFAULT_SERVER_INDEX_LABEL: str(server)}


def ultraserver_object(
    rack: ClusterRack,
    device_mode: str,
    pools: str = "rack",
    partition_sizes: tuple[int, ...] | None = None,
) -> dict[str, Any]:
    """The rack's UltraServer: its nodes are found by label, so a partial rack works too."""
    layout: dict[str, Any] = {"pools": pools} if pools != "rack" else {}
    if partition_sizes is not None:
        layout["partitionSizes"] = list(partition_sizes)
    if rack.instance_type is not None:
        layout["instanceType"] = rack.instance_type
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": "UltraServer",
        "metadata": {"name": rack.name},
        "spec": {
            "generation": rack.generation,
            "mode": device_mode,
            **layout,
            "nodes": {
                "selector": {"matchLabels": {RACK_LABEL: rack.name}},
                "serverIndexLabel": DEFAULT_SERVER_INDEX_LABEL,
            },
        },
    }
