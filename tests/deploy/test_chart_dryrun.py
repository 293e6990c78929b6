"""Every object the chart renders, for the defaults and every values file,
passes a server-side dry-run apply on the real apiserver (schema, CEL rules
of the CRDs, admission). The CRDs are installed for real first, so the
UltraServer objects are checked against them.

Objects of the Prometheus operator's API (monitoring.coreos.com) are not
served by this apiserver; they are rendered only when that API exists, and
test_chart_render.py checks their structure.
"""

import json
from collections.abc import Iterator

import pytest
import yaml

from driver.jsontypes import JSON
from localsim.controlplane.plane import ControlPlane
from tests.deploy.chart import Case, cases, fresh_namespace, kubectl, render
from tests.deploy.conftest import FIELD_MANAGER

pytestmark = pytest.mark.integration

CASES = cases()


@pytest.fixture
def namespace(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    case: Case = request.param
    fresh_namespace(control_plane, case.namespace)
    try:
        yield case.namespace
    finally:
        kubectl(control_plane, "delete", "namespace", case.namespace, "--wait=false")


def identity(o: JSON) -> tuple[str, str, str]:
    return (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])


@pytest.mark.usefixtures("crds")
@pytest.mark.parametrize(
    ("case", "namespace"),
    [(c, c) for c in CASES],
    ids=[c.name for c in CASES],
    indirect=["namespace"],
)
def test_server_side_dry_run_accepts_every_object(
    control_plane: ControlPlane, case: Case, namespace: str
) -> None:
    objects = [o for o in render(case) if o["kind"] != "CustomResourceDefinition"]
    assert objects
    out = kubectl(
        control_plane,
        "apply",
        "--server-side",
        "--dry-run=server",
        "--force-conflicts",
        f"--field-manager={FIELD_MANAGER}",
        f"--namespace={namespace}",
        "-o",
        "json",
        "-f",
        "-",
        input=yaml.safe_dump_all(objects),
    )
    returned = json.loads(out)
    items = returned["items"] if returned.get("kind") == "List" else [returned]
    assert sorted(identity(i) for i in items) == sorted(identity(o) for o in objects)
    # the apiserver, not the client, answered: it defaulted fields the chart leaves out
    for item in items:
        if item["kind"] == "DaemonSet":
            pod = item["spec"]["template"]["spec"]
            assert pod["restartPolicy"] == "Always"
            assert item["spec"]["revisionHistoryLimit"] == 10
        if item["kind"] == "UltraServer":
            assert item["spec"]["mode"] in ("partitioned", "flat")
    # a dry run stores nothing
    listed = kubectl(
        control_plane,
        "get",
        "serviceaccounts,deployments,daemonsets",
        "-n",
        namespace,
        "-o",
        "name",
    )
    assert "trainium-dra" not in listed
