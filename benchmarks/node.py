"""Node daemon benchmark (`make bench-node`): our kubelet plugin beside the Go reference.

Both plugins run against the same local apiserver with claims the real
scheduler allocated: ours (the node daemon as a subprocess) and the kubelet
plugin of sigs.k8s.io/dra-example-driver, built from its Go module by
hack/build-dra-example-driver.sh. One client drives both: the kubelet
stand-in registers each plugin, then its gRPC calls go over one channel per
plugin kept open, as the kubelet keeps one. Rounds alternate which plugin goes
first. Rows:
- the empty NodePrepareResources call (the socket and gRPC alone);
- prepare, then unprepare, of a claim of 1 device and of one of 32 devices;
- 16 claims of 16 pods prepared at the same moment by 16 threads (the kubelet
  prepares the claims of different pods concurrently), then unprepared so.
Every row runs three times (the page shows the median and the spread), then
once more under py-spy for where our prepare's time goes. Also the resident
memory per simulated node of our daemon (1 node against 36).
"""

import argparse
import os
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from kubernetes import client as k8s

from benchmarks import pyspy
from benchmarks.report import REPEATS, Conditions, add_noisy_flag, write_results
from driver.kubeletplugin import pluginclient
from localsim.controlplane.plane import ControlPlane
from localsim.standin.kubelet import KubeletStandIn
from testbed.daemon import Daemon, short_tmpdir
from testbed.rack import DRIVER, NODES, RACK_ID, Rack, Site, published_rack
from testbed.waiting import wait_for

COMMAND = "make bench-node"
ROUNDS = 500
CONCURRENT = 16
CONCURRENT_ROUNDS = 50
RACK_NODES = 36
RPC_TIMEOUT = 30.0
GO_PLUGIN_ENV = "TRAINIUM_DRA_GO_PLUGIN"
GO_DRIVER = "gpu.example.com"
GO_DEVICES = 32
GO_QPS = 1000
"""Client QPS and burst given to the Go plugin: its defaults (5 and 10) make
back-to-back prepares wait for the client-side rate limiter."""
GO_SITE = Site(GO_DRIVER, "goref", "goref", ("goref-n0",))
Ref = tuple[str, str, str]  # namespace, uid, name
HEALTH_CRD = (
    Path(__file__).resolve().parent.parent
    / "charts/trainium-dra/crds/nodedevicehealths.trainium.sim.dev.yaml"
)


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "p50_ms": percentile(samples, 50) * 1e3,
        "p99_ms": percentile(samples, 99) * 1e3,
        "mean_ms": statistics.fmean(samples) * 1e3,
        "samples": len(samples),
    }


@dataclass
class Plugin:
    """One plugin as the client sees it: its channel, API version and cluster side."""

    name: str
    channel: grpc.Channel
    version: str
    rack: Rack
    kubelet: KubeletStandIn
    node: str
    selector: str  # CEL selector for single-device requests ("" for any device)

    def prepare(self, refs: Sequence[Ref], devices: int) -> None:
        response = pluginclient.node_prepare(self.channel, refs, RPC_TIMEOUT, self.version)
        for _, uid, name in refs:
            result = response.claims[uid]
            if result.error or len(result.devices) != devices:
                raise RuntimeError(f"{self.name}: prepare {name}: {result.error or result}")

    def unprepare(self, refs: Sequence[Ref]) -> None:
        response = pluginclient.node_unprepare(self.channel, refs, RPC_TIMEOUT, self.version)
        for _, uid, name in refs:
            if response.claims[uid].error:
                raise RuntimeError(f"{self.name}: unprepare {name}: {response.claims[uid].error}")

    def empty(self) -> None:
        pluginclient.node_prepare(self.channel, [], RPC_TIMEOUT, self.version)


@contextmanager
def claims(plugin: Plugin, tag: str, pods: int, devices: int) -> Iterator[list[list[Ref]]]:
    """`pods` pods on the plugin's node, each with one claim of `devices` devices,
    allocated by the scheduler; their refs per pod, all deleted afterwards."""
    names = [f"bench-{tag}-{i}" for i in range(pods)]
    for name in names:
        plugin.rack.create_claim(name, count=devices, selector=plugin.selector)
        plugin.rack.create_pod(f"{name}-pod", name, node=plugin.node)
    try:
        yield [
            plugin.kubelet.pod_claims(plugin.rack.objects, plugin.rack.bound_pod(f"{name}-pod"))
            for name in names
        ]
    finally:
        for name in names:
            plugin.rack.delete_claim(name, f"{name}-pod")


