"""Kueue's configuration file for the local cluster, as a pure function of
its loopback ports and the DeviceClasses that name extended resources."""

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from localsim.addon.ports import ManagerPorts

NAMESPACE = "kueue-system"
"""Kueue's own namespace; its pod webhooks skip it, as they skip kube-system."""

FRAMEWORKS = ("batch/job", "pod")
"""Jobs (suspended until admitted) and plain pods (gated until admitted)."""

FEATURE_GATES: Mapping[str, bool] = {
    # Counts the devices of a pod's ResourceClaimTemplates against quota
    # (alpha in 0.17: `exactly` requests of a mapped DeviceClass only).
    "DynamicResourceAllocation": True,
    # The on-demand visibility API is an aggregated apiserver with its own
    # certificates; the local cluster serves none.
    "VisibilityOnDemand": False,
}

QUOTA_MODES = ("devices", "cores")
"""How the default ClusterQueue counts (`trainium-dra up --kueue-quota`)."""

CLIENT_QPS = 500
"""As the local scheduler's: the apiserver serves this cluster alone."""


def device_class_mappings(device_classes: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One mapping per DeviceClass that carries an extended resource name:
    a claim for N devices of the class counts N of that resource, the same
    quota a pod asking for the resource in its limits draws on."""
    by_resource: dict[str, list[str]] = {}
    for device_class in device_classes:
        resource = (device_class.get("spec") or {}).get("extendedResourceName")
        if resource:
            by_resource.setdefault(resource, []).append(device_class["metadata"]["name"])
    return [
        {"name": resource, "deviceClassNames": sorted(names)}
        for resource, names in sorted(by_resource.items())
    ]


def transformations(cores: Mapping[str, int], core_resource: str) -> list[dict[str, Any]]:
    """Kueue's `resources.transformations`: each extended resource in `cores`
    (name -> the cores one unit holds) replaced by that many `core_resource`,
    so one quota of cores covers chips, servers and UltraServers alike."""
    return [
        {"input": name, "strategy": "Replace", "outputs": {core_resource: str(n)}}
        for name, n in sorted(cores.items())
        if name != core_resource
    ]


def admission(mappings: list[dict[str, Any]], transforms: list[dict[str, Any]]) -> dict[str, Any]:
    """What Kueue admits and how it counts, the same wherever its manager runs:
    Jobs and pods with a queue label only, never those of kube-system or
    Kueue's own namespace, and devices counted by `mappings` (or, in cores,
    by `transforms`)."""
    return {
        "manageJobsWithoutQueueName": False,
        "managedJobsNamespaceSelector": {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": ["kube-system", NAMESPACE],
                }
            ]
        },
        "integrations": {"frameworks": list(FRAMEWORKS)},
        "featureGates": dict(FEATURE_GATES),
        "resources": {"deviceClassMappings": mappings, "transformations": transforms},
    }


def configuration(
    ports: ManagerPorts,
    cert_dir: Path,
    mappings: list[dict[str, Any]],
    transforms: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The `config.kueue.x-k8s.io/v1beta2` Configuration: everything on
    127.0.0.1, one replica (no leader election), certificates the cluster's
    CA issued in `cert_dir` rather than Kueue's own."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports.health}"},
        "metrics": {
            "bindAddress": f"127.0.0.1:{ports.metrics}",
            "enableClusterQueueResources": True,
        },
        "webhook": {"host": "127.0.0.1", "port": ports.webhook, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "clientConnection": {"qps": CLIENT_QPS, "burst": CLIENT_QPS},
        **admission(mappings, transforms or []),
    }


def chart_configuration(mappings: list[dict[str, Any]]) -> dict[str, Any]:
    """The Configuration for Kueue's own Helm chart (`make kind-kueue`): the
    chart's ports on every address, Kueue's own webhook certificates and its
    visibility API, as the chart expects; what it admits and counts as the
    local cluster's manager does. No leader election: the chart runs one
    replica, which a lease renewal missed on a loaded machine would only
    restart (its webhooks refusing every Job meanwhile)."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        # The ports the chart's probes, metrics Service and webhook Service use.
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443", "enableClusterQueueResources": True},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": False},
        **admission(mappings, []),
        # The chart always installs the visibility APIServices and their
        # Service: the manager must serve them, or every namespace deletion
        # stalls on their failing discovery.
        "featureGates": {**FEATURE_GATES, "VisibilityOnDemand": True},
    }
