"""A real Prometheus scrapes a running system while a workload runs, and every
PromQL expression of every Grafana dashboard returns data.

The system: the session control plane (apiserver, controller-manager and
scheduler are scraped too), the node daemon of a two-node partitioned rack
(the node tests' fixture), claims the real scheduler allocates, prepared
through the kubelet stand-in, and jobs submitted through the workload API.
"""

import json
import math
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from localsim.controlplane.plane import ControlPlane
from localsim.prometheus import (
    PrometheusProcess,
    Targets,
    rule_files,
    start_prometheus,
    substitute,
)
from localsim.standin.kubelet import KubeletError
from testbed.daemon import Daemon, short_tmpdir
from testbed.rack import NODES, RACK_ID, Rack, published_rack
from testbed.waiting import Deadline, wait_for
from tests.deploy.dashboards import PanelQuery, dashboard_queries, variable_queries

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((ROOT / "charts/trainium-dra/dashboards").glob("*.json"))
NEURON = {"apiVersion": "trainium.sim.dev/v1alpha1", "kind": "NeuronConfig"}
RATE_INTERVAL = "15s"
"""What Grafana's $__rate_interval becomes at a 1 s scrape interval (>= 4 samples)."""


def attr(name: str) -> str:
    return f'device.attributes["plugintest.sim.dev"].{name}'


class Workload:
    """A prepared claim's workload API client (the container's view)."""

    def __init__(self, daemon: Daemon, rack: Rack, pod: str) -> None:
        bound = rack.bound_pod(pod)
        self.node: str = bound["spec"]["nodeName"]
        self.kubelet = daemon.kubelet(self.node)
        self.refs = self.kubelet.pod_claims(rack.objects, bound)
        prepared = self.kubelet.prepare(self.refs)
        (self.uid,) = prepared
        paths = daemon.paths(self.node)
        token = paths.token_file(self.uid).read_text()
        transport = httpx.HTTPTransport(uds=str(paths.workload_socket))
        self.api = httpx.Client(
            transport=transport,
            base_url="http://node",
            headers={"Authorization": f"Bearer {token}"},
            timeout=10.0,
        )

    def prepare_again(self) -> None:
        """What the kubelet does for a running pod after a restart: an idempotent prepare."""
        assert self.kubelet.prepare(self.refs).keys() == {self.uid}

    def submit(self, workload: dict[str, Any]) -> dict[str, Any]:
        response = self.api.post(f"/v1/claims/{self.uid}/jobs", json={"workload": workload})
        assert response.status_code == 201, response.text
        job: dict[str, Any] = response.json()
        return job

    def job(self, job_id: str) -> dict[str, Any]:
        found: dict[str, Any] = self.api.get(f"/v1/claims/{self.uid}/jobs/{job_id}").json()
        return found

    def close(self) -> None:
        self.api.close()
        self.kubelet.unprepare(self.refs)


@pytest.fixture(scope="module")
def rack(control_plane: ControlPlane) -> Iterator[Rack]:
    with published_rack(control_plane) as published:
        yield published


@pytest.fixture(scope="module")
def daemon(control_plane: ControlPlane, rack: Rack) -> Iterator[Daemon]:
    with short_tmpdir() as workdir:
        running = Daemon(workdir, control_plane.kubeconfig).start()
        yield running
        assert running.stop() == 0


@pytest.fixture(scope="module")
def prometheus(
    control_plane: ControlPlane, daemon: Daemon, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusProcess]:
    workdir = tmp_path_factory.mktemp("prometheus")
    targets = Targets.of_control_plane(
        control_plane, {RACK_ID: f"127.0.0.1:{daemon.http_port}"}, workdir / "token"
    )
    running = start_prometheus(workdir, targets, interval="1s")
    yield running
    running.stop()


@pytest.fixture(scope="module")
def workload(daemon: Daemon, rack: Rack) -> Iterator[dict[str, Workload]]:
    """A whole chip busy with a long GEMM on one node, short jobs finishing on a
    core pair of the other node, and one claim whose prepare fails (bad LNC).
    Like a kubelet, a thread keeps retrying the failed prepare and re-preparing
    the running pods' claims every second, so rates have data to show."""
    rack.create_claim("prom-chip", selector=f'{attr("resourceType")} == "chip"')
    rack.create_pod("prom-chip-pod", "prom-chip", node=NODES[0])
    rack.create_claim(
        "prom-pair", selector=f"{attr('coreCount')} == 2", config={**NEURON, "logicalNeuronCore": 2}
    )
    rack.create_pod("prom-pair-pod", "prom-pair", node=NODES[1])
    rack.create_claim(
        "prom-bad", selector=f"{attr('coreCount')} == 2", config={**NEURON, "logicalNeuronCore": 4}
    )
    rack.create_pod("prom-bad-pod", "prom-bad", node=NODES[1])
    running = {
        "chip": Workload(daemon, rack, "prom-chip-pod"),
        "pair": Workload(daemon, rack, "prom-pair-pod"),
    }
    bad = rack.bound_pod("prom-bad-pod")
    kubelet = daemon.kubelet(bad["spec"]["nodeName"])
    bad_refs = kubelet.pod_claims(rack.objects, bad)
    with pytest.raises(KubeletError, match="logicalNeuronCore=4"):
        kubelet.prepare(bad_refs)
    big = {"kind": "gemm", "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16", "iterations": 20000}
    running["chip"].submit(big)
    small = {"kind": "gemm", "m": 512, "n": 512, "k": 512, "dtype": "bf16", "iterations": 4}
    first = running["pair"].submit(small)
    wait_for(
        "a short job to finish",
        lambda: running["pair"].job(first["id"])["state"] == "succeeded",
        timeout=30,
    )
    running["pair"].submit({**big, "iterations": 5000})
    stop = threading.Event()

    def kubelet_retries() -> None:
        while not stop.wait(1.0):
            for w in running.values():
                w.prepare_again()
            with pytest.raises(KubeletError):
                kubelet.prepare(bad_refs)

    retries = threading.Thread(target=kubelet_retries, daemon=True)
    retries.start()
    yield running
    stop.set()
    retries.join()
    for w in running.values():
        w.close()
    rack.delete_claim("prom-chip", "prom-chip-pod")
    rack.delete_claim("prom-pair", "prom-pair-pod")
    rack.delete_claim("prom-bad", "prom-bad-pod")


