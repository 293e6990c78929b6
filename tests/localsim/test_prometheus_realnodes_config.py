"""The real-node Prometheus's scrape jobs (checked by the real promtool), the
access its ServiceAccount gets, and its private token file."""

import json
import stat
import subprocess
from pathlib import Path
from typing import Any

from localsim.commands.flags import parse_up
from localsim.controlplane.chart import NAMESPACE
from localsim.prometheus import (
    CONTROLLER_JOB,
    NODE_JOB,
    Targets,
    locate_binary,
    prometheus_config,
    rule_files,
)
from localsim.prometheus_access import access_objects, write_private
from localsim.realnodes.prometheus import KUBELET_JOB, real_node_jobs


def jobs(tmp_path: Path) -> list[dict[str, Any]]:
    kubelets = {"rack-a-node-1": "172.30.99.11:10250", "rack-a-node-0": "172.30.99.10:10250"}
    return real_node_jobs(
        "https://172.30.99.1:6443", tmp_path / "ca.crt", tmp_path / "token", kubelets
    )


def test_pods_are_discovered_in_the_chart_namespace_and_kubelets_listed(tmp_path: Path) -> None:
    by_name = {job["job_name"]: job for job in jobs(tmp_path)}
    assert list(by_name) == [NODE_JOB, CONTROLLER_JOB, KUBELET_JOB]
    node = by_name[NODE_JOB]
    [discovery] = node["kubernetes_sd_configs"]
    assert discovery["namespaces"] == {"names": [NAMESPACE]}
    assert discovery["selectors"][0]["label"].endswith("component=node")
    assert discovery["authorization"] == {"credentials_file": str(tmp_path / "token")}
    kubelet = by_name[KUBELET_JOB]
    assert kubelet["scheme"] == "https"
    assert kubelet["static_configs"] == [
        {"targets": ["172.30.99.10:10250"], "labels": {"node": "rack-a-node-0"}},
        {"targets": ["172.30.99.11:10250"], "labels": {"node": "rack-a-node-1"}},
    ]


def test_generated_real_node_config_passes_promtool(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("t")
    (tmp_path / "ca.crt").write_text("")
    targets = Targets({}, "172.30.99.1:6443", None, None, tmp_path / "ca.crt", tmp_path / "token")
    config = prometheus_config(targets, "5s", rule_files(), jobs(tmp_path))
    path = tmp_path / "prometheus.yml"
    path.write_text(json.dumps(config))
    done = subprocess.run(
        [str(locate_binary("promtool")), "check", "config", "--syntax-only", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_service_account_reads_only_pods_and_metrics() -> None:
    rules = [
        (doc["kind"], rule)
        for doc in access_objects()
        if doc["kind"] in {"Role", "ClusterRole"}
        for rule in doc["rules"]
    ]
    assert rules == [
        ("Role", {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}),
        ("ClusterRole", {"apiGroups": [""], "resources": ["nodes/metrics"], "verbs": ["get"]}),
        ("ClusterRole", {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}),
    ]
    [role] = [doc for doc in access_objects() if doc["kind"] == "Role"]
    assert role["metadata"]["namespace"] == NAMESPACE


def test_token_file_is_never_readable_by_others(tmp_path: Path) -> None:
    token = tmp_path / "prometheus" / "token"
    write_private(token, "first")
    write_private(token, "second")
    assert token.read_text() == "second"
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    assert stat.S_IMODE(token.parent.stat().st_mode) == 0o700
    assert [p.name for p in token.parent.iterdir()] == ["token"]


def test_up_takes_with_prometheus_with_real_nodes_as_root() -> None:
    flags = parse_up(["--real-nodes", "--with-prometheus"])
    assert flags.settings.real_nodes and flags.settings.with_prometheus