def timed(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


Samples = dict[str, dict[str, list[float]]]  # op -> plugin -> seconds


def alternate(plugins: Sequence[Plugin], rounds: int, one_round: Callable[[Plugin], None]) -> None:
    for i in range(rounds):
        for plugin in plugins if i % 2 == 0 else reversed(plugins):
            one_round(plugin)


def sequential_row(plugins: Sequence[Plugin], devices: int) -> Samples:
    out: Samples = {"prepare": {}, "unprepare": {}}
    with both_claims(plugins, f"seq{devices}", 1, devices) as refs:

        def one_round(plugin: Plugin) -> None:
            (pod_refs,) = refs[plugin.name]
            out["prepare"].setdefault(plugin.name, []).append(
                timed(lambda: plugin.prepare(pod_refs, devices))
            )
            out["unprepare"].setdefault(plugin.name, []).append(
                timed(lambda: plugin.unprepare(pod_refs))
            )

        alternate(plugins, ROUNDS, one_round)
    return out


def concurrent_row(plugins: Sequence[Plugin]) -> Samples:
    out: Samples = {"prepare": {}, "unprepare": {}}
    with (
        both_claims(plugins, "conc", CONCURRENT, 1) as refs,
        ThreadPoolExecutor(CONCURRENT) as pool,
    ):

        def together(plugin: Plugin, call: Callable[[list[Ref]], None]) -> list[float]:
            start = threading.Barrier(CONCURRENT)

            def one(pod_refs: list[Ref]) -> float:
                start.wait()
                return timed(lambda: call(pod_refs))

            return list(pool.map(one, refs[plugin.name]))

        def one_round(plugin: Plugin) -> None:
            prepared = together(plugin, lambda r: plugin.prepare(r, 1))
            out["prepare"].setdefault(plugin.name, []).extend(prepared)
            unprepared = together(plugin, plugin.unprepare)
            out["unprepare"].setdefault(plugin.name, []).extend(unprepared)

        alternate(plugins, CONCURRENT_ROUNDS, one_round)
    return out


@contextmanager
def both_claims(
    plugins: Sequence[Plugin], tag: str, pods: int, devices: int
) -> Iterator[dict[str, list[list[Ref]]]]:
    with (
        claims(plugins[0], tag, pods, devices) as first,
        claims(plugins[1], tag, pods, devices) as second,
    ):
        yield {plugins[0].name: first, plugins[1].name: second}


def empty_row(plugins: Sequence[Plugin]) -> Samples:
    out: Samples = {"call": {}}
    alternate(
        plugins,
        ROUNDS,
        lambda plugin: out["call"].setdefault(plugin.name, []).append(timed(plugin.empty)),
    )
    return out


def go_slice_published(api: k8s.ApiClient) -> bool:
    listed = k8s.ResourceV1Api(api).list_resource_slice(field_selector=f"spec.driver={GO_DRIVER}")
    return sum(len(s.spec.devices or []) for s in listed.items) == GO_DEVICES


@contextmanager
def go_plugin(binary: Path, kubeconfig: Path, node: str) -> Iterator[KubeletStandIn]:
    """The Go reference plugin for `node`, registered with a kubelet stand-in."""
    with short_tmpdir() as workdir:
        kubelet_root = workdir / "kubelet"
        (kubelet_root / "plugins_registry").mkdir(parents=True)  # the kubelet's to create
        args = [
            str(binary),
            f"--node-name={node}",
            f"--cdi-root={workdir / 'cdi'}",
            f"--num-devices={GO_DEVICES}",
            "--device-profile=gpu",
            f"--kubelet-registrar-directory-path={kubelet_root / 'plugins_registry'}",
            f"--kubelet-plugins-directory-path={kubelet_root / 'plugins'}",
            f"--kubeconfig={kubeconfig}",
            f"--kube-api-qps={GO_QPS}",
            f"--kube-api-burst={GO_QPS}",
        ]
        log = workdir / "plugin.log"
        with log.open("w") as out:
            proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        try:
            kubelet = KubeletStandIn(kubelet_root, GO_DRIVER)
            try:
                kubelet.register(timeout=60)
            except Exception as err:
                raise RuntimeError(f"{err}\n{log.read_text()[-3000:]}") from err
            yield kubelet
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


class DefaultsDaemon(Daemon):
    """The test daemon with a deployment's defaults for the ResourceSlice cache
    and the health interval instead of the tests' short ones."""

    def args(self) -> list[str]:
        base = super().args()
        base[base.index("--slice-cache-seconds") + 1] = "5"
        base[base.index("--health-interval") + 1] = "0.5"
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
        "rack_nodes": RACK_NODES,
        "rss_1_node_mib": rss[1] / 2**20,
        f"rss_{RACK_NODES}_nodes_mib": rss[RACK_NODES] / 2**20,
        "per_node_mib": per_node / 2**20,
        "per_node_vs_process_ratio": per_node / rss[1],
    }


