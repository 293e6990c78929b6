"""A whole Trn3 Gen2 UltraServer on real kubelets (`make bench-realrack`, root;
not part of the tests): 36 real nodes, each a kubelet, containerd and
kube-proxy in network and mount namespaces of its own, with the chart
installed by Helm. Recorded, in order:
- the start-up, until every node is Ready and the chart's pods run;
- every node's memory and CPU while idle, and the host's memory in use;
- the whole-rack gang example (deploy/examples/whole-rack): one claim of the
  whole rack shared by a 36-pod Indexed Job, until all 36 pods run and each
  has started its job on its node's daemon;
- a fill: pods of one single-core claim each, created a batch at a time, until
  every core of the rack is held, the host's available memory falls below a
  floor or a time budget is spent; the pods run the sandbox (pause) image, so
  what each costs is the pod itself, its claim and its prepare, not a
  workload's interpreter;
- the kubelets' own prepare and unprepare figures over the gang and over the
  fill, each with its deletion.
"""

import argparse
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, TypeVar

import urllib3
from kubernetes import client

from benchmarks import realnodes
from benchmarks.kubelet_histograms import summary_ms
from benchmarks.report import Conditions, add_noisy_flag, make_command, write_results
from driver.jsontypes import JSON
from localsim.images import pause_image
from localsim.realnodes import cgroups
from simdevice.topology import rack_spec
from testbed.localcluster import running_cluster
from testbed.realnodes import DRIVER, RealCluster, claim_template, namespace, real_cluster

COMMAND: Final = "make bench-realrack"
GENERATION: Final = "trn3-gen2"
ROOT: Final = Path(__file__).resolve().parent.parent
GANG_EXAMPLE: Final = ROOT / "deploy/examples/whole-rack/whole-rack.yaml"
GANG_NAMESPACE: Final = "example-whole-rack"
GANG_JOB: Final = "rack-train"
GANG_SELECTOR: Final = f"job-name={GANG_JOB}"
FILL_NAMESPACE: Final = "bench-realrack"
FILL_SELECTOR: Final = "bench=realrack"
ONE_CORE: Final = f'device.attributes["{DRIVER}"].coreCount == 1'
BATCH: Final = 36
"""Pods created at once in the fill: one per node on average."""
MEMORY_FLOOR_MIB: Final = 2048
"""The fill stops before the host's available memory falls below this."""
FILL_SECONDS: Final = 900.0
"""The fill starts no batch after this long, so a slowing host ends the run."""
START_TIMEOUT: Final = 3600.0
WAIT_TIMEOUT: Final = 900.0
DELETE_TIMEOUT: Final = "1800s"
POLL_SECONDS: Final = 1.0
LOG_POLL_SECONDS: Final = 5.0
"""Reading 36 logs goes through every kubelet: not every second."""


def available_mib() -> float:
    """The host's MemAvailable."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("/proc/meminfo has no MemAvailable")


T = TypeVar("T")
REQUEST_TIMEOUT: Final = 120.0
"""No API call of the run may hang on an apiserver the load has starved."""
API_FAILURES: Final = (client.ApiException, urllib3.exceptions.HTTPError, OSError)
"""What a starved apiserver does to a request: a 504, a broken or timed-out
connection. The phase it hits stops, and the run writes what it measured."""


def api_failure(err: BaseException) -> str:
    if isinstance(err, client.ApiException):
        return f"{err.status} {err.reason}"
    return f"{type(err).__name__}: {err}"


def pods_of(core: client.CoreV1Api, ns: str) -> list[Any]:
    """The namespace's pods, or none if the apiserver fails to list them."""
    try:
        pods: list[Any] = core.list_namespaced_pod(ns, _request_timeout=REQUEST_TIMEOUT).items
    except API_FAILURES as err:
        progress(f"pods of {ns}: {api_failure(err)}")
        return []
    return pods


def look(poll: Callable[[], T]) -> T | None:
    """A poll's answer, or None when the apiserver fails it: while waiting, a
    failed look is a missed look, not a verdict; the wait's deadline still holds."""
    try:
        return poll()
    except API_FAILURES as err:
        progress(f"a poll failed, trying again: {api_failure(err)}")
        return None


