"""The controller against a real control plane (its own, started here):

- publishing 1, 10 and 100 Trn3 Gen2 racks from cold: wall time, the writes
  the controller made (its own counter) and every API request the apiserver
  served meanwhile (all clients, e.g. the garbage collector too), beside the
  upstream Go ResourceSlice controller publishing the same slices;
- resyncs with nothing changed (writes, slice LISTs, time per rack), against
  the upstream controller's sync of unchanged pools, and one rack's change;
- the real scheduler allocating single-core claims on one rack, partitioned
  (2,197 devices with counters) versus flat (1,152 single-core devices, no
  counters): the ratio of the two times, measured in the same run;
- the share of a rack's cores a random mix of 1/2/4/8-core claims gets,
  against the same mix in decreasing size (the baseline, which packs fully).

Usage: python -m benchmarks.controller [--racks 1,10,100] [--claims 1152] [--no-claims]
"""

import argparse
import json
import random
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from kubernetes import client

from benchmarks.publishing import (
    NOOP_RESYNCS,
    RESYNC_SECONDS,
    WORKERS,
    delete_racks,
    publish_anchor,
    publish_ours,
    rack_nodes,
    ready_racks,
    remove_published,
)
from benchmarks.report import write_report
from driver.localsim.controlplane import ControlPlane
from tests.controller.cluster import (
    controller,
    custom,
    install,
    load_claim,
    pod,
    ultraserver,
)
from tests.waiting import wait_for

COMMAND = "make bench-controller"
RESULTS = Path(__file__).resolve().parent / "results" / "controller.json"
SIZES = {1: "core-1", 2: "cores-2", 4: "cores-4", 8: "chip"}
NS = "bench"


def run_claims(
    api: client.ApiClient, sizes: list[int], rack: str, timeout: float
) -> tuple[float, int]:
    """Create one claim + pod per size; wait until every pod is bound or refused.
    Returns (seconds, cores allocated)."""
    core = client.CoreV1Api(api)
    t0 = time.perf_counter()
    for i, size in enumerate(sizes):
        claim = load_claim(SIZES[size], f"c{i:05d}", NS, rack)
        custom(api).create_namespaced_custom_object(
            "resource.k8s.io", "v1", NS, "resourceclaims", claim
        )
        core.create_namespaced_pod(NS, pod(f"c{i:05d}", NS, [f"c{i:05d}"]))

    def settled() -> tuple[int, int] | None:
        pods = core.list_namespaced_pod(NS).items
        bound = [p for p in pods if p.spec.node_name]
        refused = [
            p
            for p in pods
            if not p.spec.node_name
            and any(
                c.type == "PodScheduled" and c.reason == "Unschedulable"
                for c in p.status.conditions or []
            )
        ]
        if len(bound) + len(refused) < len(sizes):
            return None
        return len(bound), len(refused)

    wait_for("claims settled", settled, timeout, 0.5)
    elapsed = time.perf_counter() - t0
    claims = custom(api).list_namespaced_custom_object(
        "resource.k8s.io", "v1", NS, "resourceclaims"
    )["items"]
    cores = 0
    for c in claims:
        if (c.get("status") or {}).get("allocation"):
            cores += sizes[int(c["metadata"]["name"][1:])]
    return elapsed, cores


