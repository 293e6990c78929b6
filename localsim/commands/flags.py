"""Every flag of `trainium-dra up`, `down`, `status` and `top`, in one place."""

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from driver.devicemodel.awsprofile import AWS_DRIVER, INSTANCE_TYPES
from driver.devicemodel.layout import POOL_LAYOUTS
from driver.devicemodel.profiles import PROFILES
from driver.names import DEFAULT_DRIVER_NAME
from localsim.clusterspec import ClusterSpec, ClusterSpecError, check_partition_sizes
from localsim.commands.upsettings import UpSettings
from localsim.kueue.settings import QUOTA_MODES as KUEUE_QUOTAS
from localsim.paths import ClusterPaths
from localsim.state import STATE_DIR_ENV, default_state_dir
from simdevice.topology import GENERATIONS


def _state_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help=f"where the cluster keeps its kubeconfig, sockets and logs "
        f"(default: ${STATE_DIR_ENV} or {default_state_dir()})",
    )


def parse_sizes(text: str | None) -> tuple[int, ...] | None:
    """`1,2` -> (1, 2), checked as `ClusterSpec.build` checks them;
    ClusterSpecError names the flag."""
    if text is None:
        return None
    try:
        sizes = tuple(int(n) for n in text.split(","))
    except ValueError as err:
        raise ClusterSpecError(f"--partition-sizes: {text!r}: write sizes as 1,2,4") from err
    check_partition_sizes(sizes)
    return sizes


def _layout(args: argparse.Namespace) -> ClusterPaths:
    return ClusterPaths((args.state_dir or default_state_dir()).absolute())


@dataclass(frozen=True)
class UpFlags:
    paths: ClusterPaths
    settings: UpSettings
    foreground: bool
    recreate: bool = False

    @property
    def spec(self) -> ClusterSpec:
        return self.settings.spec


