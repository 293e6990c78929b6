"""Unit tests of `up --with-lws`'s pure parts: the pinned release, the missing
build's message, LeaderWorkerSet's configuration, the flag and its place in
the settings a second `up` compares; and the AWS examples it runs, whose
groups fit the nodes the README's cluster has."""

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from localsim.addon.ports import ManagerPorts
from localsim.clusterspec import ClusterSpec
from localsim.commands.flags import parse_up
from localsim.commands.upsettings import (
    UpSettings,
    differences,
    read_settings,
    write_settings,
)
from localsim.lws.install import LWS_VERSION, LwsInstall, LwsMissingError
from localsim.lws.settings import configuration
from localsim.paths import ClusterPaths
from testbed.gomodules import HACK, required_version

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "deploy" / "examples" / "aws-ultraserver"
EXCLUSIVE = "leaderworkerset.sigs.k8s.io/exclusive-topology"
README_CLUSTER = ("--profile", "aws", "--racks", "2", "--generation", "trn3-gen1")
"""The cluster deploy/examples/aws-ultraserver/README.md starts."""


def test_version_matches_the_go_module() -> None:
    assert required_version(HACK / "lws", "sigs.k8s.io/lws") == LWS_VERSION


def test_a_missing_build_names_the_make_target(tmp_path: Path) -> None:
    with pytest.raises(
        LwsMissingError, match=r"--with-lws: LeaderWorkerSet v0\.7\.0.*make lws.*--without-lws"
    ):
        LwsInstall.locate(tmp_path)


def test_configuration_serves_on_loopback_with_the_clusters_certificate() -> None:
    config = configuration(ManagerPorts(9443, 8443, 8081), Path("/state/lws/certs"))
    assert config["apiVersion"] == "config.lws.x-k8s.io/v1alpha1"
    assert config["webhook"] == {"host": "127.0.0.1", "port": 9443, "certDir": "/state/lws/certs"}
    assert config["metrics"] == {"bindAddress": "127.0.0.1:8443"}
    assert config["health"] == {"healthProbeBindAddress": "127.0.0.1:8081"}
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["internalCertManagement"] == {"enable": False}


def test_with_lws_flag_and_settings() -> None:
    assert parse_up(["--with-lws"]).settings.with_lws
    assert not parse_up([]).settings.with_lws
    changed = differences(parse_up([]).settings, parse_up(["--with-lws"]).settings)
    assert changed == ["--with-lws: running off, asked on"]


def test_the_aws_profile_runs_it_unless_told_without(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_up(list(README_CLUSTER)).settings.with_lws
    assert not parse_up([*README_CLUSTER, "--without-lws"]).settings.with_lws
    assert not parse_up(["--without-lws"]).settings.with_lws
    with pytest.raises(SystemExit):
        parse_up(["--with-lws", "--without-lws"])
    assert "not allowed with argument" in capsys.readouterr().err
    changed = differences(
        parse_up(list(README_CLUSTER)).settings,
        parse_up([*README_CLUSTER, "--without-lws"]).settings,
    )
    assert changed == ["--with-lws: running on, asked off"]


def test_settings_written_before_the_flag_read_as_off(tmp_path: Path) -> None:
    paths = ClusterPaths(tmp_path)
    wanted = parse_up(list(README_CLUSTER)).settings
    write_settings(paths, wanted)
    assert read_settings(paths) == wanted
    older = json.loads(paths.settings_file.read_text())
    del older["withLws"]
    assert UpSettings.from_json(older).with_lws is False


def example(size: int) -> dict[str, dict[str, Any]]:
    """The file's objects by kind."""
    documents = yaml.safe_load_all((EXAMPLES / f"lws-{size}-node.yaml").read_text())
    return {d["kind"]: d for d in documents if d}


@pytest.mark.parametrize("size", [2, 4])
def test_each_group_takes_whole_nodes_of_one_ultraserver_set(size: int) -> None:
    objects = example(size)
    assert set(objects) == {"Namespace", "ResourceClaimTemplate", "LeaderWorkerSet"}
    namespace = objects["Namespace"]["metadata"]["name"]
    assert {o["metadata"].get("namespace", namespace) for o in objects.values()} == {namespace}
    lws = objects["LeaderWorkerSet"]
    label = f"neuron.amazonaws.com/ultraserver-server-id-{size}"
    assert lws["metadata"]["annotations"][EXCLUSIVE] == label
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == size
    template = objects["ResourceClaimTemplate"]["spec"]["spec"]["devices"]
    [request] = template["requests"]
    [selector] = request["exactly"]["selectors"]
    assert "resourceType == 'neuron_node'" in selector["cel"]["expression"]
    assert template["config"][0]["opaque"]["parameters"]["ultraserverMode"] == size
    claim_template = objects["ResourceClaimTemplate"]["metadata"]["name"]
    for role in ("leaderTemplate", "workerTemplate"):
        pod = lws["spec"]["leaderWorkerTemplate"][role]["spec"]
        assert pod["resourceClaims"][0]["resourceClaimTemplateName"] == claim_template


@pytest.mark.parametrize("size", [2, 4])
def test_the_readme_cluster_has_a_label_value_for_every_group(size: int) -> None:
    """Each value of the exclusive-topology label holds exactly one group's
    nodes, and there are as many values as the LeaderWorkerSet has groups."""
    spec: ClusterSpec = parse_up(list(README_CLUSTER)).spec
    label = f"neuron.amazonaws.com/ultraserver-server-id-{size}"
    values = Counter(
        spec.profile_labels(rack, server)[label]
        for rack in spec.racks
        for server in range(rack.nodes)
    )
    assert set(values.values()) == {size}
    assert len(values) >= example(size)["LeaderWorkerSet"]["spec"]["replicas"]
