"""The kind path's configuration, checked without a kind cluster (`make
kind-e2e` runs one): the cluster config has the gates, API and CDI settings
the driver needs and agrees with the node image's containerd and CNI config;
its nodes are mapped to the servers of the UltraServer that
deploy/values/kind.yaml creates, by the controller's and the node daemon's own
mapping code, and carry the AWS profile's pair and quad labels, which
deploy/values/kind-aws.yaml switches the chart to; podman's limits fit this
host; the Makefile targets, the demo, docs/kind.md and the end-to-end script
agree; the demo's objects pass a server-side dry-run."""

import ipaddress
import json
import re
import resource
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from driver.devicemodel.awsprofile import EFA_CLASS, ULTRASERVER_LABEL_PREFIX
from driver.devicemodel.nodemap import map_nodes, selector_matches
from driver.devicemodel.placement import find_place
from driver.devicemodel.profiles import AWS
from driver.devicemodel.ultraserver import DEFAULT_SERVER_INDEX_LABEL, parse_spec
from driver.jsontypes import JSON
from driver.names import DEFAULT_DRIVER_NAME, WHOLE_BY_NAME, device_class_name
from localsim.controlplane.k8srelease import DEFAULT
from localsim.controlplane.plane import ControlPlane
from simdevice.topology import rack_spec
from tests.deploy.chart import CHART, Case, by_kind, fresh_namespace, kubectl, one, render

ROOT = Path(__file__).resolve().parents[2]
KIND_TARGETS = (
    "kind-node-image",
    "kind-up",
    "kind-load",
    "kind-install",
    "kind-demo",
    "kind-kueue",
    "kind-aws",
    "kind-lws",
    "kind-down",
)
"""docs/kind.md's steps, in its order."""
KIND = ROOT / "deploy" / "kind"
NODE = ROOT / "hack" / "kind" / "node"


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def cluster() -> JSON:
    found: JSON = load(KIND / "cluster.yaml")
    return found


def values() -> JSON:
    found: JSON = load(ROOT / "deploy" / "values" / "kind.yaml")
    return found


def kind_nodes() -> dict[str, dict[str, str]]:
    """Node name -> labels, as kind names nodes (<cluster>-control-plane,
    -worker, -worker2, ...) and kubeadm labels them."""
    name = cluster()["name"]
    out = {}
    seen: dict[str, int] = {}
    for node in cluster()["nodes"]:
        role = node["role"]
        seen[role] = seen.get(role, 0) + 1
        node_name = f"{name}-{role}{'' if seen[role] == 1 else seen[role]}"
        labels = {**node.get("labels", {}), "kubernetes.io/hostname": node_name}
        if role == "control-plane":
            labels["node-role.kubernetes.io/control-plane"] = ""
        out[node_name] = labels
    return out


def kubeadm_patch(kind: str) -> JSON:
    (patch,) = [
        p for p in map(yaml.safe_load, cluster()["kubeadmConfigPatches"]) if p["kind"] == kind
    ]
    found: JSON = patch
    return found


def containerd_patch() -> JSON:
    (patch,) = cluster()["containerdConfigPatches"]
    found: JSON = tomllib.loads(patch)
    return found


