"""The controller's /metrics, /healthz and /readyz against the real control
plane and scheduler: its rack figures equal the UltraServer status after a
real allocation, its write counter equals the apiserver's count, a standby is
ready but exports no rack series and takes them over with the Lease, and a
real Prometheus scrapes it and evaluates the chart's alert expression."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from kubernetes import client

from localsim.controlplane.plane import ControlPlane, free_port
from localsim.prometheus import Targets, rule_files, start_prometheus
from testbed.controlplane import (
    Samples,
    condition,
    controller,
    create_claim_and_pod,
    custom,
    delta,
    get_rack,
    install,
    load_claim,
    metric_key,
    metric_samples,
    request_counts,
    stop,
    ultraserver,
)
from testbed.waiting import wait_for

pytestmark = pytest.mark.integration

RACK = "ctl-metrics"
NODES = [f"ctl-metrics-{i}" for i in range(4)]
NS = "ctl-metrics"
LEASE = "ctl-metrics"


def scrape(port: int) -> Samples:
    return metric_samples(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text)


def probe(port: int, path: str) -> tuple[int, dict[str, Any]]:
    """(status, JSON body); (0, {}) while nothing listens yet."""
    try:
        response = httpx.get(f"http://127.0.0.1:{port}{path}", timeout=5)
    except httpx.ConnectError:
        return 0, {}
    return response.status_code, response.json()


def cores(samples: Samples, state: str) -> float | None:
    return samples.get(metric_key("trainium_dra_ultraserver_cores", state=state, ultraserver=RACK))


def rack_ready(api: client.ApiClient) -> bool:
    ready = condition(get_rack(api, RACK), "Ready")
    return ready is not None and ready["status"] == "True"


def status_cores(api: client.ApiClient) -> dict[str, int]:
    return dict(((get_rack(api, RACK) or {}).get("status") or {}).get("cores") or {})


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> Iterator[tuple[ControlPlane, client.ApiClient]]:
    install(control_plane)
    for node in NODES:
        control_plane.create_node(node)
    with control_plane.api_client() as api:
        client.CoreV1Api(api).create_namespace({"metadata": {"name": NS}})
        try:
            yield control_plane, api
        finally:
            client.CoreV1Api(api).delete_namespace(NS)
            if get_rack(api, RACK) is not None:
                custom(api).delete_cluster_custom_object(
                    "trainium.sim.dev", "v1alpha1", "ultraservers", RACK
                )
            for node in NODES:
                control_plane.delete_node(node)


def test_metrics_match_status_and_follow_the_lease(
    cluster: tuple[ControlPlane, client.ApiClient], tmp_path: Path
) -> None:
    cp, api = cluster
    ports = {"a": free_port(), "b": free_port()}
    args = ("--lease-name", LEASE, "--lease-seconds", "6", "--resync-seconds", "2")
    before = request_counts(cp)
    with controller(
        cp, tmp_path / "a.log", *args, "--identity", "a", f"--http-address=127.0.0.1:{ports['a']}"
    ) as leader:
        wait_for("a serves /readyz", lambda: probe(ports["a"], "/readyz")[0] == 200, 30)
        custom(api).create_cluster_custom_object(
            "trainium.sim.dev", "v1alpha1", "ultraservers", ultraserver(RACK, "trn2", NODES)
        )
        wait_for("rack ready", lambda: rack_ready(api))
        create_claim_and_pod(api, load_claim("cores-4", "four", NS, RACK))
        wait_for("4 cores allocated in status", lambda: status_cores(api).get("allocated") == 4)

        got = scrape(ports["a"])
        status = (get_rack(api, RACK) or {})["status"]
        for state in ("total", "allocated", "free", "unhealthy"):
            assert cores(got, state) == status["cores"][state], state
        for kind, count in status["devices"].items():
            assert (
                got[metric_key("trainium_dra_ultraserver_devices", kind=kind, ultraserver=RACK)]
                == count
            )
        assert (
            got[metric_key("trainium_dra_ultraserver_condition", type="Ready", ultraserver=RACK)]
            == 1
        )
        assert got[metric_key("trainium_dra_controller_leader")] == 1
        made = delta(before, request_counts(cp))
        assert (
            got[
                metric_key(
                    "trainium_dra_controller_writes_total", resource="resourceslices", verb="create"
                )
            ]
            == made[("resourceslices", "", "POST")]
            == status["pool"]["slices"]
        )
        assert got[metric_key("trainium_dra_controller_reconciles_total", result="ok")] >= 2
        # Caught up with a published rack: nothing queued, delayed or in hand.
        assert got[metric_key("trainium_dra_controller_pending_work")] == 0
        code, details = probe(ports["a"], "/healthz")
        assert (code, details) == (200, {"role": "leader", "problems": []})

        # A real Prometheus scrapes the leader; the chart's "nearly full" alert
        # expression, without its threshold, is the allocated share of the rack.
        workdir = tmp_path / "prometheus"
        prometheus = start_prometheus(
            workdir, Targets({}, controller=f"127.0.0.1:{ports['a']}"), interval="1s"
        )
        try:
            (rule,) = [
                r
                for path in rule_files()
                for group in yaml.safe_load(path.read_text())["groups"]
                for r in group["rules"]
                if r.get("alert") == "TrainiumRackNearlyFull"
            ]
            ratio, threshold = rule["expr"].rsplit(">", 1)
            assert float(threshold) == 0.9
            (sample,) = wait_for(
                "Prometheus has the ratio", lambda: prometheus.query(ratio), timeout=30
            )
            assert sample["metric"] == {"ultraserver": RACK}
            assert float(sample["value"][1]) == pytest.approx(4 / status["cores"]["total"])
        finally:
            prometheus.stop()

        with controller(
            cp,
            tmp_path / "b.log",
            *args,
            "--identity",
            "b",
            f"--http-address=127.0.0.1:{ports['b']}",
        ):
            wait_for(
                "b stands by",
                lambda: probe(ports["b"], "/readyz") == (200, {"role": "standby", "problems": []}),
                30,
            )
            standby = scrape(ports["b"])
            assert standby[metric_key("trainium_dra_controller_leader")] == 0
            assert not [name for name, _ in standby if name.startswith("trainium_dra_ultraserver")]

            stop(leader)
            wait_for(
                "b leads",
                lambda: scrape(ports["b"])[metric_key("trainium_dra_controller_leader")] == 1,
                30,
            )
            # The new leader writes nothing (the status is current) yet exports the figures.
            took_over = wait_for(
                "b exports the rack", lambda: cores(scrape(ports["b"]), "allocated"), 30
            )
            assert took_over == 4
            assert probe(ports["b"], "/readyz")[0] == 200