def empty_queries(
    prometheus: PrometheusProcess, queries: list[PanelQuery], values: dict[str, str]
) -> list[str]:
    """The queries that return no series, or only NaN samples, right now."""
    empty = []
    for q in queries:
        expr = substitute(q.expr, values)
        result = prometheus.query(expr)
        samples = [float(r["value"][1]) for r in result]
        if not samples or all(math.isnan(s) for s in samples):
            empty.append(f"{q.dashboard} / {q.panel} [{q.ref}]: {expr}")
    return empty


def test_every_target_is_up(prometheus: PrometheusProcess, workload: dict[str, Workload]) -> None:
    def all_up() -> dict[str, float] | None:
        up = {r["metric"]["job"]: float(r["value"][1]) for r in prometheus.query("up")}
        return up if len(up) == 4 and all(v == 1 for v in up.values()) else None

    up = wait_for("every scrape target up", all_up, timeout=30)
    assert set(up) == {
        "trainium-dra-node",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    }


def test_every_dashboard_query_returns_data(
    prometheus: PrometheusProcess, workload: dict[str, Workload]
) -> None:
    queries: list[PanelQuery] = []
    for path in DASHBOARDS:
        document = json.loads(path.read_text())
        queries += [*variable_queries(document), *dashboard_queries(document)]
    # Kueue's panel has data only beside Kueue: tests/e2e/test_kueue.py checks it there.
    queries = [q for q in queries if "kueue_" not in q.expr]
    assert len(queries) > 30
    detail_node = workload["pair"].node  # finished jobs: execution latency exists there
    values = {
        "ultraserver": RACK_ID,
        "node": detail_node,
        "__rate_interval": RATE_INTERVAL,
    }
    # Driver health uses node=~"$node" (multi-value, "All"): Grafana sends a regex.
    all_nodes = {**values, "node": "|".join(NODES)}
    single = [q for q in queries if 'node=~"$node"' not in q.expr]
    multi = [q for q in queries if 'node=~"$node"' in q.expr]
    assert multi

    def empties() -> list[str]:
        return empty_queries(prometheus, single, values) + empty_queries(
            prometheus, multi, all_nodes
        )

    deadline = Deadline(60)
    while (missing := empties()) and not deadline.passed():
        time.sleep(2)
    assert missing == [], "dashboard queries without data:\n" + "\n".join(missing)
    # And the data says what happened: the chip's 8 cores and the pair are busy.
    busy = prometheus.query(
        f'sum(neuroncore_utilization_ratio{{ultraserver="{RACK_ID}"}} > bool 0)'
    )
    assert float(busy[0]["value"][1]) == 10
    errors = prometheus.query('sum(trainium_dra_node_request_errors_total{operation="prepare"})')
    assert float(errors[0]["value"][1]) >= 1


def test_every_recording_rule_produces_series(
    prometheus: PrometheusProcess, workload: dict[str, Workload]
) -> None:
    records = [
        rule["record"]
        for path in rule_files()
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
        if "record" in rule
    ]
    assert len(records) == 12

    deadline = Deadline(60)
    while (gone := [r for r in records if not prometheus.query(r)]) and not deadline.passed():
        time.sleep(2)
    assert gone == []
    ratio = prometheus.query(f'ultraserver:neuroncores_busy:ratio{{ultraserver="{RACK_ID}"}}')
    assert float(ratio[0]["value"][1]) == pytest.approx(10 / 64)
    claims = prometheus.query("ultraserver:trainium_dra_node_prepared_claims:sum")
    assert {r["metric"]["ultraserver"]: float(r["value"][1]) for r in claims} == {RACK_ID: 2}


def test_uncorrected_ecc_fires_its_alert(
    prometheus: PrometheusProcess, daemon: Daemon, workload: dict[str, Workload]
) -> None:
    """A fault injected into an idle chip becomes a firing TrainiumUncorrectedECC."""
    node = NODES[1]
    fault = {"node": node, "kind": "ecc-uncorrected-hbm", "chip": 3}
    assert daemon.sim("POST", "/sim/v1/faults", json=fault).status_code == 200
    try:
        query = 'ALERTS{alertname="TrainiumUncorrectedECC", alertstate="firing"}'
        (alert,) = wait_for("the ECC alert to fire", lambda: prometheus.query(query), timeout=30)
        assert {k: alert["metric"][k] for k in ("node", "chip", "severity")} == {
            "node": node,
            "chip": "3",
            "severity": "critical",
        }
        unhealthy = f'ultraserver:neuron_devices_unhealthy:sum{{ultraserver="{RACK_ID}"}}'
        wait_for(
            "the failed chip in the recording rule",
            lambda: float(prometheus.query(unhealthy)[0]["value"][1]) == 1,
            timeout=30,
        )
    finally:
        assert daemon.sim("DELETE", "/sim/v1/faults", json=fault).status_code == 200
