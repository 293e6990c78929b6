"""The controller against a real control plane (its own, started here):

- publishing 1, 10 and 100 Trn3 Gen2 racks from cold: wall time, the writes
  the controller made (its own counter) and every API request the apiserver
  served meanwhile (all clients, e.g. the garbage collector too), beside the
  upstream Go ResourceSlice controller publishing the same slices;
- resyncs with nothing changed (writes, slice LISTs, time per rack), against
  the upstream controller's sync of unchanged pools, and one rack's change;

What the layouts cost the scheduler is benchmarks/scheduler.py's.

Usage: python -m benchmarks.controller [--racks 1,10,100]
"""

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.publishing import (
    NOOP_RESYNCS,
    RESYNC_SECONDS,
    WORKERS,
    publish_anchor,
    publish_ours,
    rack_nodes,
    remove_published,
)
from benchmarks.report import write_report
from driver.localsim.controlplane import ControlPlane
from tests.controller.cluster import install

COMMAND = "make bench-controller"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.controller")
    parser.add_argument("--racks", default="1,10,100", help="rack counts to publish from cold")
    args = parser.parse_args(argv)
    racks = [int(r) for r in args.racks.split(",")]
    work = Path(tempfile.mkdtemp(prefix="bench-controller-"))
    results: dict[str, Any] = {}
    with ControlPlane.running(work / "cp", storage_only=True) as cp, cp.api_client() as api:
        install(cp)
        for i in range(max(racks)):
            for node in rack_nodes(i):
                cp.create_node(node)
        results["publish"] = []
        for n in racks:
            last = n == racks[-1]
            ours = publish_ours(cp, api, n, work / f"publish-{n}.log", follow_up=last)
            remove_published(api, n)
            ours["anchor"] = publish_anchor(cp, api, n)
            results["publish"].append(ours)
            save(results, command(argv))
    print(markdown(results))
    return 0


def row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def command(argv: list[str] | None) -> str:
    """The make command that ran, with the arguments it was given."""
    given = sys.argv[1:] if argv is None else argv
    return f"{COMMAND} BENCH_ARGS={' '.join(given)}" if given else COMMAND


def save(results: dict[str, Any], cmd: str) -> None:
    """Write what is measured so far, so a late failure keeps the early figures."""
    write_report("controller", cmd, results, markdown(results))


def markdown(r: dict[str, Any]) -> str:
    lines: list[str] = []
    if r.get("publish"):
        lines += publish_markdown(r["publish"])
    return "\n".join(lines)


def ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}x" if theirs else "n/a"


def publish_markdown(runs: list[dict[str, Any]]) -> list[str]:
    lines = [
        "Publishing Trn3 Gen2 racks (2,197 devices, 42 slices each) from cold: ours from",
        "starting the controller process to every rack Ready (status written); the",
        "upstream Go ResourceSlice controller (`k8s.io/dynamic-resource-allocation`",
        "v0.36.3 in hack/slice-anchor, no client-side rate limit, one worker as upstream",
        "runs it) from its start to its last slice created, publishing the same devices",
        "and counters built by our slice builder (upstream sets one node selection per",
        "pool, so `allNodes`). Same apiserver, same run, one after the other; etcd and",
        "kube-apiserver only (no scheduler or controller-manager caching every slice). Writes are",
        "the controller's own count (`trainium_dra_controller_writes_total`); the",
        "apiserver's `apiserver_request_total` counts every client over the same time.",
        "CPU is the controller process's own (user + system):",
        "",
        row(
            "racks",
            "slices",
            "ours s",
            "upstream s",
            "ours / upstream",
            "ours CPU s",
            "upstream CPU s",
            "slice writes",
            "status writes",
            "apiserver: slice writes",
            "apiserver: slice LISTs",
        ),
        row(*["---"] * 11),
    ]
    for p in runs:
        anchor = p.get("anchor") or {}
        lines.append(
            row(
                p["racks"],
                p["slices"],
                p["seconds"],
                anchor.get("seconds", "n/a"),
                ratio(p["seconds"], anchor.get("seconds", 0)),
                p.get("controller_cpu_seconds", "n/a"),
                anchor.get("cpu_seconds", "n/a"),
                p["slice_writes"],
                p["status_writes"],
                p["apiserver_slice_writes"],
                p["requests"].get("resourceslices LIST", 0),
            )
        )
    noops = [p for p in runs if p.get("noop_resync")]
    if noops:
        lines += [
            "",
            f"No-op resyncs: the {RESYNC_SECONDS:.0f} s resync queues every rack "
            f"({WORKERS} workers, {NOOP_RESYNCS} periods),",
            "nothing changed. Time per rack is the controller's reconcile histogram; the",
            "upstream controller's is its sync of an unchanged pool after `Update` with the",
            "same resources. LISTs and writes are the controller's own counters; the",
            "apiserver column counts slice LISTs and slice/UltraServer writes it served:",
            "",
            row(
                "racks",
                "reconciles",
                "unchanged",
                "rebuilt",
                "slice LISTs",
                "writes",
                "apiserver: LISTs / writes",
                "ours ms/rack",
                "upstream ms/rack",
                "ours / upstream",
                "racks/s, one worker",
            ),
            row(*["---"] * 11),
        ]
        for p in noops:
            idle, anchor = p["noop_resync"], p.get("anchor") or {}
            per_rack = idle["ms_per_rack"] or 0
            lines.append(
                row(
                    p["racks"],
                    idle["reconciles"],
                    idle["unchanged"],
                    idle["rebuilt"],
                    idle["slice_lists"],
                    idle["writes"],
                    f"{idle['apiserver_slice_lists']} / {idle['apiserver_writes']}",
                    per_rack,
                    anchor.get("noop_ms_per_rack", "n/a"),
                    ratio(per_rack, anchor.get("noop_ms_per_rack", 0)),
                    f"{1000 / per_rack:.0f}" if per_rack else "n/a",
                )
            )
    last = runs[-1]
    change = last.get("one_rack_change")
    if change:
        lines += [
            "",
            f"One rack's change, {last['racks']} racks published (a chip of one server of the",
            "first rack reported failed; its devices, its server and the rack-wide device",
            f"gain a taint): {change['slice_writes']} slice writes, "
            f"{change['slices_written']} slices with a",
            f"new resourceVersion, all in racks: {', '.join(change['racks_written']) or 'none'}.",
        ]
    if "controller_peak_rss_bytes" in last:
        anchor = last.get("anchor") or {}
        lines += [
            "",
            f"Memory with {last['racks']} racks published: our controller "
            f"{last['controller_rss_bytes'] / 2**20:.0f} MiB resident (peak "
            f"{last['controller_peak_rss_bytes'] / 2**20:.0f} MiB); the upstream",
            f"controller {anchor.get('rss_bytes', 0) / 2**20:.0f} MiB (it keeps every slice "
            "in its informer and the desired ones in memory).",
        ]
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
