"""The chart's RBAC and node-health admission policy, installed for real on the
apiserver: each component can do what its code does and nothing broader, and
a node daemon can write only its own node's NodeDeviceHealth, both when its
identity is impersonated and with a real pod-bound ServiceAccount token."""

import json
import time
from collections.abc import Iterator

import pytest

from localsim.controlplane.plane import ControlPlane
from testbed.waiting import Deadline
from tests.deploy.access import ACCESS_KINDS, NODE_NAME_EXTRA, access_installed, attempt
from tests.deploy.chart import Case, kubectl

pytestmark = pytest.mark.integration

CASE = Case("rbac", None)
NODE_A, NODE_B = "deploy-rbac-node-a", "deploy-rbac-node-b"
CONTROLLER = f"system:serviceaccount:{CASE.namespace}:{CASE.release}-trainium-dra-controller"
NODE = f"system:serviceaccount:{CASE.namespace}:{CASE.release}-trainium-dra-node"

# What the code does (driver/controller/runner.py, reconciler.py, slicewatch.py,
# lease.py, handlers.py, claimstatus.py; driver/node/apireader.py, main.py,
# healthreport.py), as (resource, verbs) of `kubectl auth can-i --list`.
CONTROLLER_RULES = {
    "resourceslices.resource.k8s.io": {"get", "list", "watch", "create", "update", "delete"},
    "resourceclaims.resource.k8s.io": {"get", "list", "watch"},
    "resourceclaims.resource.k8s.io/status": {"patch"},
    "resourceclaims.resource.k8s.io/driver": {"arbitrary-node:patch"},
    "ultraservers.trainium.sim.dev": {"get", "list", "watch"},
    "ultraservers.trainium.sim.dev/status": {"patch"},
    "nodedevicehealths.trainium.sim.dev": {"list", "watch"},
    "nodes": {"list", "watch"},
}
CONTROLLER_NAMESPACE_RULES = {"leases.coordination.k8s.io": {"get", "create", "update"}}
NODE_RULES = {
    "resourceclaims.resource.k8s.io": {"get"},
    "resourceslices.resource.k8s.io": {"list", "watch"},
    "ultraservers.trainium.sim.dev": {"list", "watch"},
    "nodes": {"get"},
    "nodedevicehealths.trainium.sim.dev": {"get", "create", "update"},
}
NOBODY = "system:serviceaccount:default:trainium-dra-bound-to-nothing"


@pytest.fixture(scope="module")
def installed(control_plane: ControlPlane, crds: None) -> Iterator[None]:
    with access_installed(control_plane, CASE) as objects:
        assert {o["kind"] for o in objects} == set(ACCESS_KINDS)
        try:
            yield
        finally:
            for name in (NODE_A, NODE_B):
                attempt(control_plane, "delete", "nodedevicehealth", name, "--ignore-not-found")


def listed_rules(cp: ControlPlane, user: str, namespace: str) -> dict[str, set[str]]:
    """`kubectl auth can-i --list` as `user`: resource -> verbs."""
    out = kubectl(cp, "auth", "can-i", "--list", f"--as={user}", "-n", namespace, "--no-headers")
    found: dict[str, set[str]] = {}
    for line in out.splitlines():
        parts = line.split()
        if not parts or parts[0].startswith("["):
            continue  # non-resource URLs (discovery): granted to everyone
        verbs = line[line.rindex("[") + 1 : line.rindex("]")].split()
        found.setdefault(parts[0], set()).update(verbs)
    return found


def rules(cp: ControlPlane, user: str, namespace: str) -> dict[str, set[str]]:
    """What `user` may do beyond what every authenticated user may (the
    release's default roles: self reviews, and from 1.37 reading
    ClusterTrustBundles), measured on a service account bound to nothing."""
    everyone = listed_rules(cp, NOBODY, namespace)
    found = {}
    for resource, verbs in listed_rules(cp, user, namespace).items():
        extra = verbs - everyone.get(resource, set())
        if extra:
            found[resource] = extra
    return found


def can(cp: ControlPlane, user: str, verb: str, resource: str, namespace: str = "default") -> bool:
    result = attempt(cp, "auth", "can-i", verb, resource, f"--as={user}", "-n", namespace)
    return result.output.strip().splitlines()[0] == "yes"


@pytest.mark.usefixtures("installed")
def test_controller_has_exactly_its_verbs(control_plane: ControlPlane) -> None:
    assert rules(control_plane, CONTROLLER, "default") == CONTROLLER_RULES
    assert rules(control_plane, CONTROLLER, CASE.namespace) == {
        **CONTROLLER_RULES,
        **CONTROLLER_NAMESPACE_RULES,
    }
    own_lease = f"leases.coordination.k8s.io/{CONTROLLER.rsplit(':', 1)[1]}"
    assert can(control_plane, CONTROLLER, "update", own_lease, CASE.namespace)
    for verb, resource, namespace in [
        ("create", "leases.coordination.k8s.io", "kube-system"),
        ("update", "leases.coordination.k8s.io/kube-scheduler", CASE.namespace),
        ("delete", "ultraservers.trainium.sim.dev", "default"),
        ("update", "ultraservers.trainium.sim.dev", "default"),
        ("update", "nodes", "default"),
        ("create", "resourceclaims.resource.k8s.io", "default"),
        ("get", "secrets", CASE.namespace),
        ("create", "nodedevicehealths.trainium.sim.dev", "default"),
    ]:
        assert not can(control_plane, CONTROLLER, verb, resource, namespace), (verb, resource)


