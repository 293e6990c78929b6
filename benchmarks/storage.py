"""What one Trn3 Gen2 rack's slices take in etcd, per pool layout and
partition sizes, measured inside etcd.

For each layout: publish RACKS racks with the real controller on a
storage-only control plane, compact etcd's history to its current revision,
defragment it and read how many bytes of its database are in use
(`etcd_mvcc_db_total_size_in_use_in_bytes`), against the same reading taken
the same way before the racks existed; then remove them. Compaction leaves
only live keys, so the difference divided by RACKS is what a rack adds to a
fleet's etcd (the apiserver stores slices as protobuf, so it differs from the
JSON the apiserver serves, which is recorded beside it). Sizes do not depend
on the machine's load.

Usage: python -m benchmarks.storage [--racks 10]
"""

import argparse
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Final

from kubernetes import client

from benchmarks.publishing import (
    clear_etcd_history,
    create_racks,
    rack_nodes,
    ready_racks,
    remove_published,
    slice_bytes,
    storage,
)
from benchmarks.report import Conditions, add_noisy_flag, interleaved, make_command, write_results
from localsim.controlplane.plane import ControlPlane
from testbed.controlplane import controller, install
from testbed.waiting import wait_for

COMMAND = "make bench-storage"
LAYOUTS: Final[dict[str, dict[str, Any]]] = {
    "rack pools": {},
    "node pools": {"pools": "node"},
    "node pools, partition sizes [1]": {"pools": "node", "partitionSizes": [1]},
    "node pools, partition sizes [1, 2]": {"pools": "node", "partitionSizes": [1, 2]},
}
"""UltraServer spec fields of each measured layout (whole chips are always published)."""


def in_use(cp: ControlPlane) -> int:
    """etcd's database bytes in use once the runs before have left nothing behind."""
    clear_etcd_history(cp)
    return storage(cp)["etcd_db_in_use_bytes"]


def measure(
    cp: ControlPlane, api: client.ApiClient, racks: int, spec: dict[str, Any], log: Path
) -> dict[str, Any]:
    before = in_use(cp)
    create_racks(api, racks, **spec)
    with controller(cp, log, "--lease-name", "bench-storage"):
        wait_for(f"{racks} racks ready", lambda: ready_racks(api) == racks, 1800, 0.5)
    after = in_use(cp)
    slices, json_bytes = slice_bytes(api)
    remove_published(api, racks)
    return {
        "racks": racks,
        "etcd_in_use_before_bytes": before,
        "etcd_in_use_after_bytes": after,
        "etcd_bytes_per_rack": round((after - before) / racks),
        "slices_per_rack": slices / racks,
        "slice_json_bytes_per_rack": round(json_bytes / racks),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.storage")
    parser.add_argument("--racks", type=int, default=10, help="racks published per measurement")
    add_noisy_flag(parser)
    args = parser.parse_args(argv)
    conditions = Conditions.begin(args.noisy)
    work = Path(tempfile.mkdtemp(prefix="bench-storage-"))
    with ControlPlane.running(work / "cp", storage_only=True) as cp, cp.api_client() as api:
        install(cp)
        for i in range(args.racks):
            for node in rack_nodes(i):
                cp.create_node(node)
        runs: dict[str, Callable[[], dict[str, Any]]] = {
            name: partial(measure, cp, api, args.racks, spec, work / "controller.log")
            for name, spec in LAYOUTS.items()
        }
        measured = interleaved(runs)
    results = {"racks": args.racks, "layouts": LAYOUTS, "runs": measured}
    write_results("storage", make_command(COMMAND, argv), results, conditions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
