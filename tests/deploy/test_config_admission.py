"""The chart's admission policy refuses malformed opaque configs of the driver
when a ResourceClaim or ResourceClaimTemplate is created, with the node
daemon's own message, and lets through what only allocation can judge.

Against the real apiserver: the rendered policy is installed for a driver name
of this test only, and every claim is sent as a dry run (admission runs in
full, nothing is stored). Generated configs check that the apiserver and the
daemon's parser (driver/node/claimconfig.py) give the same verdict and the
same message on each.
"""

import json
import os
import re
import ssl
import time
from collections.abc import Iterator
from contextlib import suppress
from typing import Any

import httpx
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from driver.devicemodel.awsprofile import ULTRASERVER_MODES
from driver.devicemodel.profiles import CONFIG_KINDS as KINDS
from driver.devicemodel.profiles import NEURON_CONFIG, PROFILES, TRAINIUM
from driver.node.claimconfig import ConfigError, parse_config
from localsim.controlplane.plane import ControlPlane
from simdevice.topology import VALID_LNC
from testbed.waiting import Deadline
from tests.deploy.chart import Case, kubectl, render

pytestmark = pytest.mark.integration

CASE = Case("config", None)
DRIVER = "deploy-config.sim.dev"
NAMESPACE = CASE.namespace
DENIED = "denied request: "
API_GROUP_VERSION = TRAINIUM.dialect.api_version
EXAMPLES = int(os.environ.get("TRAINIUM_DRA_ADMISSION_EXAMPLES", "200"))
"""Generated configs per run; raise it for a longer fuzzing run."""


def policy_objects(profile: str = "trainium") -> list[dict[str, Any]]:
    objects = render(CASE, f"--set=driverName={DRIVER}", f"--set=profile={profile}")
    return [
        o
        for o in objects
        if o["kind"].startswith("ValidatingAdmissionPolicy")
        and o["metadata"]["name"].endswith("-opaque-config")
    ]


def policy_variables(profile: str = "trainium") -> dict[str, Any]:
    """The policy's variables whose expressions are literals, as Python values
    (a CEL list or map literal of strings and ints is also YAML)."""
    [policy] = [o for o in policy_objects(profile) if o["kind"] == "ValidatingAdmissionPolicy"]
    literals = ("apiVersion", "kinds", "fields", "logicalNeuronCores", "ultraserverModes")
    return {
        v["name"]: yaml.safe_load(v["expression"])
        for v in policy["spec"]["variables"]
        if v["name"] in literals
    }


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_the_policy_allows_what_the_daemon_allows(profile: str) -> None:
    found = policy_variables(profile)
    dialect = PROFILES[profile].dialect
    assert found["apiVersion"] == dialect.api_version
    assert found["kinds"] == list(KINDS)
    assert found["fields"] == {kind: list(fields) for kind, fields in dialect.fields.items()}
    assert found["logicalNeuronCores"] == list(VALID_LNC)
    assert found["ultraserverModes"] == list(ULTRASERVER_MODES)


class Door:
    """Dry-run creates against the apiserver as the admin."""

    def __init__(self, cp: ControlPlane) -> None:
        token = yaml.safe_load(cp.kubeconfig.read_text())["users"][0]["user"]["token"]
        self.http = httpx.Client(
            base_url=cp.config.url,
            verify=ssl.create_default_context(cafile=str(cp.config.certs.ca_cert)),
            headers={"Authorization": f"Bearer {token}"},
            timeout=30.0,
        )

    def create(self, kind: str, body: dict[str, Any]) -> str | None:
        """None when admitted, else the refusal's message (the policy's part of it)."""
        plural = "resourceclaimtemplates" if kind == "ResourceClaimTemplate" else "resourceclaims"
        answer = self.http.post(
            f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/{plural}",
            params={"dryRun": "All"},
            content=json.dumps(body),
            headers={"Content-Type": "application/json"},
        )
        if answer.status_code == 201:
            return None
        message: str = answer.json()["message"]
        return message.split(DENIED, 1)[1] if DENIED in message else f"[not ours] {message}"


def devices(configs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "requests": [{"name": "chip", "exactly": {"deviceClassName": f"chip.{DRIVER}"}}],
        "config": configs,
    }


def claim(*params: Any, driver: str = DRIVER) -> dict[str, Any]:
    configs = [{"opaque": {"driver": driver, "parameters": p}} for p in params]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"generateName": "c-"},
        "spec": {"devices": devices(configs)},
    }


def template(*params: Any) -> dict[str, Any]:
    configs = [{"opaque": {"driver": DRIVER, "parameters": p}} for p in params]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"generateName": "t-"},
        "spec": {"spec": {"devices": devices(configs)}},
    }


