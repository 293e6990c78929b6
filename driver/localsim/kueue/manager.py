"""Kueue's manager as a child of the local cluster: its CRDs, a serving
certificate from the cluster's CA, the manager on loopback ports, then its
webhooks and the default queues (`trainium-dra up --with-kueue`)."""

import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from driver.localsim.clusterspec import ClusterPaths, ClusterSpec
from driver.localsim.controlplane.binaries import Binaries
from driver.localsim.controlplane.certs import issue_certificate
from driver.localsim.controlplane.chart import run
from driver.localsim.controlplane.children import Child, die_with_parent
from driver.localsim.controlplane.plane import ControlPlane, free_port
from driver.localsim.kueue import manifests
from driver.localsim.kueue.install import KueueInstall
from driver.localsim.kueue.privateetc import private_etc
from driver.localsim.kueue.queues import CLUSTER_QUEUE, in_cores, queue_objects, quotas
from driver.localsim.kueue.settings import (
    KueuePorts,
    configuration,
    device_class_mappings,
    transformations,
)

STATE_ENTRY = "kueue"
"""Kueue's directory in the state directory: config, certificates."""
START_TIMEOUT = 120.0


class KueueError(RuntimeError):
    """Kueue did not start; the message carries the tail of its log."""


@dataclass
class KueueProcess:
    """The running manager; dies with its parent (parent-death signal)."""

    child: Child
    ports: KueuePorts

    @property
    def metrics_address(self) -> str:
        """`host:port` of its HTTPS /metrics, served with the cluster-issued certificate."""
        return f"127.0.0.1:{self.ports.metrics}"

    def stop(self) -> None:
        self.child.stop()


def _spawn(install: KueueInstall, config_file: Path, cert_dir: Path, paths: ClusterPaths) -> Child:
    enter_private_etc = private_etc(cert_dir)

    def before_exec() -> None:
        enter_private_etc()
        die_with_parent()  # after the new credentials, which could clear it

    argv = [str(install.binary), f"--config={config_file}", f"--kubeconfig={paths.kubeconfig}"]
    log_path = paths.logs / "kueue.log"
    log = log_path.open("ab")
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            # Go's os/user, without cgo, needs $HOME; nothing is read from it.
            env={"HOME": str(config_file.parent)},
            preexec_fn=before_exec,  # noqa: PLW1509
        )
    except subprocess.SubprocessError as err:
        log.close()
        tail = log_path.read_text(errors="replace").splitlines()[-3:]
        raise KueueError(f"Kueue's manager did not start: {err}; {' '.join(tail)}") from err
    return Child("kueue", argv, log_path, process, log)


def _ready(child: Child, health_port: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if not child.alive():
            raise KueueError(
                f"kueue exited with code {child.process.returncode}; "
                f"log {child.log_path}:\n{child.log_tail()}"
            )
        try:
            if httpx.get(f"http://127.0.0.1:{health_port}/readyz", timeout=2.0).is_success:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    child.stop()
    raise KueueError(f"kueue not ready after {START_TIMEOUT:.0f}s:\n{child.log_tail()}")


def _apply(kubectl: list[str], objects: Iterable[Mapping[str, Any]]) -> None:
    run([*kubectl, "apply", "--server-side", "-f", "-"], yaml.safe_dump_all(list(objects)))


def start_kueue(
    paths: ClusterPaths,
    plane: ControlPlane,
    spec: ClusterSpec,
    device_classes: list[dict[str, Any]],
    progress: Callable[[str], None],
    *,
    quota_mode: str = "devices",
) -> KueueProcess:
    """Start Kueue on `plane` and install the default queues, whose device
    quotas are the extended resources `device_classes` name; returns once the
    ClusterQueue is Active."""
    install = KueueInstall.locate()
    workdir = paths.root / STATE_ENTRY
    cert_dir = workdir / "certs"
    certs = plane.config.certs
    issue_certificate(
        certs, "kueue", (), cert_dir / "tls.crt", cert_dir / "tls.key", hosts=("127.0.0.1",)
    )
    ports = KueuePorts(webhook=free_port(), metrics=free_port(), health=free_port())
    mappings = device_class_mappings(device_classes)
    counted, config = mappings, configuration(ports, cert_dir, mappings)
    if quota_mode == "cores":
        core, cores = in_cores(spec, mappings, spec.driver)
        counted = [m for m in mappings if m["name"] == core]
        config = configuration(ports, cert_dir, [], transformations(cores, core))
    config_file = workdir / "config.yaml"
    config_file.write_text(yaml.safe_dump(config))
    base_url = f"https://127.0.0.1:{ports.webhook}"
    ca_pem = certs.ca_cert.read_bytes()
    binaries = plane.binaries or Binaries.locate()
    kubectl = [str(binaries.kubectl), f"--kubeconfig={paths.kubeconfig}"]

    crds = manifests.crds(install, base_url, ca_pem)
    progress(f"installing Kueue's {len(crds)} CRDs ({install.directory})")
    _apply(kubectl, crds)
    names = [f"crd/{crd['metadata']['name']}" for crd in crds]
    run([*kubectl, "wait", "--for=condition=Established", "--timeout=60s", *names])

    progress(f"starting Kueue (webhooks on {base_url}, metrics on :{ports.metrics})")
    child = _spawn(install, config_file, cert_dir, paths)
    try:
        _ready(child, ports.health)
        _apply(kubectl, manifests.webhook_configurations(install, base_url, ca_pem))
        quota = quotas(spec, counted, spec.driver)
        _apply(kubectl, queue_objects(quota))
        active = ["wait", "--for=condition=Active", "--timeout=60s"]
        run([*kubectl, *active, f"clusterqueue/{CLUSTER_QUEUE}"])
    except BaseException:
        child.stop()
        raise
    progress("  queues: " + ", ".join(f"{name}={value}" for name, value in sorted(quota.items())))
    return KueueProcess(child, ports)
