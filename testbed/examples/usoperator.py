"""deploy/examples/aws-ultraserver/'s operator cases on a cluster of the AWS
profile with the simulated UltraServer operator: allocation, the template
pinning pods to the workload's nodes, cascade deletion, bad input, and each
failure strategy against the fault kinds of `FAULTS`: a chip failed or its
NeuronLinks down through the simulator's fault plane, the node daemon
stopped, the Node NotReady. Each failure check prints the seconds from the
fault to the NeuronUltraServer going Degraded, to the workload's nodes
re-allocated, and to every pod Running again."""

import datetime
import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from kubernetes import client

from driver.devicemodel.awsprofile import WORKLOAD_ID_ATTRIBUTE, WORKLOAD_ID_LABEL
from driver.jsontypes import JSON
from driver.usoperator.names import GROUP, VERSION
from testbed import waiting
from testbed.examples.target import Target
from testbed.localcluster import Cluster, device_attributes, wait_for

OPERATOR_RACKS = ("--profile=aws", "--racks=2", "--generation=trn3-gen1")
"""Two Trn3 Gen1 UltraServers of four trn3.48xlarge nodes each."""
OPERATOR_CLUSTER = (*OPERATOR_RACKS, "--without-lws")
"""The operator's examples alone: they need no LeaderWorkerSet."""
DRIVER = "neuron.aws.com"
EXAMPLE = "aws-ultraserver/{}.yaml"
CHIP_FAULT = "ecc-uncorrected-hbm"
WAIT = 120.0
NOOP_SETTLE = 1.0
"""Seconds a NoOp check waits after the report before it looks at the pods:
a failed chip's taint evicts its pod within one (docs/reliability.md)."""
TIMED_POLL = 0.05
"""Seconds between polls of a timed step: its figure is this coarse."""


def workload(cluster: Cluster, namespace: str, name: str) -> JSON:
    found: JSON = client.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
        GROUP, VERSION, namespace, "neuronultraserverworkloads", name
    )
    return found


def status_of(cluster: Cluster, namespace: str, name: str) -> JSON:
    return workload(cluster, namespace, name).get("status") or {}


def ultraservers(cluster: Cluster) -> list[JSON]:
    found = client.CustomObjectsApi(cluster.api).list_cluster_custom_object(
        GROUP, VERSION, "neuronultraservers"
    )
    items: list[JSON] = found["items"]
    return items


def allocated(cluster: Cluster, namespace: str, name: str) -> JSON:
    def probe() -> JSON | None:
        status = status_of(cluster, namespace, name)
        return status if status.get("state") == "Allocated" else None

    return wait_for(f"workload {namespace}/{name} Allocated", probe, WAIT)


def running_pods(
    cluster: Cluster,
    namespace: str,
    count: int,
    nodes: set[str] | Callable[[], set[str]],
    interval: float = 0.5,
) -> list[JSON]:
    """`count` Running pods of the namespace, on `nodes` and nowhere else
    (read anew at each look when a callable: a workload's nodes as they are)."""

    def probe() -> list[JSON] | None:
        pods = client.CoreV1Api(cluster.api).list_namespaced_pod(namespace).items
        live = [cluster.api.sanitize_for_serialization(p) for p in pods]
        live = [p for p in live if not p["metadata"].get("deletionTimestamp")]
        running = [p for p in live if p["status"].get("phase") == "Running"]
        on = {p["spec"]["nodeName"] for p in running}
        want = nodes() if callable(nodes) else nodes
        return running if len(running) == count == len(live) and on == want else None

    try:
        where = "the nodes it holds" if callable(nodes) else sorted(nodes)
        what = f"{count} pods of {namespace} Running on {where}"
        return waiting.wait_for(what, probe, WAIT, interval)
    except AssertionError as err:
        raise AssertionError(f"{err}\n{story(cluster, namespace)}") from None


def story(cluster: Cluster, namespace: str) -> str:
    """Each pod's phase and node, and the namespace's events, for a wait in vain."""
    core = client.CoreV1Api(cluster.api)
    lines = [f"pods of {namespace}:"]
    for pod in core.list_namespaced_pod(namespace).items:
        gone = " terminating" if pod.metadata.deletion_timestamp else ""
        lines.append(f"  {pod.metadata.name}: {pod.status.phase}{gone} on {pod.spec.node_name}")
    for e in sorted(
        core.list_namespaced_event(namespace).items,
        key=lambda e: str(e.last_timestamp or e.event_time),
    ):
        lines.append(f"  {e.involved_object.kind}/{e.involved_object.name} {e.reason}: {e.message}")
    return "\n".join(lines)


