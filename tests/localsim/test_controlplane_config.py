"""Unit tests of the pure parts of the harness: versions and command lines."""

import json
import subprocess
from pathlib import Path

import pytest

from localsim.controlplane import binaries
from localsim.controlplane.k8srelease import V1_36, V1_37, Release
from localsim.controlplane.plane import (
    CLIENT_QPS,
    CONTROLLERS,
    ControlPlaneConfig,
    Ports,
    apiserver_args,
    controller_manager_args,
    feature_gates_flag,
    scheduler_args,
)
from localsim.controlplane.schedulerconfig import configuration
from testbed.gomodules import HACK, required_version


def test_default_versions_match_the_go_modules() -> None:
    assert required_version(HACK / "k8s", "k8s.io/kubernetes") == binaries.K8S_VERSION
    assert required_version(HACK / "etcd", "go.etcd.io/etcd/server/v3") == binaries.ETCD_VERSION


def test_every_staging_module_is_replaced_with_the_matching_version() -> None:
    listing = subprocess.run(
        ["go", "mod", "edit", "-json"], cwd=HACK / "k8s", capture_output=True, text=True, check=True
    )
    replaces = {r["Old"]["Path"]: r["New"] for r in json.loads(listing.stdout)["Replace"]}
    staging_version = "v0." + binaries.K8S_VERSION.removeprefix("v1.")
    for module in (
        "k8s.io/api",
        "k8s.io/apimachinery",
        "k8s.io/client-go",
        "k8s.io/component-base",
        "k8s.io/dynamic-resource-allocation",
        "k8s.io/kubelet",
    ):
        assert replaces[module] == {"Path": module, "Version": staging_version}


def config(tmp_path: Path, release: Release = V1_37, **gates: bool) -> ControlPlaneConfig:
    return ControlPlaneConfig(tmp_path, Ports(1, 2, 3, 4, 5), release, gates)


def test_all_components_get_the_same_feature_gates(tmp_path: Path) -> None:
    cfg = config(tmp_path, DRAPartitionableDevices=False)
    flag = feature_gates_flag(cfg.feature_gates)
    assert "DRAPartitionableDevices=false" in flag
    assert "GenericWorkload=true" in flag
    for args in (
        apiserver_args(cfg, Path("a")),
        controller_manager_args(cfg, Path("c")),
        scheduler_args(cfg, Path("s")),
    ):
        assert flag in args


@pytest.mark.parametrize(
    ("release", "runtime_config", "named", "unnamed"),
    [
        (
            V1_36,
            {"resource.k8s.io/v1beta2=true", "scheduling.k8s.io/v1alpha2=true"},
            {"GangScheduling", "DRADeviceTaintRules"},
            {"TopologyAwareWorkloadScheduling"},
        ),
        # DeviceTaintRules are GA in resource.k8s.io/v1; gangs come with GenericWorkload.
        (
            V1_37,
            {"scheduling.k8s.io/v1beta1=true"},
            {"TopologyAwareWorkloadScheduling", "GenericWorkload"},
            {"GangScheduling", "DRADeviceTaintRules", "DRAResourceClaimDeviceStatus"},
        ),
    ],
)
def test_apiserver_serves_the_releases_apis_and_skips_node_admission(
    tmp_path: Path, release: Release, runtime_config: set[str], named: set[str], unnamed: set[str]
) -> None:
    args = apiserver_args(config(tmp_path, release), Path("kube-apiserver"))
    [runtime] = [a for a in args if a.startswith("--runtime-config=")]
    assert set(runtime.removeprefix("--runtime-config=").split(",")) == runtime_config
    [gates] = [a for a in args if a.startswith("--feature-gates=")]
    set_gates = {g.split("=")[0] for g in gates.removeprefix("--feature-gates=").split(",")}
    assert named <= set_gates
    assert not unnamed & set_gates
    assert "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition" in args
    assert "--secure-port=3" in args and "--bind-address=127.0.0.1" in args


def test_controller_manager_runs_the_dra_controllers_but_no_node_lifecycle(tmp_path: Path) -> None:
    args = controller_manager_args(config(tmp_path), Path("kcm"))
    controllers = (
        next(a for a in args if a.startswith("--controllers=")).split("=", 1)[1].split(",")
    )
    assert set(controllers) == set(CONTROLLERS)
    assert "resourceclaim-controller" in controllers
    assert "device-taint-eviction-controller" in controllers
    assert not any("lifecycle" in c for c in controllers)
    assert {f"--kube-api-qps={CLIENT_QPS}", f"--kube-api-burst={CLIENT_QPS}"} <= set(args)


def test_the_scheduler_reads_its_client_settings_from_its_file(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    args = scheduler_args(cfg, Path("s"))
    assert f"--config={cfg.scheduler_config}" in args
    # With --config the scheduler ignores these flags: they must not look as if they worked.
    ignored = ("--kubeconfig", "--kube-api-qps", "--profiling")
    assert not any(a.split("=")[0] in ignored for a in args)
    kubeconfig = cfg.component_kubeconfig("scheduler")
    doc = configuration(kubeconfig, qps=5000, profiling=True, profiles=[])
    assert doc["clientConnection"] == {
        "kubeconfig": str(kubeconfig),
        "qps": 5000,
        "burst": 5000,
    }
    assert doc["enableProfiling"] is True
    assert [p["schedulerName"] for p in doc["profiles"]] == ["default-scheduler"]
    default = configuration(Path("k"), qps=None, profiling=False, profiles=[])
    assert default["clientConnection"] == {"kubeconfig": "k"}
