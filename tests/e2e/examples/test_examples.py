"""Every example under deploy/examples/ on the stand-in rack (the checks are
testbed/examples/manifests.py's, shared with the real-node run), and
`trainium-dra status` on a running claim."""

import subprocess

import pytest

from localsim.controlplane.children import trainium_dra_argv
from testbed.examples.collectives import test_nccom_test_on_one_server_and_across_two
from testbed.examples.manifests import (
    node_of,
    test_admin_access,
    test_cel_topology,
    test_demo_job,
    test_device_taint_toleration,
    test_drain_chip,
    test_first_available,
    test_invalid_config,
    test_lnc2_partition,
    test_single_core,
    test_two_chips_same_server,
    test_whole_chip,
    test_whole_rack_shared_by_a_pod_per_server,
    test_whole_server,
)
from testbed.localcluster import Cluster, results, wait_for

pytestmark = pytest.mark.integration

__all__ = [
    "test_admin_access",
    "test_cel_topology",
    "test_demo_job",
    "test_device_taint_toleration",
    "test_drain_chip",
    "test_first_available",
    "test_invalid_config",
    "test_lnc2_partition",
    "test_nccom_test_on_one_server_and_across_two",
    "test_single_core",
    "test_two_chips_same_server",
    "test_whole_chip",
    "test_whole_rack_shared_by_a_pod_per_server",
    "test_whole_server",
]
"""The checks collected here, against the stand-in `target` of conftest.py."""


def test_status_shows_allocations_and_unhealthy_devices(cluster: Cluster) -> None:
    """`trainium-dra status` on a running claim and on a chip the simulator failed."""
    files = ("whole-chip/whole-chip.yaml",)
    cluster.apply(*files)
    sim = cluster.sim_control()
    fault = {"node": "rack-a-node-7", "kind": "ecc-uncorrected-hbm", "chip": 1}
    try:
        pod = cluster.running("example-whole-chip", "train")
        claim = cluster.claim_of(pod)
        [result] = results(claim)

        def status() -> str:
            done = subprocess.run(
                trainium_dra_argv(["status", f"--state-dir={cluster.paths.root}"]),
                capture_output=True,
                text=True,
                check=True,
            )
            return done.stdout

        row = next(line for line in status().splitlines() if claim["metadata"]["name"] in line)
        assert f"rack-a/{result['device']}" in row and node_of(pod) in row and "train" in row
        sim.post("/sim/v1/faults", json=fault).raise_for_status()
        unhealthy = wait_for(
            "the failed chip in status",
            lambda: [
                line
                for line in status().split("UNHEALTHY DEVICES")[1].splitlines()
                if "server07-chip01 " in line + " "
            ],
        )
        assert "rack-a-node-7" in unhealthy[0] and "failed" in unhealthy[0]
        sim.request("DELETE", "/sim/v1/faults", json=fault).raise_for_status()
        wait_for("recovery", lambda: "(none)" in status().split("UNHEALTHY DEVICES")[1])
    finally:
        sim.request("DELETE", "/sim/v1/faults", json=fault)
        sim.close()
        cluster.delete(*files)
