"""A real Kubernetes control plane as local processes: etcd, kube-apiserver,
kube-controller-manager and kube-scheduler on loopback ports.

The command lines are pure functions of a `ControlPlaneConfig`; `ControlPlane`
starts the processes, waits until each is ready and stops them all again.
Every child gets a parent-death signal, so none outlives the process that
started it, even when that process is killed.
"""

import base64
import contextlib
import datetime
import functools
import secrets
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from kubernetes import client as k8s

from driver.kubeapi.credentials import typed_client
from driver.names import DEFAULT_DRIVER_NAME
from localsim.controlplane import chart
from localsim.controlplane.binaries import Binaries, k8s_version
from localsim.controlplane.certs import CertFiles, issue_certificate, write_certs
from localsim.controlplane.children import Child
from localsim.controlplane.k8srelease import DEFAULT, Release, release_of
from localsim.controlplane.schedulerconfig import (
    SCHEDULER_CONFIG,
    chart_profiles,
    configuration,
)

CONTROLLERS = (
    "resourceclaim-controller",
    "deployment-controller",
    "device-taint-eviction-controller",
    "garbage-collector-controller",
    "job-controller",
    "namespace-controller",
    "podgroup-protection-controller",
    "replicaset-controller",
    "resourcequota-controller",
    "serviceaccount-controller",
    "statefulset-controller",
)
"""Controllers the driver relies on, plus Jobs, Deployments and StatefulSets
for users' workloads (AWS's examples use Deployments; LeaderWorkerSet, `up
--with-lws`, runs each group's leader and workers as StatefulSets), the
PodGroup finalizer (a deleted PodGroup otherwise never goes, and neither does
the claim reserved for it) and ResourceQuota usage (quota admission refuses
everything in a namespace whose quota has no status yet); notably no
node-lifecycle controller, so fake Nodes stay Ready without a kubelet."""

REAL_NODE_CONTROLLERS = (
    *CONTROLLERS,
    "daemonset-controller",
    "endpointslice-controller",
    "root-ca-certificate-publisher-controller",
    "pod-garbage-collector-controller",
    "node-lifecycle-controller",
)
"""With real kubelets the chart's Deployment and DaemonSet run as pods, the
daemon's Service needs endpoints and every pod's token volume needs the
`kube-root-ca.crt` ConfigMap; the node lifecycle controller lifts the
not-ready taint a node is created with, and sets it again when a kubelet stops."""

SERVICE_CIDR = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
APISERVER_KUBELET_CLIENT = "kube-apiserver-kubelet-client"

ADMIN_USER = "admin"
SCHEDULER_USER = "system:kube-scheduler"
CONTROLLER_MANAGER_USER = "system:kube-controller-manager"

START_TIMEOUT = 120.0


