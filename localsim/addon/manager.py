"""A manager as a child of the local cluster: a serving certificate from the
cluster's CA, its CRDs (converting through it), the manager itself on loopback
ports, then its webhook configurations once it answers /readyz."""

import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from kubernetes import client

from driver.kubeapi.credentials import typed_client
from localsim.addon import manifests
from localsim.addon.install import ManagerInstall
from localsim.addon.ports import ManagerPorts
from localsim.controlplane.binaries import Binaries
from localsim.controlplane.certs import issue_certificate
from localsim.controlplane.chart import run
from localsim.controlplane.children import Child, die_with_parent
from localsim.controlplane.plane import ControlPlane, free_port
from localsim.paths import ClusterPaths

START_TIMEOUT = 120.0
ESTABLISHED_TIMEOUT = 60.0


class ManagerError(RuntimeError):
    """The manager did not start; the message carries the tail of its log."""


def free_ports() -> ManagerPorts:
    return ManagerPorts(webhook=free_port(), metrics=free_port(), health=free_port())


@dataclass
class ManagerProcess:
    """The running manager; dies with its parent (parent-death signal)."""

    child: Child
    ports: ManagerPorts

    @property
    def metrics_address(self) -> str:
        """`host:port` of its HTTPS /metrics."""
        return f"127.0.0.1:{self.ports.metrics}"

    def stop(self) -> None:
        self.child.stop()


@dataclass(frozen=True)
class LocalManager:
    """One manager's place beside a running cluster: its state directory
    `<state>/<NAME>/` (configuration, `certs/`), its log `<state>/logs/<NAME>.log`,
    the admin kubeconfig it and kubectl use."""

    install: ManagerInstall
    paths: ClusterPaths
    plane: ControlPlane
    ports: ManagerPorts = field(default_factory=free_ports)

    @property
    def name(self) -> str:
        return self.install.NAME

    @property
    def workdir(self) -> Path:
        return self.paths.root / self.name

    @property
    def cert_dir(self) -> Path:
        """`tls.crt` and `tls.key` for 127.0.0.1, issued by the cluster's CA."""
        return self.workdir / "certs"

    @property
    def base_url(self) -> str:
        """Where the apiserver calls its webhooks."""
        return f"https://127.0.0.1:{self.ports.webhook}"

    def issue_certificate(self) -> None:
        issue_certificate(
            self.plane.config.certs,
            self.name,
            (),
            self.cert_dir / "tls.crt",
            self.cert_dir / "tls.key",
            hosts=("127.0.0.1",),
        )

    def write_config(self, config: Mapping[str, Any]) -> Path:
        path = self.workdir / "config.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(dict(config)))
        return path

    def kubectl(self, *args: str, stdin: str | None = None) -> None:
        binaries = self.plane.binaries or Binaries.locate()
        run([str(binaries.kubectl), f"--kubeconfig={self.paths.kubeconfig}", *args], stdin)

    def apply(self, objects: Iterable[Mapping[str, Any]]) -> None:
        self.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(list(objects)))

    def start(
        self,
        args: list[str],
        progress: Callable[[str], None],
        *,
        before_exec: Callable[[], None] | None = None,
        then: Callable[[], None] | None = None,
    ) -> ManagerProcess:
        """Install the CRDs, start the binary with `args` and the admin
        kubeconfig, wait for /readyz on the health port, install the webhook
        configurations, then run `then`; a failure on the way stops the child.
        `before_exec` runs in the child before exec (before its parent-death
        signal is set, which new credentials would clear)."""
        ca_pem = self.plane.config.certs.ca_cert.read_bytes()
        title = self.install.TITLE
        crds = manifests.crds(self.install, self.base_url, ca_pem)
        progress(f"installing {title}'s {len(crds)} CRDs ({self.install.directory})")
        self.apply(crds)
        self._established([crd["metadata"]["name"] for crd in crds])

        metrics = self.ports.metrics
        progress(f"starting {title} (webhooks on {self.base_url}, metrics on :{metrics})")
        child = self._spawn(args, before_exec)
        try:
            self._ready(child)
            self.apply(manifests.webhook_configurations(self.install, self.base_url, ca_pem))
            if then is not None:
                then()
        except BaseException:
            child.stop()
            raise
        return ManagerProcess(child, self.ports)

    def _established(self, names: list[str]) -> None:
        """Until every CRD is Established. Polled rather than `kubectl wait`,
        which fails outright when it reads a CRD whose status has no
        conditions yet."""
        deadline = time.monotonic() + ESTABLISHED_TIMEOUT
        waiting = set(names)
        with typed_client(self.paths.kubeconfig) as api:
            extensions = client.ApiextensionsV1Api(api)

            def established(name: str) -> bool:
                status = extensions.read_custom_resource_definition(name).status
                conditions = (status.conditions if status else None) or []
                return any(c.type == "Established" and c.status == "True" for c in conditions)

            while waiting := {name for name in waiting if not established(name)}:
                if time.monotonic() > deadline:
                    raise ManagerError(
                        f"{self.install.TITLE}'s CRDs not Established after "
                        f"{ESTABLISHED_TIMEOUT:.0f}s: {', '.join(sorted(waiting))}"
                    )
                time.sleep(0.2)

    def _spawn(self, args: list[str], before_exec: Callable[[], None] | None) -> Child:
        def prepare() -> None:
            if before_exec is not None:
                before_exec()
            die_with_parent()

        argv = [str(self.install.binary), *args, f"--kubeconfig={self.paths.kubeconfig}"]
        log_path = self.paths.logs / f"{self.name}.log"
        log = log_path.open("ab")
        try:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # Go's os/user, without cgo, needs $HOME; nothing is read from it.
                env={"HOME": str(self.workdir)},
                preexec_fn=prepare,  # noqa: PLW1509
            )
        except subprocess.SubprocessError as err:
            log.close()
            tail = log_path.read_text(errors="replace").splitlines()[-3:]
            raise ManagerError(
                f"{self.install.TITLE}'s manager did not start: {err}; {' '.join(tail)}"
            ) from err
        return Child(self.name, argv, log_path, process, log)

    def _ready(self, child: Child) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        readyz = f"http://127.0.0.1:{self.ports.health}/readyz"
        while time.monotonic() < deadline:
            if not child.alive():
                raise ManagerError(
                    f"{self.name} exited with code {child.process.returncode}; "
                    f"log {child.log_path}:\n{child.log_tail()}"
                )
            try:
                if httpx.get(readyz, timeout=2.0).is_success:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise ManagerError(f"{self.name} not ready after {START_TIMEOUT:.0f}s:\n{child.log_tail()}")
