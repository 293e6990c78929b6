"""helm lint and helm template of the chart for every values case, and what the
rendered objects must say: the components' real flag parsers accept their
args, host paths are mounted where the daemon reports them, monitors select
the metrics Service, and dashboards and rules come from the chart's files.

Needs the built helm binary (like the control plane), so it is an integration test.
"""

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from driver.controller import flags as controller_flags
from driver.devicemodel.awsprofile import AWS_DRIVER, EFA_CLASS
from driver.httpendpoint import split_address
from driver.jsontypes import JSON
from driver.names import DEFAULT_DRIVER_NAME
from driver.node import flags as node_flags
from localsim.controlplane.schedulerconfig import chart_profiles
from tests.deploy.chart import (
    CHART,
    MONITORING_API,
    Case,
    by_kind,
    cases,
    helm,
    one,
    render,
    run_helm,
    values_args,
)

pytestmark = pytest.mark.integration

CASES = cases()
DEFAULTS = Case("defaults", None)
IDS = [c.name for c in CASES]
NAMESPACED = {
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "Deployment",
    "DaemonSet",
    "Service",
    "ConfigMap",
    "Secret",
    "NetworkPolicy",
    "ServiceMonitor",
    "PodMonitor",
    "PrometheusRule",
}


def values_of(case: Case) -> JSON:
    defaults: JSON = yaml.safe_load((CHART / "values.yaml").read_text())
    override: JSON = yaml.safe_load(case.values.read_text()) if case.values else {}
    return merge(defaults, override)


def driver_of(values: JSON) -> str:
    """The driver name the chart renders: driverName, or the profile's."""
    name: str = values["driverName"] or (
        AWS_DRIVER if values.get("profile") == "aws" else DEFAULT_DRIVER_NAME
    )
    return name


def merge(base: JSON, override: JSON) -> JSON:
    out = dict(base)
    for key, value in override.items():
        if value is None:  # helm: null removes a default
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def container(workload: JSON) -> JSON:
    containers = workload["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    found: JSON = containers[0]
    return found


def assert_probe_thresholds(c: JSON, probes: JSON) -> None:
    """Each probe reads its values; liveness waits longer than readiness, so a
    container slowed by its host leaves the Service long before it is restarted."""
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert c[probe]["periodSeconds"] == probes["periodSeconds"]
        assert c[probe]["timeoutSeconds"] == probes["timeoutSeconds"]
    assert c["startupProbe"]["failureThreshold"] == probes["startupFailureThreshold"]
    assert c["readinessProbe"]["failureThreshold"] == probes["failureThreshold"]
    assert c["livenessProbe"]["failureThreshold"] == probes["livenessFailureThreshold"]
    assert probes["livenessFailureThreshold"] > probes["failureThreshold"]


def expand(args: list[str], env: dict[str, str]) -> list[str]:
    """Expand $(VAR) as the kubelet does for container args."""
    return [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a) for a in args]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_lint(case: Case) -> None:
    out = run_helm("lint", "--strict", str(CHART), *values_args(case))
    assert "1 chart(s) linted, 0 chart(s) failed" in out


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("monitoring", [False, True], ids=["plain", "monitoring-api"])
def test_objects_are_named_and_namespaced(case: Case, monitoring: bool) -> None:
    objects = render(case, api_versions=[MONITORING_API] if monitoring else [])
    seen = set()
    for o in objects:
        key = (o["kind"], o["metadata"]["name"])
        assert key not in seen, f"{key} rendered twice"
        seen.add(key)
        if o["kind"] in NAMESPACED:
            assert o["metadata"]["namespace"] == case.namespace, key
        else:
            assert "namespace" not in o["metadata"], key
    monitors = [o for o in objects if o["apiVersion"] == MONITORING_API]
    if not monitoring:
        assert monitors == [], "monitoring objects need the operator's API"


