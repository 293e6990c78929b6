"""The controller against a real control plane (its own, started here):

- publishing 1, 10 and 100 Trn3 Gen2 racks from cold: wall time, the writes
  the controller made (its own counter) and every API request the apiserver
  served meanwhile (all clients, e.g. the garbage collector too);
- writes made by resyncs with nothing changed, counted both ways;
- the real scheduler allocating single-core claims on one rack, partitioned
  (2,197 devices with counters) versus flat (1,152 single-core devices, no
  counters): the ratio of the two times, measured in the same run;
- the share of a rack's cores a random mix of 1/2/4/8-core claims gets,
  against the same mix in decreasing size (the baseline, which packs fully).

Usage: python -m benchmarks.controller [--racks 1,10,100] [--claims 1152]
"""

import argparse
import random
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from kubernetes import client

from benchmarks.report import write_report
from driver.controller.slices import MANAGED_BY, MANAGED_BY_LABEL, rack_label
from driver.localsim.controlplane import ControlPlane, free_port
from driver.names import DEFAULT_DRIVER_NAME
from tests.controller.cluster import (
    WRITE_VERBS,
    controller,
    custom,
    delta,
    install,
    load_claim,
    metric_key,
    metric_samples,
    pod,
    request_counts,
    ultraserver,
)
from tests.waiting import wait_for

COMMAND = "make bench-controller"
GEN2_SLICES = 5 + 36 + 1
RESYNC_SECONDS = 5.0
WORKERS = 4
NOOP_RESYNCS = 3
SIZES = {1: "core-1", 2: "cores-2", 4: "cores-4", 8: "chip"}
NS = "bench"


def rack_nodes(rack: int) -> list[str]:
    return [f"bench-r{rack:03d}-s{s:02d}" for s in range(36)]


def summarize(d: dict[tuple[str, str, str], int]) -> dict[str, int]:
    """Requests by resource and verb, only those the controller makes."""
    out: dict[str, int] = {}
    for (resource, sub, verb), n in d.items():
        if resource in (
            "resourceslices",
            "ultraservers",
            "nodedevicehealths",
            "resourceclaims",
            "nodes",
            "leases",
        ):
            out[f"{resource}{'/' + sub if sub else ''} {verb}"] = n
    return dict(sorted(out.items()))


def ready_racks(api: client.ApiClient) -> int:
    items = custom(api).list_cluster_custom_object("trainium.sim.dev", "v1alpha1", "ultraservers")[
        "items"
    ]
    return sum(
        1
        for r in items
        for c in (r.get("status") or {}).get("conditions") or []
        if c["type"] == "Ready" and c["status"] == "True"
    )


def delete_racks(api: client.ApiClient, names: list[str]) -> None:
    """Delete the racks' slices, then the racks, so the garbage collector has
    nothing left to delete in the next measurement. Rack by rack: one
    collection delete of 100 racks answers with ~190 MB."""
    for name in names:
        custom(api).delete_collection_cluster_custom_object(
            "resource.k8s.io",
            "v1",
            "resourceslices",
            label_selector=(
                f"{MANAGED_BY_LABEL}={MANAGED_BY},{rack_label(DEFAULT_DRIVER_NAME)}={name}"
            ),
        )
        custom(api).delete_cluster_custom_object(
            "trainium.sim.dev", "v1alpha1", "ultraservers", name
        )


def controller_counts(port: int) -> tuple[dict[str, int], int]:
    """The controller's own counts: its writes by resource and verb, and its
    successful reconciles."""
    samples = metric_samples(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text)
    writes = {
        f"{labels['resource']} {labels['verb']}": int(value)
        for (name, pairs), value in samples.items()
        if name == "trainium_dra_controller_writes_total" and (labels := dict(pairs))
    }
    ok = samples.get(metric_key("trainium_dra_controller_reconciles_total", result="ok"), 0)
    return writes, int(ok)


def own_writes(counts: dict[str, int], resource: str) -> int:
    return sum(n for key, n in counts.items() if key.split(" ")[0] == resource)


def rack_names(racks: int) -> list[str]:
    return [f"bench-{i:03d}" for i in range(racks)]


