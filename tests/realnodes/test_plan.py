"""Unit tests of the real-node cluster's pure parts: addresses, paths, the
configuration documents, the control plane's real-node flags, and the
certificates nodes authenticate with."""

import ipaddress
import json
import tomllib
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from driver.devicemodel.ultraserver import DEFAULT_SERVER_INDEX_LABEL as SERVER_INDEX_LABEL
from localsim.clusterspec import RACK_LABEL, ClusterSpec
from localsim.controlplane import binaries
from localsim.controlplane.certs import issue_certificate, write_certs
from localsim.controlplane.plane import (
    CONTROLLERS,
    ControlPlaneConfig,
    Ports,
    apiserver_args,
    controller_manager_args,
)
from localsim.realnodes import plan
from localsim.realnodes.release import cluster_values
from testbed.gomodules import HACK, required_version


def nodes(tmp_path: Path, racks: int = 1, generation: str = "trn3-gen1") -> list[plan.RealNode]:
    return plan.plan_nodes(tmp_path / "n", ClusterSpec.build(racks, generation).racks)


def test_every_node_gets_its_own_address_pod_subnet_namespace_and_cgroup(tmp_path: Path) -> None:
    found = nodes(tmp_path, racks=2)
    assert [n.name for n in found[:4]] == [f"rack-a-node-{i}" for i in range(4)]
    assert len(found) == 8
    for attr in ("ip", "pod_cidr", "netns", "veth", "cgroup", "mount_ns", "root"):
        values = [getattr(n, attr) for n in found]
        assert len(set(values)) == len(values), attr
    gateway = ipaddress.ip_address(plan.gateway())
    for node in found:
        assert ipaddress.ip_address(node.ip) in plan.NODE_SUBNET
        assert ipaddress.ip_address(node.ip) != gateway
        assert ipaddress.IPv4Network(node.pod_cidr).subnet_of(plan.POD_SUPERNET)
        assert node.labels == {RACK_LABEL: node.rack, SERVER_INDEX_LABEL: str(node.server)}
        assert len(node.veth) <= 15  # IFNAMSIZ - 1


def test_the_chart_paths_are_bind_mounted_from_the_node_directory(tmp_path: Path) -> None:
    node = nodes(tmp_path)[1]
    mounts = dict((target, source) for source, target in node.bind_mounts())
    for target in ("/var/lib/kubelet", "/var/run/cdi", "/var/lib/trainium-dra", "/var/log/pods"):
        assert mounts[target].parent == node.root
    assert mounts["/etc/resolv.conf"] == node.resolv_conf


def test_containerd_config_is_version_3_with_cdi_and_the_nodes_own_paths(tmp_path: Path) -> None:
    node = nodes(tmp_path)[2]
    config = tomllib.loads(plan.containerd_config(node, Path("/cni/bin"), "localhost/pause:1"))
    assert config["version"] == 3
    assert config["root"].startswith(str(node.root))
    assert config["state"].startswith(str(node.root))
    assert config["grpc"]["address"] == str(node.containerd_socket)
    runtime = config["plugins"]["io.containerd.cri.v1.runtime"]
    assert runtime["enable_cdi"] is True
    assert "/var/run/cdi" in runtime["cdi_spec_dirs"]
    assert runtime["restrict_oom_score_adj"] is True
    assert runtime["netns_mounts_under_state_dir"] is True
    assert runtime["cni"]["conf_dir"] == str(node.dir("cni"))
    assert config["plugins"]["io.containerd.cri.v1.images"]["pinned_images"]["sandbox"] == (
        "localhost/pause:1"
    )


def test_kubelet_config_suits_a_cgroup_v1_host_and_keeps_nodes_apart(tmp_path: Path) -> None:
    a, b = nodes(tmp_path)[:2]
    config = plan.kubelet_config(a, Path("/ca.crt"), {"ResourceHealthStatus": True})
    assert config["failCgroupV1"] is False
    assert config["cgroupDriver"] == "cgroupfs"
    assert config["cgroupRoot"] == a.cgroup != b.cgroup
    assert config["address"] == a.ip
    assert config["containerRuntimeEndpoint"] == f"unix://{a.containerd_socket}"
    assert config["authentication"]["anonymous"]["enabled"] is False
    assert config["authorization"]["mode"] == "Webhook"
    assert config["featureGates"]["ResourceHealthStatus"] is True


