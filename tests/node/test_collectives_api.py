"""Collectives through the node daemon's workload API: the installed
`nccom-test` asks the daemon over its real unix socket with the claim's
token, the daemon times them on the chips it prepared for the claim (plus
the peers named), counts them in /metrics, and refuses bad values by field."""

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from driver.claimendpoint import ClaimEndpoint, ClaimEndpointError
from driver.node import cdi
from localsim.controlplane.plane import ControlPlane
from localsim.standin.kubelet import container_edits
from simdevice.collectives import time_collective
from simdevice.fabric import rank_places
from testbed.daemon import Daemon, short_tmpdir
from testbed.rack import DRIVER, NODES, RACK, Rack, published_rack
from tests.node.test_daemon import metric, prepare_pod

pytestmark = pytest.mark.integration

GIB = float(1 << 30)
SERVER = f'device.attributes["{DRIVER}"].resourceType == "server"'


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


def claim_env(daemon: Daemon, node: str, prepared: dict[str, object]) -> dict[str, str]:
    """What the container gets, with the mounted paths resolved on the host."""
    ((uid, result),) = prepared.items()
    edits = container_edits(daemon.paths(node).cdi_dir, result.devices[0]["cdi_device_ids"])  # type: ignore[attr-defined]
    env = dict(edits.env)
    for key in ("TRAINIUM_DRA_WORKLOAD_SOCKET", "TRAINIUM_DRA_TOKEN_FILE"):
        env[key] = str(cdi.host_path(edits.mounts, env[key]))
    assert env["TRAINIUM_DRA_CLAIM_UID"] == uid
    return env


def nccom(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "nccom-test"
    return subprocess.run(
        [str(script), *argv],
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def busbws(out: str) -> list[float]:
    lines = out.strip().splitlines()
    return [float(line.split()[5]) for line in lines[1:-1]]


def test_nccom_test_is_answered_by_the_node_on_the_claims_chips(daemon: Daemon, rack: Rack) -> None:
    for i, node in enumerate(NODES):
        rack.create_claim(f"coll-{i}", selector=SERVER)
        rack.create_pod(f"coll-{i}-pod", f"coll-{i}", node=node)
    prepared = [prepare_pod(daemon, rack, f"coll-{i}-pod") for i in range(len(NODES))]
    (node_a, _, (kubelet_a, refs_a, by_uid_a)), (node_b, _, (kubelet_b, refs_b, by_uid_b)) = (
        prepared
    )
    env_a, env_b = claim_env(daemon, node_a, by_uid_a), claim_env(daemon, node_b, by_uid_b)
    assert env_a["TRAINIUM_DRA_GENERATION"] == RACK.generation
    ring_a = [int(c) for c in env_a["TRAINIUM_DRA_RING"].split(",")]
    ring_b = [int(c) for c in env_b["TRAINIUM_DRA_RING"].split(",")]
    assert len(ring_a) == len(ring_b) == RACK.chips_per_server

    # one server: the claim's own chips, which the container never names
    sweep = ("-b", "1M", "-e", "1G", "-f", "32", "-n", "3", "-w", "1", "--show-algorithm")
    one = nccom(env_a, "-r", "4", *sweep, "allr")
    assert one.returncode == 0, one.stderr
    places_a = rank_places(RACK, [(0, c) for c in ring_a])
    sizes = [1 << 20, 1 << 25, 1 << 30]
    expected_one = [time_collective("all-reduce", RACK, places_a, s).busbw / GIB for s in sizes]
    assert busbws(one.stdout) == pytest.approx(expected_one, abs=0.01)

    # a gang of two servers: the other pod's chips as peers
    peers = ",".join(map(str, ring_b))
    gang = nccom(env_a, "-r", "8", "--peers", peers, *sweep, "allr")
    assert gang.returncode == 0, gang.stderr
    places = rank_places(RACK, [(0, c) for c in ring_a + ring_b])
    expected_gang = [time_collective("all-reduce", RACK, places, s).busbw / GIB for s in sizes]
    assert busbws(gang.stdout) == pytest.approx(expected_gang, abs=0.01)
    assert busbws(gang.stdout)[-1] != pytest.approx(busbws(one.stdout)[-1], abs=0.5)
    assert "hier" in gang.stdout
    back = nccom(env_b, "-r", "8", "--peers", ",".join(map(str, ring_a)), *sweep, "allr")
    assert busbws(back.stdout) == pytest.approx(expected_gang, abs=0.01)

    # the daemon counted them per claim: 3 sizes x (3 + 1) operations, twice
    text = daemon.http("GET", "/metrics").text
    labels = {"node": node_a, "claim": "coll-0", "operation": "all-reduce"}
    assert metric(text, "trainium_dra_node_collectives_total", **labels) == 2 * 3 * 4
    assert metric(text, "trainium_dra_node_collective_bytes_total", **labels) == 2 * 4 * sum(sizes)
    seconds = 4 * sum(
        time_collective("all-reduce", RACK, p, s).duration
        for p in (places_a, places)
        for s in sizes
    )
    assert metric(text, "trainium_dra_node_collective_seconds_total", **labels) == pytest.approx(
        seconds, rel=1e-9
    )

    # bad values are refused by field; the container's chips of its own claim are not taken
    endpoint = ClaimEndpoint.from_environment(env_a)
    good = {"operation": "all-reduce", "nworkers": 4, "sizes": [1024]}
    for bad, field in (
        ({"operation": "allr"}, "operation:"),
        ({"sizes": [-1]}, "sizes:"),
        ({"sizes": []}, "sizes:"),
        ({"nworkers": 5}, "nworkers: 5 ranks need 5 chips"),
        ({"nworkers": 5, "peers": [[0, ring_a[0]]]}, "peers:"),
        ({"nworkers": 5, "peers": [[0, 999]]}, "peers: chips: chip 999"),
        ({"algorithm": "tree"}, "algorithm:"),
        ({"nworkers": 3, "algorithm": "rdh"}, "algorithm: rdh does not apply"),
        ({"iterations": 0}, "iterations:"),
    ):
        with pytest.raises(ClaimEndpointError) as err:
            endpoint.collectives({**good, **bad})
        assert str(err.value).startswith(f"workload API 400: {field}"), err.value
    refused = nccom(env_a, "-r", "5", "allr")
    assert refused.returncode == 1 and "nworkers: 5 ranks need 5 chips" in refused.stderr

    # unprepare drops the claim's series
    kubelet_a.unprepare(refs_a)
    kubelet_b.unprepare(refs_b)
    text = daemon.http("GET", "/metrics").text
    assert 'claim="coll-0"' not in text and 'claim="coll-1"' not in text
    for i in range(len(NODES)):
        rack.delete_claim(f"coll-{i}", f"coll-{i}-pod")
