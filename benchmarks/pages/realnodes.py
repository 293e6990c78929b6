"""The `realnodes` section of docs/benchmarks.md, from
benchmarks/results/realnodes.json: the kubelets' own DRA histograms."""

import math
from typing import Any

from benchmarks.pages.common import tail_name

METRICS = (
    ("dra_grpc_operations_duration_seconds", "kubelet_grpc_ms"),
    ("dra_operations_duration_seconds", "kubelet_step_ms"),
)


def bucket(stats: dict[str, Any], q: str) -> tuple[float, float] | None:
    """The bucket a quantile falls in: recorded, or, for older results, the
    lowest bucket when every call fell in it."""
    if f"{q}_bucket" in stats:
        low, high = stats[f"{q}_bucket"]
        return float(low), float(high)
    if stats["in_lowest_bucket"] == 1.0:
        return 0.0, float(stats["lowest_bucket_ms"])
    return None


def bound(b: tuple[float, float] | None, interpolated: float) -> str:
    """What the histogram knows of a quantile: its bucket, not a point in it."""
    if b is None:
        return f"~{interpolated:.1f}"
    low, high = b
    if math.isinf(high):
        return f"> {low:g}"
    return f"≤ {high:g}" if low == 0 else f"{low:g} to {high:g}"


def quantile_cells(ours: dict[str, Any], go: dict[str, Any], q: str) -> str:
    """Both sides' buckets, and a ratio only where they differ (inside one
    bucket the interpolated figures are equal by construction)."""
    ours_b, go_b = bucket(ours, q), bucket(go, q)
    same = ours_b is not None and ours_b == go_b
    ratio = "— (same bucket)" if same else f"{ours[q] / go[q]:.2f}x" if go[q] else "n/a"
    return f"{bound(ours_b, ours[q])} | {bound(go_b, go[q])} | {ratio}"


def table(r: dict[str, Any]) -> str:
    calls = min(
        side[key][call]["count"] for _, key in METRICS for call in r[key] for side in (r, r["go"])
    )
    tail = tail_name(calls)
    rows = [
        "| kubelet metric | call | calls ours | calls Go | mean ms ours | mean ms Go "
        "| ours/Go mean | p50 ms ours | p50 ms Go | ours/Go p50 "
        f"| {tail} ms ours | {tail} ms Go | ours/Go {tail} |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for metric, key in METRICS:
        for call, ours in r[key].items():
            go = r["go"][key][call]
            rows.append(
                f"| `{metric}` | {call} | {ours['count']:.0f} | {go['count']:.0f} "
                f"| {ours['mean']:.1f} | {go['mean']:.1f} | {ours['mean'] / go['mean']:.2f}x "
                f"| {quantile_cells(ours, go, 'p50')} | {quantile_cells(ours, go, 'p99')} |"
            )
    return "\n".join(rows)


def inside_table(r: dict[str, Any]) -> str:
    """Each plugin's own mean per claim beside the kubelet's mean for the gRPC
    call around it; the difference is spent outside the plugin's handler."""
    rows = [
        "| call | ours: own mean ms | ours: kubelet gRPC mean ms | ours: outside ms "
        "| Go: own mean ms | Go: kubelet gRPC mean ms | Go: outside ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for call in r["plugin_own_ms"]:
        cells = []
        for side in (r, r["go"]):
            own, grpc = side["plugin_own_ms"][call]["mean"], side["kubelet_grpc_ms"][call]["mean"]
            cells.append(f"{own:.1f} | {grpc:.1f} | {grpc - own:.1f}")
        rows.append(f"| {call} | {' | '.join(cells)} |")
    return "\n".join(rows)


def lowest_bucket_share(side: dict[str, Any]) -> float:
    """Share of all calls in the table's rows for one driver that fall in the
    kubelet's lowest bucket."""
    rows = [side[key][call] for _, key in METRICS for call in side[key]]
    calls = sum(row["count"] for row in rows)
    return sum(row["in_lowest_bucket"] * row["count"] for row in rows) / calls if calls else 0.0


def median_and_slowest(samples: list[float]) -> str:
    return f"median {samples[len(samples) // 2]:.1f} s, slowest {samples[-1]:.1f} s"


def render(payload: dict[str, Any]) -> str:
    """The section's body for the results of `benchmarks.realnodes`."""
    r = payload["results"]
    idle = r["idle"]
    mem = [v["memory_mib"] for v in idle.values()]
    cpu = [v["cpu_percent"] for v in idle.values()]
    system = [v["system_memory_mib"] for v in idle.values()]
    go = r["go"]
    lowest = r["kubelet_grpc_ms"]["prepare"]["lowest_bucket_ms"]
    return f"""{r["nodes"]} real nodes (kubelet, containerd, kube-proxy and the chart's pods in each
node's cgroup), {r["pods"]} pods with one whole-chip claim each, created and deleted one
after another. Then the Go reference kubelet plugin, `{go["module"]}` {go["version"]},
as a DaemonSet on every node with the resources and container security of our daemon
(its binary mounted from the host into the driver image), registered by each kubelet
through its plugin-registration directory and publishing its own ResourceSlices of
{go["devices_per_node"]} `gpu` devices per node (client QPS and burst {go["kube_api_qps"]}),
and {r["pods"]} pods with one claim of its DeviceClass each, created and deleted the same
way; each of them is checked for the environment containerd injected from the plugin's
CDI spec.

Latencies are the kubelets' own histograms, read through the apiserver
(`/api/v1/nodes/<node>/proxy/metrics`) before and after each phase and summed over the
nodes; each phase is the difference of its two scrapes (the Go plugin's own pods start
before and stop after its phase's scrapes).
`dra_grpc_operations_duration_seconds` is also labelled by driver;
`dra_operations_duration_seconds`, the kubelet's whole prepare or unprepare step of a
pod, is not. The mean (the histogram's `_sum` over its `_count`) is exact and is the
figure to compare. A histogram knows a quantile only to its bucket:
{100 * lowest_bucket_share(r):.0f} % of our calls in the table and
{100 * lowest_bucket_share(go):.0f} % of the Go plugin's fall in the lowest bucket (0 to
{lowest:.0f} ms), so the quantile columns give the bucket, and no ratio where both
plugins' quantiles share one. With fewer than 100 calls a side the tail column is the
slowest call's bucket, called max.

{table(r)}

Inside the plugins: each one's own latency histogram per claim, read in its pods
(`kubectl exec`) around the same phases, beside the kubelet's gRPC mean; ours
(`trainium_dra_node_request_duration_seconds`) runs from the claim's GET to the
answer, the Go plugin's (`dra_example_driver_prepare_claim_duration_seconds` and the
unprepare one) starts after its kubelet-plugin library has fetched the claim, so its
GET counts as outside. One claim per call here, so per claim is per call.

{inside_table(r)}

Start-up, `trainium-dra up --real-nodes` until every node is Ready and the chart's
pods run (images imported, certificates issued, helm install): {r["start_s"]:.0f} s (one
start-up, not repeated).

Pod create to Running (scheduler, kubelet, prepare, CDI, container start): ours
{median_and_slowest(r["pod_startup_s"])}; Go plugin {median_and_slowest(go["pod_startup_s"])}.

Per node, idle for {r["idle_seconds"]:.0f} s after start-up, before the Go plugin starts
(cgroup `memory.stat` rss + mapped files; `cpuacct.usage`): memory {min(mem):.0f} to
{max(mem):.0f} MiB of which kubelet, containerd, shims and kube-proxy {min(system):.0f} to
{max(system):.0f} MiB; CPU {min(cpu):.1f} to {max(cpu):.1f} % of one core.
"""
