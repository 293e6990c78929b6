"""LeaderWorkerSet's manager as a child of the local cluster
(localsim/addon/): its CRD, a serving certificate from the cluster's
CA, the manager on loopback ports, then its webhooks
(`trainium-dra up --with-lws`)."""

from collections.abc import Callable

from localsim.addon.manager import LocalManager, ManagerProcess
from localsim.controlplane.plane import ControlPlane
from localsim.lws.install import LwsInstall
from localsim.lws.settings import configuration
from localsim.paths import ClusterPaths


def start_lws(
    paths: ClusterPaths, plane: ControlPlane, progress: Callable[[str], None]
) -> ManagerProcess:
    """Start LeaderWorkerSet's manager on `plane`; returns once it is ready and
    its webhooks are installed, so LeaderWorkerSets can be created."""
    lws = LocalManager(LwsInstall.locate(), paths, plane)
    lws.issue_certificate()
    config_file = lws.write_config(configuration(lws.ports, lws.cert_dir))
    return lws.start([f"--config={config_file}"], progress)
