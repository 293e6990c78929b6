"""The chart's NetworkPolicies, enforced on real nodes by kube-network-policies.

Two probe pods on one node: one in a namespace outside the chart's allowed
peers, one in the monitoring namespace (standing in for Prometheus). Each
opens TCP connections from inside its pod to the daemon pod of the same
node and to the controller pod (on that node too): /metrics, the
simulator's controls, and as a control the apiserver's Service, which no
policy selects. Without the agent on the node every connection opens.
"""

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from kubernetes import client

from driver.jsontypes import JSON
from localsim.controlplane.plane import KUBERNETES_SERVICE_IP
from localsim.realnodes.netpolicy import (
    AGENT_METRICS_PORT,
    AGENT_VERSION,
    MONITORING_NAMESPACE,
    QUEUE_CHAIN,
)
from localsim.realnodes.realnodecluster import WORKLOAD_IMAGE
from testbed.gomodules import HACK, required_version
from testbed.localcluster import wait_for
from testbed.realnodes import NAMESPACE, RealCluster, namespace

pytestmark = pytest.mark.integration

OUTSIDE = "real-netpol-outside"
SIM_CONTROL_PORT = 8082
API_SERVICE = (KUBERNETES_SERVICE_IP, 443)
AGENT_METRICS = f"http://127.0.0.1:{AGENT_METRICS_PORT}/metrics"

PROBE = """
import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3) as s:
        s.sendall(b"GET /metrics HTTP/1.0\\r\\n\\r\\n")
        print("open", s.recv(64).split(b"\\r\\n")[0].decode())
except OSError as err:
    print("blocked", type(err).__name__)
"""
"""Prints `open <first line of the answer>` or `blocked <error>`."""


def test_the_agent_version_matches_its_go_module() -> None:
    assert required_version(
        HACK / "kube-network-policies", "sigs.k8s.io/kube-network-policies"
    ) == (AGENT_VERSION)


def probe_pod(ns: str, node: str) -> JSON:
    """A sleeping pod of the driver image on `node`, to open connections from."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", "namespace": ns},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [
                {
                    "name": "main",
                    "image": WORKLOAD_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["python3", "-c", "import time; time.sleep(3600)"],
                }
            ],
            "terminationGracePeriodSeconds": 1,
        },
    }


def connect(real: RealCluster, ns: str, address: tuple[str, int]) -> str:
    """What the probe pod of `ns` saw connecting to `address`."""
    return real.kubectl(
        "-n", ns, "exec", "probe", "--", "python3", "-c", PROBE, address[0], str(address[1])
    ).strip()


def controller_pod(real: RealCluster) -> Any:
    pods = client.CoreV1Api(real.api).list_namespaced_pod(
        NAMESPACE, label_selector="app.kubernetes.io/component=controller"
    )
    running = [p for p in pods.items if p.status.phase == "Running"]
    assert len(running) == 1, [p.metadata.name for p in pods.items]
    return running[0]


def metrics_port(pod: JSON) -> int:
    ports = [p for c in pod["spec"]["containers"] for p in c.get("ports") or []]
    return int(next(p["containerPort"] for p in ports if p["name"] == "metrics"))


def answered(outcome: str) -> str | None:
    return outcome if outcome.startswith("open") else None


def url(address: tuple[str, int], path: str) -> str:
    return f"http://{address[0]}:{address[1]}{path}"


def in_node(real: RealCluster, node: str, *argv: str) -> str:
    """The output of `argv` run in the node's network namespace."""
    command = ["ip", "netns", "exec", real.nodes[node].netns, *argv]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def agent_drops(real: RealCluster, node: str) -> float:
    """Packets the node's agent dropped, from its own /metrics (node loopback)."""
    read = (
        f"import urllib.request; print(urllib.request.urlopen({AGENT_METRICS!r}).read().decode())"
    )
    text = in_node(real, node, sys.executable, "-c", read)
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("kube_network_policies_packet_count{") and 'verdict="drop"' in line
    )


def restarts(pod: Any) -> int:
    return sum(s.restart_count for s in pod.status.container_statuses or [])


@pytest.fixture
def probes(real: RealCluster) -> Iterator[None]:
    """Removes the probe namespaces after the test."""
    yield
    for ns in (OUTSIDE, MONITORING_NAMESPACE):
        real.kubectl("delete", "namespace", ns, "--wait=false", "--ignore-not-found")


def test_only_the_allowed_peers_reach_the_daemons_and_the_controller(
    real: RealCluster, probes: None
) -> None:
    controller = controller_pod(real)
    node = controller.spec.node_name
    controller_json = real.api.sanitize_for_serialization(controller)
    daemon = real.daemon_pod(node)
    daemon_metrics = (daemon["status"]["podIP"], metrics_port(daemon))
    sim_control = (daemon["status"]["podIP"], SIM_CONTROL_PORT)
    controller_metrics = (controller.status.pod_ip, metrics_port(controller_json))
    restarts_before = restarts(controller)

    for ns in (OUTSIDE, MONITORING_NAMESPACE):
        real.apply(namespace(ns), probe_pod(ns, node))
    for ns in (OUTSIDE, MONITORING_NAMESPACE):
        real.running(ns, "probe")

    # The allowed peer: the agent knows its address once this answers.
    answer = wait_for(
        "the monitoring pod reading the daemon's /metrics",
        lambda: answered(connect(real, MONITORING_NAMESPACE, daemon_metrics)),
        timeout=60,
    )
    assert answer.split()[:3:2] == ["open", "200"], answer

    # The outside pod has a working network (the apiserver's Service) but
    # reaches none of the driver's ports.
    assert connect(real, OUTSIDE, API_SERVICE).startswith("open")
    assert connect(real, OUTSIDE, daemon_metrics).startswith("blocked")
    assert connect(real, OUTSIDE, sim_control).startswith("blocked")
    assert connect(real, OUTSIDE, controller_metrics).startswith("blocked")

    # The monitoring pod reads metrics only.
    assert connect(real, MONITORING_NAMESPACE, controller_metrics).startswith("open HTTP")
    assert connect(real, MONITORING_NAMESPACE, sim_control).startswith("blocked")

    # The host (the apiserver's pod proxy, the tests, a host Prometheus) keeps both.
    assert httpx.get(url(daemon_metrics, "/metrics"), timeout=10).status_code == 200
    assert httpx.get(url(sim_control, "/sim/v1/nodes"), timeout=10).status_code == 401

    # The controller, selected by a policy too, keeps working.
    after = controller_pod(real)
    assert after.metadata.uid == controller.metadata.uid
    assert restarts(after) == restarts_before
    ready = [c for c in after.status.conditions or [] if c.type == "Ready"]
    assert ready and ready[0].status == "True"

    # What refused them: the queue rule sends new connections to the agent,
    # which counted its drops.
    assert "NFQUEUE" in in_node(real, node, "iptables", "-t", "mangle", "-S", QUEUE_CHAIN)
    assert agent_drops(real, node) >= 3
