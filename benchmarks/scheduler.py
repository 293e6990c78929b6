"""What the device layout costs the real kube-scheduler, on its own control plane.

The same 1,152 single-core claims (one pod each) are scheduled against:
our partitioned rack (2,197 devices, counters), our flat layout (1,152
single-core devices, no counters), the same devices in per-node pools (the
AWS Neuron driver's shape) and upstream scheduler_perf's DRA shape as a
calibration. The slices are published by this script from the controller's
own builder, so nothing but the scheduler works on the claims. Then: device
orders of the partitioned layout, how much of a rack random 1/2/4/8-core
mixes of claims get, the same mixes asked for as extended resources under
upstream's default profile and the chart's bin-packing profile, and busy
fleets (`benchmarks.scheduler_busy`).

Usage: python -m benchmarks.scheduler [--claims 1152] [--pack-runs 3]
       python -m benchmarks.scheduler --steps occupancy [--busy-racks 1,10]
              [--scheduler counters-first]
"""

import argparse
import json
import random
import re
import tempfile
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from benchmarks.pages.scheduler import STEPS, occupancy_step
from benchmarks.report import (
    REPEATS,
    Conditions,
    add_noisy_flag,
    add_out_flag,
    interleaved,
    write_results,
)
from benchmarks.scheduler_busy import (
    BUSY_LAYOUTS,
    OCCUPANCIES,
    RACK_POOLS_MAX_RACKS,
    STOCK,
    occupancy_runs,
)
from benchmarks.scheduler_layouts import (
    CALIBRATION_TEMPLATE,
    DEVICE_ORDERS,
    DRIVER_ORDER,
    FLEET_LAYOUTS,
    RACK,
    calibration_nodes,
    calibration_objects,
    calibration_slices,
    flat_slices,
    fleet_slices,
    node_labels,
    partitioned_slices,
    per_node_pool_slices,
    rack_nodes,
)
from benchmarks.scheduler_profile import go_tool
from benchmarks.scheduler_runs import (
    NS,
    ProfileRequest,
    Workload,
    ensure_fleet_nodes,
    gone_already,
    nothing_left,
    publish,
    run_pods,
)
from driver.jsontypes import JSON
from localsim.controlplane.plane import ControlPlane
from testbed.controlplane import custom, install, load_claim, pod
from testbed.countersfirst import ARM as COUNTERS_FIRST_ARM
from testbed.countersfirst import NAME as COUNTERS_FIRST
from testbed.countersfirst import counters_first_scheduler
from testbed.waiting import wait_for

COMMAND = "make bench-scheduler"
SIZES = {1: "core-1", 2: "cores-2", 4: "cores-4", 8: "chip"}
CALIBRATION_DEVICES_PER_NODE = 10
"""maxClaimsPerNode of upstream's SchedulingWithResourceClaimTemplate/5000pods_500nodes."""
UPSTREAM_CONFIG = (
    "test/integration/scheduler_perf/dra/performance-config.yaml in k8s.io/kubernetes v1.36.3"
)
UPSTREAM_THRESHOLDS = {
    "5000pods_500nodes": (40, 51),
    "5000pods_500nodes_QueueingHintsEnabled": (56, 70),
}
"""(threshold, "typically above") SchedulingThroughput in pods/s, from the
comments of UPSTREAM_CONFIG (figures from perf-dash.k8s.io)."""
CORE_RESOURCE = "aws.amazon.com/neuroncore"
"""The chart's extended resource name for one NeuronCore."""
SCHEDULERS = {"default profile": "default-scheduler", "bin-packing profile": "trainium-dra-binpack"}
"""The profiles the binpack step compares: upstream's and the chart's."""
PACKING_GOAL = 0.995
"""Share of a rack's cores a random mix must get in every run."""
UPSTREAM_CLIENT_QPS = 5000
"""Client QPS and burst of scheduler_perf's scheduler (its util.go): at the
kube-scheduler's default 50 QPS and about five requests per pod, the rate
limiter, not the layout, would set the pace."""


def rack_workload(sizes: Sequence[int], rack: str | None = RACK) -> Workload:
    """Claims of the given sizes, pinned to `rack` (None: any rack)."""

    def item(i: int) -> tuple[JSON | None, JSON]:
        name = f"c{i:05d}"
        return load_claim(SIZES[sizes[i]], name, NS, rack), pod(name, NS, [name])

    return item


