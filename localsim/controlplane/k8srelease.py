"""What each supported Kubernetes minor release needs from a cluster running
the driver: the feature gates of its features, the API versions to serve, and
where the PodGroup and DeviceTaintRule kinds live. Pure data; the control
plane, the kind config and the example tests read it.

Each gate is listed with the stage and default the release's own
`kube-apiserver --help` prints for it (a test compares them); gates that went
GA there are not set (the help no longer lists them, and a GA gate locked to
its default refuses `=false`), and gates a release removed are not named
(the components refuse unknown gates).
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Gate:
    name: str
    stage: str  # ALPHA or BETA, as `--help` prints it
    default: bool


@dataclass(frozen=True)
class Release:
    minor: str  # "1.37"
    version: str  # the patch release the project builds and tests, "v1.37.2"
    gates: tuple[Gate, ...]
    """Every gate is turned on, on every component."""
    unnamed_gates: tuple[str, ...]
    """Gates of the previous release this one no longer lists: GA (on, and
    possibly locked) or removed."""
    runtime_config: Mapping[str, str]
    podgroup_api: str
    device_taint_rule_api: str
    podgroup_scheduled_condition: str
    """The PodGroup condition the scheduler sets once the gang is placed."""

    @property
    def feature_gates(self) -> dict[str, bool]:
        return {gate.name: True for gate in self.gates}


V1_36 = Release(
    minor="1.36",
    version="v1.36.3",
    gates=(
        Gate("DRAPartitionableDevices", "BETA", default=True),
        Gate("DRAConsumableCapacity", "BETA", default=True),
        Gate("DRADeviceTaints", "BETA", default=True),
        Gate("DRADeviceTaintRules", "BETA", default=False),
        Gate("DRADeviceBindingConditions", "BETA", default=True),
        Gate("DRAResourceClaimDeviceStatus", "BETA", default=True),
        Gate("GenericWorkload", "ALPHA", default=False),
        Gate("GangScheduling", "ALPHA", default=False),
        Gate("DRAWorkloadResourceClaims", "ALPHA", default=False),
    ),
    unnamed_gates=(),
    # DeviceTaintRules are served only in resource.k8s.io/v1beta2, and
    # PodGroups only in scheduling.k8s.io/v1alpha2; neither is on by default.
    runtime_config={"resource.k8s.io/v1beta2": "true", "scheduling.k8s.io/v1alpha2": "true"},
    podgroup_api="scheduling.k8s.io/v1alpha2",
    device_taint_rule_api="resource.k8s.io/v1beta2",
    podgroup_scheduled_condition="PodGroupScheduled",
)

V1_37 = Release(
    minor="1.37",
    version="v1.37.2",
    gates=(
        Gate("DRAPartitionableDevices", "BETA", default=True),
        Gate("DRAConsumableCapacity", "BETA", default=True),
        Gate("DRADeviceBindingConditions", "BETA", default=True),
        Gate("GenericWorkload", "BETA", default=False),
        Gate("DRAWorkloadResourceClaims", "BETA", default=False),
        Gate("TopologyAwareWorkloadScheduling", "ALPHA", default=False),
    ),
    # GA: DRADeviceTaints, DRADeviceTaintRules, DRAResourceClaimDeviceStatus;
    # removed: GangScheduling (the GenericWorkload gate gives gangs).
    unnamed_gates=(
        "DRADeviceTaints",
        "DRADeviceTaintRules",
        "DRAResourceClaimDeviceStatus",
        "GangScheduling",
    ),
    # DeviceTaintRules are served in resource.k8s.io/v1 by default; PodGroups
    # in scheduling.k8s.io/v1beta1, off by default like every beta API.
    runtime_config={"scheduling.k8s.io/v1beta1": "true"},
    podgroup_api="scheduling.k8s.io/v1beta1",
    device_taint_rule_api="resource.k8s.io/v1",
    podgroup_scheduled_condition="PodGroupInitiallyScheduled",
)

RELEASES: Mapping[str, Release] = {r.minor: r for r in (V1_36, V1_37)}
DEFAULT = V1_37
"""The release `make demo`, the real nodes and kind run unless told otherwise."""


class UnsupportedReleaseError(ValueError):
    """A Kubernetes version the project has no table for."""


def release_of(version: str) -> Release:
    """The release of a version string such as `v1.37.2` or `v1.36.3-dirty`."""
    match = re.match(r"v?(\d+\.\d+)\.", version)
    release = RELEASES.get(match[1]) if match else None
    if release is None:
        supported = ", ".join(r.version for r in RELEASES.values())
        raise UnsupportedReleaseError(
            f"Kubernetes {version}: not supported by the local cluster (supported: {supported})"
        )
    return release