def neuron(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": API_GROUP_VERSION, "kind": NEURON_CONFIG, **fields}


@pytest.fixture(scope="module")
def door(control_plane: ControlPlane) -> Iterator[Door]:
    cp = control_plane
    manifest = yaml.safe_dump_all(policy_objects())
    with suppress(AssertionError):
        kubectl(cp, "create", "namespace", NAMESPACE)
    kubectl(cp, "apply", "--server-side", "-f", "-", input=manifest)
    door = Door(cp)
    try:
        deadline = Deadline(60)
        while door.create("ResourceClaim", claim(neuron(logicalNeuronCore=3))) is None:
            assert not deadline.passed(), "the policy never took effect"
            time.sleep(0.5)
        yield door
    finally:
        door.http.close()
        with suppress(AssertionError):
            kubectl(cp, "delete", "-f", "-", "--wait=false", input=manifest)


WHERE = "spec.devices.config[0].opaque.parameters"


def test_good_configs_pass(door: Door) -> None:
    assert door.create("ResourceClaim", claim(neuron(logicalNeuronCore=2))) is None
    assert door.create("ResourceClaim", claim(neuron(), neuron(logicalNeuronCore=None))) is None
    rack = {"apiVersion": API_GROUP_VERSION, "kind": "UltraServerConfig", "logicalNeuronCore": 1}
    assert door.create("ResourceClaimTemplate", template(rack)) is None
    # another driver's config is not ours to judge
    assert door.create("ResourceClaim", claim({"anything": [1]}, driver="other.dev")) is None
    # whether LNC 4 fits the device is known only after allocation: the daemon decides
    assert door.create("ResourceClaim", claim(neuron(logicalNeuronCore=4))) is None


@pytest.mark.parametrize(
    ("kind", "body", "message"),
    [
        (
            "ResourceClaim",
            claim(neuron(logicalNeuronCore=3)),
            f"{WHERE}.logicalNeuronCore: must be one of 1, 2, 4, got 3",
        ),
        (
            "ResourceClaimTemplate",
            template(neuron(logicalNeuronCore="2")),
            "spec.spec.devices.config[0].opaque.parameters.logicalNeuronCore: "
            'must be one of 1, 2, 4, got "2"',
        ),
        (
            "ResourceClaim",
            claim({"apiVersion": API_GROUP_VERSION, "kind": "GpuConfig"}),
            f'{WHERE}.kind: must be one of NeuronConfig, UltraServerConfig, got "GpuConfig"',
        ),
        (
            "ResourceClaim",
            claim({"kind": NEURON_CONFIG}),
            f'{WHERE}.apiVersion: must be "trainium.sim.dev/v1alpha1", got null',
        ),
        (
            "ResourceClaimTemplate",
            template(neuron(lnc=2, mode="x")),
            "spec.spec.devices.config[0].opaque.parameters.lnc: unknown field of NeuronConfig; "
            "allowed fields are apiVersion, kind, logicalNeuronCore",
        ),
        (
            "ResourceClaim",
            claim(neuron(), neuron(logicalNeuronCore=2.0)),
            "spec.devices.config[1].opaque.parameters.logicalNeuronCore: "
            "must be one of 1, 2, 4, got a float",
        ),
    ],
)
def test_bad_configs_are_refused_with_the_daemon_s_message(
    door: Door, kind: str, body: dict[str, Any], message: str
) -> None:
    assert door.create(kind, body) == message
    devices_of = body["spec"]["spec"] if kind == "ResourceClaimTemplate" else body["spec"]
    index = len(devices_of["devices"]["config"]) - 1
    where = WHERE.replace("[0]", f"[{index}]")
    if kind == "ResourceClaimTemplate":
        where = f"spec.{where}"
    params = devices_of["devices"]["config"][index]["opaque"]["parameters"]
    with pytest.raises(ConfigError) as daemon:
        parse_config(params, where)
    assert str(daemon.value) == message


scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
near_miss = st.sampled_from(
    [API_GROUP_VERSION, "trainium.sim.dev/v1", *KINDS, "neuronconfig", *VALID_LNC, 0, 3, 8]
)
parameters = st.dictionaries(
    st.sampled_from(["apiVersion", "kind", "logicalNeuronCore", "mode", "x", ""])
    | st.text(max_size=6),
    near_miss | json_values,
    max_size=4,
)
well_formed = st.builds(
    lambda kind, lnc: (
        {"apiVersion": API_GROUP_VERSION, "kind": kind}
        | ({} if lnc == "absent" else {"logicalNeuronCore": lnc})
    ),
    st.sampled_from(KINDS),
    st.sampled_from(["absent", None, *VALID_LNC, 0, 3, -1, 2.0, "4", True]),
)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    params=st.lists(parameters | well_formed, min_size=1, max_size=3),
    as_template=st.booleans(),
)
def test_the_apiserver_and_the_daemon_agree(
    door: Door, params: list[dict[str, Any]], as_template: bool
) -> None:
    kind = "ResourceClaimTemplate" if as_template else "ResourceClaim"
    refused = door.create(kind, template(*params) if as_template else claim(*params))
    prefix = "spec.spec.devices.config" if as_template else "spec.devices.config"
    expected = None
    for index, p in enumerate(params):
        try:
            parse_config(p, f"{prefix}[{index}].opaque.parameters")
        except ConfigError as err:
            expected = str(err)
            break
    assert refused == expected


@pytest.mark.parametrize("params", [[1], "NeuronConfig", 5, True])
def test_parameters_that_are_no_object_never_get_in(door: Door, params: Any) -> None:
    """The apiserver itself refuses them (before any policy), as the daemon would."""
    refused = door.create("ResourceClaim", claim(params))
    assert refused is not None and "must be a valid JSON object" in refused
    with pytest.raises(ConfigError, match=rf"^{re.escape(WHERE)}: must be an object"):
        parse_config(params, WHERE)