def extended_workload(sizes: Sequence[int], scheduler: str) -> Workload:
    """Pods asking for `sizes[i]` cores as the extended resource, no claim of their own."""

    def item(i: int) -> tuple[JSON | None, JSON]:
        spec = pod(f"c{i:05d}", NS, [])
        spec["spec"]["schedulerName"] = scheduler
        spec["spec"]["containers"][0]["resources"] = {"limits": {CORE_RESOURCE: str(sizes[i])}}
        return None, spec

    return item


def template_workload(i: int) -> tuple[JSON | None, JSON]:
    """A pod whose claim the resourceclaim controller creates from the template."""
    name = f"c{i:05d}"
    spec = pod(name, NS, [])
    spec["spec"]["containers"][0]["resources"] = {"claims": [{"name": "resource"}]}
    spec["spec"]["resourceClaims"] = [
        {"name": "resource", "resourceClaimTemplateName": CALIBRATION_TEMPLATE}
    ]
    return None, spec


def clear(shared: client.ApiClient) -> None:
    """Delete the pods, claims and slices of the last run and wait until they are gone.

    One DELETE per object on a client of its own: a collection delete of a
    thousand pods outlived the apiserver's request timeout and broke the
    connection mid-response."""
    api = client.ApiClient(shared.configuration)
    core = client.CoreV1Api(api)
    for item in core.list_namespaced_pod(NS).items:
        gone_already(core.delete_namespaced_pod, item.metadata.name, NS, grace_period_seconds=0)
    claims = custom(api).list_namespaced_custom_object(
        "resource.k8s.io", "v1", NS, "resourceclaims"
    )
    for claim in claims["items"]:
        gone_already(
            custom(api).delete_namespaced_custom_object,
            "resource.k8s.io",
            "v1",
            NS,
            "resourceclaims",
            claim["metadata"]["name"],
        )
    custom(api).delete_collection_cluster_custom_object("resource.k8s.io", "v1", "resourceslices")
    wait_for("pods cleared", lambda: not core.list_namespaced_pod(NS, limit=1).items, 600, 0.5)
    for plural in ("resourceclaims", "resourceslices"):
        wait_for(f"{plural} cleared", partial(nothing_left, api, plural), 600, 0.5)


def on_layout(
    cp: ControlPlane,
    api: client.ApiClient,
    slices: Sequence[JSON],
    count: int,
    item: Workload,
    *,
    profile: ProfileRequest | None = None,
) -> dict[str, Any]:
    publish(api, slices)
    try:
        result: dict[str, Any] = run_pods(cp, api, count, item, 3600, profile=profile)
        result["devices"] = sum(len(s["spec"].get("devices") or []) for s in slices)
        result["slices"] = len(slices)
        return result
    finally:
        clear(api)


def fleet_nodes(racks: int) -> list[str]:
    return [n for r in range(racks) for n in rack_nodes(r)]


def max_racks(counts: str) -> int:
    return max((int(x) for x in counts.split(",") if x), default=1)


