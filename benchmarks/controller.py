"""The controller against a real control plane (its own, started here):

- publishing 1, 10 and 100 Trn3 Gen2 racks from cold: wall time, the writes
  the controller made (its own counter) and every API request the apiserver
  served meanwhile (all clients, e.g. the garbage collector too), beside the
  upstream Go ResourceSlice controller publishing the same slices;
- resyncs with nothing changed (writes, slice LISTs, time per rack), against
  the upstream controller's sync of unchanged pools, and one rack's change;

each rack count published three times by ours and by upstream in turn, each
of our runs starting on an etcd whose history is compacted and defragmented
(its database size counts that run's publishing alone); then
a fleet filling up (`benchmarks.controller_busy`): the controller's CPU and
writes per allocated claim. What the layouts cost the scheduler is
benchmarks/scheduler.py's.

Usage: python -m benchmarks.controller [--racks 1,10,100] [--busy-racks 10] [--noisy]
"""

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from kubernetes import client

from benchmarks.controller_busy import BUSY_ARMS, NS, busy_controller
from benchmarks.publishing import (
    NOOP_RESYNCS,
    RESYNC_SECONDS,
    WORKERS,
    clear_etcd_history,
    publish_anchor,
    publish_ours,
    rack_nodes,
    remove_published,
)
from benchmarks.report import REPEATS, Conditions, add_noisy_flag, make_command, write_results
from localsim.controlplane.plane import ControlPlane
from testbed.controlplane import install

COMMAND = "make bench-controller"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.controller")
    parser.add_argument("--racks", default="1,10,100", help="rack counts to publish from cold")
    parser.add_argument(
        "--busy-racks", type=int, default=10, help="racks the fleet-filling runs fill (0: none)"
    )
    parser.add_argument(
        "--busy-only",
        action="store_true",
        help="only the fleet-filling runs, keeping the last run's publishing figures",
    )
    add_noisy_flag(parser)
    args = parser.parse_args(argv)
    racks = [int(r) for r in args.racks.split(",")] if not args.busy_only else []
    conditions = Conditions.begin(args.noisy)
    work = Path(tempfile.mkdtemp(prefix="bench-controller-"))
    results: dict[str, Any] = {
        "resync": {"seconds": RESYNC_SECONDS, "workers": WORKERS, "periods": NOOP_RESYNCS},
        "publish": [],
    }
    with ControlPlane.running(work / "cp", storage_only=True) as cp, cp.api_client() as api:
        install(cp)
        client.CoreV1Api(api).create_namespace({"metadata": {"name": NS}})
        for i in range(max([*racks, args.busy_racks])):
            for node in rack_nodes(i):
                cp.create_node(node)
        for n in racks:
            point: dict[str, Any] = {"racks": n, "runs": [], "anchor_runs": []}
            results["publish"].append(point)
            for i in range(REPEATS):
                # One rack's change on the last run of the largest count only,
                # so the runs before it measure publishing alone.
                change = n == racks[-1] and i == REPEATS - 1
                # Every run's etcd size counts its own publishing only.
                clear_etcd_history(cp)
                ours = publish_ours(cp, api, n, work / f"publish-{n}-{i}.log", follow_up=change)
                if change:
                    point["one_rack_change"] = ours.pop("one_rack_change")
                remove_published(api, n)
                point["runs"].append(ours)
                point["anchor_runs"].append(publish_anchor(cp, api, n))
                # Written after every run, so a late failure keeps the early figures.
                write_results("controller", make_command(COMMAND, argv), results, conditions)
        if args.busy_racks:
            bands = [
                band
                for pools, publishing in BUSY_ARMS
                for band in busy_controller(
                    cp,
                    api,
                    args.busy_racks,
                    pools,
                    work / f"busy-{pools}-{publishing}.log",
                    publishing=publishing,
                )
            ]
            results["busy"] = {
                "bands": bands,
                "command": make_command(COMMAND, argv),
                "date": time.strftime("%Y-%m-%d"),
                "conditions": conditions.end(),
            }
            write_results(
                "controller",
                make_command(COMMAND, argv),
                {"busy": results["busy"]} if args.busy_only else results,
                conditions,
                merge=args.busy_only,
                keep_header=args.busy_only,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
