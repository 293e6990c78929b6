"""The chart's identity and access objects installed for real on an apiserver,
shared by the tests of what they let each component do."""

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import yaml

from driver.jsontypes import JSON
from localsim.controlplane.plane import ControlPlane
from tests.deploy.chart import Case, fresh_namespace, kubectl, render

ACCESS_KINDS = (
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
)
"""The chart's identity and access objects: what these tests install."""

NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
"""The user extra a pod-bound token carries with its pod's node; the
admission policies read it."""


@dataclass(frozen=True)
class Result:
    ok: bool
    output: str


def attempt(cp: ControlPlane, *args: str, input: str | None = None) -> Result:
    """kubectl against `cp`, refused or not: refusals are what these tests check."""
    try:
        done = cp.kubectl(*args, input=input)
    except subprocess.CalledProcessError as err:
        return Result(False, err.stdout + err.stderr)
    return Result(True, done.stdout + done.stderr)


@contextmanager
def access_installed(cp: ControlPlane, case: Case, *settings: str) -> Iterator[list[JSON]]:
    """The access objects of `case` rendered with `settings`, applied in the
    case's fresh namespace; yields them. On leaving, they and the namespace
    are deleted without waiting (the next `fresh_namespace` waits)."""
    objects = [o for o in render(case, *settings) if o["kind"] in ACCESS_KINDS]
    manifest = yaml.safe_dump_all(objects)
    fresh_namespace(cp, case.namespace)
    try:
        kubectl(cp, "apply", "--server-side", "-n", case.namespace, "-f", "-", input=manifest)
        yield objects
    finally:
        attempt(cp, "delete", "-n", case.namespace, "-f", "-", "--wait=false", input=manifest)
        attempt(cp, "delete", "namespace", case.namespace, "--wait=false")
