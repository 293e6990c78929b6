"""The controller's metrics and probes as pure functions of its state."""

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from driver.controller.metrics import ControllerMetrics, rack_families
from driver.controller.probes import ReplicaState, report
from driver.httpendpoint import HTTPEndpoint, split_address
from testbed.controlplane import Samples, metric_key, metric_samples

STATUS = {
    "cores": {"total": 1152, "allocated": 12, "free": 1140, "unhealthy": 8},
    "devices": {"core": 2016, "chip": 144, "server": 36, "ultraserver": 1},
    "pool": {"generation": 3, "slices": 42},
    "conditions": [
        {"type": "Ready", "status": "True"},
        {"type": "Published", "status": "True"},
        {"type": "Degraded", "status": "True"},
    ],
}


def samples(registry: CollectorRegistry) -> Samples:
    return metric_samples(generate_latest(registry).decode())


def test_rack_figures_come_from_the_status() -> None:
    families = {f.name: f for f in rack_families({"r1": STATUS})}
    cores = {s.labels["state"]: s.value for s in families["trainium_dra_ultraserver_cores"].samples}
    assert cores == {"total": 1152, "allocated": 12, "free": 1140, "unhealthy": 8}
    devices = {
        s.labels["kind"]: s.value for s in families["trainium_dra_ultraserver_devices"].samples
    }
    assert devices == {"core": 2016, "chip": 144, "server": 36, "ultraserver": 1}
    conditions = families["trainium_dra_ultraserver_condition"].samples
    assert {s.labels["type"]: s.value for s in conditions} == {
        "Ready": 1.0,
        "Published": 1.0,
        "Degraded": 1.0,
    }
    (pool,) = families["trainium_dra_ultraserver_pool_generation"].samples
    assert pool.value == 3 and pool.labels == {"ultraserver": "r1"}


def test_an_invalid_rack_exports_zeros_and_false_conditions() -> None:
    invalid = {"conditions": [{"type": "Ready", "status": "False"}]}
    families = {f.name: f for f in rack_families({"bad": invalid})}
    assert {s.value for s in families["trainium_dra_ultraserver_cores"].samples} == {0.0}
    assert not families["trainium_dra_ultraserver_devices"].samples
    assert {s.value for s in families["trainium_dra_ultraserver_condition"].samples} == {0.0}


def test_forgotten_racks_leave_the_registry() -> None:
    registry = CollectorRegistry()
    metrics = ControllerMetrics(registry)
    metrics.racks.record("r1", STATUS)
    metrics.racks.record("r2", STATUS)
    metrics.racks.forget("r1")
    metrics.wrote("resourceslices", "create")
    metrics.wrote("resourceslices", "create")
    metrics.reconciled("ok", 0.2)
    got = samples(registry)
    racks = {dict(labels).get("ultraserver") for (name, labels) in got if "ultraserver" in name}
    assert racks == {"r2"}
    assert (
        got[
            metric_key(
                "trainium_dra_controller_writes_total", resource="resourceslices", verb="create"
            )
        ]
        == 2
    )
    assert got[metric_key("trainium_dra_controller_reconciles_total", result="ok")] == 1
    assert got[metric_key("trainium_dra_controller_leader")] == 0


@pytest.mark.parametrize(
    ("state", "live", "ready", "problem"),
    [
        (ReplicaState("starting", False, [], ""), True, False, "has not tried"),
        (ReplicaState("standby", False, [], ""), True, True, ""),
        (ReplicaState("standby", False, [], "connection refused"), True, False, "apiserver"),
        (ReplicaState("leader", False, [], ""), True, False, "still listing"),
        (ReplicaState("leader", True, [], ""), True, True, ""),
        (ReplicaState("leader", True, ["worker-2"], ""), False, False, "worker-2"),
    ],
)
def test_probes(state: ReplicaState, live: bool, ready: bool, problem: str) -> None:
    assert report(state, need_ready=False)[0] is live
    ok, details = report(state, need_ready=True)
    assert ok is ready
    assert details["role"] == state.role
    assert problem in " ".join(details["problems"])
    assert bool(details["problems"]) is not ready


def test_http_address_names_the_flag_and_the_fix() -> None:
    assert split_address(":8081", "--http-address") == ("0.0.0.0", 8081)
    assert split_address("127.0.0.1:0", "--http-address") == ("127.0.0.1", 0)
    with pytest.raises(SystemExit, match=r"--http-address: '8081' must be HOST:PORT"):
        split_address("8081", "--http-address")


def test_a_port_in_use_names_the_flag() -> None:
    taken = HTTPEndpoint("127.0.0.1", 0, {})
    try:
        with pytest.raises(SystemExit, match=r"--http-address: cannot listen on 127\.0\.0\.1:\d+"):
            HTTPEndpoint("127.0.0.1", taken.port, {})
    finally:
        taken.stop()
