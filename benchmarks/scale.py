"""Toward a million accelerators: the scheduler's time per single-core claim
with SCHEDULER_RACKS Trn3 Gen2 racks published (`--measure-scheduler`; other
counts with `--scheduler-racks`), smallest fleet first, into
benchmarks/results/scale.json; docs/scale.md and its plots are rendered from
that and the publishing benchmark's results (`make bench-controller`) by
benchmarks/pages/scale.py. Without `--measure-scheduler` the pages are only
rendered again. Each step prints a line: the point, n of m, what it does and
the time since the start.

Usage: python -m benchmarks.scale [--measure-scheduler] [--scheduler-racks 1,4,16]
       [--claims 64] [--noisy]
"""

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any, Final

from kubernetes import client

from benchmarks import render
from benchmarks.publishing import create_racks, rack_nodes, ready_racks, remove_published
from benchmarks.report import REPEATS, Conditions, add_noisy_flag, make_command, write_results
from benchmarks.scalefit import SCHEDULER_RACKS
from localsim.controlplane.plane import ControlPlane
from testbed.controlplane import controller, custom, install, load_claim, pod
from testbed.waiting import wait_for

COMMAND = "make bench-scale"
NS: Final = "scale"


def measuring_order(racks: Iterable[int]) -> list[int]:
    """The rack counts to measure, smallest first and each once: a point keeps
    the nodes of the points before it and adds its own, so no point filters
    (or waits for) a larger fleet's nodes."""
    found = sorted(set(racks))
    if not found or found[0] < 1:
        raise ValueError(f"rack counts must be whole numbers from 1 up, not {found}")
    return found


def progress(point: int, total: int, racks: int, doing: str, elapsed: float) -> str:
    """A step's line: which point of how many, its fleet, what it does, the
    time since the start."""
    fleet = f"{racks} rack{'' if racks == 1 else 's'}"
    return f"bench-scale: point {point} of {total} ({fleet}): {doing}; {elapsed:,.0f} s elapsed"


def measure_scheduler(counts: list[int], claims: int) -> list[dict[str, Any]]:
    """Seconds for the real scheduler to bind `claims` single-core claims (one pod
    each, no rack pinned) with each of `counts` racks published, in their
    measuring order: REPEATS runs, the median per claim."""
    out = []
    work = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    start = time.monotonic()
    with ControlPlane.running(work / "cp") as cp, cp.api_client() as api:
        install(cp)
        client.CoreV1Api(api).create_namespace({"metadata": {"name": NS}})
        made = 0
        for index, n in enumerate(counts, 1):
            step = partial(say, index, len(counts), n, start)
            new_nodes = [node for i in range(made, n) for node in rack_nodes(i)]
            step(f"making {len(new_nodes)} more nodes")
            for node in new_nodes:
                cp.create_node(node)
            made = n
            step(f"publishing {n} racks")
            create_racks(api, n)
            with controller(cp, work / f"sched-{n}.log", "--lease-name", "scale"):
                step("waiting for every rack to be Ready")
                wait_for(f"{n} racks ready", partial(all_ready, api, n), 3600, 1)
                runs = []
                for run in range(REPEATS):
                    step(f"run {run + 1} of {REPEATS}, binding {claims} claims")
                    runs.append(round(bind_claims(api, claims, f"s{n}-{run}-"), 2))
                    clear(api)
                seconds = statistics.median(runs)
                out.append(
                    {
                        "racks": n,
                        "claims": claims,
                        "seconds": seconds,
                        "seconds_runs": runs,
                        "ms_per_claim": round(1000 * seconds / claims, 1),
                    }
                )
            step(f"removing the racks, {1000 * seconds / claims:,.0f} ms a claim")
            remove_published(api, n)
    return out


def say(point: int, total: int, racks: int, start: float, doing: str) -> None:
    print(progress(point, total, racks, doing, time.monotonic() - start), flush=True)


def all_ready(api: client.ApiClient, racks: int) -> bool:
    return ready_racks(api) == racks


def bind_claims(api: client.ApiClient, claims: int, prefix: str) -> float:
    """Seconds to bind `claims` new claims and pods, named after `prefix` so a
    run never meets the last run's claims still being deleted."""
    core = client.CoreV1Api(api)
    t0 = time.perf_counter()
    for i in range(claims):
        name = f"{prefix}{i:04d}"
        custom(api).create_namespaced_custom_object(
            "resource.k8s.io", "v1", NS, "resourceclaims", load_claim("core-1", name, NS)
        )
        core.create_namespaced_pod(NS, pod(name, NS, [name]))
    wait_for(
        "every pod bound",
        lambda: sum(1 for p in core.list_namespaced_pod(NS).items if p.spec.node_name) == claims,
        3600,
        0.5,
    )
    return time.perf_counter() - t0


def clear(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    core.delete_collection_namespaced_pod(NS, grace_period_seconds=0)
    custom(api).delete_collection_namespaced_custom_object(
        "resource.k8s.io", "v1", NS, "resourceclaims"
    )
    wait_for("pods cleared", lambda: not core.list_namespaced_pod(NS).items, 600, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.scale")
    parser.add_argument("--measure-scheduler", action="store_true")
    parser.add_argument("--scheduler-racks", default=",".join(map(str, SCHEDULER_RACKS)))
    parser.add_argument("--claims", type=int, default=64, help="single-core claims per point")
    add_noisy_flag(parser)
    args = parser.parse_args(argv)
    if not args.measure_scheduler:
        render.write_pages()
        return 0
    try:
        counts = measuring_order(int(r) for r in args.scheduler_racks.split(","))
    except ValueError as error:
        parser.error(f"--scheduler-racks: {error}")
    conditions = Conditions.begin(args.noisy)
    results = {"scheduler": measure_scheduler(counts, args.claims)}
    # The make target passes --measure-scheduler itself; the command names what was added.
    given = [a for a in (sys.argv[1:] if argv is None else argv) if a != "--measure-scheduler"]
    print(write_results("scale", make_command(COMMAND, given), results, conditions))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
