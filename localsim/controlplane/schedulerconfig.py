"""The kube-scheduler's configuration file. The local cluster's scheduler
reads a file rather than flags so that it serves, beside the default profile,
the profiles the chart ships (its `<release>-scheduler-profile` ConfigMap):
what a user adds to their own scheduler is what the tests run against."""

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from driver.jsontypes import JSON

SCHEDULER_CONFIG = "kube-scheduler.yaml"
"""The file's name in the control plane's directory."""
PROFILE_COMPONENT = "scheduler-profile"
"""`app.kubernetes.io/component` of the chart's profile ConfigMap."""
PROFILE_KEY = "profile.yaml"


def chart_profiles(documents: Iterable[Any]) -> list[JSON]:
    """The scheduler profiles in a rendered chart."""
    return [
        yaml.safe_load(d["data"][PROFILE_KEY])
        for d in documents
        if isinstance(d, dict)
        and d.get("kind") == "ConfigMap"
        and (d.get("metadata", {}).get("labels") or {}).get("app.kubernetes.io/component")
        == PROFILE_COMPONENT
    ]


def configuration(
    kubeconfig: Path, *, qps: int | None, profiling: bool, profiles: Sequence[JSON]
) -> JSON:
    """A KubeSchedulerConfiguration: upstream's default profile first, then
    `profiles`; `qps` (and burst) None keeps the scheduler's own default."""
    connection: JSON = {"kubeconfig": str(kubeconfig)}
    if qps is not None:
        connection |= {"qps": qps, "burst": qps}
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": connection,
        "enableProfiling": profiling,
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": "default-scheduler"}, *profiles],
    }
