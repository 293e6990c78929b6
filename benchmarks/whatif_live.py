"""The live replays of docs/whatif.md, each through the real kube-scheduler
on a cluster of its own, brought up and taken down here, on the settle clock
(simulated time jumps from event to event once the cluster has settled), so
their figures are the scheduler's decisions, not this machine's speed; its
wall time is what the machine spent. Each case keeps what
`trainium-dra whatif live` records beside its figures: the load average, each
process's CPU seconds, the scheduler's attempts by result and the settle
clock's wall time per event; and the conditions every benchmark records
(release, commit, load sampled during the case), which say whether it was
noisy.

Cases run with the local cluster (`trainium-dra up`, the kubelet stand-in)
except `hundred-racks`: 3,600 nodes are more node daemons than this machine
holds, so it runs the control plane, the controller (one advertised rack
device) and Nodes nothing runs pods on. The replay only needs pods bound.

Results merge case by case into benchmarks/results/whatif-live.json, each
written as soon as its case ends.

Usage: python -m benchmarks.whatif_live [--cases ten-racks,policy-claims] [--noisy]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Final

from kubernetes import client

from benchmarks.paths import ROOT
from benchmarks.publishing import create_racks, rack_nodes
from benchmarks.report import Conditions, add_noisy_flag, make_command, write_results
from benchmarks.scale import all_ready
from driver.devicemodel.layout import PARTITION_SIZES
from driver.names import DEFAULT_DRIVER_NAME
from localsim.controlplane.plane import ControlPlane, free_port
from simdevice.topology import rack_spec
from testbed.controlplane import controller, install
from testbed.waiting import wait_for
from whatif import cli as whatif
from whatif.jobdiff import SAME
from whatif.livecluster import LiveCluster, replay_on

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
    repeats: int = 1
    """Replays of the same trace on the same cluster; the last beside a CPU hog."""


POLICY_MIX: Final = "cores-2=0.3,cores-4=0.3,chips-1=0.18,serverx4=0.2,rack=0.02"
"""Partitions of two and four cores beside chips, four-server gangs and a few
whole racks: a rack job waits for the rack to empty, gangs of servers for
whole servers, so where each policy puts the small jobs shows."""


def _trace(jobs: int, load: float, mix: str = MIX) -> tuple[str, ...]:
    return (
        "--jobs", str(jobs), "--load", str(load), "--mix", mix, "--max-duration-hours", "1",
    )  # fmt: skip


POLICY_UP: Final = ("--racks", "1", "--pools", "node")
POLICY_TRACE: Final = _trace(150, 1.3, POLICY_MIX)
"""More work than the rack holds: the queue never empties, and policies part."""
KUEUE_UP: Final = (*POLICY_UP, "--with-kueue", "--kueue-quota", "cores")
CASES: Final = {
    "ten-racks": Case(
        "10 Trn3 Gen2 racks (11,520 cores), 2,000 jobs at offered load 0.6",
        ("--racks", "10", "--pools", "node"),
        _trace(2000, 0.6),
    ),
    "ten-racks-overloaded": Case(
        "10 Trn3 Gen2 racks, 2,000 jobs at offered load 1.2: more work than the racks hold",
        ("--racks", "10", "--pools", "node"),
        _trace(2000, 1.2),
    ),
    "policy-claims": Case("1 rack, claims, default scheduler", POLICY_UP, POLICY_TRACE),
    "one-rack-repeat": Case(
        "1 rack, claims, the same 100 jobs three times, the third beside a busy loop on "
        "every CPU: the settle clock's figures must not move",
        POLICY_UP,
        _trace(100, 0.9),
        repeats=3,
    ),
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
    "kueue-strict": Case(
        "1 rack, every job through Kueue (StrictFIFO), Neuron-style requests",
        KUEUE_UP,
        (*POLICY_TRACE, "--kueue", "strict"),
    ),
    "kueue-best-effort": Case(
        "1 rack, every job through Kueue (BestEffortFIFO), Neuron-style requests",
        KUEUE_UP,
        (*POLICY_TRACE, "--kueue", "best-effort"),
    ),
    "packed-versus-spread": Case(
        "2 Trn3 Gen2 racks, claims, 36 training jobs of 2 to 8 chips, each timed on the "
        "chips it was given",
        ("--racks", "2", "--pools", "node"),
        (
            "--trace",
            str(ROOT / "benchmarks" / "traces" / "packed-versus-spread.csv"),
            "--with-spread",
        ),
    ),
    "hundred-racks": Case(
        "100 Trn3 Gen2 racks (115,200 cores, 3,600 nodes), 500 jobs at offered load 0.8, "
        "no kubelets, one advertised rack device",
        (),
        _trace(500, 0.8),
        bare_racks=100,
    ),
}


def run_local(case: Case, work: Path) -> dict[str, Any]:
    state = work / "state"
    subprocess.run([CLI, "up", f"--state-dir={state}", *case.up], check=True)
    outs = [work / f"out-{i}" for i in range(case.repeats)]
    try:
        for i, out in enumerate(outs):
            trace = ["--trace", str(outs[0] / "trace.csv")] if i else list(case.live)
            argv = ["live", f"--state-dir={state}", *trace, "--out", str(out)]
            with cpu_hog(on=i > 0 and i == case.repeats - 1):
                if whatif.main(argv) != 0:
                    raise SystemExit(f"whatif {' '.join(argv)} failed")
    finally:
        subprocess.run([CLI, "down", f"--state-dir={state}"], check=False)
    results = [json.loads((out / "result.json").read_text()) for out in outs]
    first: dict[str, Any] = results[0]
    if case.repeats > 1:
        first["repeats"] = [
            repeat_figures(first, r, hog=i == case.repeats - 1) for i, r in enumerate(results)
        ]
    return first


def waits_by_shape(jobs: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Each replay's queueing by job shape (whole racks starve where small
    jobs overtake them). Every job's own record stays in the run's
    result.json only."""
    found: dict[str, dict[str, Any]] = {}
    for replay, records in jobs.items():
        shapes: dict[str, list[dict[str, Any]]] = {}
        for job in records:
            shapes.setdefault(job["shape"], []).append(job)
        found[replay] = {shape: _waits(group) for shape, group in sorted(shapes.items())}
    return found


