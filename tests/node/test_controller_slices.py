"""The daemon prepares devices from the slices the controller builds.

The ResourceSlices come from the controller's own pure builder
(`driver.controller.slices.build_slices`, partitioned mode) for two mapped
servers of a Trn3 Gen2 rack, so the attribute scheme the daemon reads is the
one the controller publishes; the real scheduler allocates against them.
"""

from collections.abc import Iterator
from typing import Any

import pytest

from driver.controller.slices import build_slices
from driver.devicemodel.poolplan import RackInput
from driver.node.devices import device_attributes
from driver.node.durable.checkpoint import Checkpoint
from localsim.controlplane.plane import ControlPlane
from simdevice.topology import CoreRange
from testbed.daemon import Daemon, short_tmpdir
from testbed.rack import RACK, Rack, Site, published_rack

pytestmark = pytest.mark.integration

SITE = Site(
    "ctrlslices.sim.dev", "ctrlslices-rack", "ctrlslices", ("ctrlslices-n0", "ctrlslices-n1")
)
SLICES = build_slices(
    RackInput(
        name=SITE.rack_id,
        rack=RACK,
        mode="partitioned",
        flat_device="chip",
        nodes=dict(enumerate(SITE.nodes)),
        rack_nodes=None,
        taints={},
        # Published without the controller, so nothing would bring a fabric up.
        binding_conditions=False,
    ),
    SITE.driver,
)
ATTRS = device_attributes(SLICES, SITE.driver)


@pytest.fixture(scope="module")
def rack(control_plane: ControlPlane) -> Iterator[Rack]:
    with published_rack(control_plane, SITE, SLICES) as published:
        yield published


@pytest.fixture(scope="module")
def daemon(control_plane: ControlPlane, rack: Rack) -> Iterator[Daemon]:
    with short_tmpdir() as workdir:
        running = Daemon(workdir, control_plane.kubeconfig, site=SITE).start()
        yield running
        assert running.stop() == 0


@pytest.mark.parametrize(
    ("kind", "selector", "lnc"),
    [
        ("core", 'resourceType == "core" && device.attributes["{d}"].coreCount == 4', 2),
        ("chip", 'resourceType == "chip"', 1),
        ("server", 'resourceType == "server"', 2),
    ],
)
def test_controller_device_is_prepared_with_its_cores(
    kind: str, selector: str, lnc: int, daemon: Daemon, rack: Rack
) -> None:
    expression = f'device.attributes["{SITE.driver}"].' + selector.format(d=SITE.driver)
    config = {"apiVersion": "trainium.sim.dev/v1alpha1", "kind": "NeuronConfig"}
    rack.create_claim(
        f"ctrl-{kind}", selector=expression, config={**config, "logicalNeuronCore": lnc}
    )
    rack.create_pod(f"ctrl-{kind}-pod", f"ctrl-{kind}")
    pod: dict[str, Any] = rack.bound_pod(f"ctrl-{kind}-pod")
    node = pod["spec"]["nodeName"]
    claim = rack.claim(f"ctrl-{kind}")
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    attrs = ATTRS[(result["pool"], result["device"])]
    assert attrs["resourceType"] == kind
    chips = [int(attrs["chipIndex"])] if "chipIndex" in attrs else range(RACK.chips_per_server)
    start, count = (int(attrs["coreStart"]), int(attrs["coreCount"])) if kind == "core" else (0, 8)
    expected = [c for chip in chips for c in CoreRange(chip, start, count).visible_cores(lnc, 8)]

    kubelet = daemon.kubelet(node)
    edits = kubelet.start_pod(rack.objects, pod, daemon.paths(node).cdi_dir)["main"]
    assert edits.env["NEURON_RT_VISIBLE_CORES"] == ",".join(map(str, expected))
    assert edits.env["NEURON_LOGICAL_NC_CONFIG"] == str(lnc)
    kubelet.stop_pod(rack.objects, pod)
    assert Checkpoint(daemon.paths(node).checkpoint).claims == {}
    assert list(daemon.paths(node).cdi_dir.iterdir()) == []
    rack.delete_claim(f"ctrl-{kind}", f"ctrl-{kind}-pod")
