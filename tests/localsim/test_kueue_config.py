"""Unit tests of `up --with-kueue`'s pure parts: the Kueue configuration, the
default queues for a cluster spec, the flag (the webhook and CRD rewrites are
tests/localsim/test_addon.py's)."""

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from localsim.addon.ports import ManagerPorts
from localsim.clusterspec import ClusterSpec
from localsim.commands.flags import parse_up
from localsim.kueue.chartvalues import chart_values, node_allocatable, racks_of
from localsim.kueue.install import KUEUE_VERSION, KueueInstall, KueueMissingError
from localsim.kueue.queues import (
    CLUSTER_QUEUE,
    LOCAL_QUEUE,
    LOCAL_QUEUE_NAMESPACE,
    QueueSpecError,
    in_cores,
    queue_objects,
    quotas,
    scale_quantity,
)
from localsim.kueue.settings import (
    admission,
    chart_configuration,
    configuration,
    device_class_mappings,
    transformations,
)
from localsim.prometheus import KUEUE_JOB, Targets, prometheus_config
from testbed.gomodules import HACK, required_version

DRIVER = "trainium.sim.dev"


def device_class(name: str, resource: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": []}
    if resource:
        spec["extendedResourceName"] = resource
    return {"kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


CLASSES = [
    device_class(f"core.{DRIVER}"),
    device_class(f"neuroncore.{DRIVER}", "aws.amazon.com/neuroncore"),
    device_class(f"chip.{DRIVER}", "aws.amazon.com/neuron"),
    device_class(f"server.{DRIVER}"),
]


def test_version_matches_the_go_module() -> None:
    assert required_version(HACK / "kueue", "sigs.k8s.io/kueue") == KUEUE_VERSION


def test_a_missing_build_names_the_make_target(tmp_path: Path) -> None:
    with pytest.raises(KueueMissingError, match=r"make kueue"):
        KueueInstall.locate(tmp_path)


def test_only_classes_with_an_extended_resource_are_mapped() -> None:
    assert device_class_mappings(CLASSES) == [
        {"name": "aws.amazon.com/neuron", "deviceClassNames": [f"chip.{DRIVER}"]},
        {"name": "aws.amazon.com/neuroncore", "deviceClassNames": [f"neuroncore.{DRIVER}"]},
    ]


def test_configuration_serves_on_loopback_with_the_given_certificates() -> None:
    mappings = device_class_mappings(CLASSES)
    config = configuration(ManagerPorts(9443, 8443, 8081), Path("/state/kueue/certs"), mappings)
    assert config["webhook"] == {"host": "127.0.0.1", "port": 9443, "certDir": "/state/kueue/certs"}
    assert config["metrics"]["bindAddress"] == "127.0.0.1:8443"
    assert config["health"]["healthProbeBindAddress"] == "127.0.0.1:8081"
    assert config["internalCertManagement"] == {"enable": False}
    assert config["featureGates"]["DynamicResourceAllocation"] is True
    assert config["resources"]["deviceClassMappings"] == mappings
    assert set(config["integrations"]["frameworks"]) == {"batch/job", "pod"}


def test_quotas_are_the_whole_rack() -> None:
    spec = ClusterSpec.build(1, "trn3-gen2")
    assert quotas(spec, device_class_mappings(CLASSES), DRIVER) == {
        "aws.amazon.com/neuroncore": "1152",
        "aws.amazon.com/neuron": "144",
        "cpu": "2304",
        "memory": "18432Gi",
    }


def test_quotas_count_only_the_nodes_a_partial_rack_has() -> None:
    spec = ClusterSpec.build(2, "trn3-gen2", nodes_per_rack=4)
    classes = [*CLASSES, device_class(f"ultraserver.{DRIVER}", "trainium.sim.dev/ultraserver")]
    found = quotas(spec, device_class_mappings(classes), DRIVER)
    assert found["aws.amazon.com/neuroncore"] == str(2 * 4 * 4 * 8)
    assert found["aws.amazon.com/neuron"] == str(2 * 4 * 4)
    assert found["trainium.sim.dev/ultraserver"] == "0"


def test_an_extended_resource_on_a_partition_class_is_refused() -> None:
    classes = [device_class(f"core.{DRIVER}", "example.com/partition")]
    with pytest.raises(QueueSpecError, match=r"'core'.*extendedResources"):
        quotas(ClusterSpec.build(1, "trn3-gen2"), device_class_mappings(classes), DRIVER)


def test_scale_quantity() -> None:
    assert scale_quantity("512Gi", 3) == "1536Gi"
    with pytest.raises(QueueSpecError, match="whole number"):
        scale_quantity("0.5", 2)


def test_queue_objects_cover_every_quota_in_one_flavor() -> None:
    flavor, cluster_queue, local_queue = queue_objects({"cpu": "64", "aws.amazon.com/neuron": "4"})
    group = cluster_queue["spec"]["resourceGroups"][0]
    assert group["coveredResources"] == ["aws.amazon.com/neuron", "cpu"]
    assert group["flavors"][0]["name"] == flavor["metadata"]["name"]
    assert group["flavors"][0]["resources"][1] == {"name": "cpu", "nominalQuota": "64"}
    assert cluster_queue["spec"]["namespaceSelector"] == {}
    assert cluster_queue["metadata"]["name"] == CLUSTER_QUEUE
    assert local_queue["metadata"] == {"name": LOCAL_QUEUE, "namespace": LOCAL_QUEUE_NAMESPACE}
    assert local_queue["spec"] == {"clusterQueue": CLUSTER_QUEUE}


def test_with_kueue_flag() -> None:
    assert parse_up(["--with-kueue"]).settings.with_kueue
    assert not parse_up([]).settings.with_kueue


def test_kueue_quota_cores_counts_chips_servers_and_racks_as_their_cores() -> None:
    classes = [
        *CLASSES[:3],
        device_class(f"server.{DRIVER}", "trainium.sim.dev/server"),
        device_class(f"ultraserver.{DRIVER}", "trainium.sim.dev/ultraserver"),
    ]
    mappings = device_class_mappings(classes)
    core, cores = in_cores(ClusterSpec.build(1, "trn3-gen2"), mappings, DRIVER)
    assert core == "aws.amazon.com/neuroncore"
    assert cores == {
        "aws.amazon.com/neuroncore": 1,
        "aws.amazon.com/neuron": 8,
        "trainium.sim.dev/server": 32,
        "trainium.sim.dev/ultraserver": 1152,
    }
    found = transformations(cores, core)
    assert [t["input"] for t in found] == [
        "aws.amazon.com/neuron",
        "trainium.sim.dev/server",
        "trainium.sim.dev/ultraserver",
    ]
    assert found[2] == {
        "input": "trainium.sim.dev/ultraserver",
        "strategy": "Replace",
        "outputs": {"aws.amazon.com/neuroncore": "1152"},
    }
    config = configuration(ManagerPorts(1, 2, 3), Path("/c"), [], found)
    assert config["resources"] == {"deviceClassMappings": [], "transformations": found}
    two = ClusterSpec.build(2, "trn3-gen2")
    mixed = replace(two, racks=(two.racks[0], replace(two.racks[1], generation="trn3-gen1")))
    with pytest.raises(QueueSpecError, match="--kueue-quota cores: the racks are of generations"):
        in_cores(mixed, mappings, DRIVER)
    with pytest.raises(QueueSpecError, match="no DeviceClass of single cores"):
        in_cores(ClusterSpec.build(1, "trn3-gen2"), mappings[:1], DRIVER)


def test_kueue_quota_needs_with_kueue(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_up(["--with-kueue", "--kueue-quota", "cores"]).settings.kueue_quota == "cores"
    assert parse_up(["--with-kueue"]).settings.kueue_quota == "devices"
    with pytest.raises(SystemExit):
        parse_up(["--kueue-quota", "cores"])
    assert "--kueue-quota: only with --with-kueue" in capsys.readouterr().err


def test_with_kueue_refuses_the_aws_profile(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_up(["--with-kueue", "--profile", "aws"])
    assert "--with-kueue: the aws profile" in capsys.readouterr().err


def test_prometheus_scrapes_kueue_over_https_with_the_cluster_ca(tmp_path: Path) -> None:
    targets = Targets(
        {},
        apiserver="127.0.0.1:6443",
        ca_file=tmp_path / "ca.crt",
        token_file=tmp_path / "token",
        kueue="127.0.0.1:8443",
    )
    jobs = {j["job_name"]: j for j in prometheus_config(targets)["scrape_configs"]}
    assert jobs[KUEUE_JOB]["static_configs"] == [{"targets": ["127.0.0.1:8443"]}]
    assert jobs[KUEUE_JOB]["scheme"] == "https"
    assert jobs[KUEUE_JOB]["tls_config"] == {"ca_file": str(tmp_path / "ca.crt")}
    assert jobs[KUEUE_JOB]["authorization"] == {"credentials_file": str(tmp_path / "token")}


def kind_node(name: str, rack: str | None, cpu: str = "2") -> dict[str, Any]:
    labels = {"trainium.sim.dev/ultraserver": rack} if rack else {}
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}},
    }


KIND_RACK = {
    "kind": "UltraServer",
    "metadata": {"name": "kind-rack"},
    "spec": {"generation": "trn3-gen1"},
}


def test_kueue_from_its_chart_admits_and_counts_as_the_local_clusters() -> None:
    mappings = device_class_mappings(CLASSES)
    local = configuration(ManagerPorts(webhook=1, metrics=2, health=3), Path("/certs"), mappings)
    chart = chart_configuration(mappings)
    for key, value in admission(mappings, []).items():
        if key != "featureGates":
            assert chart[key] == local[key] == value, key
    # The same gates, but the chart's visibility APIServices need their server.
    assert chart["featureGates"] == {**local["featureGates"], "VisibilityOnDemand": True}
    assert chart["featureGates"]["DynamicResourceAllocation"] is True
    # The chart's own ports and certificates, not the local cluster's loopback ones.
    assert chart["webhook"] == {"port": 9443}
    assert chart["leaderElection"] == local["leaderElection"] == {"leaderElect": False}
    assert "internalCertManagement" not in chart
    values = chart_values(mappings)
    assert yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"]) == chart


def test_kind_nodes_make_one_full_rack_and_its_queue() -> None:
    objects = [KIND_RACK, *(kind_node(f"n{i}", "kind-rack") for i in range(4)), *CLASSES]
    (rack,) = racks_of(objects)
    assert (rack.name, rack.generation, rack.servers, rack.nodes) == (
        "kind-rack",
        "trn3-gen1",
        4,
        4,
    )
    spec = ClusterSpec((rack,))
    quota = quotas(spec, device_class_mappings(CLASSES), DRIVER, node_allocatable(objects))
    assert quota == {
        "cpu": "8",
        "memory": "64Gi",
        "aws.amazon.com/neuroncore": str(4 * 16 * 8),
        "aws.amazon.com/neuron": "64",
    }


def test_kind_nodes_that_differ_or_no_rack_are_refused() -> None:
    with pytest.raises(QueueSpecError, match="different cpu and memory"):
        node_allocatable([kind_node("a", "kind-rack"), kind_node("b", "kind-rack", cpu="4")])
    with pytest.raises(QueueSpecError, match="install the driver's chart"):
        racks_of([kind_node("a", None)])
