"""Real nodes, measured by clients nobody here wrote: the kubelet's own DRA
histograms give NodePrepareResources and NodeUnprepareResources latency as the
kubelet sees them (gRPC call, and the whole prepare step including its claim
cache), for our node daemon and, side by side, for the Go reference kubelet
plugin on the same nodes; the nodes' cgroups give each node's memory and CPU.

Run as `python -m benchmarks.realnodes [--pods N] [--nodes-per-rack N] [--generation G]`
(root; `make bench-realnodes`, which builds the Go plugin and passes its path in
TRAINIUM_DRA_GO_PLUGIN). Pods with one whole-chip claim each are created and
deleted one after another; then as many pods with one claim of the Go plugin's
DeviceClass each, the same way; the kubelet prepares and unprepares each.
"""

import argparse
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client

from benchmarks import realnodes_goref as goref
from benchmarks.kubelet_histograms import Histogram, parse_histogram, summary_ms, total
from benchmarks.plugin_metrics import scrape_pods
from benchmarks.report import Conditions, add_noisy_flag, write_results
from driver.jsontypes import JSON
from driver.localsim.realnodes import cgroups
from tests.e2e.cluster import Cluster, running_cluster, wait_for
from tests.realnodes.realcluster import (
    DRIVER,
    RealCluster,
    claim_template,
    namespace,
    real_cluster,
    workload_pod,
)

NS = "bench-realnodes"
IDLE_SECONDS = 30.0
PREPARE = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"
UNPREPARE = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources"
GRPC = "dra_grpc_operations_duration_seconds"
STEP = "dra_operations_duration_seconds"
GO_PLUGIN_ENV = "TRAINIUM_DRA_GO_PLUGIN"
STATS = ("mean", "p50", "p99")
OUR_DAEMON_PODS = ("trainium-dra", "app.kubernetes.io/component=node")
OWN_HISTOGRAMS: dict[str, dict[str, tuple[str, dict[str, str]]]] = {
    "ours": {
        call: ("trainium_dra_node_request_duration_seconds", {"operation": call})
        for call in ("prepare", "unprepare")
    },
    "go": {
        call: (f"dra_example_driver_{call}_claim_duration_seconds", {})
        for call in ("prepare", "unprepare")
    },
}
"""Each plugin's own per-claim latency histogram: ours from the claim's GET to
the answer; the Go plugin's after its kubelet-plugin library fetched the claim."""


def kubelet_metrics(real: RealCluster, node: str) -> str:
    return real.kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/metrics")


def node_usage(real: RealCluster, seconds: float) -> dict[str, dict[str, float]]:
    """Resident memory and CPU share of each node's cgroup over `seconds` of idling."""
    start = {n: cgroups.cpu_seconds(node.cgroup) for n, node in real.nodes.items()}
    time.sleep(seconds)
    return {
        n: {
            "memory_mib": cgroups.memory_bytes(node.cgroup) / 2**20,
            "system_memory_mib": cgroups.memory_bytes(node.system_cgroup) / 2**20,
            "cpu_percent": 100 * (cgroups.cpu_seconds(node.cgroup) - start[n]) / seconds,
        }
        for n, node in real.nodes.items()
    }


PodCheck = Callable[[RealCluster, str], None]


def run_pods(
    real: RealCluster,
    pods: int,
    template: JSON,
    pod: Callable[[str], JSON],
    check: PodCheck | None = None,
) -> list[float]:
    """Create, wait Running, delete, wait gone: one pod at a time; returns
    seconds from create to Running. `check` looks at a Running pod (untimed)."""
    real.apply(namespace(NS), template)
    core = client.CoreV1Api(real.api)
    startup = []
    for i in range(pods):
        manifest = pod(f"p{i}")
        name = manifest["metadata"]["name"]
        started = time.monotonic()
        real.apply(manifest)
        real.running(NS, name)
        startup.append(time.monotonic() - started)
        if check:
            check(real, name)
        real.kubectl("-n", NS, "delete", "pod", name, "--wait", "--timeout=120s")
    wait_for("pods gone", lambda: not core.list_namespaced_pod(NS).items)
    return startup


def our_pod(name: str) -> JSON:
    return workload_pod(NS, name, "chip")


def go_pod_named(name: str) -> JSON:
    return goref.go_pod(NS, f"go-{name}", "gpu")


def check_go_cdi(real: RealCluster, name: str) -> None:
    """containerd injected the Go plugin's CDI edits: its driver name and the
    pod's claim UID are in the container's environment."""
    env = real.wait_logs(NS, name, "DRA_RESOURCE_DRIVER_NAME")
    pod = real.cluster.pod(NS, name)
    assert pod is not None, f"pod {NS}/{name} gone before its check"
    uid = real.cluster.claim_of(pod)["metadata"]["uid"]
    claims = [v for k, v in env.items() if k.endswith("_RESOURCE_CLAIM")]
    if env["DRA_RESOURCE_DRIVER_NAME"] != goref.GO_DRIVER or uid not in claims:
        raise AssertionError(
            f"pod {NS}/{name}: CDI env {env} lacks claim {uid} of {goref.GO_DRIVER}"
        )


def scrape(real: RealCluster) -> list[str]:
    return [kubelet_metrics(real, n) for n in real.nodes]


