"""The `realnodes` section of docs/bench-real-nodes.md, from
benchmarks/results/realnodes.json: the kubelets' own DRA histograms."""

import math
import statistics
from typing import Any

from benchmarks.pages.common import profile_table, spread, tail_name

METRICS = (
    ("dra_grpc_operations_duration_seconds", "kubelet_grpc_ms"),
    ("dra_operations_duration_seconds", "kubelet_step_ms"),
)
GRPC_KEY = "kubelet_grpc_ms"
OWN = "plugin_own_ms"
CLAIM_GET = "ApiReader.get_claim (driver/node/apireader.py)"
"""Our prepare's GET of the claim: inside our own histogram, outside the Go plugin's."""


def bucket(stats: dict[str, Any], q: str) -> tuple[float, float]:
    low, high = stats[f"{q}_bucket"]
    return float(low), float(high)


def bound(b: tuple[float, float]) -> str:
    """What the histogram knows of a quantile: its bucket, not a point in it."""
    low, high = b
    if math.isinf(high):
        return f"> {low:g}"
    return f"≤ {high:g}" if low == 0 else f"{low:g} to {high:g}"


def bucket_cell(ours: dict[str, Any], go: dict[str, Any], q: str) -> str:
    """Both sides' buckets for a quantile and no ratio: inside a bucket the
    histogram interpolates, and a ratio of two interpolations measures nothing."""
    return f"{bound(bucket(ours, q))} / {bound(bucket(go, q))}"


def over_lowest(ours: dict[str, Any], go: dict[str, Any]) -> str:
    """Each side's calls above its lowest bucket's bound: counts the histogram
    knows exactly."""
    over = [side["count"] * (1 - side["in_lowest_bucket"]) for side in (ours, go)]
    bounds = [f"> {side['lowest_bucket_ms']:g} ms" for side in (ours, go)]
    if bounds[0] == bounds[1]:
        return f"{over[0]:.0f} / {over[1]:.0f} ({bounds[0]})"
    return f"{over[0]:.0f} ({bounds[0]}) / {over[1]:.0f} ({bounds[1]})"


def means(rounds: list[dict[str, Any]], metric: str, call: str) -> list[float]:
    return [float(r[metric][call]["mean"]) for r in rounds]


def mean_ratios(r: dict[str, Any], metric: str, call: str) -> list[float]:
    """Ours over the Go plugin's mean, round by round."""
    ours, go = (means(r["rounds"][side], metric, call) for side in ("ours", "go"))
    return [o / g for o, g in zip(ours, go, strict=True)]


def goal(ratios: list[float]) -> str:
    return "met" if statistics.median(ratios) <= 1.0 else "not met"