def tagged(cluster: Cluster) -> dict[str, str]:
    """node -> the workloadId its devices carry."""
    return {
        pool: str(attrs[WORKLOAD_ID_ATTRIBUTE]["string"])
        for (pool, _), attrs in device_attributes(cluster.api, DRIVER).items()
        if WORKLOAD_ID_ATTRIBUTE in attrs
    }


@contextmanager
def applied(target: Target, name: str) -> Iterator[None]:
    target.apply(EXAMPLE.format(name))
    try:
        yield
    finally:
        target.delete(EXAMPLE.format(name))


def test_a_workload_gets_one_pair_and_its_pods_land_on_it(target: Target) -> None:
    cluster, ns = target.cluster, "aws-us-training"
    with applied(target, "workload"):
        status = allocated(cluster, ns, "training")
        nodes = set(status["nodes"])
        assert status["workloadId"] == f"{ns}.training" and len(nodes) == 2
        [us] = status["allocatedUltraServers"]
        pods = running_pods(cluster, ns, 2, nodes)
        for pod in pods:
            claim = target.claim_of(pod)
            assert claim["metadata"]["labels"][WORKLOAD_ID_LABEL] == f"{ns}.training"
            [result] = claim["status"]["allocation"]["devices"]["results"]
            assert (result["pool"], result["device"]) == (pod["spec"]["nodeName"], "neuronnode")
            env = target.seen(pod)
            assert env["NEURON_RT_ULTRASERVER_MODE"] == "2"
        assert tagged(cluster) == {n: f"{ns}.training" for n in nodes}
        [record] = [u for u in ultraservers(cluster) if u["metadata"]["name"] == us]
        assert record["status"]["state"] == "PartiallyAllocated"
        assert record["status"]["allocations"] == [
            {"workload": f"{ns}/training", "workloadId": f"{ns}.training", "nodes": sorted(nodes)}
        ]
        reasons = {e["reason"] for e in cluster.events(ns, "training")}
        assert "Allocated" in reasons
    wait_for("the workload's tags gone", lambda: not tagged(cluster), WAIT)
    assert all(not (u["status"].get("allocations")) for u in ultraservers(cluster))


def test_two_ultraservers_each_pod_with_its_nodes_efas(target: Target) -> None:
    cluster, ns = target.cluster, "aws-us-two-ultraservers"
    with applied(target, "two-ultraservers"):
        status = allocated(cluster, ns, "two-ultraservers")
        assert len(status["allocatedUltraServers"]) == 2 and status["totalNodesAllocated"] == 4
        pods = running_pods(cluster, ns, 4, set(status["nodes"]))
        for pod in pods:
            names = [c["name"] for c in pod["spec"]["resourceClaims"]]
            assert names == ["neuron-claim", "efa-claim"]
            statuses = {
                s["name"]: s["resourceClaimName"] for s in pod["status"]["resourceClaimStatuses"]
            }
            efa = client.ResourceV1Api(cluster.api).read_namespaced_resource_claim(
                statuses["efa-claim"], ns
            )
            results = efa.status.allocation.devices.results
            assert {r.pool for r in results} == {pod["spec"]["nodeName"]}
            assert all(r.device.startswith("efa") for r in results) and len(results) == 16


def test_deleting_a_workload_releases_its_nodes_template_and_pods(target: Target) -> None:
    """The workload alone deleted (its Deployment stays): its tags go, its
    template and pods are deleted; pods the Deployment makes again wait."""
    cluster, ns = target.cluster, "aws-us-training"
    with applied(target, "workload"):
        nodes = set(allocated(cluster, ns, "training")["nodes"])
        pods = {p["metadata"]["name"] for p in running_pods(cluster, ns, 2, nodes)}
        done = target.cluster.kubectl(
            "delete",
            "neuronultraserverworkload",
            "training",
            "-n",
            ns,
            "--timeout=120s",
            check=False,
        )
        assert done.returncode == 0, done.stderr
        wait_for("the workload's tags gone", lambda: not tagged(cluster), WAIT)
        resource = client.ResourceV1Api(cluster.api)
        assert not resource.list_namespaced_resource_claim_template(ns).items
        wait_for("its pods gone", lambda: not pods & set(_pod_names(cluster, ns)), WAIT)
        assert not _running_names(cluster, ns), "no pod of the Deployment runs without it"
        assert all(not u["status"].get("allocations") for u in ultraservers(cluster))


