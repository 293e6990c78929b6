"""Every flag of `trainium-dra node`, in one place."""

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from driver.devicemodel.awsprofile import AWS_DRIVER
from driver.devicemodel.profiles import PROFILES, TRAINIUM, Profile
from driver.names import DEFAULT_DRIVER_NAME
from driver.node.sim.simaccess import SimControlError, check_token_needed, parse_address
from simdevice.topology import GENERATIONS

DEFAULT_SIM_CONTROL_SOCKET = "/var/lib/trainium-dra/sim-control.sock"


@dataclass(frozen=True)
class NodeSpec:
    name: str
    server_index: int | None  # None: found from the UltraServer objects at start


@dataclass(frozen=True)
class Flags:
    driver_name: str
    nodes: tuple[NodeSpec, ...]
    ultraserver: str
    generation: str
    kubelet_root: str  # may contain {node}
    state_dir: str  # may contain {node}
    cdi_dir: str  # may contain {node}
    pod_uid: str
    kubeconfig: Path | None
    http_address: str
    sim_control_address: str  # "" = no simulator controls
    sim_control_token_file: str
    workload_tcp: str
    health_interval: float
    health_timeout: int
    slice_cache_seconds: float
    grpc_workers: int
    log_level: str
    profile: Profile = TRAINIUM
    heartbeat_seconds: float = 0.0
    """0: no heartbeat Lease."""
    heartbeat_namespace: str = "default"


def node_spec(text: str) -> NodeSpec:
    name, sep, index = text.partition("=")
    if not name or (sep and not index.isdigit()):
        raise argparse.ArgumentTypeError(
            f"--node: {text!r} must be NAME or NAME=SERVER_INDEX, e.g. rack-a-node-3=3"
        )
    return NodeSpec(name, int(index) if sep else None)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="trainium-dra node",
        description="Node daemon: kubelet DRA plugin for simulated Trainium servers.",
    )
    env = os.environ.get
    p.add_argument(
        "--driver-name",
        default=None,
        help=f"DRA driver name (default: {DEFAULT_DRIVER_NAME}, or {AWS_DRIVER} with "
        "--profile aws)",
    )
    p.add_argument(
        "--profile",
        default="trainium",
        choices=sorted(PROFILES),
        help="the claims' config dialect and devices: trainium (this project's) or aws "
        "(AWS's Neuron DRA vocabulary, neuron.aws.com/v1 configs)",
    )
    p.add_argument(
        "--node",
        dest="nodes",
        action="append",
        type=node_spec,
        required=True,
        metavar="NAME[=SERVER_INDEX]",
        help="a simulated node and its server index in the UltraServer; without the index it "
        "is found from the UltraServer objects; repeat to host several",
    )
    p.add_argument(
        "--ultraserver",
        default="",
        help="UltraServer (rack) id of the nodes; required when indexes are given",
    )
    p.add_argument(
        "--generation",
        default="trn3-gen2",
        choices=GENERATIONS,
        help="rack generation when indexes are given (else the UltraServer's)",
    )
    p.add_argument(
        "--kubelet-root",
        default="/var/lib/kubelet",
        help="kubelet root dir; must contain {node} when hosting several nodes",
    )
    p.add_argument(
        "--state-dir",
        default="/var/lib/trainium-dra/{node}",
        help="checkpoint, tokens and workload socket; must contain {node} for several nodes",
    )
    p.add_argument(
        "--cdi-dir",
        default="/var/run/cdi",
        help="where CDI specs are written; must contain {node} when hosting several nodes",
    )
    p.add_argument(
        "--pod-uid",
        default=env("POD_UID", ""),
        help="this pod's UID: gives sockets unique names for rolling updates (env POD_UID)",
    )
    p.add_argument(
        "--kubeconfig",
        type=Path,
        default=env("KUBECONFIG"),
        help="default: in-cluster; may contain {node} to give each node its own credential",
    )
    p.add_argument(
        "--http-address",
        default="0.0.0.0:8080",
        help="HOST:PORT for /metrics, /healthz and /readyz (port 0 picks one)",
    )
    p.add_argument(
        "--sim-control-address",
        default=f"unix:{DEFAULT_SIM_CONTROL_SOCKET}",
        help="where the simulator's fault controls (/sim/v1) listen: unix:PATH (mode 0600), "
        "HOST:PORT, or '' for none; a non-loopback HOST needs --sim-control-token-file",
    )
    p.add_argument(
        "--sim-control-token-file",
        default="",
        help="file holding the bearer token every /sim/v1 request must carry",
    )
    p.add_argument(
        "--workload-tcp",
        default="",
        help="HOST:PORT to also serve the workload API over TCP (node i gets PORT+i)",
    )
    p.add_argument("--health-interval", type=float, default=0.5, help="seconds between checks")
    p.add_argument(
        "--health-timeout",
        type=int,
        default=30,
        help="health_check_timeout_seconds told to the kubelet",
    )
    p.add_argument(
        "--slice-cache-seconds",
        type=float,
        default=5.0,
        help="the longest a prepare waits for the ResourceSlice watch to bring in a device "
        "its claim names (0: answer from what the watch has brought)",
    )
    p.add_argument("--grpc-workers", type=int, default=4, help="threads per gRPC server")
    p.add_argument(
        "--heartbeat-seconds",
        type=float,
        default=0.0,
        help="renew each node's heartbeat Lease this often (0: none); the UltraServer "
        "operator reads it to tell a stopped daemon",
    )
    p.add_argument(
        "--heartbeat-namespace",
        default=env("POD_NAMESPACE") or "default",
        help="where the heartbeat Leases live (default: $POD_NAMESPACE or default)",
    )
    p.add_argument("--log-level", default="INFO")
    return p


