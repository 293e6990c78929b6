"""The simulator's fault controls listen apart from /metrics: a unix socket by
default, and on an exposed TCP address only with a bearer token."""

import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from driver.httpendpoint import json_reply
from driver.node import flags as flagmod
from driver.node.sim.simaccess import (
    BearerGuard,
    SimControlAddress,
    SimControlError,
    check_token_needed,
    parse_address,
    read_token,
)
from driver.node.sim.simcontrol import FaultRequestError, parse_fault_request
from localsim.controlplane.plane import ControlPlane
from testbed.daemon import ROOT, Daemon, short_tmpdir
from testbed.rack import Site

SITE = Site("simcontrol.sim.dev", "simcontrol-rack", "simcontrol", ("simcontrol-n0",))
TOKEN = "s3cret-token"
FAULT = {"node": SITE.nodes[0], "kind": "ecc-uncorrected-hbm", "chip": 1}


def test_addresses_and_what_is_exposed() -> None:
    assert parse_address("") is None
    assert parse_address("unix:/run/x.sock") == SimControlAddress(unix_path=Path("/run/x.sock"))
    assert parse_address("127.0.0.1:9") == SimControlAddress(host="127.0.0.1", port=9)
    assert parse_address(":9") == SimControlAddress(host="0.0.0.0", port=9)
    exposed = {
        text: address.exposed
        for text in ("unix:/a.sock", "127.0.0.1:1", "[::1]:1", "localhost:1", "0.0.0.0:1")
        if (address := parse_address(text)) is not None
    }
    assert exposed == {
        "unix:/a.sock": False,
        "127.0.0.1:1": False,
        "[::1]:1": False,
        "localhost:1": False,
        "0.0.0.0:1": True,
    }
    assert SimControlAddress(host="node-7.example", port=1).exposed
    with pytest.raises(SimControlError, match=r"--sim-control-address: 'unix:rel\.sock' must"):
        parse_address("unix:rel.sock")


def test_an_exposed_address_needs_a_token() -> None:
    check_token_needed(parse_address("127.0.0.1:0"), "")
    check_token_needed(parse_address("0.0.0.0:0"), "/etc/token")
    with pytest.raises(SimControlError, match=r"^--sim-control-token-file: required when"):
        check_token_needed(parse_address("0.0.0.0:8082"), "")


def test_the_token_file_must_hold_a_token(tmp_path: Path) -> None:
    (tmp_path / "token").write_text(f"{TOKEN}\n")
    assert read_token(tmp_path / "token") == TOKEN
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(SimControlError, match=r"--sim-control-token-file: .*empty is empty"):
        read_token(tmp_path / "empty")
    with pytest.raises(SimControlError, match=r"--sim-control-token-file: cannot read"):
        read_token(tmp_path / "missing")


def test_the_bearer_guard() -> None:
    guard = BearerGuard(TOKEN)
    assert guard({"authorization": f"Bearer {TOKEN}"}) is None
    assert guard({"authorization": f"bearer {TOKEN}"}) is None
    assert guard({})[0] == 401  # type: ignore[index]
    assert guard({"authorization": f"Basic {TOKEN}"})[0] == 401  # type: ignore[index]
    assert guard({"authorization": "Bearer wrong"})[0] == 403  # type: ignore[index]
    assert guard({"authorization": f"Bearer {TOKEN}x"}) == json_reply(
        403, {"error": "Authorization: the bearer token is not accepted"}
    )


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        (b"[]", 422, "body: must be an object"),
        (b"{", 422, "body: not JSON"),
        (b'{"node": "other", "kind": "ecc-uncorrected-hbm", "chip": 0}', 404, "node: 'other'"),
        (b'{"node": "n0", "kind": "melt", "chip": 0}', 422, "kind: 'melt' is not one of"),
        (b'{"node": "n0", "kind": "ecc-uncorrected-hbm"}', 422, "chip: required"),
    ],
)
def test_bad_fault_requests_name_the_field(body: bytes, code: int, message: str) -> None:
    with pytest.raises(FaultRequestError, match=message) as caught:
        parse_fault_request(body, ["n0"])
    assert caught.value.code == code


def test_the_daemon_flags_refuse_an_exposed_address_without_a_token(
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = ["--node=n0=0", "--ultraserver=r"]
    with pytest.raises(SystemExit):
        flagmod.parse([*base, "--sim-control-address=0.0.0.0:8082"])
    refusal = capsys.readouterr().err
    assert "--sim-control-token-file: required when --sim-control-address" in refusal
    parsed = flagmod.parse([*base])
    assert parsed.sim_control_address == "unix:/var/lib/trainium-dra/sim-control.sock"
    assert flagmod.parse([*base, "--sim-control-address="]).sim_control_address == ""


@pytest.fixture
def exposed_daemon(control_plane: ControlPlane) -> Iterator[Daemon]:
    with short_tmpdir() as workdir:
        (workdir / "token").write_text(TOKEN)
        args = ("--sim-control-address=0.0.0.0:0", f"--sim-control-token-file={workdir / 'token'}")
        daemon = Daemon(workdir, control_plane.kubeconfig, site=SITE, extra_args=args).start()
        try:
            yield daemon
        finally:
            assert daemon.stop() == 0


@pytest.mark.integration
def test_exposed_controls_need_the_token_and_metrics_stay_open(exposed_daemon: Daemon) -> None:
    daemon = exposed_daemon
    assert daemon.sim_control.startswith("0.0.0.0:")
    assert daemon.sim("POST", "/sim/v1/faults", json=FAULT).status_code == 401
    assert daemon.sim("GET", "/sim/v1/nodes").status_code == 401
    assert daemon.sim("POST", "/sim/v1/faults", json=FAULT, token="wrong").status_code == 403
    metrics = daemon.http("GET", "/metrics")
    assert metrics.status_code == 200 and "neuroncore_utilization_ratio" in metrics.text
    for method in ("POST", "DELETE"):  # the metrics port serves no controls
        assert daemon.http(method, "/sim/v1/faults", json=FAULT).status_code == 404
    assert daemon.http("GET", "/sim/v1/nodes").status_code == 404
    injected = daemon.sim("POST", "/sim/v1/faults", json=FAULT, token=TOKEN)
    assert injected.status_code == 200, injected.text
    assert injected.json()["health"]["1"] == "failed"
    cleared = daemon.sim("DELETE", "/sim/v1/faults", json=FAULT, token=TOKEN)
    assert cleared.json()["health"]["1"] == "healthy"


@pytest.mark.integration
def test_the_default_listener_is_a_private_unix_socket(control_plane: ControlPlane) -> None:
    with short_tmpdir() as workdir:
        daemon = Daemon(workdir, control_plane.kubeconfig, site=SITE).start()
        try:
            assert daemon.sim_control == f"unix:{daemon.sim_socket}"
            assert stat.S_IMODE(daemon.sim_socket.stat().st_mode) == 0o600
            answer = daemon.sim("POST", "/sim/v1/faults", json=FAULT)
            assert answer.status_code == 200, answer.text
            assert daemon.sim("DELETE", "/sim/v1/faults", json=FAULT).status_code == 200
        finally:
            assert daemon.stop() == 0
        assert not daemon.sim_socket.exists()


def test_the_daemon_does_not_start_exposed_without_a_token(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "driver.cli", "node", "--node=n0=0", "--ultraserver=r"]
    result = subprocess.run(
        [*argv, "--sim-control-address=0.0.0.0:0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "--sim-control-token-file: required when --sim-control-address" in result.stderr