class PodsNotRunningError(Exception):
    """Pods that will never all run: the message says why."""


def wait_running(
    core: client.CoreV1Api,
    ns: str,
    selector: str,
    count: int,
    failed: Callable[[], str | None] = lambda: None,
) -> None:
    """Until `count` pods of `ns` matching `selector` run; PodsNotRunningError names what the
    others wait for after WAIT_TIMEOUT, or what `failed` reports at once."""
    deadline = time.monotonic() + WAIT_TIMEOUT
    pods: list[Any] = []
    while True:
        listed = look(
            lambda: (
                core.list_namespaced_pod(
                    ns, label_selector=selector, _request_timeout=REQUEST_TIMEOUT
                ).items
            )
        )
        pods = pods if listed is None else listed
        running = [p for p in pods if p.status.phase == "Running"]
        if len(running) >= count:
            return
        if reason := look(failed):
            raise PodsNotRunningError(f"{len(running)} of {count} pods running: {reason}")
        if time.monotonic() > deadline:
            waiting = [p for p in pods if p.status.phase != "Running"][:3]
            reasons = [
                f"{p.metadata.name}: {p.status.phase} "
                f"{[c.message for c in p.status.conditions or [] if c.message]}"
                for p in waiting
            ]
            raise PodsNotRunningError(
                f"{len(running)} of {count} pods running after {WAIT_TIMEOUT:.0f} s; {reasons}"
            )
        time.sleep(POLL_SECONDS)


def progress(message: str) -> None:
    print(f"bench-realrack: {message}", file=sys.stderr, flush=True)


def scrape(real: RealCluster) -> dict[str, str]:
    """Each kubelet's metrics by node; one that does not answer is left out, so
    a phase's other figures survive a kubelet the load has made deaf."""
    texts = {}
    for node in real.nodes:
        try:
            texts[node] = realnodes.kubelet_metrics(real, node)
        except realnodes.KubeletScrapeError as err:
            progress(str(err))
    return texts


def prepare_figures(before: dict[str, str], after: dict[str, str]) -> dict[str, Any]:
    """The kubelets' gRPC prepare and unprepare of our driver between two
    scrapes, over the kubelets that answered both."""
    read = sorted(before.keys() & after.keys())
    seen = realnodes.difference(
        realnodes.histograms([after[n] for n in read], DRIVER),
        realnodes.histograms([before[n] for n in read], DRIVER),
    )
    return {
        "kubelets_read": len(read),
        "calls": {call: summary_ms(h) for call, h in seen["kubelet_grpc_ms"].items()},
    }


def node_memory(real: RealCluster) -> dict[str, dict[str, float]]:
    """Each node's cgroup now: everything, and the kubelet, containerd, shims and
    kube-proxy alone."""
    return {
        name: {
            "memory_mib": cgroups.memory_bytes(node.cgroup) / 2**20,
            "system_memory_mib": cgroups.memory_bytes(node.system_cgroup) / 2**20,
        }
        for name, node in real.nodes.items()
    }


def job_failed(batch: client.BatchV1Api) -> str | None:
    """The gang Job's Failed condition, once it has one."""
    job = batch.read_namespaced_job(GANG_JOB, GANG_NAMESPACE, _request_timeout=REQUEST_TIMEOUT)
    for c in job.status.conditions or []:
        if c.type == "Failed" and c.status == "True":
            return f"Job {GANG_JOB} failed: {c.reason}, {c.message}"
    return None


def container_errors(core: client.CoreV1Api) -> dict[str, int]:
    """How the gang's failed containers ended, counted: the last line each
    printed (`error=...`), or its exit reason where it printed none."""
    counts: Counter[str] = Counter()
    for pod in pods_of(core, GANG_NAMESPACE):
        if pod.status.phase != "Failed":
            continue
        try:
            log = core.read_namespaced_pod_log(
                pod.metadata.name, GANG_NAMESPACE, tail_lines=1, _request_timeout=REQUEST_TIMEOUT
            )
        except API_FAILURES:
            log = ""
        statuses = pod.status.container_statuses or []
        ended = statuses[0].state.terminated if statuses else None
        fallback = f"exit {ended.exit_code} ({ended.reason})" if ended else "no container status"
        counts[log.strip() or fallback] += 1
    return dict(counts)