def clear_claims(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    core.delete_collection_namespaced_pod(NS, grace_period_seconds=0)
    custom(api).delete_collection_namespaced_custom_object(
        "resource.k8s.io", "v1", NS, "resourceclaims"
    )
    wait_for("pods cleared", lambda: not core.list_namespaced_pod(NS).items, 600, 1)
    wait_for(
        "claims cleared",
        lambda: (
            not custom(api).list_namespaced_custom_object(
                "resource.k8s.io", "v1", NS, "resourceclaims"
            )["items"]
        ),
        600,
        1,
    )


def on_one_rack(
    cp: ControlPlane, api: client.ApiClient, log: Path, mode: str, body: Callable[[], Any]
) -> Any:
    nodes = rack_nodes(0)
    spec = {"mode": mode, "flatDevice": "core"} if mode == "flat" else {}
    custom(api).create_cluster_custom_object(
        "trainium.sim.dev",
        "v1alpha1",
        "ultraservers",
        ultraserver("bench-sched", "trn3-gen2", nodes, **spec),
    )
    with controller(cp, log, "--lease-name", "bench"):
        wait_for("rack ready", lambda: ready_racks(api) == 1, 120)
        try:
            return body()
        finally:
            clear_claims(api)
            delete_racks(api, ["bench-sched"])
            wait_for(
                "rack gone",
                lambda: (
                    not custom(api).list_cluster_custom_object(
                        "resource.k8s.io", "v1", "resourceslices"
                    )["items"]
                ),
                120,
                1,
            )


def random_mix(rng: random.Random, total: int) -> list[int]:
    sizes: list[int] = []
    while sum(sizes) < total:
        size = rng.choice([s for s in SIZES if s <= total - sum(sizes)])
        sizes.append(size)
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.controller")
    parser.add_argument("--racks", default="1,10,100", help="rack counts to publish from cold")
    parser.add_argument("--claims", type=int, default=1152, help="single-core claims per layout")
    parser.add_argument(
        "--pack-cores", type=int, default=1152, help="cores of the random 1/2/4/8 mix"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--no-claims", action="store_true", help="only publishing (keep the scheduler figures)"
    )
    args = parser.parse_args(argv)
    racks = [int(r) for r in args.racks.split(",")]
    work = Path(tempfile.mkdtemp(prefix="bench-controller-"))
    results: dict[str, Any] = {}
    if args.no_claims and RESULTS.exists():
        kept = json.loads(RESULTS.read_text())["results"]
        results = {k: v for k, v in kept.items() if k in ("single_core_claims", "packing")}
    with ControlPlane.running(work / "cp") as cp, cp.api_client() as api:
        install(cp)
        for node in rack_nodes(0):
            cp.create_node(node)
        client.CoreV1Api(api).create_namespace({"metadata": {"name": NS}})
        if not args.no_claims:
            measure_claims(cp, api, args, work, results)
        for i in range(1, max(racks)):
            for node in rack_nodes(i):
                cp.create_node(node)
        results["publish"] = []
        for n in racks:
            last = n == racks[-1]
            ours = publish_ours(cp, api, n, work / f"publish-{n}.log", follow_up=last)
            remove_published(api, n)
            ours["anchor"] = publish_anchor(cp, api, n)
            results["publish"].append(ours)
            save(results)
    print(markdown(results))
    return 0


def measure_claims(
    cp: ControlPlane, api: client.ApiClient, args: argparse.Namespace, work: Path, results: Any
) -> None:
    """The scheduler figures: single-core claims on both layouts, and packing."""
    # One rack's nodes only while the scheduler is measured: it filters every node.
    singles = [1] * args.claims
    sched: dict[str, Any] = {}
    for mode in ("partitioned", "flat"):
        seconds, cores = on_one_rack(
            cp,
            api,
            work / f"sched-{mode}.log",
            mode,
            partial(run_claims, api, singles, "bench-sched", 3600),
        )
        sched[mode] = {
            "claims": args.claims,
            "seconds": round(seconds, 2),
            "allocated_cores": cores,
        }
    sched["ratio_partitioned_over_flat"] = round(
        sched["partitioned"]["seconds"] / sched["flat"]["seconds"], 2
    )
    results["single_core_claims"] = sched
    save(results)
    rng = random.Random(args.seed)
    mix = random_mix(rng, args.pack_cores)
    packing: dict[str, Any] = {
        "claims": len(mix),
        "cores_requested": sum(mix),
        "seed": args.seed,
    }
    for order, sizes in (("decreasing", sorted(mix, reverse=True)), ("random", mix)):
        seconds, cores = on_one_rack(
            cp,
            api,
            work / f"pack-{order}.log",
            "partitioned",
            partial(run_claims, api, sizes, "bench-sched", 3600),
        )
        packing[order] = {
            "allocated_cores": cores,
            "ratio": round(cores / sum(sizes), 4),
            "seconds": round(seconds, 2),
        }
    results["packing"] = packing
    save(results)


def row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def save(results: dict[str, Any]) -> None:
    """Write what is measured so far, so a late failure keeps the early figures."""
    write_report("controller", COMMAND, results, markdown(results))


def markdown(r: dict[str, Any]) -> str:
    lines: list[str] = []
    if "single_core_claims" in r:
        s = r["single_core_claims"]
        part, flat = s["partitioned"], s["flat"]
        lines += [
            f"Scheduler: {part['claims']} single-core claims (one pod each) on one Trn3 Gen2",
            "rack (36 nodes), from the first create to the last pod bound:",
            "",
            row("layout", "seconds", "cores allocated"),
            row(*["---"] * 3),
            row("partitioned (2,197 devices, counters)", part["seconds"], part["allocated_cores"]),
            row("flat (1,152 single-core devices)", flat["seconds"], flat["allocated_cores"]),
            "",
            f"Partitioned / flat time ratio: **{s['ratio_partitioned_over_flat']}**.",
            "",
        ]
    if "packing" in r:
        k = r["packing"]
        lines += [
            f"Packing: {k['claims']} claims of 1/2/4/8 cores ({k['cores_requested']} cores,",
            f"seed {k['seed']}) on one partitioned rack of 1152 cores, all created at once:",
            "",
            row("order", "cores allocated", "share of the cores requested"),
            row(*["---"] * 3),
            row(
                "decreasing size (baseline)",
                k["decreasing"]["allocated_cores"],
                k["decreasing"]["ratio"],
            ),
            row("random", k["random"]["allocated_cores"], k["random"]["ratio"]),
            "",
        ]
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
        "pool, so `allNodes`). Same apiserver, same run, one after the other. Writes are",
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
            "first rack reported failed; its devices gain a taint in several slices, so the",
            f"pool moves to a new generation): {change['slice_writes']} slice writes, "
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