def test_bad_workloads_are_refused_at_create_with_the_field(target: Target) -> None:
    base = (
        "apiVersion: neuron.aws.com/v1\nkind: NeuronUltraServerWorkload\nmetadata:\n"
        "  name: bad\n  namespace: default\nspec:\n  instanceType: trn3.48xlarge\n"
    )
    cases = {
        "  topologySize: 3\n  serverCount: 1\n": "spec.topologySize",
        "  topologySize: 2\n  serverCount: 0\n": "spec.serverCount",
        "  topologySize: 2\n  serverCount: 1\n  allocationPolicy:\n    failureStrategy: Pray\n": (
            "spec.allocationPolicy.failureStrategy"
        ),
    }
    for spec, field in cases.items():
        result = target.cluster.kubectl("apply", "-f", "-", check=False, stdin=base + spec)
        assert result.returncode != 0 and field in result.stderr, result.stderr
    gone = target.cluster.kubectl(
        "get", "neuronultraserverworkloads", "-A", "-o", "name", check=False
    )
    assert "bad" not in gone.stdout


def test_a_workload_no_cluster_can_hold_fails_and_holds_nothing(target: Target) -> None:
    cluster = target.cluster
    text = (
        "apiVersion: neuron.aws.com/v1\nkind: NeuronUltraServerWorkload\nmetadata:\n"
        "  name: too-big\n  namespace: default\nspec:\n  instanceType: trn3.48xlarge\n"
        "  topologySize: 4\n  serverCount: 3\n"
    )
    assert target.cluster.kubectl("apply", "-f", "-", check=False, stdin=text).returncode == 0
    try:
        status = wait_for(
            "too-big Failed",
            lambda: (s := status_of(cluster, "default", "too-big")).get("state") == "Failed" and s,
            WAIT,
        )
        assert status["message"].startswith("spec.serverCount: 3 UltraServers of trn3.48xlarge")
        assert status["nodes"] == [] and not tagged(cluster)
        templates = client.ResourceV1Api(cluster.api).list_namespaced_resource_claim_template(
            "default"
        )
        assert not templates.items
    finally:
        target.cluster.delete_manifest("the refused workload", text)


def test_a_claim_not_of_the_workload_is_refused_at_prepare(target: Target) -> None:
    """A hand-written claim can select a device the workload holds (here with the
    workload's own pods scaled away, so its chips are free to the scheduler);
    the node daemon refuses to prepare it, and the pod says why."""
    cluster, ns = target.cluster, "aws-us-training"
    workload_id = f"{ns}.training"
    with applied(target, "workload"):
        allocated(cluster, ns, "training")
        cluster.kubectl("-n", ns, "scale", "deployment/training", "--replicas=0")
        wait_for("the workload's pods gone", lambda: not _pod_names(cluster, ns), WAIT)
        attrs = "device.attributes['neuron.aws.com']"
        intruder = f"""apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: intruder
  namespace: {ns}
spec:
  devices:
    requests:
      - name: neurons
        exactly:
          deviceClassName: neuron.aws.com
          selectors:
            - cel:
                expression: >-
                  {attrs}.resourceType == 'neuron_device' && 'workloadId' in {attrs} &&
                  {attrs}.workloadId == '{workload_id}'
---
apiVersion: v1
kind: Pod
metadata:
  name: intruder
  namespace: {ns}
spec:
  containers:
    - name: main
      image: localhost/trainium-dra/driver:dev
      args: [workload]
      resources:
        claims: [{{name: neurons}}]
  resourceClaims:
    - name: neurons
      resourceClaimName: intruder
"""
        applied_intruder = target.cluster.kubectl("apply", "-f", "-", check=False, stdin=intruder)
        assert applied_intruder.returncode == 0, applied_intruder.stderr

        def warned() -> list[JSON] | None:
            events = cluster.events(ns, "intruder")
            found = [e for e in events if e["reason"] == "FailedPrepareDynamicResources"]
            return found or None

        try:
            [warning, *_] = wait_for("the workload refusal in the pod's events", warned, WAIT)
            assert workload_id in warning["message"], warning["message"]
            assert "neuron.aws.com/workload-id" in warning["message"]
            pod = cluster.pod(ns, "intruder")
            assert pod is not None and pod["status"]["phase"] == "Pending"
        finally:
            target.cluster.delete_manifest("the intruder", intruder)


