"""With the UltraServer operator on, each node daemon renews a heartbeat Lease
for its node (driver/node/heartbeat.py): the chart's RBAC and admission
policy, installed for real, let a daemon's token write its own node's Lease
and no other node's."""

import datetime
import json
from collections.abc import Iterator

import pytest

from driver.node.heartbeat import lease_object
from localsim.controlplane.plane import ControlPlane
from testbed.waiting import wait_for
from tests.deploy.access import NODE_NAME_EXTRA, access_installed, attempt
from tests.deploy.chart import Case, kubectl

pytestmark = pytest.mark.integration

CASE = Case("heartbeat", None)
SETTINGS = ("--set=profile=aws", "--set=ultraserverOperator.enabled=true")
NODE = f"system:serviceaccount:{CASE.namespace}:{CASE.release}-trainium-dra-node"
NODE_A, NODE_B = "deploy-heartbeat-node-a", "deploy-heartbeat-node-b"
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


@pytest.fixture(scope="module")
def installed(control_plane: ControlPlane, crds: None) -> Iterator[None]:
    with access_installed(control_plane, CASE, *SETTINGS) as objects:
        names = {o["metadata"]["name"] for o in objects}
        assert any(n.endswith("-own-heartbeat") for n in names), "the policy is rendered"
        yield


def lease(node: str) -> str:
    return json.dumps(lease_object(node, CASE.namespace, 1.0, NOW))


def as_node(node: str) -> list[str]:
    return [f"--as={NODE}", f"--as-user-extra={NODE_NAME_EXTRA}={node}"]


@pytest.mark.usefixtures("installed")
def test_a_node_daemon_renews_only_its_own_heartbeat(control_plane: ControlPlane) -> None:
    cp = control_plane

    def refused_for_b() -> bool:
        dry = attempt(
            cp, *as_node(NODE_A), "create", "--dry-run=server", "-f", "-", input=lease(NODE_B)
        )
        return not dry.ok and "ValidatingAdmissionPolicy" in dry.output

    wait_for("the heartbeat policy in effect", refused_for_b, 60, 0.5)
    other = attempt(cp, *as_node(NODE_A), "create", "-f", "-", input=lease(NODE_B))
    assert not other.ok
    assert f"may renew only Lease trainium-dra-node.{NODE_A}" in other.output
    own = attempt(cp, *as_node(NODE_A), "create", "-f", "-", input=lease(NODE_A))
    assert own.ok, own.output
    renewed = attempt(
        cp, *as_node(NODE_A), "apply", "--server-side", "-f", "-", input=lease(NODE_A)
    )
    assert renewed.ok, renewed.output
    kubectl(cp, "create", "-n", CASE.namespace, "-f", "-", input=lease(NODE_B))
    foreign = attempt(
        cp, *as_node(NODE_A), "apply", "--server-side", "-f", "-", input=lease(NODE_B)
    )
    assert not foreign.ok and "may renew only" in foreign.output
