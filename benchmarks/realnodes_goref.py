"""The Go reference kubelet plugin (sigs.k8s.io/dra-example-driver) run as a
real kubelet plugin on real nodes, so the kubelet's own histograms measure it
the way they measure our node daemon.

It runs as our daemon runs: a DaemonSet pod on every node, with the same
resource requests and container security settings as the chart gives our
daemon (so the same CPU weight under the kubelet's cgroups), hostPath mounts
of the kubelet's plugin-registration and plugin directories and of the CDI
directory containerd reads, and a ServiceAccount whose ClusterRole grants
what the example driver's own chart grants its plugin. The binary, built from
its Go module outside the repo, is mounted read-only from the host into a
container of the driver image (every node has it; no registry here).
"""

import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from driver.jsontypes import JSON
from localsim.realnodes.realnodecluster import WORKLOAD_IMAGE
from testbed.realnodes import RealCluster

GO_DRIVER = "gpu.example.com"
GO_NAMESPACE = "dra-example-driver"
GO_ACCOUNT = "dra-example-kubeletplugin"
GO_DEVICES = 8
"""The plugin's default device count; pods here take one device each, one at a time."""
GO_QPS = 1000
"""Client QPS and burst, as `make bench-node` gives it: its defaults (5 and 10)
make back-to-back prepares wait for the client-side rate limiter."""
REAL_NODE_VALUES = Path(__file__).resolve().parent.parent / "deploy/values/real-nodes.yaml"
"""The chart values `up --real-nodes` installs with: our daemon's resources."""
BINARY_MOUNT = "/opt/dra-example-driver"
METRICS_PORT = 8080
"""The plugin's own /metrics (its prepare and unprepare histograms), in its pod."""
POD_SELECTOR = f"app.kubernetes.io/name={GO_ACCOUNT}"
START_TIMEOUT = 120.0
REGISTERED = '"Registered DRA plugin"'
"""The kubelet's log message (at -v=3) once it has validated and connected a DRA plugin."""
SHOWN_ENV = "import os, signal, sys\n" + (
    "for k, v in sorted(os.environ.items()):\n"
    "    if k.endswith('_RESOURCE_CLAIM') or k.startswith('DRA_'):\n"
    "        print(f'{k}={v}', flush=True)\n"
    "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n"
    "signal.pause()\n"
)
"""The Go pods' container: print what CDI injected from the plugin's specs, then hold."""


def access_objects() -> list[JSON]:
    """Namespace, ServiceAccount, the ClusterRole of the example driver's chart
    for its kubelet plugin, its binding, and the plugin's DeviceClass (pure)."""
    rules = [
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceclaims"],
            "verbs": ["get", "list", "watch"],
        },
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceclaims/status"],
            "verbs": ["update"],
        },
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceslices"],
            "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
        },
    ]
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": GO_NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": GO_ACCOUNT, "namespace": GO_NAMESPACE},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": GO_ACCOUNT},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": GO_ACCOUNT},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": GO_ACCOUNT,
            },
            "subjects": [{"kind": "ServiceAccount", "name": GO_ACCOUNT, "namespace": GO_NAMESPACE}],
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": GO_DRIVER},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GO_DRIVER}"'}}]},
        },
    ]


def plugin_args(node_name_var: str) -> list[str]:
    """The plugin's flags; registration and plugin directories stay at their
    defaults, the kubelet's, and the client config is the pod's own (pure)."""
    return [
        f"--node-name=$({node_name_var})",
        "--device-profile=gpu",
        f"--num-devices={GO_DEVICES}",
        "--cdi-root=/var/run/cdi",
        f"--kube-api-qps={GO_QPS}",
        f"--kube-api-burst={GO_QPS}",
        f"--metrics-port={METRICS_PORT}",
    ]


def our_daemon_resources(values: dict[str, Any]) -> dict[str, Any]:
    """The resources the real-node values give our node daemon (pure)."""
    try:
        resources: dict[str, Any] = values["node"]["resources"]
    except (KeyError, TypeError):
        raise ValueError(
            f"{REAL_NODE_VALUES}: node.resources is missing; the Go plugin gets the "
            "same resources as our daemon, so set them there"
        ) from None
    return resources