Clear = Callable[[], None]


@dataclass(frozen=True)
class Fault:
    """One fault kind: `inject(target, node)` puts it on the node and returns
    what takes it away again."""

    kind: str
    inject: Callable[[Target, str], Clear]
    what: str
    """What the fault is, for a page."""


def _sim_fault(kind: str) -> Callable[[Target, str], Clear]:
    def inject(target: Target, node: str) -> Clear:
        fault = {"node": node, "chip": 0, "kind": kind}
        sim = target.sim_control(node)
        sim.post("/sim/v1/faults", json=fault).raise_for_status()

        def clear() -> None:
            sim.request("DELETE", "/sim/v1/faults", json=fault)
            sim.close()

        return clear

    return inject


def _stop_daemon(target: Target, node: str) -> Clear:
    """SIGSTOP the daemon serving `node`: it stops renewing its heartbeat and
    answering the kubelet, and nothing restarts it while the check looks
    (a SIGKILLed one the kubelet or the stand-in restarts within seconds);
    SIGCONT brings it back."""
    assert target.daemon_pids is not None, "this target cannot reach its node daemons"
    pids = target.daemon_pids(node)
    assert pids, f"no node daemon process for {node}"
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)

    def clear() -> None:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)

    return clear


def _not_ready(target: Target, node: str) -> Clear:
    """The Node's Ready condition Unknown, as the node lifecycle controller
    writes it when a kubelet stops posting status (the stand-in has no such
    controller and no kubelet posting, so it stays until cleared)."""
    core = client.CoreV1Api(target.cluster.api)

    def ready(status: str, reason: str, message: str) -> None:
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        condition = {
            "type": "Ready",
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }
        core.patch_node_status(node, {"status": {"conditions": [condition]}})

    ready("Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
    return lambda: ready("True", "KubeletReady", "simulated node")


CHIP = Fault("chip", _sim_fault(CHIP_FAULT), f"chip 0 failed (`{CHIP_FAULT}`)")
LINK_DOWN = Fault("link-down", _sim_fault("link-down"), "chip 0's NeuronLinks down (`link-down`)")
DAEMON_STOPPED = Fault("daemon-stopped", _stop_daemon, "its node daemon stopped (SIGSTOP)")
NOT_READY = Fault("not-ready", _not_ready, "its Node's Ready condition Unknown")
FAULTS = {f.kind: f for f in (CHIP, LINK_DOWN, DAEMON_STOPPED, NOT_READY)}


def standin_daemon_pids(cluster: Cluster) -> Callable[[str], list[int]]:
    """The stand-in's rack daemon of a node, from the cluster's record."""

    def pids(node: str) -> list[int]:
        record = json.loads(cluster.paths.cluster_file.read_text())
        return [int(record["pids"][f"node-{node.rsplit('-node-', 1)[0]}"])]

    return pids


def _pod_names(cluster: Cluster, ns: str) -> dict[str, str]:
    pods = client.CoreV1Api(cluster.api).list_namespaced_pod(ns).items
    return {p.metadata.name: p.spec.node_name for p in pods if not p.metadata.deletion_timestamp}


@dataclass(frozen=True)
class FailureRun:
    """One workload's fault and what its strategy did about it."""

    before: JSON
    """The workload's status before the fault."""
    after: JSON
    """Its status once its pods run on the nodes it holds; under NoOp, once
    the operator reported."""
    pods_before: dict[str, str]
    """pod -> node before the fault."""
    pods_after: dict[str, str]
    """Running pod -> node once every pod runs again; under NoOp, the pods
    Running a second after the operator reported."""
    seconds: dict[str, float | None]
    """From the fault to `degraded` (its NeuronUltraServer Degraded, naming the
    failed node), `acted` (the workload's reason names the strategy's act) and
    `running` (every pod Running again; None where the failed node's pod stays
    Pending: NoOp)."""
    claims_made: int
    """Claims of the workload's namespace made after the fault."""
    degraded: str
    """The NeuronUltraServer's status message once Degraded: which node, and why."""


def fail_a_node(target: Target, file: str, name: str, fault: Fault = CHIP) -> FailureRun:
    """Apply the example (namespace `aws-us-<name>`), wait for its two pods, put
    `fault` on the workload's first node, wait for the operator to act and the
    pods to run again (under NoOp: a second for the pods to settle), clear the
    fault, then remove the example."""
    cluster, ns = target.cluster, f"aws-us-{name}"
    with applied(target, file):
        before = allocated(cluster, ns, name)
        running_pods(cluster, ns, 2, set(before["nodes"]))
        pods_before = _pod_names(cluster, ns)
        claims_before = _claim_names(cluster, ns)
        victim = sorted(before["nodes"])[0]
        [us] = before["allocatedUltraServers"]
        started = time.monotonic()
        clear = fault.inject(target, victim)
        try:

            def degraded() -> str | None:
                """The message once it names the victim: on the stand-in one
                daemon renews every node's Lease in turn, so a stopped daemon's
                nodes may go silent a moment apart, the victim not first."""
                return next(
                    (
                        str(u["status"].get("message"))
                        for u in ultraservers(cluster)
                        if u["metadata"]["name"] == us
                        and u["status"].get("health") == "Degraded"
                        and f"{victim}:" in str(u["status"].get("message"))
                    ),
                    None,
                )

            why = waiting.wait_for(f"{us} Degraded, naming {victim}", degraded, WAIT, TIMED_POLL)
            to_degraded = time.monotonic() - started

            def acted() -> JSON | None:
                s = status_of(cluster, ns, name)
                return s if s.get("reason") in ("Restarted", "Migrated", "Degraded") else None

            try:
                after = waiting.wait_for(f"{name} acted on the failure", acted, WAIT, TIMED_POLL)
            except AssertionError as err:
                raise AssertionError(f"{err}; status {status_of(cluster, ns, name)}") from None
            to_acted = time.monotonic() - started
            if victim not in after["nodes"]:
                # The nodes it holds once its pods run there: another move may follow the first.
                pods = running_pods(
                    cluster, ns, 2, lambda: set(status_of(cluster, ns, name)["nodes"]), TIMED_POLL
                )
                to_running: float | None = time.monotonic() - started
                placed = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}
                after = status_of(cluster, ns, name)
            else:
                time.sleep(NOOP_SETTLE)
                to_running, placed = None, _running_names(cluster, ns)
            claims = len(_claim_names(cluster, ns) - claims_before)
        finally:
            clear()
    seconds = {"degraded": to_degraded, "acted": to_acted, "running": to_running}
    print(f"{name} ({fault.kind}): seconds from the fault: {seconds}")
    return FailureRun(before, after, pods_before, placed, seconds, claims, why)