def workload_logs(core: client.CoreV1Api) -> dict[str, str]:
    """Each gang pod's log so far."""
    logs = {}
    pods = core.list_namespaced_pod(
        GANG_NAMESPACE, label_selector=GANG_SELECTOR, _request_timeout=REQUEST_TIMEOUT
    ).items
    for pod in pods:
        try:
            logs[pod.metadata.name] = core.read_namespaced_pod_log(
                pod.metadata.name, GANG_NAMESPACE, _request_timeout=REQUEST_TIMEOUT
            )
        except API_FAILURES:
            logs[pod.metadata.name] = ""
    return logs


def wait_started(core: client.CoreV1Api, pods: int) -> dict[str, str]:
    """Until every gang pod's workload has its job on its node's daemon
    (`job_submitted=` in its log); PodsNotRunningError when one prints an error
    or WAIT_TIMEOUT passes. Returns the logs."""
    deadline = time.monotonic() + WAIT_TIMEOUT
    logs: dict[str, str] = {}
    while True:
        logs = look(lambda: workload_logs(core)) or logs
        failed = [
            line for log in logs.values() for line in log.splitlines() if line.startswith("error=")
        ]
        if failed:
            raise PodsNotRunningError(f"a gang workload failed: {failed[0]}")
        started = [name for name, log in logs.items() if "job_submitted=" in log]
        if len(started) >= pods:
            return logs
        if time.monotonic() > deadline:
            raise PodsNotRunningError(
                f"{len(started)} of {pods} workloads started after {WAIT_TIMEOUT:.0f} s"
            )
        time.sleep(LOG_POLL_SECONDS)


def gang(real: RealCluster, pods: int) -> dict[str, Any]:
    """The whole-rack example as a user applies it, until every pod runs, or
    what stopped it."""
    core = client.CoreV1Api(real.api)
    batch = client.BatchV1Api(real.api)
    before = scrape(real)
    started = time.monotonic()
    real.kubectl("apply", "-f", str(GANG_EXAMPLE))
    progress(f"gang: {GANG_EXAMPLE.relative_to(ROOT)} applied")
    outcome: dict[str, Any] = {"pods": pods}
    try:
        wait_running(core, GANG_NAMESPACE, GANG_SELECTOR, pods, lambda: job_failed(batch))
        outcome["create_to_all_running_s"] = time.monotonic() - started
        progress(f"gang: {pods} pods running after {outcome['create_to_all_running_s']:.0f} s")
        logs = wait_started(core, pods)
        outcome["create_to_all_started_s"] = time.monotonic() - started
        progress(f"gang: {pods} jobs started after {outcome['create_to_all_started_s']:.0f} s")
        outcome["waited_for_api"] = sum("waiting_for_api=" in log for log in logs.values())
    except PodsNotRunningError as err:
        outcome["stopped"] = str(err)
        outcome["container_errors"] = container_errors(core)
        progress(f"gang: stopped: {err}")
    nodes = {n for p in pods_of(core, GANG_NAMESPACE) if (n := p.spec.node_name)}
    delete_namespace(real, GANG_NAMESPACE)
    after = scrape(real)  # after the delete, so the unprepares count too
    return {
        **outcome,
        "nodes_used": len(nodes),
        "kubelet_grpc_ms": prepare_figures(before, after),
    }


def delete_namespace(real: RealCluster, name: str) -> None:
    """Delete `name` and wait until it is gone; a failure is shown, not raised,
    so what was measured before it is still written."""
    done = real.cluster.kubectl(
        "delete", "namespace", name, "--wait", f"--timeout={DELETE_TIMEOUT}", check=False
    )
    progress(f"namespace {name}: " + (done.stdout or done.stderr).strip())


def fill_pod(index: int, image: str) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"core-{index:04d}",
            "namespace": FILL_NAMESPACE,
            "labels": {"bench": "realrack"},
        },
        "spec": {
            "containers": [
                {
                    "name": "hold",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "resources": {"claims": [{"name": "core"}]},
                }
            ],
            "resourceClaims": [{"name": "core", "resourceClaimTemplateName": "core"}],
            "terminationGracePeriodSeconds": 0,
        },
    }


