"""`trainium-dra status` and `top` on real nodes: the rack, a running claim
and its busy cores, read from the chart's daemon pods and the nodes' CDI
specs, as the commands read them on the stand-in."""

import subprocess

import pytest

from localsim.controlplane.children import trainium_dra_argv
from testbed.localcluster import wait_for
from testbed.realnodes import RealCluster, claim_template, namespace, workload_pod

pytestmark = pytest.mark.integration

NODE = "rack-a-node-3"
NS = "real-status-top"
WORK = '{"kind": "train-step", "hidden": 4096, "seq": 2048, "layers": 2, "iterations": 1000000}'
"""Long enough to keep the chip busy until the test deletes the pod."""


def run(real: RealCluster, *args: str) -> str:
    result = subprocess.run(
        trainium_dra_argv([*args, f"--state-dir={real.cluster.paths.root}"]),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def section(text: str, title: str) -> list[list[str]]:
    """The rows of one table of `status`, split into cells (header first)."""
    block = text.split(f"{title}\n", 1)[1].split("\n\n", 1)[0]
    return [line.split() for line in block.splitlines()]


def busy_chip_row(real: RealCluster, chip: int) -> str | None:
    """`top`'s row of NODE once every core of `chip` shows work."""
    screen = run(real, "top", "--iterations=1")
    row = next((line for line in screen.splitlines() if line.startswith(NODE)), None)
    if row is None or " " in row.split("|")[1 + chip]:
        return None
    return screen


def test_status_and_top_show_a_running_claim_on_real_nodes(real: RealCluster) -> None:
    real.apply(namespace(NS), claim_template(NS, "chip", "chip.trainium.sim.dev"))
    real.apply(workload_pod(NS, "train", "chip", ("--spec", WORK), node=NODE))
    pod = real.running(NS, "train")
    real.wait_logs(NS, "train", "job_submitted")
    claim = real.cluster.claim_of(pod)
    [result] = claim["status"]["allocation"]["devices"]["results"]
    device = f"{result['pool']}/{result['device']}"

    status = run(real, "status")
    racks = section(status, "RACKS")
    assert racks[0][:2] == ["NAME", "GENERATION"]
    [rack] = racks[1:]
    assert rack[:4] == ["rack-a", "trn3-gen1", "partitioned", "4/4"], rack
    assert int(rack[4]) == 4 * 16 * 8 and int(rack[5]) >= 8 and rack[-1] == "True", rack
    kinds = section(status, "DEVICES BY KIND")
    assert kinds[1][0] == "rack-a" and int(kinds[1][2]) == 4 * 16, kinds
    rows = [r for r in section(status, "ALLOCATIONS BY CLAIM") if claim["metadata"]["name"] in r]
    assert rows == [[NS, claim["metadata"]["name"], device, "train", NODE, "1", "0-7"]], status

    chip = int(result["device"].rsplit("chip", 1)[1])
    screen = wait_for(f"top to show chip {chip} of {NODE} busy", lambda: busy_chip_row(real, chip))
    header = screen.splitlines()[0]
    assert header.startswith("trainium-dra top — rack-a (trn3-gen1, 4 nodes, 512 cores)"), screen
    busy = int(screen.split("busy cores ", 1)[1].split("/", 1)[0])
    assert busy >= 8, screen
    real.kubectl("delete", "namespace", NS, "--wait=false")
