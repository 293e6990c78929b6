"""LeaderWorkerSet's configuration file for the local cluster, as a pure
function of its loopback ports and certificate directory."""

from pathlib import Path
from typing import Any

from localsim.addon.ports import ManagerPorts

CLIENT_QPS = 500
"""As the local scheduler's: the apiserver serves this cluster alone."""


def configuration(ports: ManagerPorts, cert_dir: Path) -> dict[str, Any]:
    """The `config.lws.x-k8s.io/v1alpha1` Configuration: everything on
    127.0.0.1, one replica (no leader election), the webhook serving the
    certificate the cluster's CA issued in `cert_dir` rather than one of
    LeaderWorkerSet's own (which it would keep in a Secret for a Service)."""
    return {
        "apiVersion": "config.lws.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports.health}"},
        "metrics": {"bindAddress": f"127.0.0.1:{ports.metrics}"},
        "webhook": {"host": "127.0.0.1", "port": ports.webhook, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "clientConnection": {"qps": CLIENT_QPS, "burst": CLIENT_QPS},
    }