class ControlPlaneError(RuntimeError):
    """A component did not start; the message carries the tail of its log."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int

    @classmethod
    def pick(cls) -> "Ports":
        return cls(free_port(), free_port(), free_port(), free_port(), free_port())


CLIENT_QPS = 500
"""Client QPS and burst of the local scheduler and controller-manager. Their
own defaults (50 and 20) guard a shared production apiserver; here the
apiserver serves the local cluster alone, and with several requests per
bound pod and per deleted claim those limits, not the driver, would set how
fast a rack fills and empties."""


@dataclass(frozen=True)
class ControlPlaneConfig:
    """Everything the command lines depend on."""

    workdir: Path
    ports: Ports
    release: Release = DEFAULT
    """The release of the binaries: which gates exist and which APIs to serve."""
    gate_overrides: Mapping[str, bool] = field(default_factory=dict)
    """Gates set otherwise than the release's table says, e.g. one turned off by a test."""
    address: str = "127.0.0.1"
    """Where the apiserver listens; real nodes reach it on their bridge's gateway."""
    real_nodes: bool = False
    """Real kubelets join: Node authorizer, ServiceAccount admission, pod controllers."""
    scheduler_qps: int | None = CLIENT_QPS
    """The scheduler's client QPS and burst; None keeps its defaults."""
    controller_manager_qps: int = CLIENT_QPS
    """The controller-manager's client QPS and burst."""
    scheduler_profiling: bool = False
    """Serve /debug/pprof on the scheduler's secure port."""
    storage_only: bool = False
    """etcd and kube-apiserver alone: a publishing benchmark at 100 racks, where
    the scheduler's and the controller-manager's caches of every slice would
    take gigabytes the benchmark does not measure."""

    @property
    def feature_gates(self) -> dict[str, bool]:
        """The gates the driver's features need (all on), with the overrides;
        the same set goes to every component (docs/scheduling.md)."""
        return {**self.release.feature_gates, **self.gate_overrides}

    @property
    def url(self) -> str:
        return f"https://{self.address}:{self.ports.apiserver}"

    @property
    def serving_hosts(self) -> tuple[str, ...]:
        hosts: tuple[str, ...] = ("127.0.0.1", "localhost", self.address)
        if self.real_nodes:
            hosts += (
                KUBERNETES_SERVICE_IP,
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            )
        return tuple(dict.fromkeys(hosts))

    @property
    def kubelet_client_cert(self) -> tuple[Path, Path]:
        """The apiserver's client certificate towards kubelets (logs, exec)."""
        pki = self.workdir / "pki"
        return pki / "apiserver-kubelet-client.crt", pki / "apiserver-kubelet-client.key"

    @property
    def certs(self) -> CertFiles:
        pki = self.workdir / "pki"
        return CertFiles(
            ca_cert=pki / "ca.crt",
            ca_key=pki / "ca.key",
            serving_cert=pki / "apiserver.crt",
            serving_key=pki / "apiserver.key",
            sa_public_key=pki / "sa.pub",
            sa_private_key=pki / "sa.key",
        )

    @property
    def token_file(self) -> Path:
        return self.workdir / "tokens.csv"

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig users and tests use."""
        return self.workdir / "kubeconfig"

    def component_kubeconfig(self, component: str) -> Path:
        return self.workdir / f"{component}.kubeconfig"

    @property
    def scheduler_config(self) -> Path:
        return self.workdir / SCHEDULER_CONFIG


def feature_gates_flag(gates: Mapping[str, bool]) -> str:
    return "--feature-gates=" + ",".join(f"{k}={str(v).lower()}" for k, v in sorted(gates.items()))


def etcd_args(config: ControlPlaneConfig, binary: Path) -> list[str]:
    peer = f"http://127.0.0.1:{config.ports.etcd_peer}"
    client_url = f"http://127.0.0.1:{config.ports.etcd_client}"
    return [
        str(binary),
        "--name=local",
        f"--data-dir={config.workdir / 'etcd'}",
        f"--listen-client-urls={client_url}",
        f"--advertise-client-urls={client_url}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=local={peer}",
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def apiserver_args(config: ControlPlaneConfig, binary: Path) -> list[str]:
    certs = config.certs
    if config.real_nodes:
        kubelet_cert, kubelet_key = config.kubelet_client_cert
        mode_args = [
            "--authorization-mode=Node,RBAC",
            f"--kubelet-client-certificate={kubelet_cert}",
            f"--kubelet-client-key={kubelet_key}",
            "--kubelet-preferred-address-types=InternalIP",
        ]
    else:
        mode_args = [
            "--authorization-mode=RBAC",
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            "--endpoint-reconciler-type=none",
        ]
    return [
        str(binary),
        f"--etcd-servers=http://127.0.0.1:{config.ports.etcd_client}",
        f"--bind-address={config.address}",
        f"--advertise-address={config.address}",
        f"--secure-port={config.ports.apiserver}",
        f"--tls-cert-file={certs.serving_cert}",
        f"--tls-private-key-file={certs.serving_key}",
        f"--client-ca-file={certs.ca_cert}",
        f"--token-auth-file={config.token_file}",
        *mode_args,
        f"--service-account-key-file={certs.sa_public_key}",
        f"--service-account-signing-key-file={certs.sa_private_key}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--allow-privileged=true",
        "--profiling=false",
        "--runtime-config="
        + ",".join(f"{k}={v}" for k, v in config.release.runtime_config.items()),
        feature_gates_flag(config.feature_gates),
    ]


def _delegated_auth_args(kubeconfig: Path) -> list[str]:
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        "--leader-elect=false",
        "--profiling=false",
    ]


def controller_manager_args(config: ControlPlaneConfig, binary: Path) -> list[str]:
    controllers = REAL_NODE_CONTROLLERS if config.real_nodes else CONTROLLERS
    return [
        str(binary),
        *_delegated_auth_args(config.component_kubeconfig("controller-manager")),
        f"--secure-port={config.ports.controller_manager}",
        f"--controllers={','.join(controllers)}",
        f"--kube-api-qps={config.controller_manager_qps}",
        f"--kube-api-burst={config.controller_manager_qps}",
        f"--root-ca-file={config.certs.ca_cert}",
        "--use-service-account-credentials=false",
        f"--service-account-private-key-file={config.certs.sa_private_key}",
        feature_gates_flag(config.feature_gates),
    ]


def scheduler_args(config: ControlPlaneConfig, binary: Path) -> list[str]:
    """The client side (kubeconfig, QPS, profiling) is in `scheduler_config`."""
    kubeconfig = config.component_kubeconfig("scheduler")
    return [
        str(binary),
        f"--config={config.scheduler_config}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={config.ports.scheduler}",
        feature_gates_flag(config.feature_gates),
    ]


def kubeconfig_document(url: str, ca_file: Path, user: str, token: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "local", "cluster": {"server": url, "certificate-authority": str(ca_file)}}
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
        "current-context": "local",
    }


class ControlPlane:
    """A running control plane, or one attached to by its kubeconfig."""

    def __init__(self, config: ControlPlaneConfig, binaries: Binaries | None = None) -> None:
        self.config = config
        self.binaries = binaries
        self.components: list[Child] = []

    @property
    def kubeconfig(self) -> Path:
        return self.config.kubeconfig

    @classmethod
    @contextlib.contextmanager
    def running(  # noqa: PLR0917
        cls,
        workdir: Path,
        feature_gates: Mapping[str, bool] | None = None,
        binaries: Binaries | None = None,
        on_progress: Callable[[str], None] | None = None,
        address: str = "127.0.0.1",
        real_nodes: bool = False,
        scheduler_qps: int | None = CLIENT_QPS,
        scheduler_profiling: bool = False,
        storage_only: bool = False,
    ) -> Iterator["ControlPlane"]:
        """Start a control plane in `workdir`, yield it, stop it whatever happens;
        `feature_gates` override the release's (docs/scheduling.md)."""
        bins = binaries or Binaries.locate()
        config = ControlPlaneConfig(
            workdir=workdir,
            ports=Ports.pick(),
            release=bins.release,
            gate_overrides=dict(feature_gates or {}),
            address=address,
            real_nodes=real_nodes,
            scheduler_qps=scheduler_qps,
            scheduler_profiling=scheduler_profiling,
            storage_only=storage_only,
        )
        plane = cls(config, bins)
        try:
            plane.start(on_progress or (lambda _: None))
            yield plane
        finally:
            plane.stop()

    @classmethod
    def attach(cls, kubeconfig: Path) -> "ControlPlane":
        """Use a control plane that is already running (e.g. `trainium-dra controlplane up`)."""
        server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        port = int(server.rsplit(":", 1)[1])
        config = ControlPlaneConfig(
            workdir=kubeconfig.parent,
            ports=Ports(0, 0, port, 0, 0),
            release=release_of(k8s_version()),
        )
        return cls(config)

    def start(self, on_progress: Callable[[str], None]) -> None:
        if self.binaries is None:
            raise ControlPlaneError("an attached control plane cannot be started")
        cfg, bins = self.config, self.binaries
        cfg.workdir.mkdir(parents=True, exist_ok=True)
        (cfg.workdir / "logs").mkdir(exist_ok=True)
        certs = write_certs(cfg.workdir / "pki", cfg.serving_hosts)
        if cfg.real_nodes:
            issue_certificate(
                certs, APISERVER_KUBELET_CLIENT, ("system:masters",), *cfg.kubelet_client_cert
            )
        self._write_credentials()
        try:
            on_progress("starting etcd")
            etcd = self._spawn("etcd", etcd_args(cfg, bins.etcd))
            self._wait(
                etcd, lambda: self._http_ok(f"http://127.0.0.1:{cfg.ports.etcd_client}/health")
            )
            on_progress("starting kube-apiserver")
            apiserver = self._spawn("kube-apiserver", apiserver_args(cfg, bins.kube_apiserver))
            self._wait(apiserver, lambda: self._http_ok(f"{cfg.url}/readyz", auth=True))
            if cfg.storage_only:
                on_progress("control plane ready (etcd and kube-apiserver only)")
                return
            on_progress("starting kube-controller-manager and kube-scheduler")
            manager = self._spawn(
                "kube-controller-manager",
                controller_manager_args(cfg, bins.kube_controller_manager),
            )
            self._write_scheduler_config(bins)
            scheduler = self._spawn("kube-scheduler", scheduler_args(cfg, bins.kube_scheduler))
            for component, port in (
                (manager, cfg.ports.controller_manager),
                (scheduler, cfg.ports.scheduler),
            ):
                healthz = f"https://127.0.0.1:{port}/healthz"
                self._wait(component, functools.partial(self._http_ok, healthz))
            on_progress("control plane ready")
        except BaseException:
            self.stop()
            raise

    def restart_scheduler(self, binary: Path) -> None:
        """Stop the kube-scheduler and start `binary` in its place with the same
        flags and configuration (a patched build, e.g. hack/k8s-counters-first);
        returns once it answers /healthz."""
        for old in [c for c in self.components if c.name == "kube-scheduler"]:
            old.stop()
            self.components.remove(old)
        scheduler = self._spawn("kube-scheduler", scheduler_args(self.config, binary))
        healthz = f"https://127.0.0.1:{self.config.ports.scheduler}/healthz"
        self._wait(scheduler, functools.partial(self._http_ok, healthz))

    def stop(self) -> None:
        """Stop every component, newest first."""
        while self.components:
            self.components.pop().stop()

    def __enter__(self) -> "ControlPlane":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _write_scheduler_config(self, bins: Binaries) -> None:
        cfg = self.config
        rendered = chart.render(chart.helm_binary(bins), DEFAULT_DRIVER_NAME)
        document = configuration(
            cfg.component_kubeconfig("scheduler"),
            qps=cfg.scheduler_qps,
            profiling=cfg.scheduler_profiling,
            profiles=chart_profiles(yaml.safe_load_all(rendered)),
        )
        cfg.scheduler_config.write_text(yaml.safe_dump(document, sort_keys=False))

    def _write_credentials(self) -> None:
        cfg = self.config
        users = {
            ADMIN_USER: ("admin", "system:masters"),
            SCHEDULER_USER: ("scheduler", ""),
            CONTROLLER_MANAGER_USER: ("controller-manager", "system:masters"),
        }
        rows, tokens = [], {}
        for user, (component, groups) in users.items():
            token = secrets.token_hex(16)
            tokens[component] = (user, token)
            rows.append(f'{token},{user},{component},"{groups}"')
        cfg.token_file.write_text("\n".join(rows) + "\n")
        cfg.token_file.chmod(0o600)
        for component, (user, token) in tokens.items():
            path = cfg.kubeconfig if component == "admin" else cfg.component_kubeconfig(component)
            document = kubeconfig_document(cfg.url, cfg.certs.ca_cert, user, token)
            path.write_text(yaml.safe_dump(document))
            path.chmod(0o600)

    def _spawn(self, name: str, args: list[str]) -> Child:
        component = Child.start(name, args, self.config.workdir / "logs" / f"{name}.log")
        self.components.append(component)
        return component

    def _wait(self, component: Child, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if component.process.poll() is not None:
                raise ControlPlaneError(
                    f"{component.name} exited with code {component.process.returncode}; "
                    f"log {component.log_path}:\n{component.log_tail()}"
                )
            if ready():
                return
            time.sleep(0.2)
        raise ControlPlaneError(
            f"{component.name} not ready after {START_TIMEOUT:.0f}s; "
            f"log {component.log_path}:\n{component.log_tail()}"
        )

    def _admin_token(self) -> str:
        token: str = yaml.safe_load(self.kubeconfig.read_text())["users"][0]["user"]["token"]
        return token

    def _http_ok(self, url: str, auth: bool = False) -> bool:
        headers = {"Authorization": f"Bearer {self._admin_token()}"} if auth else {}
        try:
            # Loopback health probes of components whose serving certs are
            # self-signed by the component itself.
            response = httpx.get(url, headers=headers, verify=False, timeout=2.0)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    def api_client(self) -> k8s.ApiClient:
        """A new client authenticated as the cluster admin."""
        return typed_client(self.kubeconfig)

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision, through etcd's
        HTTP gateway, and return that revision: afterwards etcd holds only
        live keys (what a size measurement should count) and refuses a watch
        from before it with 410 Gone."""
        kv = f"http://127.0.0.1:{self.config.ports.etcd_client}/v3/kv"
        key = base64.b64encode(b"/registry").decode()
        current = httpx.post(f"{kv}/range", json={"key": key}, timeout=10)
        current.raise_for_status()
        revision = int(current.json()["header"]["revision"])
        compacted = httpx.post(
            f"{kv}/compaction", json={"revision": str(revision), "physical": True}, timeout=60
        )
        compacted.raise_for_status()
        return revision

    def kubectl(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this control plane; raises on a non-zero exit."""
        kubectl = self.binaries.kubectl if self.binaries else Binaries.locate().kubectl
        return subprocess.run(
            [str(kubectl), f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            check=True,
        )

    def create_node(self, name: str, labels: Mapping[str, str] | None = None) -> None:
        """A Node that looks Ready to the scheduler; nothing runs its pods."""
        with self.api_client() as api:
            core = k8s.CoreV1Api(api)
            core.create_node(
                {
                    "metadata": {
                        "name": name,
                        "labels": {"kubernetes.io/hostname": name, **(labels or {})},
                    }
                }
            )
            core.patch_node_status(name, {"status": fake_node_status()})

    def delete_node(self, name: str) -> None:
        with self.api_client() as api:
            k8s.CoreV1Api(api).delete_node(name)


def fake_node_status() -> dict[str, Any]:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    resources = {"cpu": "64", "memory": "512Gi", "pods": "1100"}
    return {
        "capacity": resources,
        "allocatable": resources,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "simulated node",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
        ],
    }
