"""Install the cluster-wide part of the Helm chart into the local cluster.

The chart (`charts/trainium-dra`) is rendered with `helm template`, so the
local cluster gets exactly the CRDs, DeviceClasses and RBAC a Helm install
gets. Workloads (Deployments, DaemonSets, ...) are not applied: the local
cluster runs the controller and node daemons as processes instead.
"""

import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from localsim.controlplane.binaries import Binaries, BinariesMissingError

CHART_DIR = Path(__file__).resolve().parents[2] / "charts" / "trainium-dra"
RELEASE = "trainium-dra"
NAMESPACE = "trainium-dra"

APPLIED_KINDS = (
    "Namespace",
    "CustomResourceDefinition",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "DeviceClass",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "ConfigMap",
)
"""Kinds applied, in this order (definitions before what uses them)."""


@dataclass(frozen=True)
class Rendered:
    applied: list[dict[str, Any]]  # in apply order
    skipped: list[str]  # "Kind/name" of what the local processes replace


def helm_binary(binaries: Binaries) -> Path:
    found = sorted(binaries.kube_apiserver.parent.glob("helm-*"))
    if not found:
        raise BinariesMissingError(
            f"helm not found in {binaries.kube_apiserver.parent}; build it with `make binaries`"
        )
    return found[-1]


def render(
    helm: Path,
    driver: str,
    chart: Path = CHART_DIR,
    profile: str = "trainium",
    values: Mapping[str, str] | None = None,
) -> str:
    """The chart's objects as YAML; `values` are more `--set` values (key -> value)."""
    result = subprocess.run(
        [
            str(helm),
            "template",
            RELEASE,
            str(chart),
            "--include-crds",
            f"--namespace={NAMESPACE}",
            f"--set=driverName={driver}",
            f"--set=profile={profile}",
            *(f"--set={key}={value}" for key, value in sorted((values or {}).items())),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"helm template {chart} failed: {result.stderr.strip()}")
    return result.stdout


def select(documents: Iterable[Any]) -> Rendered:
    """Order the rendered objects for applying and set aside the kinds not applied."""
    objects = [d for d in documents if isinstance(d, dict) and d.get("kind")]
    rank = {kind: i for i, kind in enumerate(APPLIED_KINDS)}
    applied = sorted((o for o in objects if o["kind"] in rank), key=lambda o: rank[o["kind"]])
    skipped = [f"{o['kind']}/{o['metadata']['name']}" for o in objects if o["kind"] not in rank]
    namespaced = any(o["kind"] in ("ServiceAccount", "Role", "RoleBinding") for o in applied)
    if namespaced and not any(o["kind"] == "Namespace" for o in applied):
        applied.insert(
            0, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
    return Rendered(applied, skipped)


def install(
    binaries: Binaries,
    kubeconfig: Path,
    driver: str,
    profile: str = "trainium",
    values: Mapping[str, str] | None = None,
) -> Rendered:
    """Render the chart and apply it; CRDs are Established before anything else is applied."""
    text = render(helm_binary(binaries), driver, profile=profile, values=values)
    rendered = select(yaml.safe_load_all(text))
    kubectl = [str(binaries.kubectl), f"--kubeconfig={kubeconfig}"]
    crds = [o for o in rendered.applied if o["kind"] == "CustomResourceDefinition"]
    rest = [o for o in rendered.applied if o["kind"] != "CustomResourceDefinition"]
    for batch in (crds, rest):
        if not batch:
            continue
        run(
            [*kubectl, "apply", "--server-side", f"--namespace={NAMESPACE}", "-f", "-"],
            yaml.safe_dump_all(batch),
        )
        if batch is crds:
            names = [f"crd/{o['metadata']['name']}" for o in crds]
            run([*kubectl, "wait", "--for=condition=Established", "--timeout=60s", *names])
    return rendered


def run(argv: list[str], stdin: str | None = None) -> None:
    result = subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])} ... failed: {result.stderr.strip()}")
