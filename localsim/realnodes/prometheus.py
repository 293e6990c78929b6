"""The host's Prometheus for a real-node cluster (`trainium-dra up --real-nodes
--with-prometheus`).

The chart's pods (controller and node daemons) are found by Kubernetes
service discovery through the apiserver and scraped at their pod IPs, which
the host routes to each node's pod subnet over the bridge; a pod replaced by
a rollout drops out of the targets and its successor comes in with the watch.
The kubelets are scraped directly at their addresses (HTTPS, their serving
certificates are signed by the cluster CA), the control plane as on the
stand-in cluster. Every request carries the token of Prometheus's own
ServiceAccount (localsim/prometheus_access.py), never the admin's.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from localsim.controlplane.chart import NAMESPACE, RELEASE
from localsim.controlplane.plane import ControlPlane
from localsim.prometheus import (
    CONTROLLER_JOB,
    NODE_JOB,
    PrometheusProcess,
    Targets,
    start_prometheus,
)
from localsim.prometheus_access import TokenRenewal, grant_access
from localsim.realnodes.plan import KUBELET_PORT, RealNode

KUBELET_JOB = "kubelet"
METRICS_PORT_NAME = "metrics"


def pod_job(
    job: str, component: str, api_server: str, ca_file: Path, token_file: Path
) -> dict[str, Any]:
    """Scrape the `metrics` port of the Running pods of the chart's `component`."""
    tls = {"ca_file": str(ca_file)}
    authorization = {"credentials_file": str(token_file)}
    selector = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component={component}"
    return {
        "job_name": job,
        # The daemon's own node/ultraserver labels name the node it serves.
        "honor_labels": True,
        "kubernetes_sd_configs": [
            {
                "role": "pod",
                "api_server": api_server,
                "tls_config": tls,
                "authorization": authorization,
                "namespaces": {"names": [NAMESPACE]},
                "selectors": [{"role": "pod", "label": selector}],
            }
        ],
        "relabel_configs": [
            {
                "source_labels": ["__meta_kubernetes_pod_container_port_name"],
                "regex": METRICS_PORT_NAME,
                "action": "keep",
            },
            {
                "source_labels": ["__meta_kubernetes_pod_phase"],
                "regex": "Running",
                "action": "keep",
            },
            {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        ],
    }


def kubelet_job(kubelets: Mapping[str, str], ca_file: Path, token_file: Path) -> dict[str, Any]:
    """Each kubelet's /metrics (node name -> `address:port`), with its `node` label."""
    return {
        "job_name": KUBELET_JOB,
        "scheme": "https",
        "tls_config": {"ca_file": str(ca_file)},
        "authorization": {"credentials_file": str(token_file)},
        "static_configs": [
            {"targets": [address], "labels": {"node": node}}
            for node, address in sorted(kubelets.items())
        ],
    }


def real_node_jobs(
    api_server: str, ca_file: Path, token_file: Path, kubelets: Mapping[str, str]
) -> list[dict[str, Any]]:
    """The scrape configs of the chart's pods and the kubelets."""
    return [
        pod_job(NODE_JOB, "node", api_server, ca_file, token_file),
        pod_job(CONTROLLER_JOB, "controller", api_server, ca_file, token_file),
        kubelet_job(kubelets, ca_file, token_file),
    ]


class RealNodePrometheus:
    """Prometheus plus the renewal of its token; `stop` ends both."""

    def __init__(self, process: PrometheusProcess, renewal: TokenRenewal) -> None:
        self.process = process
        self.renewal = renewal

    @property
    def url(self) -> str:
        return self.process.url

    def stop(self) -> None:
        self.process.stop()
        self.renewal.stop()


def start_for_real_nodes(
    state_dir: Path, plane: ControlPlane, nodes: Sequence[RealNode]
) -> RealNodePrometheus:
    """Grant Prometheus its ServiceAccount's access, write its token and start
    it with data under `state_dir`/prometheus."""
    workdir = state_dir / "prometheus"
    token_file = workdir / "token"
    with plane.api_client() as api:
        grant_access(api)
    renewal = TokenRenewal(plane.api_client(), token_file)
    try:
        targets = Targets.of_components(plane, {}, token_file)
        kubelets = {node.name: f"{node.ip}:{KUBELET_PORT}" for node in nodes}
        ca_file = plane.config.certs.ca_cert
        jobs = real_node_jobs(plane.config.url, ca_file, token_file, kubelets)
        return RealNodePrometheus(start_prometheus(workdir, targets, extra_jobs=jobs), renewal)
    except BaseException:
        renewal.stop()
        raise