def test_cni_config_gives_the_node_its_pod_subnet(tmp_path: Path) -> None:
    node = nodes(tmp_path)[3]
    bridge = plan.cni_config(node)["plugins"][0]
    assert bridge["type"] == "bridge"
    assert bridge["ipam"]["ranges"] == [[{"subnet": node.pod_cidr}]]
    assert bridge["ipam"]["dataDir"].startswith(str(node.root))
    json.dumps(plan.cni_config(node))


def test_too_many_nodes_is_a_clear_error(tmp_path: Path) -> None:
    spec = ClusterSpec.build(6, "trn3-gen2")  # 216 nodes
    with pytest.raises(ValueError, match="at most 200 real nodes"):
        plan.plan_nodes(tmp_path, spec.racks)


def test_real_node_control_plane_authorizes_nodes_and_admits_service_accounts(
    tmp_path: Path,
) -> None:
    config = ControlPlaneConfig(
        tmp_path, Ports(1, 2, 3, 4, 5), address="172.30.99.1", real_nodes=True
    )
    args = apiserver_args(config, Path("kube-apiserver"))
    assert "--authorization-mode=Node,RBAC" in args
    assert "--bind-address=172.30.99.1" in args
    assert not any(a.startswith("--disable-admission-plugins") for a in args)
    assert not any(a.startswith("--endpoint-reconciler-type") for a in args)
    assert any(a.startswith("--kubelet-client-certificate=") for a in args)
    manager = controller_manager_args(config, Path("kube-controller-manager"))
    controllers = next(a for a in manager if a.startswith("--controllers=")).split("=")[1]
    for needed in (
        "daemonset-controller",
        "deployment-controller",
        "root-ca-certificate-publisher-controller",
    ):
        assert needed in controllers.split(",")
    assert "10.96.0.1" in config.serving_hosts
    assert config.url == "https://172.30.99.1:3"


def test_the_stand_in_control_plane_is_unchanged(tmp_path: Path) -> None:
    config = ControlPlaneConfig(tmp_path, Ports(1, 2, 3, 4, 5))
    args = apiserver_args(config, Path("kube-apiserver"))
    assert "--authorization-mode=RBAC" in args
    assert "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition" in args
    manager = controller_manager_args(config, Path("kube-controller-manager"))
    assert f"--controllers={','.join(CONTROLLERS)}" in manager


def test_node_certificates_name_the_node_and_its_group(tmp_path: Path) -> None:
    files = write_certs(tmp_path / "pki")
    cert, key = tmp_path / "kubelet.crt", tmp_path / "kubelet.key"
    issue_certificate(
        files, "system:node:n0", ("system:nodes",), cert, key, hosts=("172.30.99.10",)
    )
    parsed = x509.load_pem_x509_certificate(cert.read_bytes())
    assert parsed.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "system:node:n0"
    assert parsed.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == (
        "system:nodes"
    )
    names = parsed.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("172.30.99.10") in names.get_values_for_type(x509.IPAddress)
    assert key.stat().st_mode & 0o777 == 0o600
    ca = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
    parsed.verify_directly_issued_by(ca)


def test_helm_values_carry_the_image_and_the_clusters_ultraservers() -> None:
    spec = ClusterSpec.build(2, "trn3-gen1")
    values = cluster_values(spec, "localhost/trainium-dra/driver", "abc")
    assert values["image"] == {"repository": "localhost/trainium-dra/driver", "tag": "abc"}
    assert [u["name"] for u in values["ultraservers"]] == ["rack-a", "rack-b"]
    assert values["ultraservers"][0]["spec"]["generation"] == "trn3-gen1"


def test_node_runtime_versions_match_the_go_modules() -> None:
    assert (
        required_version(HACK / "containerd", "github.com/containerd/containerd/v2")
        == binaries.CONTAINERD_VERSION
    )
    assert (
        required_version(HACK / "cni", "github.com/containernetworking/plugins")
        == binaries.CNI_PLUGINS_VERSION
    )
