"""The chart's Prometheus rules (promtool check + unit tests), its Grafana
dashboards' structure, and the local cluster's Prometheus config builder."""

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from localsim.commands.flags import parse_up
from localsim.prometheus import (
    CONTROLLER_JOB,
    NODE_JOB,
    RULES_DIR,
    Targets,
    locate_binary,
    prometheus_config,
    rule_files,
    substitute,
)
from tests.deploy.dashboards import dashboard_queries, variable_queries

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((ROOT / "charts/trainium-dra/dashboards").glob("*.json"))
EXPECTED = {
    "trainium-allocations",
    "trainium-driver-health",
    "trainium-node-detail",
    "trainium-rack-overview",
}


def promtool(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(locate_binary("promtool")), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def test_rules_pass_promtool_check() -> None:
    files = rule_files()
    assert [f.name for f in files] == ["trainium-dra.yaml"]
    done = promtool("check", "rules", *map(str, files))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 20 rules found" in done.stdout


def test_rules_unit_tests_pass() -> None:
    tests = sorted((RULES_DIR / "tests").glob("*.yaml"))
    assert tests
    done = promtool("test", "rules", *(str(t.relative_to(RULES_DIR)) for t in tests), cwd=RULES_DIR)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_promtool_rejects_a_broken_rule(tmp_path: Path) -> None:
    """The check above can fail: a rule with bad PromQL is refused."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("groups:\n- name: g\n  rules:\n  - record: a:b\n    expr: sum by (x (y)\n")
    done = promtool("check", "rules", str(bad))
    assert done.returncode != 0


def load(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text())
    return document


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_dashboard_structure(path: Path) -> None:
    d = load(path)
    assert d["uid"] == path.stem
    assert d["schemaVersion"] >= 39
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    for panel in d["panels"]:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["description"], f"{panel['title']}: say what question it answers"
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}"
    for v in variables.values():
        if v["type"] == "query":
            assert v["datasource"]["uid"] == "${datasource}"
    assert dashboard_queries(d), "a dashboard without queries"


def test_the_four_dashboards_exist() -> None:
    assert {p.stem for p in DASHBOARDS} == EXPECTED


def test_every_template_variable_has_a_value() -> None:
    values = {"ultraserver": "r", "node": "n", "__rate_interval": "10s"}
    for path in DASHBOARDS:
        d = load(path)
        for q in [*dashboard_queries(d), *variable_queries(d)]:
            assert "$" not in substitute(q.expr, values)


def test_substitute_prefers_longer_names_and_braces() -> None:
    values = {"node": "a", "nodes": "b", "__rate_interval": "5s"}
    assert substitute('x{n="$nodes",m="${node}"}[$__rate_interval]', values) == (
        'x{n="b",m="a"}[5s]'
    )
    with pytest.raises(ValueError, match="template variable"):
        substitute("x{n=$unknown}", values)


def test_variable_queries_become_group_by() -> None:
    d = {
        "title": "t",
        "templating": {
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus"},
                {
                    "name": "node",
                    "type": "query",
                    "query": {"query": 'label_values(m{a="b"}, node)'},
                },
            ]
        },
    }
    (q,) = variable_queries(d)
    assert q.expr == 'group by (node) (m{a="b"})'
    d["templating"]["list"][1]["query"] = "query_result(up)"  # type: ignore[index]
    with pytest.raises(ValueError, match="variable node"):
        variable_queries(d)


def test_config_scrapes_daemons_and_the_control_plane(tmp_path: Path) -> None:
    targets = Targets(
        node_daemons={"rack-b": "127.0.0.1:2", "rack-a": "127.0.0.1:1"},
        apiserver="127.0.0.1:6443",
        controller_manager="127.0.0.1:10257",
        scheduler="127.0.0.1:10259",
        ca_file=tmp_path / "ca.crt",
        token_file=tmp_path / "token",
        controller="127.0.0.1:8081",
    )
    config = prometheus_config(targets, "1s", [tmp_path / "r.yaml"])
    assert config["global"] == {
        "scrape_interval": "1s",
        "scrape_timeout": "1s",
        "evaluation_interval": "1s",
    }
    assert config["rule_files"] == [str(tmp_path / "r.yaml")]
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    assert list(jobs) == [
        NODE_JOB,
        CONTROLLER_JOB,
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ]
    assert jobs[CONTROLLER_JOB]["static_configs"] == [{"targets": ["127.0.0.1:8081"]}]
    node = jobs[NODE_JOB]
    assert node["honor_labels"] is True
    assert [s["targets"] for s in node["static_configs"]] == [["127.0.0.1:1"], ["127.0.0.1:2"]]
    assert jobs["kube-apiserver"]["tls_config"] == {"ca_file": str(tmp_path / "ca.crt")}
    assert jobs["kube-scheduler"]["tls_config"] == {"insecure_skip_verify": True}
    for job in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        assert jobs[job]["scheme"] == "https"
        assert jobs[job]["authorization"] == {"credentials_file": str(tmp_path / "token")}


def test_config_without_control_plane_and_missing_token() -> None:
    only_daemons = prometheus_config(Targets({"r": "127.0.0.1:9"}))
    assert [j["job_name"] for j in only_daemons["scrape_configs"]] == [NODE_JOB]
    with pytest.raises(ValueError, match=r"Targets\.token_file"):
        prometheus_config(Targets({"r": "127.0.0.1:9"}, apiserver="127.0.0.1:6443"))


def test_generated_config_passes_promtool(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("t")
    targets = Targets(
        {"rack-a": "127.0.0.1:1"}, "127.0.0.1:6443", None, "127.0.0.1:3", tmp_path / "ca", token
    )
    (tmp_path / "ca").write_text("")
    path = tmp_path / "prometheus.yml"
    path.write_text(json.dumps(prometheus_config(targets, "1s", rule_files())))
    done = promtool("check", "config", "--syntax-only", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


def test_in_cluster_scrape_config_passes_promtool() -> None:
    path = ROOT / "deploy/prometheus/kubernetes-scrape.yaml"
    done = promtool("check", "config", "--syntax-only", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


def test_up_takes_with_prometheus() -> None:
    assert parse_up(["--with-prometheus"]).settings.with_prometheus is True
    assert parse_up([]).settings.with_prometheus is False