@pytest.mark.usefixtures("installed")
def test_node_daemon_has_exactly_its_verbs(control_plane: ControlPlane) -> None:
    assert rules(control_plane, NODE, "default") == NODE_RULES
    assert rules(control_plane, NODE, CASE.namespace) == NODE_RULES
    for verb, resource in [
        ("delete", "resourceslices.resource.k8s.io"),
        ("create", "resourceslices.resource.k8s.io"),
        ("update", "resourceclaims.resource.k8s.io"),
        ("watch", "resourceclaims.resource.k8s.io"),
        ("delete", "nodedevicehealths.trainium.sim.dev"),
        ("patch", "nodes"),
        ("list", "secrets"),
        ("update", "ultraservers.trainium.sim.dev/status"),
    ]:
        assert not can(control_plane, NODE, verb, resource), (verb, resource)


def health(node: str, reported: str = "2026-01-01T00:00:00Z") -> str:
    return json.dumps(
        {
            "apiVersion": "trainium.sim.dev/v1alpha1",
            "kind": "NodeDeviceHealth",
            "metadata": {"name": node},
            "spec": {"nodeName": node, "reportedAt": reported, "devices": []},
        }
    )


def as_node(node: str | None) -> list[str]:
    extra = [f"--as-user-extra={NODE_NAME_EXTRA}={node}"] if node else []
    return [f"--as={NODE}", *extra]


def wait_for_policy(cp: ControlPlane) -> None:
    """The apiserver loads a new policy asynchronously: dry-run a refused write until it is."""
    deadline = Deadline(60)
    while not deadline.passed():
        dry = attempt(
            cp, *as_node(NODE_A), "create", "--dry-run=server", "-f", "-", input=health(NODE_B)
        )
        if not dry.ok and "ValidatingAdmissionPolicy" in dry.output:
            return
        time.sleep(0.5)
    raise AssertionError(f"the node-health admission policy never took effect: {dry}")


@pytest.mark.usefixtures("installed")
def test_node_daemon_writes_only_its_own_health(control_plane: ControlPlane) -> None:
    cp = control_plane
    wait_for_policy(cp)
    other = attempt(cp, *as_node(NODE_A), "create", "-f", "-", input=health(NODE_B))
    assert not other.ok
    assert f"node {NODE_A} may write only NodeDeviceHealth {NODE_A}, not {NODE_B}" in other.output
    nameless = attempt(cp, *as_node(None), "create", "-f", "-", input=health(NODE_A))
    assert not nameless.ok and "names no node" in nameless.output
    own = attempt(cp, *as_node(NODE_A), "create", "-f", "-", input=health(NODE_A))
    assert own.ok, own.output
    updated = attempt(
        cp, *as_node(NODE_A), "replace", "-f", "-", input=health(NODE_A, "2026-01-02T00:00:00Z")
    )
    assert updated.ok, updated.output
    # the admin (not the daemon) may write any node's object; the daemon may not update it
    kubectl(cp, "create", "-f", "-", input=health(NODE_B))
    foreign = attempt(
        cp, *as_node(NODE_A), "replace", "-f", "-", input=health(NODE_B, "2026-01-02T00:00:00Z")
    )
    assert not foreign.ok and "may write only" in foreign.output
    removed = attempt(cp, *as_node(NODE_A), "delete", "nodedevicehealth", NODE_A)
    assert not removed.ok and "forbidden" in removed.output.lower()
    stored = json.loads(kubectl(cp, "get", "nodedevicehealth", NODE_A, "-o", "json"))
    assert stored["spec"]["reportedAt"] == "2026-01-02T00:00:00Z"


@pytest.fixture
def pod_on_node(control_plane: ControlPlane, installed: None) -> Iterator[str]:
    """A node daemon pod bound to NODE_A (no kubelet runs it); yields a token bound to it."""
    cp, pod = control_plane, "deploy-rbac-daemon"
    cp.create_node(NODE_A)
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod, "namespace": CASE.namespace},
        "spec": {
            "nodeName": NODE_A,
            "serviceAccountName": NODE.rsplit(":", 1)[1],
            "containers": [{"name": "node", "image": "trainium-dra:test"}],
        },
    }
    try:
        created = json.loads(
            kubectl(cp, "create", "-o", "json", "-f", "-", input=json.dumps(manifest))
        )
        yield kubectl(
            cp,
            "create",
            "token",
            NODE.rsplit(":", 1)[1],
            "-n",
            CASE.namespace,
            "--bound-object-kind=Pod",
            f"--bound-object-name={pod}",
            f"--bound-object-uid={created['metadata']['uid']}",
        ).strip()
    finally:
        attempt(cp, "delete", "pod", pod, "-n", CASE.namespace, "--grace-period=0", "--force")
        cp.delete_node(NODE_A)


def test_pod_bound_token_names_its_node_and_writes_only_its_health(
    control_plane: ControlPlane, pod_on_node: str
) -> None:
    cp, token = control_plane, pod_on_node
    who = json.loads(kubectl(cp, f"--token={token}", "auth", "whoami", "-o", "json"))
    assert who["status"]["userInfo"]["username"] == NODE
    assert who["status"]["userInfo"]["extra"][NODE_NAME_EXTRA] == [NODE_A]
    wait_for_policy(cp)
    attempt(cp, "delete", "nodedevicehealth", NODE_A, NODE_B, "--ignore-not-found")
    other = attempt(cp, f"--token={token}", "create", "-f", "-", input=health(NODE_B))
    assert not other.ok and f"may write only NodeDeviceHealth {NODE_A}" in other.output
    own = attempt(cp, f"--token={token}", "create", "-f", "-", input=health(NODE_A))
    assert own.ok, own.output