def _waits(jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """Jobs, those never run, mean and max wait in simulated seconds."""
    waits = [j["start"] - j["arrival"] for j in jobs if j["start"] is not None]
    return {
        "jobs": len(jobs),
        "never_ran": len(jobs) - len(waits),
        "wait_mean_s": sum(waits) / len(waits) if waits else None,
        "wait_max_s": max(waits, default=None),
    }


def _same_start(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= SAME


@contextmanager
def cpu_hog(on: bool) -> Iterator[None]:
    """With `on`, a busy loop on every CPU for the duration."""
    hogs = (
        [
            subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(os.cpu_count() or 1)
        ]
        if on
        else []
    )
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def repeat_figures(first: dict[str, Any], again: dict[str, Any], *, hog: bool) -> dict[str, Any]:
    """One replay of a repeated trace against the first: its live allocation,
    its wall time and the share of jobs that started at the same simulated
    second (the trace file keeps times to the millisecond)."""
    starts = {j["name"]: j["start"] for j in first["jobs"]["kube-scheduler, gangs on"]}
    jobs = again["jobs"]["kube-scheduler, gangs on"]
    same = sum(1 for j in jobs if _same_start(j["start"], starts[j["name"]]))
    return {
        "hog": hog,
        "allocation_rate_while_arriving": again["runs"][0]["allocation_rate_while_arriving"],
        "same_start_share": same / len(jobs),
        "wall_seconds": again["wall_seconds"],
        "load_1min_after": again["load_1min"]["after"],
    }


@contextmanager
def bare_cluster(
    racks: int, work: Path
) -> Iterator[tuple[ControlPlane, client.ApiClient, int, str]]:
    """A control plane, the controller (its pid and metrics URL last) and
    `racks` Gen2 racks on Nodes no kubelet runs."""
    port = free_port()
    with ControlPlane.running(work / "cp") as cp, cp.api_client() as api:
        install(cp)
        for i in range(racks):
            for node in rack_nodes(i):
                cp.create_node(node)
        create_racks(api, racks, pools="node")
        address = f"127.0.0.1:{port}"
        log = work / "controller.log"
        with controller(cp, log, "--advertised-racks", "1", f"--http-address={address}") as proc:
            wait_for(f"{racks} racks ready", partial(all_ready, api, racks), 3600, 1)
            yield cp, api, proc.pid, f"http://{address}/metrics"


def run_bare(case: Case, work: Path) -> dict[str, Any]:
    out = work / "out"
    with bare_cluster(case.bare_racks, work) as (cp, api, controller_pid, controller_metrics):
        pids = {c.name: c.process.pid for c in cp.components} | {"controller": controller_pid}
        metrics = f"https://127.0.0.1:{cp.config.ports.scheduler}/metrics"
        servers = {
            node: (r, s) for r in range(case.bare_racks) for s, node in enumerate(rack_nodes(r))
        }
        cluster = LiveCluster(
            api,
            rack_spec("trn3-gen2"),
            case.bare_racks,
            DEFAULT_DRIVER_NAME,
            PARTITION_SIZES,
            pids,
            metrics,
            controller_metrics,
            None,
            servers,
        )
        args = whatif.parser().parse_args(["live", *case.live, "--out", str(out)])
        replay_on(cluster, args)
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
        # Admitted once above; each case keeps its own readings, as they merge apart.
        own = Conditions.begin(noisy=True)
        with tempfile.TemporaryDirectory(prefix=f"whatif-{name}-") as tmp:
            run = run_bare if case.bare_racks else run_local
            result = run(case, Path(tmp))
        result.pop("trace", None)
        result["by_shape"] = waits_by_shape(result.pop("jobs"))
        cases[name] = {
            "what": case.what,
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "command": command,
            "up": list(case.up),
            "live": list(case.live),
            **result,
            "conditions": own.end(),
        }
        # Each case as it ends: a run of several long cases stopped midway keeps those done.
        write_results(NAME, command, {"cases": {name: cases[name]}}, conditions, merge=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
