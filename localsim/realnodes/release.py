"""The Helm release of the real-node cluster: the chart installed with the
real `helm install`, the locally built image, and the cluster's UltraServers."""

import subprocess
from pathlib import Path
from typing import Any

import yaml

from localsim.clusterspec import ClusterSpec, ultraserver_object
from localsim.controlplane.binaries import Binaries
from localsim.controlplane.chart import CHART_DIR, NAMESPACE, RELEASE, helm_binary
from localsim.paths import ClusterPaths
from localsim.realnodes.netpolicy import policy_peers

VALUES = Path(__file__).resolve().parents[2] / "deploy" / "values" / "real-nodes.yaml"
INSTALL_TIMEOUT = "5m"


class ReleaseError(RuntimeError):
    """helm install failed; carries helm's message and where to look."""


def cluster_values(spec: ClusterSpec, repository: str, tag: str) -> dict[str, Any]:
    """What `up` sets on top of deploy/values/real-nodes.yaml (pure)."""
    return {
        "driverName": spec.driver,
        "profile": spec.profile,
        "image": {"repository": repository, "tag": tag},
        "networkPolicy": policy_peers(),
        "ultraserverOperator": {"enabled": spec.ultraserver_operator},
        "ultraservers": [
            {
                "name": rack.name,
                "spec": ultraserver_object(
                    rack,
                    spec.device_mode,
                    partition_sizes=spec.partition_sizes,
                )["spec"],
            }
            for rack in spec.racks
        ],
    }


def install(
    binaries: Binaries, paths: ClusterPaths, spec: ClusterSpec, repository: str, tag: str
) -> None:
    values = paths.root / "real-nodes-values.yaml"
    values.write_text(yaml.safe_dump(cluster_values(spec, repository, tag)))
    argv = [
        str(helm_binary(binaries)),
        "install",
        RELEASE,
        str(CHART_DIR),
        f"--kubeconfig={paths.kubeconfig}",
        f"--namespace={NAMESPACE}",
        "--create-namespace",
        f"--values={VALUES}",
        f"--values={values}",
        # legacy: until the Deployment and DaemonSet are ready. Helm's default
        # watcher also waits for every UltraServer to be Ready, which a partial
        # rack (--nodes-per-rack) never is.
        "--wait=legacy",
        f"--timeout={INSTALL_TIMEOUT}",
    ]
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ReleaseError(
            f"helm install {RELEASE} failed: {result.stderr.strip()}; see `kubectl -n {NAMESPACE} "
            f"get pods,events` and the kubelet logs in {paths.logs}/"
        )
