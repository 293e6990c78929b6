"""Node daemon benchmark (`make bench-node`).

Measures, through the real gRPC socket with the kubelet stand-in and claims
the real scheduler allocated on a local control plane:
- NodePrepareResources latency (p50/p99) for a claim of 1 device and of 32
  devices, each prepare followed by an unprepare so every call does the full
  work (apiserver read, checkpoint, token, CDI spec);
- the baseline: an empty NodePrepareResources round trip on the same socket;
- resident memory per simulated node: one daemon process hosting 1 node
  against one hosting a whole 36-node rack.
"""

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.report import write_report
from driver.localsim.controlplane import ControlPlane
from driver.plugin import kubeletclient
from tests.plugin.daemonproc import Daemon, short_tmpdir
from tests.plugin.rackfixture import DRIVER, NODES, RACK_ID, Rack, Site, published_rack

COMMAND = "make bench-node"
ROUNDS = 200
RACK_NODES = 36


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "p50_ms": percentile(samples, 50) * 1e3,
        "p99_ms": percentile(samples, 99) * 1e3,
        "mean_ms": statistics.fmean(samples) * 1e3,
        "rounds": len(samples),
    }


def row(label: str, call: dict[str, float], baseline: dict[str, float]) -> str:
    """One table row from two `summary` results."""
    ratio = call["p50_ms"] / baseline["p50_ms"]
    return f"| {label} | {call['p50_ms']:.2f} | {call['p99_ms']:.2f} | {ratio:.1f}x |"


def timed(call: Callable[[], Any], rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        out.append(time.perf_counter() - started)
    return out


def claim_latency(daemon: Daemon, rack: Rack, name: str, count: int, node: str) -> list[float]:
    selector = f'device.attributes["{DRIVER}"].coreCount == 1'
    rack.create_claim(name, count=count, selector=selector)
    rack.create_pod(f"{name}-pod", name, node=node)
    pod = rack.bound_pod(f"{name}-pod")
    kubelet = daemon.kubelet(node)
    refs = kubelet.pod_claims(rack.api, pod)
    samples = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        prepared = kubelet.prepare(refs)
        samples.append(time.perf_counter() - started)
        assert len(next(iter(prepared.values())).devices) == count
        kubelet.unprepare(refs)
    rack.delete_claim(name, f"{name}-pod")
    return samples


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


class CachingDaemon(Daemon):
    """The test daemon with the default ResourceSlice cache instead of none."""

    def args(self) -> list[str]:
        base = super().args()
        base[base.index("--slice-cache-seconds") + 1] = "5"
        return base


def memory_per_node(kubeconfig: Path) -> dict[str, float]:
    rss = {}
    for count in (1, RACK_NODES):
        with short_tmpdir() as workdir:
            site = Site(DRIVER, RACK_ID, "bench", tuple(f"bench-{i}" for i in range(count)))
            daemon = Daemon(workdir, kubeconfig, site=site).start(timeout=180)
            try:
                time.sleep(2.0)  # let every node's threads settle
                assert daemon.proc is not None
                rss[count] = rss_bytes(daemon.proc.pid)
            finally:
                daemon.stop()
    per_node = (rss[RACK_NODES] - rss[1]) / (RACK_NODES - 1)
    return {
        "rss_1_node_mib": rss[1] / 2**20,
        f"rss_{RACK_NODES}_nodes_mib": rss[RACK_NODES] / 2**20,
        "per_node_mib": per_node / 2**20,
        "per_node_vs_process_ratio": per_node / rss[1],
    }


def latencies(daemon: Daemon, rack: Rack, tag: str) -> dict[str, list[float]]:
    kubelet = daemon.kubelet(NODES[0])
    assert kubelet.plugin is not None
    with kubeletclient.channel(kubelet.plugin.endpoint) as ch:
        kubeletclient.node_prepare(ch, [], 5.0)
        baseline = timed(lambda: kubeletclient.node_prepare(ch, [], 5.0), ROUNDS)
    return {
        "baseline": baseline,
        "one": claim_latency(daemon, rack, f"bench-one-{tag}", 1, NODES[1]),
        "many": claim_latency(daemon, rack, f"bench-many-{tag}", 32, NODES[0]),
    }


def measure() -> dict[str, Any]:
    """Run the daemon twice (slice cache on and off) against one published rack."""
    runs: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp, ControlPlane.running(Path(tmp) / "cp") as plane:
        with published_rack(plane) as rack:
            for tag, kind in (("cached", CachingDaemon), ("uncached", Daemon)):
                with short_tmpdir() as workdir:
                    daemon = kind(workdir, plane.kubeconfig).start()
                    try:
                        runs[tag] = latencies(daemon, rack, tag)
                    finally:
                        daemon.stop()
        memory = memory_per_node(plane.kubeconfig)
    cached, uncached = runs["cached"], runs["uncached"]
    baseline, one, many = cached["baseline"], cached["one"], cached["many"]
    return {
        "rack": RACK_ID,
        "baseline_empty_call": summary(baseline),
        "prepare_1_device": summary(one),
        "prepare_32_devices": summary(many),
        "prepare_1_device_slices_relisted": summary(uncached["one"]),
        "prepare_32_devices_slices_relisted": summary(uncached["many"]),
        "ratios": {
            "prepare_1_p50_vs_baseline_p50": percentile(one, 50) / percentile(baseline, 50),
            "prepare_32_p50_vs_prepare_1_p50": percentile(many, 50) / percentile(one, 50),
            "prepare_32_p99_vs_prepare_1_p99": percentile(many, 99) / percentile(one, 99),
        },
        "memory": memory,
    }


def render(r: dict[str, Any]) -> str:
    """The docs/benchmarks.md section for the results of `measure`."""
    m, baseline = r["memory"], r["baseline_empty_call"]
    return f"""
NodePrepareResources through the DRA socket (kubelet stand-in, claims allocated by
the real scheduler; every prepare followed by an unprepare; {ROUNDS} rounds each).
"Slices re-listed" runs the daemon with `--slice-cache-seconds 0`, so every
prepare also lists the pool's ResourceSlices from the apiserver. The apiserver,
the daemon and the client share the machine's CPUs, so p99 is noisy; one
prepare does an apiserver GET, four fsync'd writes (checkpoint twice, token,
CDI spec) and their directory fsyncs.

| call | p50 ms | p99 ms | p50 vs baseline |
|---|---|---|---|
{row("empty call (baseline)", baseline, baseline)}
{row("1 device", r["prepare_1_device"], baseline)}
{row("32 devices", r["prepare_32_devices"], baseline)}
{row("1 device, slices re-listed", r["prepare_1_device_slices_relisted"], baseline)}
{row("32 devices, slices re-listed", r["prepare_32_devices_slices_relisted"], baseline)}

32 devices cost {r["ratios"]["prepare_32_p50_vs_prepare_1_p50"]:.2f}x one device at p50.

Memory: one daemon process with 1 simulated node has {m["rss_1_node_mib"]:.0f} MiB resident;
with a whole rack of {RACK_NODES} nodes {m[f"rss_{RACK_NODES}_nodes_mib"]:.0f} MiB, so each
further node costs {m["per_node_mib"]:.2f} MiB ({m["per_node_vs_process_ratio"]:.3f}x of the
one-node process).
"""


def main() -> None:
    results = measure()
    markdown = render(results)
    write_report("node", COMMAND, results, markdown)
    print(markdown)


if __name__ == "__main__":
    main()
