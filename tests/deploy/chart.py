"""Render the Helm chart with the built helm binary: the values cases every
deploy test runs, and the rendered objects as dicts."""

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from driver.jsontypes import JSON
from localsim.controlplane.binaries import Binaries
from localsim.controlplane.chart import helm_binary
from localsim.controlplane.plane import ControlPlane

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "trainium-dra"
MONITORING_API = "monitoring.coreos.com/v1"


@dataclass(frozen=True)
class Case:
    """One values file (None: the chart's defaults) and the release it is rendered as."""

    name: str
    values: Path | None

    @property
    def release(self) -> str:
        return f"deploy-{self.name}"

    @property
    def namespace(self) -> str:
        return f"deploy-{self.name}"


def cases() -> list[Case]:
    """Defaults, every charts/trainium-dra/ci/*.yaml and every deploy/values/*.yaml."""
    files = sorted((CHART / "ci").glob("*.yaml")) + sorted(
        (ROOT / "deploy" / "values").glob("*.yaml")
    )
    found = [Case("defaults", None)]
    for f in files:
        found.append(Case(f.stem.removesuffix("-values"), f))
    return found


def helm() -> Path:
    return helm_binary(Binaries.locate())


def run_helm(*args: str) -> str:
    result = subprocess.run(
        [str(helm()), *args], capture_output=True, text=True, check=False, timeout=120
    )
    if result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args[:2])} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def values_args(case: Case, extra: Sequence[str] = ()) -> list[str]:
    return ([f"--values={case.values}"] if case.values else []) + list(extra)


def render(case: Case, *extra: str, api_versions: Sequence[str] = ()) -> list[JSON]:
    """The chart's objects (CRDs included) for `case`; `api_versions` are APIs to pretend served."""
    text = run_helm(
        "template",
        case.release,
        str(CHART),
        "--include-crds",
        f"--namespace={case.namespace}",
        *[f"--api-versions={v}" for v in api_versions],
        *values_args(case, extra),
    )
    return [d for d in yaml.safe_load_all(text) if isinstance(d, dict) and d.get("kind")]


def by_kind(objects: list[JSON], kind: str) -> list[JSON]:
    return [o for o in objects if o["kind"] == kind]


def one(objects: list[JSON], kind: str) -> JSON:
    found = by_kind(objects, kind)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def kubectl(cp: ControlPlane, *args: str, input: str | None = None) -> str:
    """kubectl against `cp`; a failure shows kubectl's own error."""
    try:
        return cp.kubectl(*args, input=input).stdout
    except subprocess.CalledProcessError as err:
        raise AssertionError(f"kubectl {' '.join(args[:4])}: {err.stderr}") from err


def fresh_namespace(cp: ControlPlane, name: str) -> None:
    """Create `name`, first waiting out a namespace of that name still terminating."""
    kubectl(cp, "wait", "--for=delete", f"namespace/{name}", "--timeout=180s")
    kubectl(cp, "create", "namespace", name)
