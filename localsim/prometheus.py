"""A real Prometheus for the local cluster: its config as a pure function of
the cluster's endpoints, and a runner for the built binary on loopback.

The node daemons serve plain HTTP; the apiserver, controller-manager and
scheduler serve HTTPS and authorize /metrics through the apiserver, so they
are scraped with the admin token (the apiserver's cert against the cluster
CA; the other two serve self-signed loopback certs). A real-node cluster's
jobs and credentials are in realnodes/prometheus.py and prometheus_access.py.
"""

import dataclasses
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from localsim.controlplane.binaries import cache_root, k8s_version
from localsim.controlplane.children import Child
from localsim.controlplane.plane import ControlPlane, free_port
from localsim.prometheus_access import write_private

PROMETHEUS_VERSION = "v0.316.0"
"""Go module version of the built Prometheus (v3.16.0); matches hack/prometheus/go.mod."""

RULES_DIR = Path(__file__).resolve().parents[1] / "charts" / "trainium-dra" / "rules"
NODE_JOB = "trainium-dra-node"
CONTROLLER_JOB = "trainium-dra-controller"
KUEUE_JOB = "kueue"
START_TIMEOUT = 60.0


class PrometheusError(RuntimeError):
    """Prometheus did not start; the message carries the tail of its log."""


@dataclass(frozen=True)
class Targets:
    """What to scrape: `host:port` of each node daemon (by rack), of the controller
    and of the control plane."""

    node_daemons: Mapping[str, str]
    apiserver: str | None = None
    controller_manager: str | None = None
    scheduler: str | None = None
    ca_file: Path | None = None
    token_file: Path | None = None
    controller: str | None = None
    kueue: str | None = None
    """Kueue's manager (`up --with-kueue`): HTTPS with a cert of the cluster CA."""

    @classmethod
    def of_control_plane(
        cls,
        plane: ControlPlane,
        node_daemons: Mapping[str, str],
        token_file: Path,
        controller: str | None = None,
    ) -> "Targets":
        """The control plane's components plus the daemons; writes the admin token file."""
        config = yaml.safe_load(plane.kubeconfig.read_text())
        write_private(token_file, config["users"][0]["user"]["token"])
        return cls.of_components(plane, node_daemons, token_file, controller)

    @classmethod
    def of_components(
        cls,
        plane: ControlPlane,
        node_daemons: Mapping[str, str],
        token_file: Path,
        controller: str | None = None,
    ) -> "Targets":
        """The control plane's components plus the daemons, scraped with the
        token someone else keeps in `token_file`."""
        ports = plane.config.ports
        return cls(
            node_daemons=node_daemons,
            controller=controller,
            apiserver=plane.config.url.removeprefix("https://"),
            controller_manager=(
                f"127.0.0.1:{ports.controller_manager}" if ports.controller_manager else None
            ),
            scheduler=f"127.0.0.1:{ports.scheduler}" if ports.scheduler else None,
            ca_file=plane.config.certs.ca_cert,
            token_file=token_file,
        )


def rule_files(rules_dir: Path = RULES_DIR) -> list[Path]:
    return sorted(rules_dir.glob("*.yaml"))


