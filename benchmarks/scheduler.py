"""What the device layout costs the real kube-scheduler, on its own control plane.

The same 1,152 single-core claims (one pod each) are scheduled against:
our partitioned rack (2,197 devices, counters), our flat layout (1,152
single-core devices, no counters), the same devices in per-node pools (the
AWS Neuron driver's shape) and upstream scheduler_perf's DRA shape as a
calibration. The slices are published by this script from the controller's
own builder, so nothing but the scheduler works on the claims. Then: device
orders of the partitioned layout, how much of a rack random 1/2/4/8-core
mixes of claims get, and the same mixes asked for as extended resources under
upstream's default profile and the chart's bin-packing profile.

Usage: python -m benchmarks.scheduler [--claims 1152] [--pack-runs 3]
"""

import argparse
import random
import re
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import yaml
from kubernetes import client

from benchmarks.report import REPEATS, Conditions, add_noisy_flag, interleaved, write_results
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
    fleet_rack_name,
    fleet_slices,
    node_labels,
    partitioned_slices,
    per_node_pool_slices,
    rack_nodes,
)
from benchmarks.scheduler_profile import go_tool, start_capture, summarize
from driver.jsontypes import JSON
from driver.kubeapi.apiserver import ApiServer
from driver.kubeapi.informer import Informer
from driver.kubeapi.resources import PODS, path_of
from driver.localsim.controlplane.plane import ControlPlane
from driver.procstat import process_cpu_seconds
from testbed.controlplane import custom, install, load_claim, pod
from testbed.waiting import wait_for

COMMAND = "make bench-scheduler"
STEPS = ("layouts", "orders", "packing", "binpack", "racks", "calibration")
NS = "bench"
SIZES = {1: "core-1", 2: "cores-2", 4: "cores-4", 8: "chip"}
CREATORS = 4
"""Threads creating claims and pods, so the client keeps ahead of the scheduler."""
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
ALGORITHM = "scheduler_scheduling_algorithm_duration_seconds"
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


Workload = Callable[[int], tuple[JSON | None, JSON]]
"""Claim (or None when the pod uses a template) and pod of item i."""


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


def scheduler_metrics(cp: ControlPlane) -> dict[str, float]:
    """Totals so far from the scheduler's own metrics: time in the scheduling
    algorithm and attempts, API requests it made, and the time those requests
    waited for its client's rate limiter (QPS/burst)."""
    text = httpx.get(
        f"https://127.0.0.1:{cp.config.ports.scheduler}/metrics",
        headers={"Authorization": f"Bearer {admin_token(cp)}"},
        verify=False,  # the scheduler's self-signed loopback serving cert
        timeout=10,
    ).text
    totals = {
        f"{ALGORITHM}_sum": "seconds",
        f"{ALGORITHM}_count": "attempts",
        "rest_client_requests_total": "requests",
        "rest_client_rate_limiter_duration_seconds_sum": "rate_limited_seconds",
    }
    out = dict.fromkeys(totals.values(), 0.0)
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        key = totals.get(name.split("{", 1)[0])
        if key:
            out[key] += float(value)
    return out


def cpu_seconds(cp: ControlPlane, component: str) -> float:
    """CPU time a control-plane process has used so far (`driver.procstat`)."""
    pid = next(c.process.pid for c in cp.components if c.name == component)
    return process_cpu_seconds(pid)


def admin_token(cp: ControlPlane) -> str:
    token: str = yaml.safe_load(cp.kubeconfig.read_text())["users"][0]["user"]["token"]
    return token


class PodWatch:
    """Which pods of the namespace are bound or refused, from one informer:
    polling a LIST of 1,000 pods would cost the apiserver more CPU than the
    scheduler spends, on the same CPUs."""

    def __init__(self, cp: ControlPlane) -> None:
        self.bound: set[str] = set()
        self.refused: set[str] = set()
        self.last_change = time.perf_counter()
        self._lock = threading.Lock()
        with cp.api_client() as api:
            server = ApiServer(api.configuration, "trainium-dra-bench", 30.0)
        self._informer: Informer[JSON] = Informer(
            server,
            path_of(PODS, namespace=NS),
            {},
            dict,
            on_list=self._see_all,
            on_event=lambda _, pod: self._see(pod),
        )
        self._informer.start()

    def _see_all(self, pods: list[JSON]) -> None:
        for obj in pods:
            self._see(obj)

    def _see(self, obj: JSON) -> None:
        name = obj["metadata"]["name"]
        conditions = (obj.get("status") or {}).get("conditions") or []
        with self._lock:
            if obj["spec"].get("nodeName"):
                if name not in self.bound:
                    self.bound.add(name)
                    self.refused.discard(name)
                    self.last_change = time.perf_counter()
            elif name not in self.refused and any(
                c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
                for c in conditions
            ):
                self.refused.add(name)
                self.last_change = time.perf_counter()

    def settled(self, count: int) -> tuple[int, int, float] | None:
        """(bound, refused, time of the last change) once all `count` pods are either."""
        with self._lock:
            if len(self.bound) + len(self.refused) < count:
                return None
            return len(self.bound), len(self.refused), self.last_change

    def close(self) -> None:
        self._informer.close()


@dataclass(frozen=True)
class ProfileRequest:
    """Profile the scheduler's first `seconds` of a run into `path`."""

    path: Path
    seconds: int


