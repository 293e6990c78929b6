"""The plugins' own latency histograms, read inside their pods: the time a
plugin reports for its handler, beside the time the kubelet measured for the
gRPC call around it, shows how much of the call is outside the handler.

Pod addresses are not routed from the host here, so the scrape runs in the
pod (`kubectl exec`, through the kubelet) with the image's Python against the
pod's own port named `metrics`.
"""

from typing import Any

from kubernetes import client

from testbed.realnodes import RealCluster

FETCH = (
    "import sys, urllib.request; "
    "sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:{port}/metrics').read().decode())"
)


def metrics_port(pod: Any) -> tuple[str, int]:
    """(container, port) of the pod's container port named `metrics`."""
    for container in pod.spec.containers:
        for port in container.ports or []:
            if port.name == "metrics":
                return container.name, int(port.container_port)
    raise LookupError(f"pod {pod.metadata.name} has no container port named metrics")


def scrape_pods(real: RealCluster, namespace: str, selector: str) -> list[str]:
    """The /metrics text of every pod matching `selector`."""
    pods = client.CoreV1Api(real.api).list_namespaced_pod(namespace, label_selector=selector)
    texts = []
    for pod in pods.items:
        if pod.metadata.deletion_timestamp:
            continue
        container, port = metrics_port(pod)
        texts.append(
            real.kubectl(
                "-n",
                namespace,
                "exec",
                pod.metadata.name,
                "-c",
                container,
                "--",
                "python",
                "-c",
                FETCH.format(port=port),
            )
        )
    return texts