def prometheus_config(
    targets: Targets,
    interval: str = "2s",
    rules: Sequence[Path] = (),
    extra_jobs: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The prometheus.yml document (a dict) for `targets`, then `extra_jobs`
    (scrape configs of their own, e.g. found by Kubernetes service discovery)."""
    jobs: list[dict[str, Any]] = []
    if targets.node_daemons:
        jobs.append(
            {
                "job_name": NODE_JOB,
                # The daemon's own node/ultraserver labels name the simulated node.
                "honor_labels": True,
                "static_configs": [
                    {"targets": [address], "labels": {"rack": rack}}
                    for rack, address in sorted(targets.node_daemons.items())
                ],
            }
        )
    if targets.controller is not None:
        jobs.append(
            {"job_name": CONTROLLER_JOB, "static_configs": [{"targets": [targets.controller]}]}
        )
    secure = (
        ("kube-apiserver", targets.apiserver, False),
        ("kube-controller-manager", targets.controller_manager, True),
        ("kube-scheduler", targets.scheduler, True),
        (KUEUE_JOB, targets.kueue, False),
    )
    for job, address, self_signed in secure:
        if address is None:
            continue
        if targets.token_file is None:
            raise ValueError(f"Targets.token_file: needed to scrape {job}; give the admin token")
        tls: dict[str, Any] = (
            {"insecure_skip_verify": True} if self_signed else {"ca_file": str(targets.ca_file)}
        )
        jobs.append(
            {
                "job_name": job,
                "scheme": "https",
                "tls_config": tls,
                "authorization": {"credentials_file": str(targets.token_file)},
                "static_configs": [{"targets": [address]}],
            }
        )
    return {
        "global": {
            "scrape_interval": interval,
            # A 36-node daemon answers /metrics in over a second on a busy machine.
            "scrape_timeout": interval,
            "evaluation_interval": interval,
        },
        "rule_files": [str(path) for path in rules],
        "scrape_configs": [*jobs, *(dict(job) for job in extra_jobs)],
    }


def prometheus_argv(binary: Path, config_file: Path, data_dir: Path, port: int) -> list[str]:
    return [
        str(binary),
        f"--config.file={config_file}",
        f"--storage.tsdb.path={data_dir}",
        "--storage.tsdb.retention.time=1d",
        f"--web.listen-address=127.0.0.1:{port}",
    ]


def locate_binary(name: str = "prometheus") -> Path:
    """`prometheus` or `promtool` from `$TRAINIUM_DRA_BIN_DIR` or the build cache."""
    env_dir = os.environ.get("TRAINIUM_DRA_BIN_DIR")
    directory = Path(env_dir) if env_dir else cache_root() / "k8s" / k8s_version()
    path = directory / f"{name}-{PROMETHEUS_VERSION}"
    if not os.access(path, os.X_OK):
        raise PrometheusError(
            f"{path} missing; build it with `make binaries` (hack/build-binaries.sh) "
            "or point TRAINIUM_DRA_BIN_DIR at a directory that has it"
        )
    return path


def query(url: str, expr: str, at: float | None = None) -> list[dict[str, Any]]:
    """Instant query of the Prometheus at `url`; the result vector (or matrix) of `expr`."""
    params: dict[str, str | float] = {"query": expr}
    if at is not None:
        params["time"] = at
    response = httpx.get(f"{url}/api/v1/query", params=params, timeout=10.0)
    body: dict[str, Any] = response.json()
    if body.get("status") != "success":
        raise PrometheusError(f"query {expr!r}: {body.get('error', response.text)}")
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


@dataclass
class PrometheusProcess:
    """A running Prometheus; dies with its parent (parent-death signal)."""

    child: Child
    url: str

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        return query(self.url, expr, at)

    def stop(self) -> None:
        self.child.stop()


def start_prometheus(
    workdir: Path,
    targets: Targets,
    interval: str = "5s",
    binary: Path | None = None,
    extra_jobs: Sequence[Mapping[str, Any]] = (),
) -> PrometheusProcess:
    """Write the config (with the chart's rules) under `workdir`, start Prometheus
    on a free loopback port and wait until it is ready."""
    workdir.mkdir(parents=True, exist_ok=True)
    config_file = workdir / "prometheus.yml"
    config = prometheus_config(targets, interval, rule_files(), extra_jobs)
    config_file.write_text(yaml.safe_dump(config, sort_keys=False))
    port = free_port()
    argv = prometheus_argv(binary or locate_binary(), config_file, workdir / "data", port)
    child = Child.start("prometheus", argv, workdir / "prometheus.log")
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if not child.alive():
            raise PrometheusError(f"prometheus exited; log {child.log_path}:\n{child.log_tail()}")
        try:
            if httpx.get(f"{url}/-/ready", timeout=2.0).status_code == 200:
                return PrometheusProcess(child, url)
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    child.stop()
    raise PrometheusError(f"prometheus not ready after {START_TIMEOUT:.0f}s:\n{child.log_tail()}")


def start_for_cluster(
    state_dir: Path,
    plane: ControlPlane,
    daemon_ports: Mapping[str, int],
    controller_port: int,
    kueue: str | None = None,
) -> PrometheusProcess:
    """The local cluster's Prometheus (`trainium-dra up --with-prometheus`):
    every rack's node daemon (rack name -> its --http-address port), the
    controller, the control plane and Kueue's manager at `kueue` (`host:port`)
    if it runs, data under `state_dir`/prometheus."""
    workdir = state_dir / "prometheus"
    daemons = {rack: f"127.0.0.1:{port}" for rack, port in daemon_ports.items()}
    targets = Targets.of_control_plane(
        plane, daemons, workdir / "token", controller=f"127.0.0.1:{controller_port}"
    )
    return start_prometheus(workdir, dataclasses.replace(targets, kueue=kueue))


def substitute(expr: str, variables: Mapping[str, str]) -> str:
    """`expr` with Grafana's `$name` and `${name}` replaced (longest names first)."""
    for name in sorted(variables, key=len, reverse=True):
        expr = expr.replace("${" + name + "}", variables[name])
        expr = expr.replace("$" + name, variables[name])
    if "$" in expr:
        raise ValueError(f"expression {expr!r}: a template variable has no value")
    return expr