def _running_names(cluster: Cluster, ns: str) -> dict[str, str]:
    pods = client.CoreV1Api(cluster.api).list_namespaced_pod(ns).items
    return {
        p.metadata.name: p.spec.node_name
        for p in pods
        if p.status.phase == "Running" and not p.metadata.deletion_timestamp
    }


def _claim_names(cluster: Cluster, ns: str) -> set[str]:
    claims = client.ResourceV1Api(cluster.api).list_namespaced_resource_claim(ns).items
    return {c.metadata.name for c in claims}


def check_noop(run: FailureRun, problem: str) -> None:
    victim = sorted(run.before["nodes"])[0]
    assert run.after["state"] == "Allocated" and run.after["reason"] == "Degraded"
    assert run.after["nodes"] == run.before["nodes"] and run.seconds["running"] is None
    assert f"{victim}: {problem}" in run.degraded, run.degraded
    assert f"{victim}: {problem}" in run.after["message"], run.after["message"]


def check_restarted(run: FailureRun, problem: str) -> None:
    victim = sorted(run.before["nodes"])[0]
    assert run.after["reason"] == "Restarted" and run.after["state"] == "Allocated"
    assert victim not in run.after["nodes"] and f"{victim}: {problem}" in run.degraded
    assert not set(run.pods_after) & set(run.pods_before), "every pod was replaced"
    assert run.after["lastFailure"]["reallocatedAt"] and run.claims_made == 2


