"""SimHost: a job being planned holds up only its own claim's requests."""

import threading
from collections.abc import Callable
from typing import Any

import pytest

from driver.node.sim.simhost import SimHost
from simdevice import workloads
from simdevice.topology import rack_spec

GEN2 = rack_spec("trn3-gen2")
GEMM = {"kind": "gemm", "m": 512, "n": 512, "k": 512, "iterations": 10**9}  # runs for hours


class PlanGate:
    """Takes the place of the workload timing lock: every timing waits until `open`."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.opened = threading.Event()

    def __enter__(self) -> None:
        self.entered.set()
        assert self.opened.wait(60), "the test never opened the gate"

    def __exit__(self, *exc: object) -> None:
        return None

    def open(self) -> None:
        self.opened.set()


class Call(threading.Thread):
    """`fn()` on its own thread, so a call that blocks cannot hang the test."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.fn = fn
        self.result: Any = None
        self.start()

    def run(self) -> None:
        self.result = self.fn()

    def value(self, timeout: float = 30.0) -> Any:
        self.join(timeout)
        assert not self.is_alive(), f"{self.fn} still blocked after {timeout} s"
        return self.result


@pytest.fixture
def host() -> SimHost:
    return SimHost(GEN2, 0)


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> PlanGate:
    gate = PlanGate()
    monkeypatch.setattr(workloads, "_TIMING_LOCK", gate)
    return gate


def planning(host: SimHost, gate: PlanGate, claim: str) -> Call:
    """Start a submit for `claim` and return once it is inside its plan."""
    submit = Call(lambda: host.submit(claim, GEMM, [(0, 0)]))
    assert gate.entered.wait(30)
    return submit


def test_health_metrics_and_other_claims_go_on_during_a_plan(
    host: SimHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = host.submit("claim-b", GEMM, [(1, 0)])
    gate = PlanGate()
    monkeypatch.setattr(workloads, "_TIMING_LOCK", gate)
    submit = planning(host, gate, "claim-a")
    assert Call(host.telemetry).value().server == 0
    assert Call(host.health_by_place).value() == {}
    assert [j.id for j in Call(lambda: host.jobs("claim-b")).value()] == [other.id]
    gate.open()
    assert submit.value().state == "running"


def after_the_plan(host: SimHost, gate: PlanGate, call: Callable[[], Any]) -> tuple[Any, Any]:
    """(the submitted job, `call`'s answer), asserting that `call`, made while
    claim-a's job is being planned, waits until the job is queued."""
    submit = planning(host, gate, "claim-a")
    waiting = Call(call)
    waiting.join(0.5)
    assert waiting.is_alive(), f"{call} answered before the claim's job was queued"
    gate.open()
    return submit.value(), waiting.value()


def test_the_claims_job_list_waits_for_its_plan(host: SimHost, gate: PlanGate) -> None:
    job, listed = after_the_plan(host, gate, lambda: host.jobs("claim-a"))
    assert [j.id for j in listed] == [job.id]


def test_a_release_during_a_plan_cancels_that_job(host: SimHost, gate: PlanGate) -> None:
    job, _ = after_the_plan(host, gate, lambda: host.release("claim-a"))
    assert host.jobs("claim-a") == []
    assert {j.id: j.state for j in host.sim.jobs()} == {job.id: "cancelled"}