def run_pods(
    cp: ControlPlane,
    api: client.ApiClient,
    count: int,
    item: Workload,
    timeout: float,
    *,
    profile: ProfileRequest | None = None,
) -> dict[str, Any]:
    """Create `count` claims and pods; wait until every pod is bound or refused.

    Each creating thread has a client of its own: connections of one client
    shared by the threads were left broken (SSL errors on its next use)."""
    local = threading.local()

    def create(i: int) -> None:
        if not hasattr(local, "api"):
            local.api = client.ApiClient(api.configuration)
        claim, spec = item(i)
        if claim is not None:
            custom(local.api).create_namespaced_custom_object(
                "resource.k8s.io", "v1", NS, "resourceclaims", claim
            )
        client.CoreV1Api(local.api).create_namespaced_pod(NS, spec)

    watch = PodWatch(cp)
    try:
        before = scheduler_metrics(cp)
        cpu_before = cpu_seconds(cp, "kube-scheduler")
        capture = (
            start_capture(
                f"https://127.0.0.1:{cp.config.ports.scheduler}",
                admin_token(cp),
                profile.seconds,
                profile.path,
            )
            if profile
            else None
        )
        t0 = time.perf_counter()
        with ThreadPoolExecutor(CREATORS) as pool:
            list(pool.map(create, range(count)))
        created = time.perf_counter() - t0
        bound, refused, done = wait_for("pods settled", lambda: watch.settled(count), timeout, 0.2)
    finally:
        watch.close()
    seconds = done - t0
    after = scheduler_metrics(cp)
    algorithm = after["seconds"] - before["seconds"]
    cpu = cpu_seconds(cp, "kube-scheduler") - cpu_before
    profiled = {}
    if capture is not None:
        capture.join()
        profiled = {"profile": summarize(capture.path), "profile_seconds": capture.seconds}
    return {
        **profiled,
        "pods": count,
        "bound": bound,
        "refused": refused,
        "seconds": round(seconds, 2),
        "create_seconds": round(created, 2),
        "ms_per_pod": round(1000 * seconds / count, 1),
        "pods_per_second": round(bound / seconds, 1),
        "algorithm_ms_per_pod": round(1000 * algorithm / count, 2),
        "scheduler_cpu_ms_per_pod": round(1000 * cpu / count, 2),
        "attempts": int(after["attempts"] - before["attempts"]),
        "api_requests_per_pod": round((after["requests"] - before["requests"]) / count, 2),
        "rate_limited_seconds": round(
            after["rate_limited_seconds"] - before["rate_limited_seconds"], 1
        ),
    }


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


def gone_already(delete: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Delete, taking "not found" as done."""
    try:
        delete(*args, **kwargs)
    except client.ApiException as err:
        if err.status != 404:
            raise


def nothing_left(api: client.ApiClient, plural: str) -> bool:
    found = custom(api).list_cluster_custom_object("resource.k8s.io", "v1", plural, limit=1)
    return not found["items"]


def publish(api: client.ApiClient, slices: Sequence[JSON]) -> None:
    """Create the slices on an empty pool (`clear` waited for it). A create the
    client sent again after a broken connection finds its own slice: 409 is done."""
    for s in slices:
        try:
            custom(api).create_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", s)
        except client.ApiException as err:
            if err.status != 409:
                raise
    time.sleep(2)  # the scheduler's informer catches up


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
    existing = {n.metadata.name for n in client.CoreV1Api(api).list_node().items}
    for rack in range(racks):
        for server, node in enumerate(rack_nodes(rack)):
            if node not in existing:
                cp.create_node(node, node_labels(fleet_rack_name(rack), server))
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
            scheduler_profiling=bool(args.profile_seconds),
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
            save(results, merge, conditions, "layouts")
        if "orders" in steps:
            results["orders"] = {}
            for order in orders:
                slices = partitioned_slices(nodes, order)
                results["orders"][order] = {"decreasing": packing_run(cp, api, slices, mix)}
                if order != DRIVER_ORDER:
                    results["orders"][order]["single_core"] = on_layout(
                        cp, api, slices, args.claims, singles
                    )
                save(results, merge, conditions, "orders")
        if "packing" in steps:
            results["packing"] = []
            for seed in range(args.seed, args.seed + args.pack_runs):
                sizes = random_mix(random.Random(seed), args.pack_cores)
                run = packing_run(cp, api, partitioned_slices(nodes), sizes)
                results["packing"].append({"seed": seed, **run})
                save(results, merge, conditions, "packing")
        if "binpack" in steps:
            results["binpack"] = []
            for seed in range(args.seed, args.seed + args.pack_runs):
                sizes = random_mix(random.Random(seed), args.pack_cores)
                # Alternate which profile goes first, so neither always runs on a warmer cache.
                order = list(SCHEDULERS.items())[:: 1 if seed % 2 else -1]
                for label, scheduler in order:
                    run = binpack_run(cp, api, partitioned_slices(nodes), sizes, scheduler)
                    results["binpack"].append({"seed": seed, "profile": label, **run})
                    save(results, merge, conditions, "binpack")
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
                save(results, merge, conditions, "racks")
            for node in sorted(set(fleet_nodes(max_racks(args.racks))) - set(nodes)):
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
            save(results, merge, conditions, "calibration")
    return 0


def save(results: dict[str, Any], merge: bool, conditions: Conditions, step: str) -> None:
    """Write what is measured so far, so a late failure keeps the early figures;
    with `merge`, over the last run's figures. The machine's load is kept per
    step: a merged file holds steps of different runs."""
    results.setdefault("loads", {})[step] = conditions.end()
    write_results("scheduler", COMMAND, results, conditions, merge=merge)


if __name__ == "__main__":
    raise SystemExit(main())