def histograms(texts: list[str], driver: str) -> dict[str, dict[str, Histogram]]:
    """Per kubelet metric and call, summed over nodes: the gRPC calls of
    `driver` only; the prepare step of whole pods (the kubelet does not label
    it by driver)."""
    return {
        "kubelet_grpc_ms": {
            call: total(
                parse_histogram(t, GRPC, {"method_name": m, "driver_name": driver}) for t in texts
            )
            for call, m in (("prepare", PREPARE), ("unprepare", UNPREPARE))
        },
        "kubelet_step_ms": {
            call: total(parse_histogram(t, STEP, {"operation_name": op}) for t in texts)
            for call, op in (("prepare", "PrepareResources"), ("unprepare", "UnprepareResources"))
        },
    }


def between(
    after: dict[str, dict[str, Histogram]], before: dict[str, dict[str, Histogram]]
) -> dict[str, dict[str, dict[str, Any]]]:
    """Summaries of what the kubelets observed between two scrapes."""
    return {
        metric: {call: summary_ms(h - before[metric][call]) for call, h in calls.items()}
        for metric, calls in after.items()
    }


def own_histograms(texts: list[str], plugin: str) -> dict[str, Histogram]:
    return {
        call: total(parse_histogram(t, metric, match) for t in texts)
        for call, (metric, match) in OWN_HISTOGRAMS[plugin].items()
    }


def own_between(
    after: dict[str, Histogram], before: dict[str, Histogram]
) -> dict[str, dict[str, Any]]:
    return {call: summary_ms(h - before[call]) for call, h in after.items()}


def ratio(ours: float, go: float) -> float:
    return ours / go if go else math.nan


def ratios(ours: dict[str, Any], go: dict[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    return {
        metric: {
            call: {stat: ratio(ours[metric][call][stat], go[metric][call][stat]) for stat in STATS}
            for call in ours[metric]
        }
        for metric in ("kubelet_grpc_ms", "kubelet_step_ms")
    }


def measure(real: RealCluster, pods: int, go_binary: Path) -> dict[str, Any]:
    """Ours first, then the Go plugin, same pods one at a time; the kubelets
    are scraped around each phase, and each phase is the difference. The Go
    plugin's own pods start before and stop after its phase's scrapes."""
    idle = node_usage(real, IDLE_SECONDS)
    ours_before, ours_own_before = scrape(real), scrape_pods(real, *OUR_DAEMON_PODS)
    template = claim_template(NS, "chip", "chip.trainium.sim.dev")
    startup = run_pods(real, pods, template, our_pod)
    ours_after, ours_own_after = scrape(real), scrape_pods(real, *OUR_DAEMON_PODS)
    go_pods = (goref.GO_NAMESPACE, goref.POD_SELECTOR)
    with goref.go_plugins(real, go_binary):
        go_before, go_own_before = scrape(real), scrape_pods(real, *go_pods)
        go_startup = run_pods(
            real, pods, goref.go_claim_template(NS, "gpu"), go_pod_named, check_go_cdi
        )
        go_after, go_own_after = scrape(real), scrape_pods(real, *go_pods)
    ours = between(histograms(ours_after, DRIVER), histograms(ours_before, DRIVER))
    go = between(histograms(go_after, goref.GO_DRIVER), histograms(go_before, goref.GO_DRIVER))
    ours["plugin_own_ms"] = own_between(
        own_histograms(ours_own_after, "ours"), own_histograms(ours_own_before, "ours")
    )
    go["plugin_own_ms"] = own_between(
        own_histograms(go_own_after, "go"), own_histograms(go_own_before, "go")
    )
    return {
        "nodes": len(real.nodes),
        "pods": pods,
        "idle": idle,
        "pod_startup_s": sorted(startup),
        **ours,
        "go": {
            "module": "sigs.k8s.io/dra-example-driver",
            "version": go_binary.parent.name.removeprefix("dra-example-driver-"),
            "devices_per_node": goref.GO_DEVICES,
            "kube_api_qps": goref.GO_QPS,
            "pod_startup_s": sorted(go_startup),
            **go,
        },
        "ratio_ours_go": ratios(ours, go),
    }


def main() -> None:
    p = argparse.ArgumentParser(prog="benchmarks.realnodes", description=__doc__)
    p.add_argument("--pods", type=int, default=20)
    p.add_argument("--generation", default="trn3-gen1")
    p.add_argument("--nodes-per-rack", type=int, default=None)
    add_noisy_flag(p)
    args = p.parse_args()
    binary = os.environ.get(GO_PLUGIN_ENV)
    if not binary:
        raise SystemExit(
            f"{GO_PLUGIN_ENV}: set it to the Go reference plugin's binary "
            "(`make bench-realnodes` builds it with hack/build-dra-example-driver.sh)"
        )
    up = ["--real-nodes", f"--generation={args.generation}"]
    if args.nodes_per_rack:
        up.append(f"--nodes-per-rack={args.nodes_per_rack}")
    cluster: Cluster
    conditions = Conditions.begin(args.noisy)
    started = time.monotonic()
    with running_cluster(*up, start_timeout=1800.0) as cluster:
        start_s = time.monotonic() - started
        results = {
            "start_s": start_s,
            "idle_seconds": IDLE_SECONDS,
            **measure(real_cluster(cluster), args.pods, Path(binary)),
        }
    defaults = vars(p.parse_args([]))
    changed = [f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items() if v != defaults[k]]
    command = "make bench-realnodes" + (f" BENCH_ARGS='{' '.join(changed)}'" if changed else "")
    print(write_results("realnodes", command, results, conditions))


if __name__ == "__main__":
    main()