def parse_up(argv: list[str]) -> UpFlags:
    p = argparse.ArgumentParser(
        prog="trainium-dra up",
        description="Start a local cluster: control plane, driver, simulated UltraServer nodes "
        "and a kubelet stand-in per node. It keeps running in the background.",
    )
    _state_dir(p)
    p.add_argument("--racks", type=int, default=1, help="UltraServer racks (default 1)")
    p.add_argument(
        "--generation",
        default=None,
        choices=GENERATIONS,
        help="rack generation (default trn3-gen2; trn3-gen1, 4 nodes, with --real-nodes)",
    )
    p.add_argument(
        "--nodes-per-rack",
        type=int,
        default=None,
        help="create Nodes for the first N servers only (default: all; a partial rack "
        "publishes no whole-rack device)",
    )
    p.add_argument("--mode", default="partitioned", choices=("partitioned", "flat"))
    p.add_argument(
        "--pools",
        default="rack",
        choices=POOL_LAYOUTS,
        help="partitioned mode's pool layout: one pool a rack (default), one a server plus "
        "the rack device's (node), or one a server and no rack device (server; "
        'docs/device-model.md, "Pool layouts")',
    )
    p.add_argument(
        "--partition-sizes",
        default=None,
        help="core partitions to publish besides whole chips, e.g. 1,2 (default: 1,2,4; "
        "the UltraServers' spec.partitionSizes)",
    )
    p.add_argument(
        "--profile",
        default="trainium",
        choices=sorted(PROFILES),
        help="trainium: this project's devices; aws: AWS's Neuron DRA vocabulary, so "
        "manifests written for EKS run unchanged (docs/aws-neuron.md)",
    )
    p.add_argument(
        "--instance-type",
        default=None,
        help="with --profile aws: the nodes' EC2 instance type, or one per rack separated by "
        f"commas, out of {', '.join(sorted(INSTANCE_TYPES))} (the first's generation is "
        "the default --generation); trn2.48xlarge makes standalone 16-chip instances",
    )
    p.add_argument(
        "--driver-name",
        default=None,
        help=f"DRA driver name (default: {DEFAULT_DRIVER_NAME}, or {AWS_DRIVER} with "
        "--profile aws)",
    )
    p.add_argument(
        "--foreground", action="store_true", help="run in this process until Ctrl-C or SIGTERM"
    )
    p.add_argument(
        "--recreate",
        action="store_true",
        help="if a cluster started with other flags is running in this state directory, "
        "stop it (as `trainium-dra down` does) and start one with these; without it `up` "
        "refuses and names the flags that differ",
    )
    p.add_argument(
        "--with-prometheus",
        action="store_true",
        help="also run Prometheus with the chart's rules, scraping the node daemons, the "
        "controller and the control plane, and with --real-nodes the kubelets "
        "(see docs/observability.md)",
    )
    p.add_argument(
        "--with-kueue",
        action="store_true",
        help="also run Kueue's manager in front of the scheduler, with a ClusterQueue and "
        "a LocalQueue in namespace default whose quotas are the cluster's cores and chips "
        "(`make kueue` builds it; see docs/queues.md)",
    )
    p.add_argument(
        "--kueue-quota",
        default=None,
        choices=KUEUE_QUOTAS,
        help="with --with-kueue, how its default ClusterQueue counts: devices (default: each "
        "extended resource against its own quota, claims from templates too) or cores "
        "(a chip, a server and an UltraServer asked by name count as their cores, against "
        "one quota of the cluster's cores; claims are not counted)",
    )
    lws = p.add_mutually_exclusive_group()
    lws.add_argument(
        "--with-lws",
        action="store_const",
        const=True,
        dest="with_lws",
        help="also run LeaderWorkerSet's controller beside the cluster, so manifests that "
        "run groups of pods as LeaderWorkerSets (AWS's UltraServer examples) run here; "
        "the default with --profile aws (`make lws` builds it; see docs/aws-neuron.md)",
    )
    lws.add_argument(
        "--without-lws",
        action="store_const",
        const=False,
        dest="with_lws",
        help="with --profile aws, start no LeaderWorkerSet controller",
    )
    p.add_argument(
        "--real-nodes",
        action="store_true",
        help="run a real kubelet, containerd and kube-proxy per node in its own network and "
        "mount namespaces, and install the Helm chart with the locally built image "
        "(root; see docs/real-nodes.md)",
    )
    args = p.parse_args(argv)
    itypes = tuple(t for t in (args.instance_type or "").split(",") if t)
    itype = INSTANCE_TYPES.get(itypes[0]) if itypes else None
    generation = args.generation or (
        itype.generation if itype else "trn3-gen1" if args.real_nodes else "trn3-gen2"
    )
    profile = PROFILES[args.profile]
    driver = args.driver_name or profile.default_driver
    if args.real_nodes and os.geteuid() != 0:
        p.error("--real-nodes: needs root (network and mount namespaces, cgroups); run as root")
    if args.kueue_quota and not args.with_kueue:
        p.error("--kueue-quota: only with --with-kueue")
    if args.with_kueue and args.real_nodes:
        p.error("--with-kueue: runs beside the kubelet stand-ins only; leave out --real-nodes")
    if args.with_kueue and not profile.names_extended_resources:
        p.error(
            f"--with-kueue: the {profile.name} profile's DeviceClasses name no extended "
            f"resources to set quotas in; leave out --profile {profile.name}"
        )
    try:
        spec = ClusterSpec.build(
            args.racks,
            generation,
            args.nodes_per_rack,
            args.mode,
            driver,
            pools=args.pools,
            partition_sizes=parse_sizes(args.partition_sizes),
            profile=args.profile,
            instance_types=itypes,
        )
    except ClusterSpecError as err:
        p.error(str(err))
    settings = UpSettings(
        spec,
        args.real_nodes,
        args.with_prometheus,
        args.with_kueue,
        args.kueue_quota or "devices",
        with_lws=profile.leader_worker_set if args.with_lws is None else args.with_lws,
    )
    return UpFlags(_layout(args), settings, args.foreground, args.recreate)


def parse_down(argv: list[str]) -> ClusterPaths:
    p = argparse.ArgumentParser(
        prog="trainium-dra down",
        description="Stop the local cluster started by `trainium-dra up` and remove its state.",
    )
    _state_dir(p)
    return _layout(p.parse_args(argv))


def parse_status(argv: list[str]) -> ClusterPaths:
    p = argparse.ArgumentParser(
        prog="trainium-dra status",
        description="Racks, devices by kind, allocations by claim and unhealthy devices.",
    )
    _state_dir(p)
    return _layout(p.parse_args(argv))


@dataclass(frozen=True)
class TopFlags:
    paths: ClusterPaths
    rack: str | None
    interval: float
    iterations: int | None


def parse_top(argv: list[str]) -> TopFlags:
    p = argparse.ArgumentParser(
        prog="trainium-dra top",
        description="Live per-core utilization of a rack, refreshed in the terminal.",
    )
    _state_dir(p)
    p.add_argument("--rack", default=None, help="rack to show (default: the first)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between refreshes")
    p.add_argument(
        "--iterations", type=int, default=None, help="stop after N refreshes (default: Ctrl-C)"
    )
    args = p.parse_args(argv)
    if args.interval <= 0:
        p.error("--interval: must be > 0 seconds")
    if args.iterations is not None and args.iterations < 1:
        p.error("--iterations: must be at least 1")
    return TopFlags(_layout(args), args.rack, args.interval, args.iterations)