def table(r: dict[str, Any]) -> str:
    ours, go = r["pooled"]["ours"], r["pooled"]["go"]
    calls = min(
        side[key][call]["count"] for _, key in METRICS for call in ours[key] for side in (ours, go)
    )
    tail = tail_name(calls)
    rows = [
        "| kubelet metric | call | calls ours | calls Go | mean ms ours | mean ms Go "
        "| ours/Go mean | goal ≤ 1.0x | p50 bucket ms, ours / Go "
        f"| {tail} bucket ms, ours / Go | calls above the lowest bucket, ours / Go |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for metric, key in METRICS:
        for call in ours[key]:
            ratios = mean_ratios(r, key, call)
            o, g = ours[key][call], go[key][call]
            rows.append(
                f"| `{metric}` | {call} | {o['count']:.0f} | {g['count']:.0f} "
                f"| {spread(means(r['rounds']['ours'], key, call), '{:.1f}')} "
                f"| {spread(means(r['rounds']['go'], key, call), '{:.1f}')} "
                f"| {spread(ratios, '{:.2f}x')} | {goal(ratios)} "
                f"| {bucket_cell(o, g, 'p50')} | {bucket_cell(o, g, 'p99')} "
                f"| {over_lowest(o, g)} |"
            )
    return "\n".join(rows)


def inside_table(r: dict[str, Any]) -> str:
    """Each plugin's own mean per claim, the bucket of its tail in its own
    histogram (the two plugins' buckets differ), and the kubelet's gRPC mean
    around it minus the own mean: the time spent outside the plugin's handler."""
    ours, go = r["pooled"]["ours"], r["pooled"]["go"]
    tail = tail_name(min(side[OWN][call]["count"] for side in (ours, go) for call in ours[OWN]))
    rows = [
        "| call | own mean ms ours | own mean ms Go | ours/Go own mean | goal ≤ 1.0x "
        f"| own {tail} bucket ms, ours / Go | outside ms ours | outside ms Go |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for call in ours[OWN]:
        ratios = mean_ratios(r, OWN, call)
        outside = [
            statistics.median(means(r["rounds"][side], GRPC_KEY, call))
            - statistics.median(means(r["rounds"][side], OWN, call))
            for side in ("ours", "go")
        ]
        rows.append(
            f"| {call} | {spread(means(r['rounds']['ours'], OWN, call), '{:.2f}')} "
            f"| {spread(means(r['rounds']['go'], OWN, call), '{:.2f}')} "
            f"| {spread(ratios, '{:.2f}x')} | {goal(ratios)} "
            f"| {bucket_cell(ours[OWN][call], go[OWN][call], 'p99')} "
            f"| {outside[0]:.1f} | {outside[1]:.1f} |"
        )
    return "\n".join(rows)


def lowest_bucket_share(side: dict[str, Any]) -> float:
    """Share of all calls in the table's rows for one driver that fall in the
    kubelet's lowest bucket."""
    rows = [side[key][call] for _, key in METRICS for call in side[key]]
    calls = sum(row["count"] for row in rows)
    return sum(row["in_lowest_bucket"] * row["count"] for row in rows) / calls if calls else 0.0


def without_claim_get(r: dict[str, Any]) -> str:
    """Our own prepare mean less the claim GET's share of the profile, beside
    the Go plugin's own mean, which starts after its GET."""
    prof = r["profile"]
    share = dict((name, float(v)) for name, v in prof["functions"]).get(CLAIM_GET, 0.0)
    ours, go = (
        statistics.median(means(r["rounds"][side], OWN, "prepare")) for side in ("ours", "go")
    )
    return (
        f"The claim's GET (`{CLAIM_GET}`) holds {100 * share:.0f} % of these samples, and the "
        f"Go plugin's own histogram leaves its GET out: our own prepare mean of {ours:.1f} ms "
        f"less that share is about {ours * (1 - share):.1f} ms, against the Go plugin's "
        f"{go:.1f} ms. So the own-mean row above compares unlike spans, and the GET, mostly "
        "waiting for the apiserver's answer, is most of the difference."
    )


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
    ours_pooled, go_pooled = r["pooled"]["ours"], r["pooled"]["go"]
    lowest = ours_pooled[GRPC_KEY]["prepare"]["lowest_bucket_ms"]
    rounds = len(r["orders"])
    prof = r["profile"]
    return f"""{r["nodes"]} real nodes (kubelet, containerd, kube-proxy and the chart's pods in each
node's cgroup). Beside our node daemon, the Go reference kubelet plugin, `{go["module"]}`
{go["version"]}, runs as a DaemonSet on every node with the resources and container
security of our daemon (its binary mounted from the host into the driver image),
registered by each kubelet through its plugin-registration directory and publishing
its own ResourceSlices of {go["devices_per_node"]} `gpu` devices per node (client QPS and
burst {go["kube_api_qps"]}). Both are registered throughout. {rounds} rounds, each a phase per
plugin, the order alternating ({", ".join(" then ".join(o) for o in r["orders"])}): {r["pods"]}
pods with one claim each (a whole chip of ours, a `gpu` of the Go plugin's), created
{r["parallel"]} at a time, waited Running, deleted. Every Go plugin pod is checked for the
environment containerd injected from its CDI spec.

Latencies are the kubelets' own histograms, read through the apiserver
(`/api/v1/nodes/<node>/proxy/metrics`) before and after each phase and summed over the
nodes; each phase is the difference of its two scrapes.
`dra_grpc_operations_duration_seconds` is also labelled by driver;
`dra_operations_duration_seconds`, the kubelet's whole prepare or unprepare step of a
pod, is not, which is why a phase runs one plugin's pods only. The mean (the
histogram's `_sum` over its `_count`) is exact: the mean columns give the median of the
{rounds} rounds with their range, and the ratio is taken round by round. The quantile
columns pool every round's calls, and a histogram knows a quantile only to its bucket, so
they give the bucket and no ratio: inside a bucket the figure is interpolated, and
{100 * lowest_bucket_share(ours_pooled):.0f} % of our calls in the table and
{100 * lowest_bucket_share(go_pooled):.0f} % of the Go plugin's fall in the kubelet's lowest
bucket (0 to {lowest:.0f} ms). What the histogram counts exactly is the last column: the
calls above that bucket's bound.

{table(r)}

Inside the plugins: each one's own latency histogram per claim, read in its pods
(`kubectl exec`) around the same phases. Ours
(`trainium_dra_node_request_duration_seconds`) runs from the claim's GET to the answer,
with buckets every 0.5 to 10 ms below 100 ms so its tail can be read; the Go plugin's
(`dra_example_driver_prepare_claim_duration_seconds` and the unprepare one) starts after
its kubelet-plugin library has fetched the claim, so its GET counts as outside, and its
buckets are its own (the tail cells show them, and no ratio, as for the kubelet's). One
claim per call here, so per claim is per call; outside is the kubelet's gRPC mean minus
the plugin's own mean (medians of the rounds).

{inside_table(r)}

Where our prepare's time goes under the real kubelets: py-spy, run on the host,
sampled the daemon process of each of the {prof["processes"]} nodes at {prof["rate_hz"]} Hz
through one more phase of {prof["pods"]} pods of ours after the rounds (not timed; the Go
plugin still registered). Of the {prof["samples"]} samples inside the gRPC handler
(`{prof["root"]}`), the share whose stack holds each function, counted as in the node
section's profile of the kubelet stand-in:

{profile_table(prof)}

{without_claim_get(r)}

Start-up, `trainium-dra up --real-nodes` until every node is Ready and the chart's
pods run (images imported, certificates issued, helm install): {r["start_s"]:.0f} s (one
start-up, not repeated).

Pod create to Running (scheduler, kubelet, prepare, CDI, container start), every round:
ours {median_and_slowest(ours_pooled["pod_startup_s"])}; Go plugin
{median_and_slowest(go_pooled["pod_startup_s"])}.

Per node, idle for {r["idle_seconds"]:.0f} s after start-up, before the Go plugin starts
(cgroup `memory.stat` rss + mapped files; `cpuacct.usage`): memory {min(mem):.0f} to
{max(mem):.0f} MiB of which kubelet, containerd, shims and kube-proxy {min(system):.0f} to
{max(system):.0f} MiB; CPU {min(cpu):.1f} to {max(cpu):.1f} % of one core.
"""
