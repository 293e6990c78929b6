"""A whole 36-node UltraServer served by one daemon process."""

from collections.abc import Iterator

import pytest

from localsim.controlplane.plane import ControlPlane
from testbed.daemon import Daemon, short_tmpdir
from testbed.rack import RACK, Site

pytestmark = pytest.mark.integration

SITE = Site(
    "rackproc.sim.dev",
    "rackproc-rack",
    "rackproc",
    tuple(f"rackproc-n{i}" for i in range(RACK.servers)),
)


@pytest.fixture(scope="module")
def daemon(control_plane: ControlPlane) -> Iterator[Daemon]:
    with short_tmpdir() as workdir:
        running = Daemon(workdir, control_plane.kubeconfig, site=SITE).start(timeout=180)
        yield running
        assert running.stop() == 0
        assert not any(running.paths(n).registration_socket.exists() for n in SITE.nodes)


def test_every_node_has_its_own_sockets_and_server(daemon: Daemon) -> None:
    assert len(SITE.nodes) == 36
    live = daemon.http("GET", "/healthz")
    assert live.status_code == 200, live.text
    assert set(live.json()) == set(SITE.nodes)
    plugins = [daemon.kubelet(node).plugin for node in SITE.nodes]
    endpoints = {plugin.endpoint for plugin in plugins if plugin is not None}
    assert endpoints == {daemon.paths(node).dra_socket for node in SITE.nodes}
    described = daemon.sim("GET", "/sim/v1/nodes").json()
    assert [d["serverIndex"] for d in described] == list(range(36))
    assert all(d["registered"] for d in described)
    metrics = daemon.http("GET", "/metrics").text
    info = [line for line in metrics.splitlines() if line.startswith("neuron_hardware_info{")]
    assert len(info) == 36
