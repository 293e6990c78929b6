"""Every flag of `trainium-dra ultraserver-operator`, in one place."""

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from driver.devicemodel.awsprofile import AWS_DRIVER

NAMESPACE_ENV = "POD_NAMESPACE"


@dataclass(frozen=True)
class Flags:
    kubeconfig: Path | None
    driver_name: str
    namespace: str
    resync_seconds: float
    http_address: str
    log_level: str


def parse(argv: list[str]) -> Flags:
    p = argparse.ArgumentParser(
        prog="trainium-dra ultraserver-operator",
        description="AWS's Neuron UltraServer operator, simulated: NeuronUltraServerWorkloads "
        "get whole UltraServers' nodes and a ResourceClaimTemplate (docs/aws-neuron.md).",
    )
    p.add_argument("--kubeconfig", type=Path, default=None, help="in-cluster config when absent")
    p.add_argument(
        "--driver-name", default=AWS_DRIVER, help=f"the DRA driver's name (default {AWS_DRIVER})"
    )
    p.add_argument(
        "--namespace",
        default=os.environ.get(NAMESPACE_ENV) or "default",
        help=f"where the NeuronUltraServers live (default: ${NAMESPACE_ENV} or default)",
    )
    p.add_argument(
        "--resync-seconds",
        type=float,
        default=10.0,
        help="a full pass at least this often, besides the passes watch events start",
    )
    p.add_argument(
        "--http-address", default="127.0.0.1:0", help="HOST:PORT of /metrics and /healthz"
    )
    p.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    a = p.parse_args(argv)
    if a.resync_seconds <= 0:
        p.error("--resync-seconds: must be positive")
    return Flags(
        a.kubeconfig, a.driver_name, a.namespace, a.resync_seconds, a.http_address, a.log_level
    )
