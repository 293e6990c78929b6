"""The `node` section of docs/bench-node-daemon.md, from benchmarks/results/node.json."""

import statistics
from typing import Any

from benchmarks.pages.common import profile_table, spread, tail_name


def title(key: str) -> str:
    """A row's key as the table names it: `16_concurrent_claims` -> `16 concurrent claims`."""
    return key.replace("_", " ")


def order(key: str) -> tuple[bool, bool, int]:
    """The empty call first, then by devices, concurrent claims last."""
    size = key.split("_", 1)[0]
    return key != "empty_call", "concurrent" in key, int(size) if size.isdigit() else 0


def median_of(repetitions: list[dict[str, Any]]) -> dict[str, Any]:
    """Per row and call: each figure's median over the repetitions, and each
    ratio's runs for its spread."""
    first = repetitions[0]
    out: dict[str, Any] = {}
    for key, ops in first.items():
        out[key] = {}
        for op in ops:
            runs = [rep[key][op] for rep in repetitions]
            out[key][op] = {
                side: {
                    stat: statistics.median(run[side][stat] for run in runs)
                    for stat in ("p50_ms", "p99_ms", "samples")
                }
                for side in ("ours", "go")
            }
            for ratio in ("ratio_p50", "ratio_p99"):
                out[key][op][f"{ratio}_runs"] = [run[ratio] for run in runs]
                out[key][op][ratio] = statistics.median(out[key][op][f"{ratio}_runs"])
    return out


def ratio_cell(r: dict[str, Any], ratio: str) -> str:
    return spread(r[f"{ratio}_runs"], "{:.2f}x")


def table(rows: dict[str, Any]) -> str:
    samples = min(
        side["samples"]
        for ops in rows.values()
        for r in ops.values()
        for side in (r["ours"], r["go"])
    )
    tail = tail_name(int(samples))
    lines = [
        f"| row | call | ours p50 ms | Go p50 ms | ours/Go p50 | ours {tail} ms | Go {tail} ms "
        f"| ours/Go {tail} | goal ≤ 1.0x |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key in sorted(rows, key=order):
        for op, r in rows[key].items():
            met = "met" if r["ratio_p50"] <= 1.0 and r["ratio_p99"] <= 1.0 else "not met"
            lines.append(
                f"| {title(key)} | {op} | {r['ours']['p50_ms']:.2f} | {r['go']['p50_ms']:.2f} "
                f"| {ratio_cell(r, 'ratio_p50')} | {r['ours']['p99_ms']:.2f} "
                f"| {r['go']['p99_ms']:.2f} | {ratio_cell(r, 'ratio_p99')} | {met} |"
            )
    return "\n".join(lines)


def render(payload: dict[str, Any]) -> str:
    """The section's body for the results of `benchmarks.node`."""
    r = payload["results"]
    m, go, n = r["memory"], r["go_plugin"], r["concurrency"]
    prof = r["profile"]
    reps = len(r["repetitions"])
    rack = m["rack_nodes"]
    return f"""Our node daemon beside the Go reference kubelet plugin, `{go["module"]}`
{go["version"]} (built from its Go module by `hack/build-dra-example-driver.sh`,
`--device-profile=gpu --num-devices={go["devices"]}`, client QPS and burst
raised to {go["kube_api_qps"]}/{go["kube_api_burst"]}: its defaults of 5/10 make
back-to-back prepares wait for the client-side rate limiter). Both run against
the same local apiserver with claims the real scheduler allocated, and one
client drives both: the kubelet stand-in's gRPC calls over one open channel per
plugin, in interleaved rounds ({r["rounds"]["sequential"]} per sequential row,
each prepare followed by its unprepare; {r["rounds"]["concurrent"]} rounds of
{n} claims of {n} pods called at once by {n} threads,
each call timed on its own). Our daemon runs with its defaults (5 s ResourceSlice
cache, health checked every 0.5 s); both plugins GET the claim from the
apiserver on every prepare. The apiserver, both plugins and the client share
the machine's CPUs, so compare the ratios, not the absolute figures. Every row
ran {reps} times, one after another; each figure is the median of the {reps}
runs, and each ratio has its lowest and highest in brackets.

{table(median_of(r["repetitions"]))}

The empty call carries no claim, so neither plugin's handler does any work: its
row is the gRPC server's own path per call, Python's (grpcio, a thread pool
behind the C core) against Go's, and it is part of every other row too.

Where our prepare's time goes: py-spy sampled our daemon at {prof["rate_hz"]} Hz
through one more run of the {" and ".join(title(k) for k in prof["rows"])} rows (not
timed). Of the {prof["samples"]} samples inside the gRPC handler
(`{prof["root"]}`), the share whose stack holds each function (a caller's
share includes its callees'; waiting for a lock or the disk counts, an idle
thread does not):

{profile_table(prof)}

Memory: one daemon process with 1 simulated node has {m["rss_1_node_mib"]:.0f} MiB resident;
with a whole rack of {rack} nodes {m[f"rss_{rack}_nodes_mib"]:.0f} MiB, so each
further node costs {m["per_node_mib"]:.2f} MiB ({m["per_node_vs_process_ratio"]:.3f}x of the
one-node process).
"""
