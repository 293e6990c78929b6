"""Fixtures of the deploy tests."""

import pytest

from localsim.controlplane.plane import ControlPlane
from tests.deploy.chart import CHART, kubectl

FIELD_MANAGER = "tests-deploy"


@pytest.fixture(scope="module")
def crds(control_plane: ControlPlane) -> None:
    """The chart's CRDs, for real; shared with other tests (same definitions), never deleted."""
    kubectl(
        control_plane,
        "apply",
        "--server-side",
        "--force-conflicts",
        f"--field-manager={FIELD_MANAGER}",
        "-f",
        str(CHART / "crds"),
    )
    names = [f"crd/{p.name.removesuffix('.yaml')}" for p in sorted((CHART / "crds").glob("*.yaml"))]
    kubectl(control_plane, "wait", "--for=condition=Established", "--timeout=60s", *names)