def plugin_daemonset(binary: Path, resources: dict[str, Any]) -> JSON:
    """The Go plugin on every node: mounts and environment as a DRA driver's
    DaemonSet has them, security and resources as our daemon's (pure)."""
    host_dirs = {
        "plugins-registry": "/var/lib/kubelet/plugins_registry",
        "plugins": "/var/lib/kubelet/plugins",
        "cdi": "/var/run/cdi",
    }
    key, value = POD_SELECTOR.split("=")
    labels = {key: value}
    volumes: list[JSON] = [
        {"name": name, "hostPath": {"path": path, "type": "DirectoryOrCreate"}}
        for name, path in host_dirs.items()
    ]
    volumes.append(
        {"name": "binary", "hostPath": {"path": str(binary.parent), "type": "Directory"}}
    )
    mounts: list[JSON] = [{"name": name, "mountPath": path} for name, path in host_dirs.items()]
    mounts.append({"name": "binary", "mountPath": BINARY_MOUNT, "readOnly": True})
    field = {"NODE_NAME": "spec.nodeName", "POD_UID": "metadata.uid"}
    container = {
        "name": "plugin",
        "image": WORKLOAD_IMAGE,
        "imagePullPolicy": "Never",
        "command": [f"{BINARY_MOUNT}/{binary.name}", *plugin_args("NODE_NAME")],
        "env": [
            {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}
            for name, path in field.items()
        ],
        "securityContext": {
            "runAsUser": 0,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "ports": [{"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
        "resources": resources,
        "volumeMounts": mounts,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": GO_ACCOUNT, "namespace": GO_NAMESPACE},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": GO_ACCOUNT,
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    "volumes": volumes,
                    "terminationGracePeriodSeconds": 10,
                },
            },
        },
    }


def go_pod(namespace: str, name: str, template: str) -> JSON:
    """A pod with one claim from `template`; its container prints the injected env."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": WORKLOAD_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["python", "-c", SHOWN_ENV],
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
            "terminationGracePeriodSeconds": 5,
        },
    }


def go_claim_template(namespace: str, name: str) -> JSON:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": GO_DRIVER}}]
                }
            }
        },
    }


def published_devices(real: RealCluster) -> dict[str, int]:
    """Devices in the plugin's ResourceSlices, per node."""
    slices = client.ResourceV1Api(real.api).list_resource_slice(
        field_selector=f"spec.driver={GO_DRIVER}"
    )
    out: dict[str, int] = {}
    for s in slices.items:
        out[s.spec.node_name] = out.get(s.spec.node_name, 0) + len(s.spec.devices or [])
    return out


def registered(real: RealCluster) -> set[str]:
    """The nodes whose kubelet logged the Go plugin's registration."""
    logs = real.cluster.paths.logs
    return {
        name
        for name in real.nodes
        if any(
            REGISTERED in line and f'driverName="{GO_DRIVER}"' in line
            for line in (logs / f"{name}-kubelet.log").read_text(errors="replace").splitlines()
        )
    }


def plugin_pods(real: RealCluster) -> list[Any]:
    pods = client.CoreV1Api(real.api).list_namespaced_pod(GO_NAMESPACE, label_selector=POD_SELECTOR)
    return list(pods.items)


def diagnosis(real: RealCluster) -> str:
    """Each plugin pod's phase, container state and log tail."""
    parts = []
    for pod in plugin_pods(real):
        name = pod.metadata.name
        states = [c.state.to_dict() for c in pod.status.container_statuses or []]
        log = real.kubectl("-n", GO_NAMESPACE, "logs", name, "--tail=20", check=False)
        parts.append(f"--- {name} on {pod.spec.node_name}: {pod.status.phase} {states}\n{log}")
    return "\n".join(parts)


def wait_started(real: RealCluster) -> None:
    """Every node's kubelet registered the plugin and its devices are published."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        done, published = registered(real), published_devices(real)
        if all(published.get(n) == GO_DEVICES for n in real.nodes) and done == set(real.nodes):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the Go plugin did not start on every node in {START_TIMEOUT:.0f} s: "
                f"registered with the kubelet on {sorted(done)}, devices published "
                f"{published}\n{diagnosis(real)}"
            )
        time.sleep(0.5)


@contextmanager
def go_plugins(real: RealCluster, binary: Path) -> Iterator[None]:
    """The Go plugin's DaemonSet, registered on every node with its devices
    published; deleted with its pods and slices afterwards."""
    resources = our_daemon_resources(yaml.safe_load(REAL_NODE_VALUES.read_text()))
    real.apply(*access_objects(), plugin_daemonset(binary, resources))
    try:
        wait_started(real)
        yield
    finally:
        real.kubectl(
            "-n", GO_NAMESPACE, "delete", "daemonset", GO_ACCOUNT, "--wait", "--timeout=120s"
        )
        wait_for_gone(real)
        with suppress(client.ApiException):
            client.ResourceV1Api(real.api).delete_collection_resource_slice(
                field_selector=f"spec.driver={GO_DRIVER}"
            )


def wait_for_gone(real: RealCluster) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while plugin_pods(real):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the Go plugin's pods outlived their DaemonSet:\n{diagnosis(real)}")
        time.sleep(0.5)