def fill(
    real: RealCluster, cores: int, batch: int, floor_mib: float, budget_s: float
) -> dict[str, Any]:
    """Single-core pods a batch at a time until the rack is full, memory is short
    or the time budget is spent."""
    core = client.CoreV1Api(real.api)
    image = pause_image().ref
    real.apply(
        namespace(FILL_NAMESPACE), claim_template(FILL_NAMESPACE, "core", "core.trainium.sim.dev")
    )
    before = scrape(real)
    available_before = available_mib()
    started = time.monotonic()
    steps: list[dict[str, float]] = []
    stopped = "every core of the rack is held"
    created = 0
    while created < cores:
        if available_mib() < floor_mib:
            stopped = f"the host's available memory fell below {floor_mib:.0f} MiB"
            break
        if time.monotonic() - started > budget_s:
            stopped = f"the fill's time budget of {budget_s:.0f} s was spent"
            break
        count = min(batch, cores - created)
        try:
            for i in range(created, created + count):
                core.create_namespaced_pod(
                    FILL_NAMESPACE, fill_pod(i, image), _request_timeout=REQUEST_TIMEOUT
                )
            wait_running(core, FILL_NAMESPACE, FILL_SELECTOR, created + count)
        except PodsNotRunningError as err:
            stopped = f"a batch did not run: {err}"
            break
        except API_FAILURES as err:
            stopped = f"the apiserver failed a request of the batch: {api_failure(err)}"
            break
        created += count
        steps.append(
            {
                "pods": created,
                "seconds": time.monotonic() - started,
                "available_mib": available_mib(),
                "load_1min": os.getloadavg()[0],
            }
        )
        progress(f"fill: {created} pods running after {steps[-1]['seconds']:.0f} s")
    progress(f"fill: stopped: {stopped}")
    memory = node_memory(real)
    deleting = time.monotonic()
    delete_namespace(real, FILL_NAMESPACE)
    after = scrape(real)  # after the delete, so the unprepares count too
    return {
        "cores": cores,
        "batch": batch,
        "memory_floor_mib": floor_mib,
        "budget_s": budget_s,
        "cpus": os.cpu_count(),
        "available_before_mib": available_before,
        "stopped": stopped,
        "steps": steps,
        "node_memory_full": memory,
        "delete_s": time.monotonic() - deleting,
        "kubelet_grpc_ms": prepare_figures(before, after),
    }


def measure(
    real: RealCluster, batch: int, floor_mib: float, fill_budget_s: float
) -> dict[str, Any]:
    rack = rack_spec(GENERATION)
    progress(f"{len(real.nodes)} nodes up; idling {realnodes.IDLE_SECONDS:.0f} s")
    idle = realnodes.node_usage(real, realnodes.IDLE_SECONDS)
    return {
        "generation": GENERATION,
        "nodes": len(real.nodes),
        "idle_seconds": realnodes.IDLE_SECONDS,
        "idle": idle,
        "available_idle_mib": available_mib(),
        "gang": gang(real, rack.servers),
        "fill": fill(real, rack.chips * rack.chip.cores, batch, floor_mib, fill_budget_s),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="benchmarks.realrack", description=__doc__)
    p.add_argument("--batch", type=int, default=BATCH, help="fill pods created at once")
    p.add_argument(
        "--memory-floor-mib",
        type=float,
        default=MEMORY_FLOOR_MIB,
        help="stop the fill before the host's available memory falls below this",
    )
    p.add_argument(
        "--fill-seconds",
        type=float,
        default=FILL_SECONDS,
        help="start no batch of the fill after this many seconds",
    )
    add_noisy_flag(p)
    args = p.parse_args(argv)
    conditions = Conditions.begin(args.noisy)
    available_before = available_mib()
    started = time.monotonic()
    with running_cluster(
        "--real-nodes", f"--generation={GENERATION}", start_timeout=START_TIMEOUT
    ) as cluster:
        results = {
            "start_s": time.monotonic() - started,
            "available_before_start_mib": available_before,
            **measure(real_cluster(cluster), args.batch, args.memory_floor_mib, args.fill_seconds),
        }
    print(write_results("realrack", make_command(COMMAND, argv), results, conditions))


if __name__ == "__main__":
    main()