def check_migrated(run: FailureRun, problem: str) -> None:
    """The failed nodes replaced; exactly the pods on them moved."""
    victim = sorted(run.before["nodes"])[0]
    assert run.after["reason"] == "Migrated" and run.after["state"] == "Allocated"
    assert victim not in run.after["nodes"] and f"{victim}: {problem}" in run.degraded
    kept = set(run.before["nodes"]) & set(run.after["nodes"])
    stayed = {name for name, node in run.pods_before.items() if node in kept}
    assert stayed <= set(run.pods_after), "the pods on healthy held nodes stayed"
    moved = set(run.pods_after) - set(run.pods_before)
    assert len(moved) == len(run.pods_before) - len(stayed) == run.claims_made


CHIP_PROBLEM = "device neurondevice0 tainted neuron.aws.com/unhealthy=failed"
LINK_PROBLEM = "device neurondevice0 tainted neuron.aws.com/unhealthy=degraded"
DAEMON_PROBLEM = "node daemon silent since"
NOT_READY_PROBLEM = "node NotReady (Ready Unknown, NodeStatusUnknown)"


def test_noop_reports_the_failure_and_moves_nothing(target: Target) -> None:
    check_noop(fail_a_node(target, "workload", "training"), CHIP_PROBLEM)


def test_restart_all_starts_every_pod_anew_on_healthy_nodes(target: Target) -> None:
    check_restarted(fail_a_node(target, "restart-all", "restart-all"), CHIP_PROBLEM)


def test_migrate_affected_moves_only_the_pod_of_the_failed_node(target: Target) -> None:
    run = fail_a_node(target, "migrate-affected", "migrate-affected")
    check_migrated(run, CHIP_PROBLEM)
    assert run.claims_made == 1, "exactly one pod moved"


def test_noop_reports_a_link_down_and_keeps_every_pod_running(target: Target) -> None:
    """A chip whose links are down is tainted NoSchedule: nothing is evicted."""
    run = fail_a_node(target, "workload", "training", LINK_DOWN)
    check_noop(run, LINK_PROBLEM)
    assert run.pods_after == run.pods_before, "no pod stopped or moved"


def test_restart_all_on_a_stopped_node_daemon(target: Target) -> None:
    check_restarted(
        fail_a_node(target, "restart-all", "restart-all", DAEMON_STOPPED), DAEMON_PROBLEM
    )


def test_migrate_affected_on_a_stopped_node_daemon(target: Target) -> None:
    """Under real kubelets a node's own daemon stops and one pod moves. On the
    stand-in one daemon serves a whole rack, so every node of the UltraServer
    goes silent and the pair moves whole; as that daemon renewed the nodes'
    Leases in turn, they go silent a moment apart, and the operator may move
    in more than one step (a pod placed on a node that falls silent next
    moves again): a claim per move, never fewer than the pods."""
    run = fail_a_node(target, "migrate-affected", "migrate-affected", DAEMON_STOPPED)
    if target.containers_run:
        check_migrated(run, DAEMON_PROBLEM)
        assert run.claims_made == 1
        return
    victim = sorted(run.before["nodes"])[0]
    assert run.after["reason"] == "Migrated" and run.after["state"] == "Allocated"
    assert victim not in run.after["nodes"] and f"{victim}: {DAEMON_PROBLEM}" in run.degraded
    assert not set(run.pods_after) & set(run.pods_before), "the pair moved whole"
    assert run.claims_made >= len(run.pods_before)


def test_restart_all_on_a_not_ready_node(target: Target) -> None:
    check_restarted(fail_a_node(target, "restart-all", "restart-all", NOT_READY), NOT_READY_PROBLEM)


def test_migrate_affected_on_a_not_ready_node(target: Target) -> None:
    run = fail_a_node(target, "migrate-affected", "migrate-affected", NOT_READY)
    check_migrated(run, NOT_READY_PROBLEM)
    assert run.claims_made == 1