def test_default_render_has_every_component() -> None:
    kinds = sorted({o["kind"] for o in render(CASES[0], api_versions=[MONITORING_API])})
    assert kinds == sorted(
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "CustomResourceDefinition",
            "DaemonSet",
            "Deployment",
            "DeviceClass",
            "NetworkPolicy",
            "PrometheusRule",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount",
            "ServiceMonitor",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
        ]
    )


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_node_daemonset_args_paths_and_updates(case: Case) -> None:
    values = values_of(case)
    objects = render(case)
    daemonsets = by_kind(objects, "DaemonSet")
    if not values["node"]["enabled"]:
        assert daemonsets == []
        return
    ds = daemonsets[0]
    c = container(ds)
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"]}
    assert env == {"NODE_NAME": "spec.nodeName", "POD_UID": "metadata.uid"}
    assert c["args"][0] == "node"
    flags = node_flags.parse(expand(c["args"][1:], {"NODE_NAME": "n-1", "POD_UID": "uid-1"}))
    driver, root = driver_of(values), values["kubeletRoot"]
    assert flags.driver_name == driver
    assert [n.name for n in flags.nodes] == ["n-1"] and flags.nodes[0].server_index is None
    assert flags.pod_uid == "uid-1"
    assert flags.kubelet_root == root
    assert flags.cdi_dir == values["cdiDir"]
    assert flags.state_dir == f"{values['stateDir']}/{{node}}"
    assert flags.ultraserver == values["node"]["ultraserver"]
    port = int(flags.http_address.rpartition(":")[2])
    assert port == values["node"]["httpPort"]
    # every host path is mounted at the same path: the daemon reports host paths
    volumes = {
        v["name"]: v["hostPath"]["path"]
        for v in ds["spec"]["template"]["spec"]["volumes"]
        if "hostPath" in v
    }
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert sorted(volumes.values()) == sorted(
        [
            f"{root}/plugins_registry",
            f"{root}/plugins/{driver}",
            values["cdiDir"],
            values["stateDir"],
        ]
    )
    for name, path in volumes.items():
        assert mounts[name] == path
    update = ds["spec"]["updateStrategy"]
    assert update["type"] == "RollingUpdate"
    assert update["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    sim_control = values["node"].get("simControl", {})
    if sim_control.get("enabled"):
        assert ports == {"metrics": port, "sim-control": sim_control["port"]}
        assert flags.sim_control_address == f"0.0.0.0:{sim_control['port']}"
        assert mounts["sim-control-token"] == str(Path(flags.sim_control_token_file).parent)
    else:
        assert ports == {"metrics": port}
        assert flags.sim_control_address == ""
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert_probe_thresholds(c, values["node"]["probes"])
    sa = ds["spec"]["template"]["spec"]["serviceAccountName"]
    assert sa == f"{case.release}-trainium-dra-node"
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert c["securityContext"]["allowPrivilegeEscalation"] is False


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_controller_deployment_args_and_lease_role(case: Case) -> None:
    values = values_of(case)
    objects = render(case)
    deployment = one(objects, "Deployment")
    spec = deployment["spec"]["template"]["spec"]
    c = container(deployment)
    assert deployment["spec"]["replicas"] == values["controller"]["replicas"]
    assert c["args"][0] == "controller"
    flags = controller_flags.parse(expand(c["args"][1:], {"POD_NAME": "ctl-abc"}))
    assert flags.driver_name == driver_of(values)
    assert flags.identity == "ctl-abc"
    assert flags.lease_namespace == case.namespace
    assert flags.kubeconfig is None
    assert flags.publishing == values["controller"]["publishing"]
    role = one(objects, "Role")
    assert role["metadata"]["namespace"] == case.namespace
    lease = {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"]}
    assert role["rules"] == [
        {**lease, "verbs": ["create"]},
        {**lease, "resourceNames": [flags.lease_name], "verbs": ["get", "update"]},
    ]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] != 0
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert spec["serviceAccountName"] == f"{case.release}-trainium-dra-controller"
    host, port = split_address(flags.http_address, "--http-address")
    assert (host, port) == ("0.0.0.0", values["controller"]["httpPort"])
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {"metrics": port}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert_probe_thresholds(c, values["controller"]["probes"])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_driver_name_everywhere(case: Case) -> None:
    driver = driver_of(values_of(case))
    objects = render(case)
    classes = by_kind(objects, "DeviceClass")
    # The aws profile's classes are AWS's two, with no extended resource names.
    aws = values_of(case).get("profile") == "aws"
    kinds = () if aws else ("core", "neuroncore", "chip", "server", "ultraserver")
    assert sorted(c["metadata"]["name"] for c in classes) == sorted(
        [driver] + [EFA_CLASS] * aws + [f"{k}.{driver}" for k in kinds]
    )
    for c in classes:
        assert f'device.driver == "{driver}"' in c["spec"]["selectors"][0]["cel"]["expression"]
    extended = {
        c["metadata"]["name"]: c["spec"]["extendedResourceName"]
        for c in classes
        if "extendedResourceName" in c["spec"]
    }
    names = values_of(case)["extendedResources"]
    wanted = {
        f"neuroncore.{driver}": names["core"],
        f"chip.{driver}": names["chip"],
        f"server.{driver}": names.get("server", ""),
        f"ultraserver.{driver}": names.get("ultraserver", ""),
    }
    assert extended == {name: value for name, value in wanted.items() if value and not aws}
    args = [
        a
        for kind in ("DaemonSet", "Deployment")
        for w in by_kind(objects, kind)
        for a in container(w)["args"]
    ]
    assert [a for a in args if a.startswith("--driver-name=")] == [f"--driver-name={driver}"] * (
        len(by_kind(objects, "DaemonSet")) + 1
    )


WORKLOADS = {"node": "DaemonSet", "controller": "Deployment"}


def component_of(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["labels"]["app.kubernetes.io/component"])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_monitors_select_each_component_s_metrics_service(case: Case) -> None:
    values = values_of(case)
    objects = render(case, api_versions=[MONITORING_API])
    metrics = values["metrics"]
    services = {component_of(o): o for o in by_kind(objects, "Service")}
    monitors = {component_of(o): o for o in by_kind(objects, "ServiceMonitor")}
    pod_monitors = {component_of(o): o for o in by_kind(objects, "PodMonitor")}
    enabled = {c for c in WORKLOADS if values[c]["enabled"]}
    assert services.keys() == (enabled if metrics["service"]["enabled"] else set())
    assert monitors.keys() == (services.keys() if metrics["serviceMonitor"]["enabled"] else set())
    assert pod_monitors.keys() == (enabled if metrics["podMonitor"]["enabled"] else set())
    for component, service in services.items():
        workload = one(objects, WORKLOADS[component])
        pod_labels = workload["spec"]["template"]["metadata"]["labels"]
        assert service["spec"]["clusterIP"] == "None"
        assert service["spec"]["selector"].items() <= pod_labels.items()
        assert workload["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
        (port,) = service["spec"]["ports"]
        container_ports = {p["name"]: p["containerPort"] for p in container(workload)["ports"]}
        assert (port["name"], port["targetPort"]) == ("metrics", "metrics")
        assert port["port"] == container_ports["metrics"] == values[component]["httpPort"]
        if component in monitors:
            sm = monitors[component]
            selected = sm["spec"]["selector"]["matchLabels"].items()
            assert selected <= service["metadata"]["labels"].items()
            assert not any(
                selected <= other["metadata"]["labels"].items()
                for name, other in services.items()
                if name != component
            )
            assert sm["spec"]["namespaceSelector"] == {"matchNames": [case.namespace]}
            assert [(e["port"], e["path"]) for e in sm["spec"]["endpoints"]] == [
                ("metrics", "/metrics")
            ]
            assert metrics["serviceMonitor"]["labels"].items() <= sm["metadata"]["labels"].items()
    for component, pm in pod_monitors.items():
        workload = one(objects, WORKLOADS[component])
        pod_labels = workload["spec"]["template"]["metadata"]["labels"]
        assert pm["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
        assert [e["port"] for e in pm["spec"]["podMetricsEndpoints"]] == ["metrics"]
        assert metrics["podMonitor"]["labels"].items() <= pm["metadata"]["labels"].items()


def rule_files() -> list[Path]:
    return sorted((CHART / "rules").glob("*.yaml"))


def dashboard_files() -> list[Path]:
    return sorted((CHART / "dashboards").glob("*.json"))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_rules_as_prometheusrule_and_configmap(case: Case) -> None:
    values = values_of(case)
    objects = render(case, api_versions=[MONITORING_API])
    configmaps = [
        c for c in by_kind(objects, "ConfigMap") if c["metadata"]["name"].endswith("-rules")
    ]
    rules = by_kind(objects, "PrometheusRule")
    if not values["prometheusRules"]["enabled"] or not rule_files():
        assert configmaps == [] and rules == []
        return
    expected_groups = [g for f in rule_files() for g in yaml.safe_load(f.read_text())["groups"]]
    assert rules[0]["spec"]["groups"] == expected_groups
    data = configmaps[0]["data"]
    assert sorted(data) == [f.name for f in rule_files()]
    for f in rule_files():
        assert data[f.name] == f.read_text().rstrip("\n")
    labels = values["prometheusRules"]["labels"]
    assert labels.items() <= rules[0]["metadata"]["labels"].items()
    assert by_kind(render(case), "PrometheusRule") == []


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_dashboards_as_sidecar_configmaps(case: Case) -> None:
    values = values_of(case)
    objects = render(case)
    dashboards = [
        c for c in by_kind(objects, "ConfigMap") if "-dashboard-" in c["metadata"]["name"]
    ]
    if not values["dashboards"]["enabled"]:
        assert dashboards == []
        return
    assert len(dashboards) == len(dashboard_files())
    by_file = {next(iter(c["data"])): c for c in dashboards}
    for f in dashboard_files():
        cm = by_file[f.name]
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert json.loads(cm["data"][f.name]) == json.loads(f.read_text())


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_ultraservers_from_values(case: Case) -> None:
    wanted = values_of(case)["ultraservers"]
    rendered = by_kind(render(case), "UltraServer")
    assert [(u["metadata"]["name"], u["spec"]) for u in rendered] == [
        (w["name"], w["spec"]) for w in wanted
    ]
    assert all(u["apiVersion"] == "trainium.sim.dev/v1alpha1" for u in rendered)


@pytest.mark.parametrize(
    ("setting", "error"),
    [
        ("controller.replica=2", "additional properties 'replica' not allowed"),
        ("driverName=Not_A_Name", "/driverName"),
        ("kubeletRoot=var/lib/kubelet", "/kubeletRoot"),
        ("node.httpPort=0", "/node/httpPort"),
        ("image.pullPolicy=Sometimes", "/image/pullPolicy"),
    ],
)
def test_schema_refuses_bad_values_naming_the_field(setting: str, error: str) -> None:
    result = subprocess.run(
        [str(helm()), "template", "x", str(CHART), f"--set={setting}"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert error in result.stderr, result.stderr


def test_the_scheduler_profile_scores_the_extended_resources_it_names() -> None:
    """The local cluster's scheduler serves what the chart ships; the profile
    names exactly the extended resources the chart's classes carry."""
    default = chart_profiles(render(DEFAULTS))
    assert [p["schedulerName"] for p in default] == ["trainium-dra-binpack"]
    fit = next(c["args"] for c in default[0]["pluginConfig"] if c["name"] == "NodeResourcesFit")
    assert fit["scoringStrategy"]["type"] == "MostAllocated"
    named = {r["name"] for r in fit["scoringStrategy"]["resources"]}
    classes = by_kind(render(DEFAULTS), "DeviceClass")
    carried = {c["spec"].get("extendedResourceName") for c in classes}
    assert named == carried - {None} == {"aws.amazon.com/neuroncore", "aws.amazon.com/neuron"}
    only_cores = chart_profiles(render(DEFAULTS, "--set=extendedResources.chip="))
    resources = only_cores[0]["pluginConfig"][0]["args"]["scoringStrategy"]["resources"]
    assert [r["name"] for r in resources] == ["aws.amazon.com/neuroncore"]
    assert chart_profiles(render(DEFAULTS, "--set=schedulerProfile.name=")) == []
    whole = by_kind(
        render(
            DEFAULTS,
            "--set=extendedResources.server=trainium.sim.dev/server",
            "--set=extendedResources.ultraserver=trainium.sim.dev/ultraserver",
        ),
        "DeviceClass",
    )
    assert {c["spec"].get("extendedResourceName") for c in whole} - carried == {
        "trainium.sim.dev/server",
        "trainium.sim.dev/ultraserver",
    }


def notes(*settings: str) -> str:
    """What `helm install` prints after installing (its NOTES), rendered without a cluster."""
    out = run_helm("install", "x", str(CHART), "--dry-run=client", *settings)
    return out[out.index("NOTES:") :]


def named_classes(text: str, driver: str) -> set[str]:
    """DeviceClass names the notes tell a user to request: each `deviceClassName N`,
    and each `(or a., b.)` prefix put before the driver name."""
    found = set(re.findall(r"deviceClassName (\S+?)[,.]?\s", text))
    for prefixes in re.findall(r"\(or ([a-z., ]+)\)", text):
        found |= {f"{p.strip()}{driver}" for p in prefixes.split(",")}
    return found


@pytest.mark.parametrize(
    ("settings", "driver"),
    [((), DEFAULT_DRIVER_NAME), (("--set=profile=aws",), AWS_DRIVER)],
    ids=["trainium", "aws"],
)
def test_notes_name_only_classes_the_profile_creates(
    settings: tuple[str, ...], driver: str
) -> None:
    text = notes(*settings)
    named = named_classes(text, driver)
    created = {c["metadata"]["name"] for c in by_kind(render(DEFAULTS, *settings), "DeviceClass")}
    assert named and named <= created, f"notes name {sorted(named - created)}, not created"
    assert f"driver {driver}" in text


def test_notes_point_aws_users_at_the_operator_only_where_it_runs() -> None:
    assert "neuronultraservers" not in notes("--set=profile=aws")
    assert "neuronultraservers" in notes(
        "--set=profile=aws", "--set=ultraserverOperator.enabled=true"
    )