def compare(samples: Samples) -> dict[str, Any]:
    """Per operation: both plugins' summaries and ours/Go at p50 and p99."""
    out = {}
    for op, by_plugin in samples.items():
        ours, go = summary(by_plugin["ours"]), summary(by_plugin["go"])
        out[op] = {
            "ours": ours,
            "go": go,
            "ratio_p50": ours["p50_ms"] / go["p50_ms"],
            "ratio_p99": ours["p99_ms"] / go["p99_ms"],
        }
    return out


def repetition(plugins: Sequence[Plugin]) -> dict[str, Any]:
    """Every row once, each row's rounds alternating which plugin goes first."""
    return {
        "empty_call": compare(empty_row(plugins)),
        "1_device": compare(sequential_row(plugins, 1)),
        f"{GO_DEVICES}_devices": compare(sequential_row(plugins, GO_DEVICES)),
        f"{CONCURRENT}_concurrent_claims": compare(concurrent_row(plugins)),
    }


def profile(pid: int, plugins: Sequence[Plugin]) -> dict[str, Any]:
    """Where our daemon's prepare spends its time: py-spy samples it through one
    more 1-device and concurrent row (not timed: sampling takes CPU)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "prepare.txt"
        with pyspy.recording(pid, out):
            sequential_row(plugins, 1)
            concurrent_row(plugins)
        return {
            **pyspy.prepare_profile([out]),
            "rows": ["1_device", f"{CONCURRENT}_concurrent_claims"],
        }


def measure(go_binary: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, ControlPlane.running(Path(tmp) / "cp") as plane:
        with (
            published_rack(plane) as rack,
            published_rack(plane, site=GO_SITE, items=[]) as go_rack,
            short_tmpdir() as workdir,
            go_plugin(go_binary, plane.kubeconfig, GO_SITE.nodes[0]) as go_kubelet,
        ):
            wait_for("the Go plugin's ResourceSlice", lambda: go_slice_published(go_rack.api))
            plane.kubectl("apply", "-f", str(HEALTH_CRD))  # the daemon reports node health
            daemon = DefaultsDaemon(workdir, plane.kubeconfig).start()
            try:
                our_kubelet = daemon.kubelet(NODES[0])
                assert our_kubelet.plugin is not None and go_kubelet.plugin is not None
                assert daemon.proc is not None
                with (
                    pluginclient.channel(our_kubelet.plugin.endpoint) as ours_ch,
                    pluginclient.channel(go_kubelet.plugin.endpoint) as go_ch,
                ):
                    single_core = f'device.attributes["{DRIVER}"].coreCount == 1'
                    plugins = [
                        Plugin(
                            "ours",
                            ours_ch,
                            our_kubelet.plugin.version,
                            rack,
                            our_kubelet,
                            NODES[0],
                            single_core,
                        ),
                        Plugin(
                            "go",
                            go_ch,
                            go_kubelet.plugin.version,
                            go_rack,
                            go_kubelet,
                            GO_SITE.nodes[0],
                            "",
                        ),
                    ]
                    for plugin in plugins:
                        plugin.empty()  # connect before timing
                    repetitions = [repetition(plugins) for _ in range(REPEATS)]
                    prepare_profile = profile(daemon.proc.pid, plugins)
            finally:
                daemon.stop()
        memory = memory_per_node(plane.kubeconfig)
    return {
        "go_plugin": {
            "module": "sigs.k8s.io/dra-example-driver",
            "version": go_binary.parent.name.removeprefix("dra-example-driver-"),
            "devices": GO_DEVICES,
            "kube_api_qps": GO_QPS,
            "kube_api_burst": GO_QPS,
        },
        "rounds": {"sequential": ROUNDS, "concurrent": CONCURRENT_ROUNDS},
        "concurrency": CONCURRENT,
        "repetitions": repetitions,
        "profile": prepare_profile,
        "memory": memory,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks.node")
    add_noisy_flag(parser)
    args = parser.parse_args(argv)
    binary = os.environ.get(GO_PLUGIN_ENV)
    if not binary:
        raise SystemExit(
            f"{GO_PLUGIN_ENV}: set it to the Go reference plugin's binary "
            "(`make bench-node` builds it with hack/build-dra-example-driver.sh)"
        )
    conditions = Conditions.begin(args.noisy)
    print(write_results("node", COMMAND, measure(Path(binary)), conditions))


if __name__ == "__main__":
    main()