def test_gates_runtime_config_and_cdi() -> None:
    c = cluster()
    assert c["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    assert c["featureGates"] == DEFAULT.feature_gates
    assert c["runtimeConfig"] == dict(DEFAULT.runtime_config)
    cri = containerd_patch()["plugins"]["io.containerd.cri.v1.runtime"]
    assert cri["enable_cdi"] is True
    assert load(CHART / "values.yaml")["cdiDir"] in cri["cdi_spec_dirs"]
    # Lowering a container's OOM score needs CAP_SYS_RESOURCE, which the node lacks.
    assert cri["restrict_oom_score_adj"] is True


def test_cluster_config_fits_the_node_image() -> None:
    """The patches name the sections of the node's containerd config (version
    3), the kubelet's cgroup driver is the one containerd's runc uses, and the
    node image's pod network replaces kind's: its CNI template takes each
    node's podCIDR, carved out of a pod subnet with a /24 for every node."""
    node_config = tomllib.loads((NODE / "config.toml").read_text())
    assert node_config["version"] == 3
    assert set(containerd_patch()["plugins"]) <= set(node_config["plugins"])
    runc = node_config["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]["runc"]
    kubelet = kubeadm_patch("KubeletConfiguration")
    assert kubelet["failCgroupV1"] is False
    assert (kubelet["cgroupDriver"] == "systemd") == runc["options"]["SystemdCgroup"]
    networking = cluster()["networking"]
    assert networking["disableDefaultCNI"] is True
    conflist = json.loads((NODE / "pod-network.conflist").read_text())
    (bridge,) = [p for p in conflist["plugins"] if p["type"] == "bridge"]
    assert bridge["ipam"]["ranges"] == [[{"subnet": "@POD_CIDR@"}]]
    # pod-network.sh masquerades only what leaves the pod subnets.
    assert bridge["ipMasq"] is False
    pod_subnet = ipaddress.IPv4Network(networking["podSubnet"])
    assert len(list(pod_subnet.subnets(new_prefix=24))) >= len(cluster()["nodes"])
    # kind always adds preflight; CoreDNS's image is not built here.
    assert kubeadm_patch("InitConfiguration")["skipPhases"] == ["preflight", "addon/coredns"]


def test_one_control_plane_runs_its_components_without_leader_election() -> None:
    """Appended to kind's own extraArgs (a JSON 6902 add, not a merge patch
    that would drop the feature gates), and only while there is one control
    plane for them to run on."""
    (patch,) = cluster()["kubeadmConfigPatchesJSON6902"]
    assert (patch["group"], patch["version"], patch["kind"]) == (
        "kubeadm.k8s.io",
        "v1beta4",
        "ClusterConfiguration",
    )
    ops = yaml.safe_load(patch["patch"])
    assert {(op["op"], op["path"]) for op in ops} == {
        ("add", "/scheduler/extraArgs/-"),
        ("add", "/controllerManager/extraArgs/-"),
    }
    assert all(op["value"] == {"name": "leader-elect", "value": "false"} for op in ops)
    assert [n["role"] for n in cluster()["nodes"]].count("control-plane") == 1


def test_podman_limits_fit_this_host() -> None:
    """Podman's default nofile and nproc limits exceed these hosts' hard limits,
    and the node container cannot raise them (no CAP_SYS_RESOURCE)."""
    conf = tomllib.loads((ROOT / "hack" / "kind" / "containers.conf").read_text())
    assert conf["engine"]["runtime"] == "runc"  # crun refuses hybrid cgroup hosts
    hard = {"nofile": resource.RLIMIT_NOFILE, "nproc": resource.RLIMIT_NPROC}
    limits = dict(u.split("=") for u in conf["containers"]["default_ulimits"])
    assert set(limits) == set(hard)
    for name, value in limits.items():
        soft, hard_value = map(int, value.split(":"))
        host = resource.getrlimit(hard[name])[1]
        assert soft <= hard_value
        assert host == resource.RLIM_INFINITY or hard_value <= host, (name, host)


def test_nodes_are_servers_of_the_kind_rack() -> None:
    (rack,) = values()["ultraservers"]
    spec = parse_spec({"metadata": {"name": rack["name"]}, "spec": rack["spec"]})
    nodes = kind_nodes()
    mapping = map_nodes(spec, nodes)
    # The whole rack: the control plane is server 0, the workers servers 1 to 3.
    name = cluster()["name"]
    assert mapping.nodes == {
        0: f"{name}-control-plane",
        1: f"{name}-worker",
        2: f"{name}-worker2",
        3: f"{name}-worker3",
    }
    assert not mapping.missing
    obj = {"metadata": {"name": rack["name"]}, "spec": rack["spec"]}
    for index, name in mapping.nodes.items():
        assert find_place(name, nodes[name], [obj], values()["node"]["ultraserver"])[:2] == (
            rack["name"],
            index,
        )


def test_nodes_carry_the_aws_profiles_pair_and_quad_labels() -> None:
    """What the AWS profile labels a server's node with on the local cluster,
    kind's nodes carry from the start: the pairs are servers 0 and 1, 2 and 3."""
    (rack,) = values()["ultraservers"]
    servers = rack_spec(rack["spec"]["generation"]).servers
    for labels in kind_nodes().values():
        server = int(labels[DEFAULT_SERVER_INDEX_LABEL])
        aws = {k: v for k, v in labels.items() if k.startswith(ULTRASERVER_LABEL_PREFIX)}
        wanted = AWS.node_labels(rack["name"], rack["spec"]["generation"], servers, None, server)
        assert aws == wanted, server
    pairs = {labels[f"{ULTRASERVER_LABEL_PREFIX}2"] for labels in kind_nodes().values()}
    assert len(pairs) == 2


@pytest.mark.integration
def test_the_aws_values_switch_the_profile_and_keep_the_rack() -> None:
    """`make kind-aws` renders the chart with deploy/values/kind-aws.yaml over
    kind.yaml: AWS's DeviceClasses, and node daemons that differ only in the
    profile and the driver's name; the image and the UltraServer stay."""
    case = Case("kind", ROOT / "deploy" / "values" / "kind.yaml")
    aws = render(case, f"--values={ROOT / 'deploy' / 'values' / 'kind-aws.yaml'}")
    trainium = render(case)
    assert {c["metadata"]["name"] for c in by_kind(aws, "DeviceClass")} == {
        AWS.default_driver,
        EFA_CLASS,
    }

    def daemon(objects: list[JSON]) -> str:
        return json.dumps(one(objects, "DaemonSet")["spec"]["template"]["spec"])

    # The kubelet plugin directory is named after the driver.
    renamed = daemon(trainium)
    for before in (f"--driver-name={DEFAULT_DRIVER_NAME}", f"plugins/{DEFAULT_DRIVER_NAME}"):
        renamed = renamed.replace(before, before.replace(DEFAULT_DRIVER_NAME, AWS.default_driver))
    assert daemon(aws) == renamed.replace("--profile=trainium", "--profile=aws")
    assert by_kind(aws, "UltraServer") == by_kind(trainium, "UltraServer")


def test_whole_servers_and_racks_are_named_as_with_kueue_on_the_local_cluster() -> None:
    """Kueue on kind counts what the local cluster's Kueue counts: the same
    extended resource names on the server and UltraServer classes."""
    named = values()["extendedResources"]
    assert {f"extendedResources.{k}": v for k, v in named.items()} == WHOLE_BY_NAME


def test_daemon_runs_on_every_node_and_controller_on_the_control_plane() -> None:
    v = values()
    chart_defaults = load(CHART / "values.yaml")
    daemon = {"matchLabels": v["node"]["nodeSelector"]}
    controller = {"matchLabels": v["controller"]["nodeSelector"]}
    (term,) = chart_defaults["node"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    nodes = kind_nodes()
    for labels in nodes.values():
        assert selector_matches(daemon, labels)
        assert selector_matches({"matchExpressions": term["matchExpressions"]}, labels)
    assert [n for n, labels in nodes.items() if selector_matches(controller, labels)] == [
        f"{cluster()['name']}-control-plane"
    ]
    # The daemon tolerates the control plane's taint.
    assert {"operator": "Exists"} in chart_defaults["node"]["tolerations"]
    # Where there are workers too, the control plane keeps its taint.
    assert {
        "key": "node-role.kubernetes.io/control-plane",
        "operator": "Exists",
        "effect": "NoSchedule",
    } in v["controller"]["tolerations"]


def test_make_targets_and_demo_agree_with_the_values() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for target in (*KIND_TARGETS, "kind-tools", "kind-e2e", "docker-image"):
        assert re.search(rf"^{target}:", makefile, re.M), target
    defaults = dict(re.findall(r"^(\w+) \?= (.*)$", makefile, re.M))
    image = values()["image"]
    assert (defaults["IMAGE_REPO"], defaults["IMAGE_TAG"]) == (image["repository"], image["tag"])
    assert image["pullPolicy"] == "Never"  # kind-load puts it on the nodes
    assert image["repository"].startswith("localhost/")  # never looked up in a registry
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


def test_docs_steps_are_what_kind_e2e_runs() -> None:
    """The `make kind-*` commands of docs/kind.md, in order, are the steps
    hack/kind/e2e.sh runs (the demo's pod wait sits between demo and down)."""
    docs = (ROOT / "docs" / "kind.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", docs, re.S)
    documented = [m for b in blocks for m in re.findall(r"^make (kind-[a-z-]+)$", b, re.M)]
    assert documented[: len(KIND_TARGETS)] == list(KIND_TARGETS)
    script = (ROOT / "hack" / "kind" / "e2e.sh").read_text()
    steps = re.findall(r"^step (kind-[a-z-]+)$", script, re.M)
    downs = re.findall(r"kind-down KIND_CLUSTER", script)
    assert [*steps, "kind-down"] == list(KIND_TARGETS) and downs


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