def fleet_runs(
    cp: ControlPlane,
    api: client.ApiClient,
    *,
    pods: int,
    repeats: int,
    layouts: Sequence[str],
    racks: int,
    profiles: tuple[Path, int] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """`repeats` rounds over the layouts on `racks` racks, interleaved so that a
    slow stretch of the machine falls on every layout alike; `pods` unpinned
    single-core claims a run. With `profiles` (directory, seconds), each run
    profiles the scheduler."""
    ensure_fleet_nodes(cp, api, racks)
    singles = rack_workload([1] * pods, rack=None)
    nodes = racks * len(rack_nodes())

    rounds: dict[str, int] = {}

    def run(layout: str) -> dict[str, Any]:
        rounds[layout] = rounds.get(layout, 0) + 1
        profile = None
        if profiles is not None:
            slug = re.sub(r"[^a-z0-9]+", "-", layout).strip("-")
            path = profiles[0] / f"racks{racks}-{slug}-{rounds[layout]}.pb.gz"
            profile = ProfileRequest(path, profiles[1])
        slices = fleet_slices(racks, layout)
        return {**on_layout(cp, api, slices, pods, singles, profile=profile), "nodes": nodes}

    return interleaved({layout: partial(run, layout) for layout in layouts}, repeats)


def mix_run(
    cp: ControlPlane,
    api: client.ApiClient,
    slices: Sequence[JSON],
    sizes: Sequence[int],
    workload: Workload,
) -> dict[str, Any]:
    """One pod per size of `sizes`, all created at once; the cores their bound pods got."""
    publish(api, slices)
    try:
        result = run_pods(cp, api, len(sizes), workload, 3600)
        pods = client.CoreV1Api(api).list_namespaced_pod(NS).items
        cores = sum(sizes[int(p.metadata.name[1:])] for p in pods if p.spec.node_name)
        return {
            "cores_requested": sum(sizes),
            "allocated_cores": cores,
            "ratio": round(cores / sum(sizes), 4),
            "seconds": result["seconds"],
            "scheduler_cpu_ms_per_pod": result["scheduler_cpu_ms_per_pod"],
        }
    finally:
        clear(api)


def packing_run(
    cp: ControlPlane, api: client.ApiClient, slices: Sequence[JSON], sizes: Sequence[int]
) -> dict[str, Any]:
    """A mix of claims."""
    return {"claims": len(sizes), **mix_run(cp, api, slices, sizes, rack_workload(sizes))}


def binpack_run(
    cp: ControlPlane,
    api: client.ApiClient,
    slices: Sequence[JSON],
    sizes: Sequence[int],
    scheduler: str,
) -> dict[str, Any]:
    """A mix asked for as extended resources, placed by `scheduler`."""
    workload = extended_workload(sizes, scheduler)
    return {"pods": len(sizes), **mix_run(cp, api, slices, sizes, workload)}


def random_mix(rng: random.Random, total: int) -> list[int]:
    """Claims of 1/2/4/8 cores, uniformly drawn, adding up to exactly `total` cores."""
    sizes: list[int] = []
    while sum(sizes) < total:
        sizes.append(rng.choice([s for s in SIZES if s <= total - sum(sizes)]))
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.scheduler")
    parser.add_argument("--claims", type=int, default=1152, help="single-core claims per layout")
    parser.add_argument("--pack-runs", type=int, default=3, help="random 1/2/4/8 mixes")
    parser.add_argument("--pack-cores", type=int, default=1152, help="cores of each random mix")
    parser.add_argument("--seed", type=int, default=7, help="seed of the first random mix")
    parser.add_argument(
        "--scheduler-qps",
        type=int,
        default=UPSTREAM_CLIENT_QPS,
        help="the kube-scheduler's client QPS and burst (its own default: 50 and 100)",
    )
    parser.add_argument(
        "--orders",
        default=",".join(DEVICE_ORDERS),
        help="device orders of the partitioned layout to try, comma-separated",
    )
    parser.add_argument(
        "--steps",
        default="",
        help=f"run only these of {','.join(STEPS)} and keep the other figures of the last run",
    )
    parser.add_argument(
        "--layouts",
        default="flat,partitioned,per-node pools",
        help="the layouts step's layouts, comma-separated",
    )
    parser.add_argument(
        "--racks", default="1,10,100", help="the racks step's fleet sizes, comma-separated"
    )
    parser.add_argument(
        "--rack-pods", type=int, default=400, help="single-core pods of each racks-step run"
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=REPEATS,
        help="interleaved runs of each layout per fleet size",
    )
    parser.add_argument(
        "--fleet-layouts",
        default=",".join(FLEET_LAYOUTS),
        help="the racks step's layouts, comma-separated",
    )
    parser.add_argument(
        "--profile-seconds",
        type=int,
        default=0,
        help="racks step: a CPU profile of the scheduler's first N seconds of each run "
        "(needs the Go toolchain); 0: none",
    )
    parser.add_argument(
        "--occupancies",
        default=",".join(map(str, OCCUPANCIES)),
        help="occupancy step: percent of the fleet's cores held, comma-separated",
    )
    parser.add_argument(
        "--busy-racks",
        default="1,10",
        help="occupancy step: fleet sizes, comma-separated (100 racks: a run of its own, "
        "without rack pools, whose 100-rack pool no run finishes in time)",
    )
    parser.add_argument(
        "--busy-pods", type=int, default=100, help="occupancy step: single-core pods a run"
    )
    parser.add_argument(
        "--busy-layouts",
        default="",
        help="occupancy step: layouts, comma-separated (default: all, rack pools only on "
        f"fleets of up to {RACK_POOLS_MAX_RACKS} rack)",
    )
    parser.add_argument(
        "--busy-profile-seconds",
        type=int,
        default=10,
        help="occupancy step: a CPU profile of the scheduler's first N seconds of each run "
        "(needs the Go toolchain); 0: none",
    )
    parser.add_argument(
        "--scheduler",
        choices=(STOCK, COUNTERS_FIRST),
        default=STOCK,
        help="occupancy step: counters-first also runs the node pools on the patched "
        "kube-scheduler (hack/k8s-counters-first, built first when missing), an arm "
        "interleaved with the stock ones",
    )
    add_out_flag(parser)
    add_noisy_flag(parser)
    args = parser.parse_args(argv)
    if args.profile_seconds < 0:
        parser.error("--profile-seconds: must be 0 (off) or a number of seconds")
    steps = [s for s in args.steps.split(",") if s] or list(STEPS)
    merge = bool(args.steps)
    if set(steps) - set(STEPS):
        parser.error(f"--steps: unknown {sorted(set(steps) - set(STEPS))}; valid: {STEPS}")
    orders = [o for o in args.orders.split(",") if o]
    unknown = [o for o in orders if o not in DEVICE_ORDERS]
    if unknown:
        parser.error(f"--orders: unknown {unknown}; valid: {', '.join(DEVICE_ORDERS)}")
    conditions = Conditions.begin(args.noisy)
    work = Path(tempfile.mkdtemp(prefix="bench-scheduler-"))
    nodes = rack_nodes()
    singles = rack_workload([1] * args.claims)
    results: dict[str, Any] = {
        "claims": args.claims,
        "scheduler_qps": args.scheduler_qps,
        "upstream_config": UPSTREAM_CONFIG,
        "upstream_thresholds": UPSTREAM_THRESHOLDS,
        "calibration_devices_per_node": CALIBRATION_DEVICES_PER_NODE,
        "packing_goal": PACKING_GOAL,
    }
    profiles = (work / "profiles", args.profile_seconds) if args.profile_seconds else None
    if profiles:
        go_tool()
        profiles[0].mkdir(parents=True)
    with (
        ControlPlane.running(
            work / "cp",
            scheduler_qps=args.scheduler_qps,
            scheduler_profiling=bool(args.profile_seconds)
            or ("occupancy" in steps and args.busy_profile_seconds > 0),
        ) as cp,
        cp.api_client() as api,
    ):
        install(cp)
        for server, node in enumerate(nodes):
            cp.create_node(node, node_labels(RACK, server))
        client.CoreV1Api(api).create_namespace({"metadata": {"name": NS}})
        layouts: dict[str, Any] = {}
        results["layouts"] = layouts
        mix = sorted(random_mix(random.Random(args.seed), args.pack_cores), reverse=True)
        if "layouts" in steps:
            # Flat, the driver's own order and per-node pools in turn, REPEATS rounds.
            builds = {
                name: partial(on_layout, cp, api, build(nodes), args.claims, singles)
                for name, build in (
                    ("flat", flat_slices),
                    ("partitioned", partitioned_slices),
                    ("per-node pools", per_node_pool_slices),
                )
                if name in args.layouts.split(",")
            }
            for name, runs in interleaved(builds, REPEATS).items():
                layouts[name] = {
                    "slices": runs[0]["slices"],
                    "devices": runs[0]["devices"],
                    "runs": runs,
                }
            save(results, merge, conditions, "layouts", args.out)
        if "orders" in steps:
            results["orders"] = {}
            for order in orders:
                slices = partitioned_slices(nodes, order)
                results["orders"][order] = {"decreasing": packing_run(cp, api, slices, mix)}
                if order != DRIVER_ORDER:
                    results["orders"][order]["single_core"] = on_layout(
                        cp, api, slices, args.claims, singles
                    )
                save(results, merge, conditions, "orders", args.out)
        if "packing" in steps:
            results["packing"] = []
            for seed in range(args.seed, args.seed + args.pack_runs):
                sizes = random_mix(random.Random(seed), args.pack_cores)
                run = packing_run(cp, api, partitioned_slices(nodes), sizes)
                results["packing"].append({"seed": seed, **run})
                save(results, merge, conditions, "packing", args.out)
        if "binpack" in steps:
            results["binpack"] = []
            for seed in range(args.seed, args.seed + args.pack_runs):
                sizes = random_mix(random.Random(seed), args.pack_cores)
                # Alternate which profile goes first, so neither always runs on a warmer cache.
                order = list(SCHEDULERS.items())[:: 1 if seed % 2 else -1]
                for label, scheduler in order:
                    run = binpack_run(cp, api, partitioned_slices(nodes), sizes, scheduler)
                    results["binpack"].append({"seed": seed, "profile": label, **run})
                    save(results, merge, conditions, "binpack", args.out)
        if "racks" in steps:
            results["racks"] = {}
            fleet_layouts = [x for x in args.fleet_layouts.split(",") if x]
            unknown = sorted(set(fleet_layouts) - set(FLEET_LAYOUTS))
            if unknown:
                parser.error(
                    f"--fleet-layouts: unknown {unknown}; valid: {', '.join(FLEET_LAYOUTS)}"
                )
            for racks in (int(x) for x in args.racks.split(",") if x):
                results["racks"][str(racks)] = fleet_runs(
                    cp,
                    api,
                    pods=args.rack_pods,
                    repeats=args.repeats,
                    layouts=fleet_layouts,
                    racks=racks,
                    profiles=profiles,
                )
                save(results, merge, conditions, "racks", args.out)
            for node in sorted(set(fleet_nodes(max_racks(args.racks))) - set(nodes)):
                cp.delete_node(node)
        if "occupancy" in steps:
            busy_layouts = [x for x in args.busy_layouts.split(",") if x]
            chosen = bool(busy_layouts)
            busy_layouts = busy_layouts or list(BUSY_LAYOUTS)
            unknown = sorted(set(busy_layouts) - set(BUSY_LAYOUTS))
            if unknown:
                parser.error(f"--busy-layouts: unknown {unknown}; valid: {', '.join(BUSY_LAYOUTS)}")
            schedulers = None
            if args.scheduler == COUNTERS_FIRST or COUNTERS_FIRST_ARM in busy_layouts:
                assert cp.binaries is not None  # a control plane this run started
                schedulers = {
                    STOCK: cp.binaries.kube_scheduler,
                    COUNTERS_FIRST: counters_first_scheduler(),
                }
            busy_profiles = None
            if args.busy_profile_seconds:
                go_tool()
                busy_profiles = (work / "busy-profiles", args.busy_profile_seconds)
                busy_profiles[0].mkdir(parents=True, exist_ok=True)
            results["occupancy"] = {}
            busy_racks = [int(x) for x in args.busy_racks.split(",") if x]
            for racks in busy_racks:
                ensure_fleet_nodes(cp, api, racks)
                results["occupancy"][str(racks)] = occupancy_runs(
                    cp,
                    api,
                    racks=racks,
                    occupancies=[int(x) for x in args.occupancies.split(",") if x],
                    layouts=busy_arms(
                        busy_layouts if chosen else default_busy_layouts(racks), args.scheduler
                    ),
                    pods=args.busy_pods,
                    repeats=args.repeats,
                    profiles=busy_profiles,
                    schedulers=schedulers,
                )
                save(results, merge, conditions, occupancy_step(racks), args.out)
            for node in sorted(set(fleet_nodes(max(busy_racks, default=1))) - set(nodes)):
                cp.delete_node(node)
        if "calibration" in steps:
            for node in nodes:
                cp.delete_node(node)
            calibration = calibration_nodes(-(-args.claims // CALIBRATION_DEVICES_PER_NODE))
            for node in calibration:
                cp.create_node(node, {"node-with-dra": "true"})
            for obj in calibration_objects():
                cp.kubectl("apply", "-n", NS, "-f", "-", input=yaml.safe_dump(obj))
            layouts["calibration"] = on_layout(
                cp,
                api,
                calibration_slices(calibration, CALIBRATION_DEVICES_PER_NODE),
                args.claims,
                template_workload,
            )
            layouts["calibration"]["nodes"] = len(calibration)
            save(results, merge, conditions, "calibration", args.out)
    return 0


def default_busy_layouts(racks: int) -> list[str]:
    """Every busy layout on the stock scheduler, rack pools only where a run ends in minutes."""
    return [
        x
        for x, shape in BUSY_LAYOUTS.items()
        if shape.scheduler == STOCK
        and (not x.startswith("rack pools") or racks <= RACK_POOLS_MAX_RACKS)
    ]


def busy_arms(layouts: list[str], scheduler: str) -> list[str]:
    """The layouts, and the node pools on the patched scheduler when `scheduler` names it."""
    wanted = scheduler == COUNTERS_FIRST and COUNTERS_FIRST_ARM not in layouts
    return [*layouts, COUNTERS_FIRST_ARM] if wanted else layouts


def save(
    results: dict[str, Any], merge: bool, conditions: Conditions, step: str, out: Path | None
) -> None:
    """Write what is measured so far, so a late failure keeps the early figures;
    with `merge`, over the last run's figures. The machine's load is kept per
    step: a merged file holds steps of different runs. With `out`, to that file
    alone: a trial run leaves the results and pages as they are."""
    results.setdefault("loads", {})[step] = conditions.end()
    if out is not None:
        out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
        return
    write_results("scheduler", COMMAND, results, conditions, merge=merge)


if __name__ == "__main__":
    raise SystemExit(main())