def parse(argv: list[str]) -> Flags:
    p = parser()
    args = p.parse_args(argv)
    nodes = tuple(args.nodes)
    if len({n.name for n in nodes}) != len(nodes):
        p.error("--node: each node name may appear once")
    if len(nodes) > 1:
        for flag in ("kubelet_root", "state_dir", "cdi_dir"):
            if "{node}" not in getattr(args, flag):
                p.error(
                    f"--{flag.replace('_', '-')}: must contain {{node}} when hosting "
                    f"{len(nodes)} nodes, e.g. /tmp/sim/{{node}}/kubelet"
                )
    if any(n.server_index is not None for n in nodes) and not args.ultraserver:
        p.error("--ultraserver: required when --node gives a server index")
    if args.heartbeat_seconds < 0:
        p.error("--heartbeat-seconds: must be >= 0 (0: no heartbeat)")
    if args.health_interval <= 0:
        p.error("--health-interval: must be > 0 seconds")
    try:
        check_token_needed(parse_address(args.sim_control_address), args.sim_control_token_file)
    except SimControlError as err:
        p.error(str(err))
    return Flags(
        driver_name=args.driver_name or PROFILES[args.profile].default_driver,
        nodes=nodes,
        ultraserver=args.ultraserver,
        generation=args.generation,
        kubelet_root=args.kubelet_root,
        state_dir=args.state_dir,
        cdi_dir=args.cdi_dir,
        pod_uid=args.pod_uid,
        kubeconfig=args.kubeconfig,
        http_address=args.http_address,
        sim_control_address=args.sim_control_address,
        sim_control_token_file=args.sim_control_token_file,
        workload_tcp=args.workload_tcp,
        health_interval=args.health_interval,
        health_timeout=args.health_timeout,
        slice_cache_seconds=args.slice_cache_seconds,
        grpc_workers=args.grpc_workers,
        log_level=args.log_level,
        profile=PROFILES[args.profile],
        heartbeat_seconds=args.heartbeat_seconds,
        heartbeat_namespace=args.heartbeat_namespace,
    )