def publish_from_cold(
    cp: ControlPlane, api: client.ApiClient, racks: int, log: Path, noop: bool
) -> dict[str, Any]:
    """Create `racks` UltraServers, start the controller, wait until all are Ready."""
    names = rack_names(racks)
    for i, name in enumerate(names):
        custom(api).create_cluster_custom_object(
            "trainium.sim.dev",
            "v1alpha1",
            "ultraservers",
            ultraserver(name, "trn3-gen2", rack_nodes(i)),
        )
    before = request_counts(cp)
    port = free_port()
    t0 = time.perf_counter()
    with controller(
        cp,
        log,
        "--resync-seconds",
        str(RESYNC_SECONDS),
        "--workers",
        str(WORKERS),
        "--lease-name",
        "bench",
        f"--http-address=127.0.0.1:{port}",
    ):
        wait_for(f"{racks} racks ready", lambda: ready_racks(api) == racks, 3600, 0.25)
        elapsed = time.perf_counter() - t0
        used = delta(before, request_counts(cp))
        own, _ = controller_counts(port)
        result: dict[str, Any] = {
            "racks": racks,
            "slices": racks * GEN2_SLICES,
            "seconds": round(elapsed, 2),
            "slice_writes": own_writes(own, "resourceslices"),
            "status_writes": own_writes(own, "ultraservers/status"),
            "controller_writes": own,
            "apiserver_slice_writes": sum(
                n for (r, _, v), n in used.items() if r == "resourceslices" and v in WRITE_VERBS
            ),
            "requests": summarize(used),
        }
        if noop:
            time.sleep(1)
            quiet, (own_before, done_before) = request_counts(cp), controller_counts(port)
            t1 = time.perf_counter()
            wait_for(
                f"{NOOP_RESYNCS} resyncs of every rack",
                lambda: controller_counts(port)[1] - done_before >= NOOP_RESYNCS * racks,
                3600,
                1,
            )
            seconds = time.perf_counter() - t1
            idle = delta(quiet, request_counts(cp))
            own_after, done_after = controller_counts(port)
            result["noop_resync"] = {
                "seconds": round(seconds, 2),
                "reconciles": done_after - done_before,
                "writes": sum(own_after.values()) - sum(own_before.values()),
                "apiserver_writes": sum(
                    n
                    for (r, _, v), n in idle.items()
                    if r in ("resourceslices", "ultraservers") and v in WRITE_VERBS
                ),
                "requests": summarize(idle),
            }
    return result


def remove_published(api: client.ApiClient, racks: int) -> None:
    delete_racks(api, rack_names(racks))
    wait_for(
        "racks gone",
        lambda: (
            not custom(api).list_cluster_custom_object(
                "resource.k8s.io", "v1", "resourceslices", limit=1
            )["items"]
        ),
        600,
        1,
    )


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
    args = parser.parse_args(argv)
    racks = [int(r) for r in args.racks.split(",")]
    work = Path(tempfile.mkdtemp(prefix="bench-controller-"))
    results: dict[str, Any] = {}
    with ControlPlane.running(work / "cp") as cp, cp.api_client() as api:
        install(cp)
        for node in rack_nodes(0):
            cp.create_node(node)
        client.CoreV1Api(api).create_namespace({"metadata": {"name": NS}})
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
        for i in range(1, max(racks)):
            for node in rack_nodes(i):
                cp.create_node(node)
        results["publish"] = []
        for n in racks:
            results["publish"].append(
                publish_from_cold(cp, api, n, work / f"publish-{n}.log", noop=n == racks[-1])
            )
            save(results)
            remove_published(api, n)
    print(markdown(results))
    return 0


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
        lines += [
            "Publishing Trn3 Gen2 racks (2,197 devices, 42 slices each) from cold, from",
            "starting the controller to every rack Ready. Writes are the controller's own",
            "count (`trainium_dra_controller_writes_total`); the apiserver's",
            "`apiserver_request_total` over the same time counts every client:",
            "",
            row(
                "racks",
                "slices",
                "seconds",
                "slice writes",
                "status writes",
                "apiserver: slice writes",
                "apiserver: slice LISTs",
            ),
            row(*["---"] * 7),
        ]
        for p in r["publish"]:
            lines.append(
                row(
                    p["racks"],
                    p["slices"],
                    p["seconds"],
                    p["slice_writes"],
                    p["status_writes"],
                    p["apiserver_slice_writes"],
                    p["requests"].get("resourceslices LIST", 0),
                )
            )
        idle = r["publish"][-1].get("noop_resync")
        if idle:
            racks = r["publish"][-1]["racks"]
            rate = idle["reconciles"] / idle["seconds"]
            lines += [
                "",
                f"No-op resync: {idle['reconciles']} reconciles of the {racks} racks (every",
                f"{RESYNC_SECONDS:.0f} s resync queues them all; {WORKERS} workers) in "
                f"{idle['seconds']} s made **{idle['writes']} writes**;",
                f"the apiserver served {idle['apiserver_writes']} writes to slices and "
                "UltraServers meanwhile.",
            ]
            if rate < 0.9 * racks / RESYNC_SECONDS:
                lines += [
                    f"The workers could not keep up with the period: {rate:.1f} no-op rack",
                    "reconciles a second is the controller's throughput (each: one GET, one",
                    "LIST of the rack's 42 slices, rebuilding and comparing them, the status).",
                ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
