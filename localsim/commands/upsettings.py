"""What a local cluster was started with, kept beside its state, so that a
second `up` asking for something else refuses and names each flag instead of
quietly handing back the cluster that is running."""

import json
from dataclasses import dataclass
from typing import Any

from driver.devicemodel.layout import PARTITION_SIZES
from localsim.clusterspec import ClusterSpec
from localsim.paths import ClusterPaths


@dataclass(frozen=True)
class UpSettings:
    spec: ClusterSpec
    real_nodes: bool = False
    with_prometheus: bool = False
    with_kueue: bool = False
    kueue_quota: str = "devices"
    with_lws: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "spec": self.spec.to_json(),
            "realNodes": self.real_nodes,
            "withPrometheus": self.with_prometheus,
            "withKueue": self.with_kueue,
            "kueueQuota": self.kueue_quota,
            "withLws": self.with_lws,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "UpSettings":
        return cls(
            ClusterSpec.from_json(data["spec"]),
            bool(data["realNodes"]),
            bool(data["withPrometheus"]),
            bool(data["withKueue"]),
            str(data["kueueQuota"]),
            # Settings written before --with-lws existed have no key: it was off.
            bool(data.get("withLws", False)),
        )


def _on(value: bool) -> str:
    return "on" if value else "off"


def flag_values(settings: UpSettings) -> dict[str, str]:
    """Each `up` flag's value as a person would read it, for comparing two settings."""
    spec = settings.spec
    racks = spec.racks
    sizes = spec.partition_sizes or PARTITION_SIZES
    nodes = ",".join(sorted({"all" if r.nodes == r.servers else str(r.nodes) for r in racks}))
    values = {
        "--racks": str(len(racks)),
        "--generation": ",".join(sorted({r.generation for r in racks})),
        "--nodes-per-rack": nodes,
        "--mode": spec.device_mode,
        "--pools": spec.pools,
        "--partition-sizes": ",".join(map(str, sizes)),
        "--profile": spec.profile,
        "--instance-type": ",".join(r.instance_type or "default" for r in racks)
        if any(r.instance_type for r in racks)
        else "default",
        "--driver-name": spec.driver,
        "--real-nodes": _on(settings.real_nodes),
        "--with-prometheus": _on(settings.with_prometheus),
        "--with-kueue": _on(settings.with_kueue),
        "--with-lws": _on(settings.with_lws),
    }
    if settings.with_kueue:
        values["--kueue-quota"] = settings.kueue_quota
    return values


def differences(running: UpSettings, wanted: UpSettings) -> list[str]:
    """One line per flag whose value differs, e.g. `--racks: running 1, asked 2`."""
    have, want = flag_values(running), flag_values(wanted)
    return [
        f"{flag}: running {have.get(flag, 'off')}, asked {value}"
        for flag, value in want.items()
        if have.get(flag) != value
    ]


def write_settings(paths: ClusterPaths, settings: UpSettings) -> None:
    tmp = paths.settings_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(settings.to_json(), indent=1))
    tmp.replace(paths.settings_file)


def read_settings(paths: ClusterPaths) -> UpSettings | None:
    """None for a cluster that recorded no settings (started with --foreground)."""
    try:
        return UpSettings.from_json(json.loads(paths.settings_file.read_text()))
    except (OSError, ValueError, KeyError):
        return None
