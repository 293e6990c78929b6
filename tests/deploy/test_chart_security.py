"""What the chart exposes: the simulator's fault controls are off unless a
value turns them on, and then ask for a Secret's token; NetworkPolicies let
in only the metrics port (and the controls only from the peers named)."""

import base64

import pytest

from driver.jsontypes import JSON
from driver.node import flags as node_flags
from tests.deploy.chart import Case, by_kind, one, render

pytestmark = pytest.mark.integration

DEFAULTS = Case("defaults", None)
ON = "--set=node.simControl.enabled=true"


def node_container(objects: list[JSON]) -> JSON:
    found: JSON = one(objects, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]
    return found


def node_flags_of(objects: list[JSON]) -> node_flags.Flags:
    args = node_container(objects)["args"][1:]
    return node_flags.parse(
        [a.replace("$(NODE_NAME)", "n").replace("$(POD_UID)", "u") for a in args]
    )


def test_controls_are_off_by_default() -> None:
    objects = render(DEFAULTS)
    assert node_flags_of(objects).sim_control_address == ""
    assert by_kind(objects, "Secret") == []
    assert [p["name"] for p in node_container(objects)["ports"]] == ["metrics"]


def test_turned_on_they_ask_for_the_chart_made_secret_s_token() -> None:
    objects = render(DEFAULTS, ON, "--set=node.simControl.port=9099")
    flags = node_flags_of(objects)
    assert flags.sim_control_address == "0.0.0.0:9099"
    secret = one(objects, "Secret")
    assert secret["metadata"]["name"] == f"{DEFAULTS.release}-trainium-dra-node-sim-control"
    assert len(base64.b64decode(secret["data"]["token"])) == 40
    pod = one(objects, "DaemonSet")["spec"]["template"]["spec"]
    [volume] = [v for v in pod["volumes"] if v["name"] == "sim-control-token"]
    assert volume["secret"]["secretName"] == secret["metadata"]["name"]
    [mount] = [m for m in node_container(objects)["volumeMounts"] if m["name"] == volume["name"]]
    token_path = f"{mount['mountPath']}/{volume['secret']['items'][0]['path']}"
    assert flags.sim_control_token_file == token_path
    assert mount["readOnly"] is True


def test_a_named_secret_is_used_and_none_is_made() -> None:
    objects = render(DEFAULTS, ON, "--set=node.simControl.tokenSecret=mine")
    assert by_kind(objects, "Secret") == []
    pod = one(objects, "DaemonSet")["spec"]["template"]["spec"]
    assert [v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v] == ["mine"]


def ingress_by_port(policy: JSON) -> dict[str, list[JSON] | None]:
    """Each ingress rule's port name and its peers (None: from anywhere)."""
    return {
        port["port"]: rule.get("from")
        for rule in policy["spec"]["ingress"]
        for port in rule["ports"]
    }


def test_network_policies_let_in_the_metrics_port_only() -> None:
    objects = render(DEFAULTS, ON)
    policies = {
        p["metadata"]["labels"]["app.kubernetes.io/component"]: p
        for p in by_kind(objects, "NetworkPolicy")
    }
    assert set(policies) == {"node", "controller"}
    for component, policy in policies.items():
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        selector = policy["spec"]["podSelector"]["matchLabels"]
        assert selector["app.kubernetes.io/component"] == component
        # no sim-control rule: with simControlFrom empty no peer may reach the controls
        assert ingress_by_port(policy) == {"metrics": [{"namespaceSelector": {}}]}
    peer = (
        '--set-json=networkPolicy.simControlFrom=[{"podSelector":{"matchLabels":{"role":"chaos"}}}]'
    )
    node = [
        p
        for p in by_kind(render(DEFAULTS, ON, peer), "NetworkPolicy")
        if "node" in p["metadata"]["name"]
    ]
    assert ingress_by_port(node[0])["sim-control"] == [
        {"podSelector": {"matchLabels": {"role": "chaos"}}}
    ]


def test_network_policies_can_be_left_out() -> None:
    assert by_kind(render(DEFAULTS, "--set=networkPolicy.enabled=false"), "NetworkPolicy") == []
