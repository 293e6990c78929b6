"""Real nodes, measured by clients nobody here wrote: the kubelet's own DRA
histograms give NodePrepareResources and NodeUnprepareResources latency as the
kubelet sees them (gRPC call, and the whole prepare step including its claim
cache), for our node daemon and, side by side, for the Go reference kubelet
plugin on the same nodes; the nodes' cgroups give each node's memory and CPU.

Run as `python -m benchmarks.realnodes [--pods N] [--parallel N] [--nodes-per-rack N]
[--generation G]` (root; `make bench-realnodes`, which builds the Go plugin and passes
its path in TRAINIUM_DRA_GO_PLUGIN). Both plugins are registered on every node
throughout. Each of three rounds has a phase per plugin, the order alternating: pods
with one claim each (a whole chip of ours, a `gpu` of the Go plugin's) created a few
at a time, waited Running, deleted; the kubelet prepares and unprepares each. One more
phase of ours, untimed, runs with py-spy attached to every node's daemon process from
the host, to show where the prepare handler's time goes under real kubelets.
"""

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kubernetes import client

from benchmarks import pyspy
from benchmarks import realnodes_goref as goref
from benchmarks.kubelet_histograms import Histogram, parse_histogram, summary_ms, total
from benchmarks.plugin_metrics import scrape_pods
from benchmarks.report import REPEATS, Conditions, add_noisy_flag, write_results
from driver.jsontypes import JSON
from localsim.realnodes import cgroups
from testbed.localcluster import Cluster, running_cluster, wait_for
from testbed.realnodes import (
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
PODS = 100
"""Pods per plugin per round: 100 calls a side is the fewest whose p99 is not the max."""
PARALLEL = 4
"""Pods created at once: one per node of a Gen1 UltraServer on average."""
POD_TIMEOUT = 300.0
POLL_SECONDS = 0.05
DAEMON_COMMAND = "trainium-dra node "
"""What our node daemon's command line holds, as the host reads it."""
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


KUBELET_SCRAPE_TRIES: Final = 5
KUBELET_SCRAPE_PAUSE: Final = 5.0
KUBELET_SCRAPE_TIMEOUT: Final = "30s"
"""A collapsed host must not hold one scrape for minutes."""


class KubeletScrapeError(RuntimeError):
    """A kubelet's metrics could not be read through the apiserver, every try."""


def kubelet_metrics(real: RealCluster, node: str) -> str:
    """The kubelet's /metrics through the apiserver's node proxy; a kubelet on a
    loaded host can miss one answer, so it is asked a few times."""
    for attempt in range(KUBELET_SCRAPE_TRIES):
        done = real.cluster.kubectl(
            "get",
            "--raw",
            f"/api/v1/nodes/{node}/proxy/metrics",
            f"--request-timeout={KUBELET_SCRAPE_TIMEOUT}",
            check=False,
        )
        if done.returncode == 0:
            return done.stdout
        if attempt + 1 < KUBELET_SCRAPE_TRIES:
            time.sleep(KUBELET_SCRAPE_PAUSE)
    raise KubeletScrapeError(
        f"metrics of the kubelet of {node}, {KUBELET_SCRAPE_TRIES} tries: {done.stderr.strip()}"
    )


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


@dataclass(frozen=True)
class Side:
    """One plugin as a phase drives it: its driver name, where its own metrics
    are read, and the pods that ask for its devices."""

    driver: str
    own_pods: tuple[str, str]  # namespace, label selector
    pod: Callable[[str], JSON]
    check: PodCheck | None = None


def running_at(core: client.CoreV1Api, names: list[str], timeout: float) -> dict[str, float]:
    """When each named pod of NS was first seen Running (monotonic seconds)."""
    seen: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    while len(seen) < len(names):
        phases = {p.metadata.name: p.status.phase for p in core.list_namespaced_pod(NS).items}
        now = time.monotonic()
        for name in names:
            if name not in seen and phases.get(name) == "Running":
                seen[name] = now
        if now > deadline:
            raise RuntimeError(f"pods not Running after {timeout:.0f} s: {phases}")
        time.sleep(POLL_SECONDS)
    return seen


def run_pods(real: RealCluster, side: Side, pods: int, parallel: int, tag: str) -> list[float]:
    """Pods created `parallel` at a time, each batch waited Running, then
    deleted and waited gone; returns seconds from each create to Running.
    `side.check` looks at each Running pod (untimed)."""
    core = client.CoreV1Api(real.api)
    startup = []
    for first in range(0, pods, parallel):
        batch = [side.pod(f"{tag}-{i}") for i in range(first, min(pods, first + parallel))]
        created = {}
        for manifest in batch:
            created[manifest["metadata"]["name"]] = time.monotonic()
            real.apply(manifest)
        running = running_at(core, list(created), POD_TIMEOUT)
        startup += [running[name] - at for name, at in created.items()]
        if side.check:
            for name in created:
                side.check(real, name)
        real.kubectl("-n", NS, "delete", "pod", *created, "--wait", "--timeout=120s")
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


SIDES: dict[str, Side] = {
    "ours": Side(DRIVER, OUR_DAEMON_PODS, our_pod),
    "go": Side(
        goref.GO_DRIVER, (goref.GO_NAMESPACE, goref.POD_SELECTOR), go_pod_named, check_go_cdi
    ),
}


def scrape(real: RealCluster) -> list[str]:
    return [kubelet_metrics(real, n) for n in real.nodes]


Histograms = dict[str, dict[str, Histogram]]  # metric -> call -> histogram


def histograms(texts: list[str], driver: str) -> Histograms:
    """Per kubelet metric and call, summed over nodes: the gRPC calls of
    `driver` only; the prepare step of whole pods (the kubelet does not label
    it by driver, so only one driver's pods run in a phase)."""
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


def own_histograms(texts: list[str], plugin: str) -> dict[str, Histogram]:
    return {
        call: total(parse_histogram(t, metric, match) for t in texts)
        for call, (metric, match) in OWN_HISTOGRAMS[plugin].items()
    }


@dataclass(frozen=True)
class Phase:
    """What one plugin's phase observed: the histograms' differences and each
    pod's seconds from create to Running."""

    seen: Histograms
    startup_s: list[float]

    def summary(self) -> dict[str, Any]:
        return {**summaries(self.seen), "pod_startup_s": sorted(self.startup_s)}


def phase(real: RealCluster, name: str, pods: int, parallel: int, tag: str) -> Phase:
    """One plugin's pods, the kubelets and the plugin's own pods scraped around
    them."""
    side = SIDES[name]
    before = histograms(scrape(real), side.driver)
    before["plugin_own_ms"] = own_histograms(scrape_pods(real, *side.own_pods), name)
    startup = run_pods(real, side, pods, parallel, tag)
    after = histograms(scrape(real), side.driver)
    after["plugin_own_ms"] = own_histograms(scrape_pods(real, *side.own_pods), name)
    return Phase(difference(after, before), startup)


def difference(after: Histograms, before: Histograms) -> Histograms:
    """What was observed between two scrapes of the same series."""
    return {
        metric: {call: h - before[metric][call] for call, h in calls.items()}
        for metric, calls in after.items()
    }


def summaries(seen: Histograms) -> dict[str, dict[str, Any]]:
    return {
        metric: {call: summary_ms(h) for call, h in calls.items()} for metric, calls in seen.items()
    }


def pooled(phases: list[Phase]) -> Phase:
    """Every round's observations of one plugin as one: the quantiles of all its calls."""
    first = phases[0].seen
    return Phase(
        {
            metric: {call: total(p.seen[metric][call] for p in phases) for call in first[metric]}
            for metric in first
        },
        [s for p in phases for s in p.startup_s],
    )


def daemon_pids(real: RealCluster) -> dict[str, int]:
    """Each node's daemon process, as the host sees it: found among the
    processes of the node's cgroup by its command line."""
    found = {}
    for name, node in real.nodes.items():
        pids = real.process_pids(name, DAEMON_COMMAND)
        if len(pids) != 1:
            raise RuntimeError(
                f"node {name}: expected one `{DAEMON_COMMAND.strip()}` process in cgroup "
                f"{node.cgroup}, found {pids}"
            )
        found[name] = pids[0]
    return found


def prepare_profile(real: RealCluster, pods: int, parallel: int) -> dict[str, Any]:
    """Where our prepare handler spends its time under the real kubelets:
    py-spy samples every node's daemon through one more phase of ours."""
    pids = daemon_pids(real)
    with tempfile.TemporaryDirectory() as tmp:
        with pyspy.recordings(pids.values(), Path(tmp)) as outs:
            run_pods(real, SIDES["ours"], pods, parallel, "profile")
        return {**pyspy.prepare_profile(outs), "processes": len(pids), "pods": pods}


def measure(
    real: RealCluster, pods: int, parallel: int, go_binary: Path, rounds: int = REPEATS
) -> dict[str, Any]:
    """Rounds of one phase per plugin, the order alternating (ours first, then
    the Go plugin first, ...), with both plugins registered throughout."""
    idle = node_usage(real, IDLE_SECONDS)
    real.apply(
        namespace(NS),
        claim_template(NS, "chip", "chip.trainium.sim.dev"),
        goref.go_claim_template(NS, "gpu"),
    )
    phases: dict[str, list[Phase]] = {"ours": [], "go": []}
    orders = []
    with goref.go_plugins(real, go_binary):
        for r in range(rounds):
            order = ("ours", "go") if r % 2 == 0 else ("go", "ours")
            orders.append(list(order))
            for name in order:
                phases[name].append(phase(real, name, pods, parallel, f"r{r}"))
        profile = prepare_profile(real, pods, parallel)
    return {
        "nodes": len(real.nodes),
        "pods": pods,
        "parallel": parallel,
        "idle": idle,
        "orders": orders,
        "rounds": {name: [p.summary() for p in runs] for name, runs in phases.items()},
        "pooled": {name: pooled(runs).summary() for name, runs in phases.items()},
        "profile": profile,
        "go": {
            "module": "sigs.k8s.io/dra-example-driver",
            "version": go_binary.parent.name.removeprefix("dra-example-driver-"),
            "devices_per_node": goref.GO_DEVICES,
            "kube_api_qps": goref.GO_QPS,
        },
    }


def main() -> None:
    p = argparse.ArgumentParser(prog="benchmarks.realnodes", description=__doc__)
    p.add_argument("--pods", type=int, default=PODS, help="pods per plugin per round")
    p.add_argument("--parallel", type=int, default=PARALLEL, help="pods created at once")
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
            **measure(real_cluster(cluster), args.pods, args.parallel, Path(binary)),
        }
    defaults = vars(p.parse_args([]))
    changed = [f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items() if v != defaults[k]]
    command = "make bench-realnodes" + (f" BENCH_ARGS='{' '.join(changed)}'" if changed else "")
    print(write_results("realnodes", command, results, conditions))


if __name__ == "__main__":
    main()
