"""Kueue's manager as a child of the local cluster (localsim/addon/):
its CRDs, a serving certificate from the cluster's CA, the manager on loopback
ports in a private /etc, then its webhooks and the default queues
(`trainium-dra up --with-kueue`)."""

from collections.abc import Callable
from typing import Any

from localsim.addon.manager import LocalManager, ManagerProcess
from localsim.clusterspec import ClusterSpec
from localsim.controlplane.plane import ControlPlane
from localsim.kueue.install import KueueInstall
from localsim.kueue.privateetc import private_etc
from localsim.kueue.queues import CLUSTER_QUEUE, in_cores, queue_objects, quotas
from localsim.kueue.settings import configuration, device_class_mappings, transformations
from localsim.paths import ClusterPaths


def start_kueue(
    paths: ClusterPaths,
    plane: ControlPlane,
    spec: ClusterSpec,
    device_classes: list[dict[str, Any]],
    progress: Callable[[str], None],
    *,
    quota_mode: str = "devices",
) -> ManagerProcess:
    """Start Kueue on `plane` and install the default queues, whose device
    quotas are the extended resources `device_classes` name; returns once the
    ClusterQueue is Active."""
    kueue = LocalManager(KueueInstall.locate(), paths, plane)
    kueue.issue_certificate()
    mappings = device_class_mappings(device_classes)
    counted, config = mappings, configuration(kueue.ports, kueue.cert_dir, mappings)
    if quota_mode == "cores":
        core, cores = in_cores(spec, mappings, spec.driver)
        counted = [m for m in mappings if m["name"] == core]
        config = configuration(kueue.ports, kueue.cert_dir, [], transformations(cores, core))
    config_file = kueue.write_config(config)
    quota = quotas(spec, counted, spec.driver)

    def install_queues() -> None:
        kueue.apply(queue_objects(quota))
        kueue.kubectl(
            "wait", "--for=condition=Active", "--timeout=60s", f"clusterqueue/{CLUSTER_QUEUE}"
        )

    process = kueue.start(
        [f"--config={config_file}"],
        progress,
        before_exec=private_etc(kueue.cert_dir),
        then=install_queues,
    )
    progress("  queues: " + ", ".join(f"{name}={value}" for name, value in sorted(quota.items())))
    return process
