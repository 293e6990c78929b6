"""The kind path without Docker: the cluster config has the gates, API and CDI
settings the driver needs; its workers are mapped to the servers of the
UltraServer that deploy/values/kind.yaml creates, by the controller's and the
node daemon's own mapping code; the Makefile targets and the demo agree with
it; the demo's objects pass a server-side dry-run."""

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from driver.devicemodel.nodemap import map_nodes, selector_matches
from driver.devicemodel.placement import find_place
from driver.devicemodel.ultraserver import parse_spec
from driver.jsontypes import JSON
from driver.localsim.controlplane import DRA_FEATURE_GATES, RUNTIME_CONFIG, ControlPlane
from driver.names import device_class_name
from tests.deploy.chart import CHART, fresh_namespace, kubectl

ROOT = Path(__file__).resolve().parents[2]
KIND = ROOT / "deploy" / "kind"


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def cluster() -> JSON:
    found: JSON = load(KIND / "cluster.yaml")
    return found


def values() -> JSON:
    found: JSON = load(ROOT / "deploy" / "values" / "kind.yaml")
    return found


def workers() -> dict[str, dict[str, str]]:
    """kind names workers <cluster>-worker, -worker2, ...; hostname label as kubeadm sets it."""
    name = cluster()["name"]
    nodes = [n for n in cluster()["nodes"] if n["role"] == "worker"]
    out = {}
    for i, node in enumerate(nodes):
        node_name = f"{name}-worker{'' if i == 0 else i + 1}"
        out[node_name] = {**node["labels"], "kubernetes.io/hostname": node_name}
    return out


def test_gates_runtime_config_and_cdi() -> None:
    c = cluster()
    assert c["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    assert c["featureGates"] == dict(DRA_FEATURE_GATES)
    assert c["runtimeConfig"] == dict(RUNTIME_CONFIG)
    (patch,) = c["containerdConfigPatches"]
    assert re.search(r"^\s*enable_cdi = true$", patch, re.M)
    cdi_dir = load(CHART / "values.yaml")["cdiDir"]
    assert f'"{cdi_dir}"' in patch


def test_workers_are_the_servers_of_the_kind_rack() -> None:
    (rack,) = values()["ultraservers"]
    spec = parse_spec({"metadata": {"name": rack["name"]}, "spec": rack["spec"]})
    nodes = workers()
    assert len(nodes) == spec.rack.servers == 4
    mapping = map_nodes(spec, nodes)
    assert mapping.missing == {}
    assert mapping.nodes == {i: name for i, name in enumerate(sorted(nodes))}
    obj = {"metadata": {"name": rack["name"]}, "spec": rack["spec"]}
    for index, name in mapping.nodes.items():
        assert find_place(name, nodes[name], [obj], values()["node"]["ultraserver"])[:2] == (
            rack["name"],
            index,
        )


def test_daemon_runs_on_every_worker_and_controller_on_the_control_plane() -> None:
    v = values()
    chart_defaults = load(CHART / "values.yaml")
    selector = {"matchLabels": v["node"]["nodeSelector"]}
    (term,) = chart_defaults["node"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    for labels in workers().values():
        assert selector_matches(selector, labels)
        assert selector_matches({"matchExpressions": term["matchExpressions"]}, labels)
    control_plane = {"node-role.kubernetes.io/control-plane": ""}  # kubeadm's label
    assert not selector_matches(selector, control_plane)
    assert v["controller"]["nodeSelector"] == control_plane
    assert {
        "key": "node-role.kubernetes.io/control-plane",
        "operator": "Exists",
        "effect": "NoSchedule",
    } in v["controller"]["tolerations"]


def test_make_targets_and_demo_agree_with_the_values() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for target in ("docker-image", "kind-up", "kind-load", "kind-install", "kind-demo"):
        assert re.search(rf"^{target}:", makefile, re.M), target
    defaults = dict(re.findall(r"^(\w+) \?= (.*)$", makefile, re.M))
    image = values()["image"]
    assert (defaults["IMAGE_REPO"], defaults["IMAGE_TAG"]) == (image["repository"], image["tag"])
    assert image["pullPolicy"] == "Never"  # kind-load puts it on the nodes
    assert defaults["KIND_CLUSTER"] == cluster()["name"]
    assert "deploy/kind/cluster.yaml" in makefile and "deploy/values/kind.yaml" in makefile
    demo = list(yaml.safe_load_all((ROOT / defaults["KIND_DEMO"]).read_text()))
    namespaces = {d["metadata"]["name"] for d in demo if d["kind"] == "Namespace"}
    assert namespaces == {defaults["KIND_DEMO_NAMESPACE"]}
    (pod,) = [d for d in demo if d["kind"] == "Pod"]
    (c,) = pod["spec"]["containers"]
    assert c["image"] == f"{image['repository']}:{image['tag']}"
    compile(c["args"][0], "demo", "exec")  # the workload script is valid Python
    (template,) = [d for d in demo if d["kind"] == "ResourceClaimTemplate"]
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == device_class_name("chip")


@pytest.mark.integration
def test_demo_objects_pass_server_side_dry_run(control_plane: ControlPlane) -> None:
    demo = list(yaml.safe_load_all((KIND / "demo.yaml").read_text()))
    (namespace,) = [d["metadata"]["name"] for d in demo if d["kind"] == "Namespace"]
    rest = [d for d in demo if d["kind"] != "Namespace"]
    fresh_namespace(control_plane, namespace)
    try:
        out = kubectl(
            control_plane,
            "apply",
            "--server-side",
            "--dry-run=server",
            "-f",
            "-",
            input=yaml.safe_dump_all(rest),
        )
        assert out.count("(server dry run)") == len(rest), out
    finally:
        kubectl(control_plane, "delete", "namespace", namespace, "--wait=false")
