"""Real nodes, measured by clients nobody here wrote: the kubelet's own DRA
histograms give NodePrepareResources and NodeUnprepareResources latency as the
kubelet sees them (gRPC call, and the whole prepare step including its claim
cache), and the nodes' cgroups give each node's memory and CPU.

Run as `python -m benchmarks.realnodes [--pods N] [--nodes-per-rack N] [--generation G]`
(root; `make bench-realnodes`). Pods with one whole-chip claim each are created
and deleted one after another; the kubelet prepares and unprepares each.
"""

import argparse
import math
import time
from collections.abc import Iterable
from typing import Any

from kubernetes import client

from benchmarks.report import write_report
from driver.localsim.realnodes import cgroups
from tests.e2e.cluster import Cluster, running_cluster, wait_for
from tests.realnodes.realcluster import (
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
Buckets = dict[float, float]


def parse_histogram(text: str, metric: str, match: dict[str, str]) -> Buckets:
    """Cumulative bucket counts (le -> count) of `metric` series whose labels
    include `match`, summed over the other labels (pure)."""
    buckets: Buckets = {}
    prefix = f"{metric}_bucket{{"
    for line in text.splitlines():
        if not line.startswith(prefix):
            continue
        labels_text, value = line[len(prefix) :].rsplit("} ", 1)
        labels = dict(
            part.split("=", 1) for part in labels_text.replace('"', "").split(",") if "=" in part
        )
        if any(labels.get(k) != v for k, v in match.items()):
            continue
        le = math.inf if labels["le"] == "+Inf" else float(labels["le"])
        buckets[le] = buckets.get(le, 0.0) + float(value)
    return buckets


def merge(histograms: Iterable[Buckets]) -> Buckets:
    out: Buckets = {}
    for h in histograms:
        for le, count in h.items():
            out[le] = out.get(le, 0.0) + count
    return out


def quantile(q: float, buckets: Buckets) -> float:
    """Prometheus' histogram_quantile: linear inside the bucket holding rank q."""
    bounds = sorted(buckets)
    total = buckets[bounds[-1]] if bounds else 0.0
    if total == 0:
        return math.nan
    rank, lower, below = q * total, 0.0, 0.0
    for le in bounds:
        count = buckets[le]
        if count >= rank:
            if math.isinf(le):
                return lower
            return lower + (le - lower) * (rank - below) / max(count - below, 1e-12)
        lower, below = le, count
    return lower


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


def run_pods(real: RealCluster, pods: int) -> list[float]:
    """Create, wait Running, delete, wait gone: one pod at a time; returns
    seconds from create to Running."""
    real.apply(namespace(NS), claim_template(NS, "chip", "chip.trainium.sim.dev"))
    core = client.CoreV1Api(real.api)
    startup = []
    for i in range(pods):
        name = f"p{i}"
        started = time.monotonic()
        real.apply(workload_pod(NS, name, "chip"))
        real.running(NS, name)
        startup.append(time.monotonic() - started)
        real.kubectl("-n", NS, "delete", "pod", name, "--wait", "--timeout=120s")
    wait_for("pods gone", lambda: not core.list_namespaced_pod(NS).items)
    return startup


def measure(real: RealCluster, pods: int) -> dict[str, Any]:
    idle = node_usage(real, IDLE_SECONDS)
    startup = run_pods(real, pods)
    texts = [kubelet_metrics(real, n) for n in real.nodes]
    grpc = {
        name: merge(
            parse_histogram(t, "dra_grpc_operations_duration_seconds", {"method_name": method})
            for t in texts
        )
        for name, method in (("prepare", PREPARE), ("unprepare", UNPREPARE))
    }
    step = {
        name: merge(
            parse_histogram(t, "dra_operations_duration_seconds", {"operation_name": op})
            for t in texts
        )
        for name, op in (("prepare", "PrepareResources"), ("unprepare", "UnprepareResources"))
    }
    return {
        "nodes": len(real.nodes),
        "pods": pods,
        "idle": idle,
        "pod_startup_s": sorted(startup),
        "kubelet_grpc_ms": {
            k: {"p50": 1e3 * quantile(0.5, h), "p99": 1e3 * quantile(0.99, h), "count": h[math.inf]}
            for k, h in grpc.items()
        },
        "kubelet_step_ms": {
            k: {"p50": 1e3 * quantile(0.5, h), "p99": 1e3 * quantile(0.99, h), "count": h[math.inf]}
            for k, h in step.items()
        },
    }


def table(r: dict[str, Any]) -> str:
    rows = ["| kubelet metric | call | p50 ms | p99 ms | calls |", "|---|---|---|---|---|"]
    for metric, key in (
        ("dra_grpc_operations_duration_seconds", "kubelet_grpc_ms"),
        ("dra_operations_duration_seconds", "kubelet_step_ms"),
    ):
        for call, figures in r[key].items():
            rows.append(
                f"| `{metric}` | {call} | {figures['p50']:.1f} | {figures['p99']:.1f} "
                f"| {figures['count']:.0f} |"
            )
    return "\n".join(rows)


def render(r: dict[str, Any]) -> str:
    idle = r["idle"]
    mem = [v["memory_mib"] for v in idle.values()]
    cpu = [v["cpu_percent"] for v in idle.values()]
    system = [v["system_memory_mib"] for v in idle.values()]
    startup = r["pod_startup_s"]
    return f"""
{r["nodes"]} real nodes (kubelet, containerd, kube-proxy and the chart's pods in each
node's cgroup), {r["pods"]} pods with one whole-chip claim each, created and deleted one
after another. Latencies are the kubelet's own histograms, read through the apiserver
(`/api/v1/nodes/<node>/proxy/metrics`) and summed over the nodes; quantiles are
interpolated inside the histogram buckets as Prometheus' `histogram_quantile` does, so
they are only as fine as the kubelet's bucket bounds.

{table(r)}

Start-up, `trainium-dra up --real-nodes` until every node is Ready and the chart's
pods run (images imported, certificates issued, helm install): {r["start_s"]:.0f} s.

Pod create to Running (scheduler, kubelet, prepare, CDI, container start): median
{startup[len(startup) // 2]:.1f} s, slowest {startup[-1]:.1f} s.

Per node, idle for {IDLE_SECONDS:.0f} s after start-up (cgroup `memory.stat`
rss + mapped files; `cpuacct.usage`): memory {min(mem):.0f} to {max(mem):.0f} MiB of which
kubelet, containerd, shims and kube-proxy {min(system):.0f} to {max(system):.0f} MiB; CPU
{min(cpu):.1f} to {max(cpu):.1f} % of one core.
"""


def main() -> None:
    p = argparse.ArgumentParser(prog="benchmarks.realnodes", description=__doc__)
    p.add_argument("--pods", type=int, default=20)
    p.add_argument("--generation", default="trn3-gen1")
    p.add_argument("--nodes-per-rack", type=int, default=None)
    args = p.parse_args()
    up = ["--real-nodes", f"--generation={args.generation}"]
    if args.nodes_per_rack:
        up.append(f"--nodes-per-rack={args.nodes_per_rack}")
    cluster: Cluster
    started = time.monotonic()
    with running_cluster(*up, start_timeout=1800.0) as cluster:
        start_s = time.monotonic() - started
        results = {"start_s": start_s, **measure(real_cluster(cluster), args.pods)}
    command = "make bench-realnodes" + (
        f" BENCH_ARGS='{' '.join(up[1:])}'" if args.nodes_per_rack else ""
    )
    write_report("realnodes", command, results, render(results))


if __name__ == "__main__":
    main()
