"""The live replays of docs/whatif.md, each through the real kube-scheduler
on a cluster of its own, brought up and taken down here. Unlike
`make bench-whatif` their figures depend on the machine: a replay that falls
behind shows the scheduler's latency as queueing. So each case keeps what
`trainium-dra whatif live` records beside its figures: the load average, each
process's CPU seconds and the scheduler's attempts by result.

Cases run with the local cluster (`trainium-dra up`, the kubelet stand-in)
except `hundred-racks`: 3,600 nodes are more node daemons than this machine
holds, so it runs the control plane, the controller (one advertised rack
device) and Nodes nothing runs pods on. The replay only needs pods bound.

Results merge case by case into benchmarks/results/whatif-live.json.

Usage: python -m benchmarks.whatif_live [--cases ten-racks,policy-claims] [--noisy]
"""

import argparse
import json
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Final

from kubernetes import client

from benchmarks.publishing import create_racks, rack_nodes
from benchmarks.report import Conditions, add_noisy_flag, make_command, write_results
from benchmarks.scale import all_ready
from driver.devicemodel.layout import PARTITION_SIZES
from driver.localsim.controlplane.plane import ControlPlane
from driver.names import DEFAULT_DRIVER_NAME
from driver.whatif import main as whatif
from simdevice.topology import rack_spec
from testbed.controlplane import controller, install
from testbed.waiting import wait_for

NAME: Final = "whatif-live"
CLI: Final = str(Path(__file__).resolve().parents[1] / ".venv" / "bin" / "trainium-dra")
MIX: Final = "cores-1=0.3,cores-2=0.1,cores-4=0.1,chips-1=0.3,chips-4=0.1,serverx4=0.07,rack=0.03"
"""Every size the driver publishes, gangs of four servers and whole racks."""


@dataclass(frozen=True)
class Case:
    what: str
    up: tuple[str, ...]
    """`trainium-dra up` flags; empty for the control plane without kubelets."""
    live: tuple[str, ...]
    """`trainium-dra whatif live` flags."""
    bare_racks: int = 0


def _trace(jobs: int, load: float, minutes: float) -> tuple[str, ...]:
    return (
        "--jobs", str(jobs), "--load", str(load), "--mix", MIX,
        "--max-duration-hours", "1", "--minutes", str(minutes),
    )  # fmt: skip


POLICY_UP: Final = ("--racks", "1", "--pools", "node")
POLICY_TRACE: Final = _trace(300, 0.9, 3)
CASES: Final = {
    "ten-racks": Case(
        "10 Trn3 Gen2 racks (11,520 cores), 2,000 jobs at offered load 0.6",
        ("--racks", "10", "--pools", "node"),
        _trace(2000, 0.6, 10),
    ),
    "ten-racks-overloaded": Case(
        "10 Trn3 Gen2 racks, 2,000 jobs at offered load 1.2: more work than the racks hold",
        ("--racks", "10", "--pools", "node"),
        _trace(2000, 1.2, 10),
    ),
    "policy-claims": Case("1 rack, claims, default scheduler", POLICY_UP, POLICY_TRACE),
    "policy-no-gangs": Case(
        "1 rack, claims, no PodGroups", POLICY_UP, (*POLICY_TRACE, "--no-gangs")
    ),
    "policy-extended": Case(
        "1 rack, Neuron-style requests, default scheduler",
        POLICY_UP,
        (*POLICY_TRACE, "--requests", "extended"),
    ),
    "policy-binpack": Case(
        "1 rack, Neuron-style requests, the chart's bin-packing profile",
        POLICY_UP,
        (*POLICY_TRACE, "--requests", "extended", "--scheduler-name", "trainium-dra-binpack"),
    ),
    "policy-sizes-1-2": Case(
        "1 rack, claims, partitions of 1 and 2 cores only",
        (*POLICY_UP, "--partition-sizes", "1,2"),
        POLICY_TRACE,
    ),
    "hundred-racks": Case(
        "100 Trn3 Gen2 racks (115,200 cores, 3,600 nodes), 500 jobs at offered load 0.8, "
        "no kubelets, one advertised rack device",
        (),
        _trace(500, 0.8, 5),
        bare_racks=100,
    ),
}


def run_local(case: Case, work: Path) -> dict[str, Any]:
    state, out = work / "state", work / "out"
    subprocess.run([CLI, "up", f"--state-dir={state}", *case.up], check=True)
    try:
        argv = ["live", f"--state-dir={state}", *case.live, "--out", str(out)]
        if whatif.main(argv) != 0:
            raise SystemExit(f"whatif {' '.join(argv)} failed")
    finally:
        subprocess.run([CLI, "down", f"--state-dir={state}"], check=False)
    result: dict[str, Any] = json.loads((out / "result.json").read_text())
    return result


@contextmanager
def bare_cluster(racks: int, work: Path) -> Iterator[tuple[ControlPlane, client.ApiClient, int]]:
    """A control plane, the controller (its pid last) and `racks` Gen2 racks
    on Nodes no kubelet runs."""
    with ControlPlane.running(work / "cp") as cp, cp.api_client() as api:
        install(cp)
        for i in range(racks):
            for node in rack_nodes(i):
                cp.create_node(node)
        create_racks(api, racks, pools="node")
        with controller(cp, work / "controller.log", "--advertised-racks", "1") as proc:
            wait_for(f"{racks} racks ready", partial(all_ready, api, racks), 3600, 1)
            yield cp, api, proc.pid


def run_bare(case: Case, work: Path) -> dict[str, Any]:
    out = work / "out"
    with bare_cluster(case.bare_racks, work) as (cp, api, controller_pid):
        pids = {c.name: c.process.pid for c in cp.components} | {"controller": controller_pid}
        metrics = f"https://127.0.0.1:{cp.config.ports.scheduler}/metrics"
        cluster = whatif.LiveCluster(
            api,
            rack_spec("trn3-gen2"),
            case.bare_racks,
            DEFAULT_DRIVER_NAME,
            PARTITION_SIZES,
            pids,
            metrics,
            None,
        )
        args = whatif.parser().parse_args(["live", *case.live, "--out", str(out)])
        whatif.replay_on(cluster, args)
    result: dict[str, Any] = json.loads((out / "result.json").read_text())
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    add_noisy_flag(parser)
    args = parser.parse_args(argv)
    names = [n for n in args.cases.split(",") if n]
    unknown = set(names) - set(CASES)
    if unknown:
        raise SystemExit(
            f"--cases: unknown {', '.join(sorted(unknown))}; known: {', '.join(CASES)}"
        )
    conditions = Conditions.begin(args.noisy)
    command = make_command("make bench-whatif-live", argv)
    cases: dict[str, Any] = {}
    for name in names:
        case = CASES[name]
        print(f"== {name}: {case.what}", flush=True)
        with tempfile.TemporaryDirectory(prefix=f"whatif-{name}-") as tmp:
            run = run_bare if case.bare_racks else run_local
            result = run(case, Path(tmp))
        result.pop("trace", None)
        cases[name] = {
            "what": case.what,
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "command": command,
            "up": list(case.up),
            "live": list(case.live),
            **result,
        }
    write_results(NAME, command, {"cases": cases}, conditions, merge=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
