"""Every flag of `trainium-dra controller`, in one place."""

import argparse
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from driver.devicemodel.awsprofile import AWS_DRIVER
from driver.devicemodel.blocking import PUBLISHING
from driver.devicemodel.profiles import PROFILES, TRAINIUM, Profile
from driver.devicemodel.rackguard import DEFAULT_SETTLE_SECONDS
from driver.names import DEFAULT_DRIVER_NAME


@dataclass(frozen=True)
class Flags:
    kubeconfig: Path | None
    driver_name: str
    lease_namespace: str
    lease_name: str
    lease_seconds: int
    identity: str
    workers: int
    resync_seconds: float
    http_address: str
    log_level: str
    rack_settle_seconds: float = DEFAULT_SETTLE_SECONDS
    advertised_racks: int = 0
    profile: Profile = TRAINIUM
    publishing: str = "plain"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="trainium-dra controller",
        description="Publish ResourceSlices for UltraServer racks and keep their status.",
    )
    p.add_argument(
        "--kubeconfig",
        type=Path,
        default=None,
        help="kubeconfig file; in-cluster config when absent",
    )
    p.add_argument(
        "--driver-name",
        default=None,
        help=f"DRA driver name in every slice (default: {DEFAULT_DRIVER_NAME}, "
        f"or {AWS_DRIVER} with --profile aws)",
    )
    p.add_argument(
        "--profile",
        default="trainium",
        choices=sorted(PROFILES),
        help="trainium: this project's devices (partitions, servers, racks); aws: AWS's "
        "Neuron DRA vocabulary (docs/aws-neuron.md)",
    )
    p.add_argument(
        "--lease-namespace", default="default", help="namespace of the leader-election Lease"
    )
    p.add_argument(
        "--lease-name", default=None, help="Lease name (default: <driver-name>-controller)"
    )
    p.add_argument(
        "--lease-seconds", type=int, default=15, help="Lease duration; renewed every third of it"
    )
    p.add_argument(
        "--identity", default=None, help="this replica's Lease identity (default: host-pid)"
    )
    p.add_argument("--workers", type=int, default=4, help="racks reconciled in parallel")
    p.add_argument(
        "--resync-seconds",
        type=float,
        default=300.0,
        help="period of the full resync (relist and reconcile every rack)",
    )
    p.add_argument(
        "--http-address",
        default="0.0.0.0:8081",
        help="HOST:PORT for /metrics, /healthz and /readyz (port 0 picks one)",
    )
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument(
        "--rack-settle-seconds",
        type=float,
        default=DEFAULT_SETTLE_SECONDS,
        help="node pool layout: how long the rack-claimed taints stand before a rack device binds",
    )
    p.add_argument(
        "--advertised-racks",
        type=int,
        default=0,
        help="node pool layout: publish the rack device of at most this many free racks "
        "(first by name; 0: every free rack); each costs the scheduler a node-selector "
        "match per node and pod",
    )
    p.add_argument(
        "--publishing",
        default="plain",
        choices=PUBLISHING,
        help="plain: each partitioned slice lists its devices in layout order; order: "
        "devices that allocated ones block are listed after the free ones, so the "
        "scheduler stops at a free device first (docs/device-model.md)",
    )
    return p


def parse(argv: list[str]) -> Flags:
    p = parser()
    a = p.parse_args(argv)
    if a.workers < 1:
        p.error("--workers: must be at least 1")
    if a.lease_seconds < 3:
        p.error("--lease-seconds: must be at least 3")
    if a.resync_seconds <= 0:
        p.error("--resync-seconds: must be positive")
    if not 0 <= a.rack_settle_seconds <= 60:
        p.error("--rack-settle-seconds: must be from 0 to 60")
    if a.advertised_racks < 0:
        p.error("--advertised-racks: must be 0 (every free rack) or more")
    profile = PROFILES[a.profile]
    driver = a.driver_name or profile.default_driver
    return Flags(
        kubeconfig=a.kubeconfig,
        driver_name=driver,
        lease_namespace=a.lease_namespace,
        lease_name=a.lease_name or f"{driver}-controller",
        lease_seconds=a.lease_seconds,
        identity=a.identity or f"{socket.gethostname()}-{os.getpid()}",
        workers=a.workers,
        resync_seconds=a.resync_seconds,
        http_address=a.http_address,
        log_level=a.log_level,
        rack_settle_seconds=a.rack_settle_seconds,
        advertised_racks=a.advertised_racks,
        profile=profile,
        publishing=a.publishing,
    )
