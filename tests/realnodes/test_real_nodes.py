"""End to end on real nodes: real kubelets and containerd, the chart installed
with Helm, the driver image running as pods, workload containers that see
what CDI injected. The kubelet is the client of our plugin here."""

import base64
import functools
import subprocess

import httpx
import pytest
from kubernetes import client

from driver.jsontypes import JSON
from localsim.controlplane.children import trainium_dra_argv
from testbed.chaos.realkubelet import kill_during_burst, steady_pods
from testbed.localcluster import wait_for
from testbed.realnodes import (
    DRIVER,
    NAMESPACE,
    RealCluster,
    claim_template,
    host_state,
    namespace,
    workload_pod,
)

pytestmark = pytest.mark.integration

NODE0 = "rack-a-node-0"
NODE1 = "rack-a-node-1"
NODE2 = "rack-a-node-2"


def claim_uid(real: RealCluster, pod: JSON) -> str:
    uid: str = real.cluster.claim_of(pod)["metadata"]["uid"]
    return uid


def slices(real: RealCluster) -> dict[str, str]:
    items = client.ResourceV1Api(real.api).list_resource_slice(
        field_selector=f"spec.driver={DRIVER}"
    )
    return {s.metadata.name: s.metadata.uid for s in items.items}


def connected(real: RealCluster, node: str, times: int) -> bool:
    """The kubelet's log says it chose our v1 service at least `times` times."""
    return real.kubelet_log(node).count('chosenService="v1.DRAPlugin"') >= times


def test_the_daemon_pods_register_with_every_real_kubelet(real: RealCluster) -> None:
    for node in real.nodes:
        pod = real.daemon_pod(node)
        assert pod["status"]["phase"] == "Running"
        wait_for(
            f"the kubelet of {node} to connect to the plugin",
            functools.partial(connected, real, node, 1),
        )
        assert DRIVER in real.kubelet_log(node)
        registry = real.nodes[node].dir("kubelet") / "plugins_registry"
        assert any(p.name.startswith(DRIVER) for p in registry.iterdir())


CLAIMS = {
    "one-core": ("core.trainium.sim.dev", f'device.attributes["{DRIVER}"].coreCount == 1', None, 1),
    "lnc2": ("core.trainium.sim.dev", f'device.attributes["{DRIVER}"].coreCount == 4', 2, 2),
    "chip": ("chip.trainium.sim.dev", None, None, 8),
    "server": ("server.trainium.sim.dev", None, None, 8 * 16),
}
"""name -> (DeviceClass, CEL, LNC, logical cores the container sees)."""


def device_status(real: RealCluster, pod: JSON) -> JSON | None:
    """The claim's one status.devices entry, once the controller wrote it."""
    entries = real.cluster.claim_of(pod)["status"].get("devices") or []
    return entries[0] if entries else None


def test_claims_reach_real_containers_through_cdi(real: RealCluster) -> None:
    ns = "real-claims"
    real.apply(namespace(ns))
    for name, (device_class, cel, lnc, _) in CLAIMS.items():
        real.apply(claim_template(ns, name, device_class, cel, lnc), workload_pod(ns, name, name))
    seen: dict[str, set[tuple[str, int]]] = {}
    for name, (_, _, lnc, logical) in CLAIMS.items():
        pod = real.running(ns, name)
        lines = real.wait_logs(ns, name, "claim_devices")
        cores = [int(c) for c in lines["NEURON_RT_VISIBLE_CORES"].split(",")]
        assert len(cores) == logical, (name, lines)
        assert lines["NEURON_LOGICAL_NC_CONFIG"] == str(lnc or 1)
        assert lines["claim_cores"] == lines["NEURON_RT_VISIBLE_CORES"]
        assert lines["TRAINIUM_DRA_CLAIM_UID"] == claim_uid(real, pod)
        node = pod["spec"]["nodeName"]
        assert real.cdi_spec(node, claim_uid(real, pod)).exists()
        # The fabric the controller wrote into the claim is what the container sees.
        status = wait_for("the claim's device status", functools.partial(device_status, real, pod))
        assert lines["TRAINIUM_DRA_RING"] == ",".join(map(str, status["data"]["ring"]))
        assert lines["TRAINIUM_DRA_FABRIC_IPS"] == ",".join(status["networkData"]["ips"])
        seen[name] = {(node, c) for c in cores}
    names = list(seen)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not seen[a] & seen[b], f"{a} and {b} share cores"
    other = claim_uid(real, real.running(ns, "chip"))
    real.apply(workload_pod(ns, "probe", "one-core", ("--probe-claim", other)))
    real.running(ns, "probe")
    probe = real.wait_logs(ns, "probe", "other_claim")
    assert probe["other_claim"].startswith("refused"), probe
    # The whole-server claim would leave its node no chip for the tests below.
    real.kubectl("delete", "namespace", ns, "--wait", "--timeout=180s")


def test_deleting_the_pod_makes_the_kubelet_unprepare(real: RealCluster) -> None:
    ns = "real-unprepare"
    real.apply(namespace(ns), claim_template(ns, "chip", "chip.trainium.sim.dev"))
    real.apply(workload_pod(ns, "train", "chip"))
    pod = real.running(ns, "train")
    node, uid = pod["spec"]["nodeName"], claim_uid(real, pod)
    assert uid in real.checkpoint_claims(node)
    spec = real.cdi_spec(node, uid)
    assert spec.exists()
    real.kubectl("-n", ns, "delete", "pod", "train", "--wait", "--timeout=120s")
    wait_for(f"CDI spec {spec.name} removed", lambda: not spec.exists())
    wait_for("checkpoint entry removed", lambda: uid not in real.checkpoint_claims(node))


def test_a_kubelet_restart_keeps_pods_and_prepares_nothing_twice(real: RealCluster) -> None:
    ns = "real-kubelet-restart"
    real.apply(namespace(ns), claim_template(ns, "chip", "chip.trainium.sim.dev"))
    real.apply(workload_pod(ns, "train", "chip", node=NODE1))
    before = real.running(ns, "train")
    started = before["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
    uid = claim_uid(real, before)
    published = slices(real)
    prepared_before = real.kubelet_log(NODE1).count("NodePrepareResources")
    real.kill(NODE1, "kubelet --config")
    wait_for(
        "the kubelet to come back and connect to the plugin again",
        functools.partial(connected, real, NODE1, 2),
        timeout=180,
    )
    after = real.running(ns, "train")
    status = after["status"]["containerStatuses"][0]
    assert status["restartCount"] == 0
    assert status["state"]["running"]["startedAt"] == started
    assert uid in real.checkpoint_claims(NODE1)
    assert slices(real) == published, "the kubelet deleted or replaced ResourceSlices"
    del prepared_before


def test_a_rolling_update_of_the_daemonset_leaves_running_pods_alone(real: RealCluster) -> None:
    ns = "real-rollout"
    real.apply(namespace(ns), claim_template(ns, "chip", "chip.trainium.sim.dev"))
    real.apply(workload_pod(ns, "before", "chip", node=NODE0))
    before = real.running(ns, "before")
    started = before["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
    old = {p["metadata"]["uid"] for p in real.daemon_pods()}
    real.kubectl("-n", NAMESPACE, "rollout", "restart", "daemonset/trainium-dra-node")
    real.kubectl(
        "-n", NAMESPACE, "rollout", "status", "daemonset/trainium-dra-node", "--timeout=300s"
    )

    def replaced() -> bool:
        pods = real.daemon_pods()
        uids = {p["metadata"]["uid"] for p in pods}
        ready = [p for p in pods if p["status"].get("phase") == "Running"]
        return not old & uids and len(ready) == len(real.nodes)

    wait_for("every old daemon pod gone and a new one Running on each node", replaced)
    pod = real.running(ns, "before")
    assert pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"] == started
    real.apply(workload_pod(ns, "after", "chip", node=NODE0))
    real.running(ns, "after")
    assert real.wait_logs(ns, "after", "workload_api")["workload_api"] == "reachable"


def test_a_daemon_killed_during_prepares_recovers_without_leaks(real: RealCluster) -> None:
    """Six pods at once; the daemon SIGKILLed once the first claim is recorded.
    A pod started before keeps its workload API (the new daemon's socket)."""
    steady_pods(real, NODE0, "real-daemon-kill-steady", 1)
    trial = kill_during_burst(real, NODE0, "real-daemon-kill", pods=6)
    assert trial.recorded_at_kill >= 1
    assert trial.counts() == dict.fromkeys(trial.counts(), 0), trial


def inject(real: RealCluster, node: str, fault: JSON) -> httpx.Response:
    """POST a fault to the daemon pod's simulator controls, with the chart's token."""
    secret = client.CoreV1Api(real.cluster.api).read_namespaced_secret(
        "trainium-dra-node-sim-control", "trainium-dra"
    )
    token = base64.b64decode(secret.data["token"]).decode()
    daemon_ip = real.daemon_pod(node)["status"]["podIP"]
    return httpx.post(
        f"http://{daemon_ip}:8082/sim/v1/faults",
        json=fault,
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )


def inject_fault(real: RealCluster, node: str, pod: JSON) -> str:
    """Fail the chip of `pod`'s claim through the daemon's simulator API; returns the device."""
    results = real.cluster.claim_of(pod)["status"]["allocation"]["devices"]["results"]
    device: str = results[0]["device"]
    chip = int(device.rsplit("chip", 1)[1])
    response = inject(real, node, {"node": node, "chip": chip, "kind": "ecc-uncorrected-hbm"})
    assert response.status_code < 300, response.text
    return device


def device_health(pod: JSON | None) -> list[tuple[str, str]]:
    """(health, message) of each resource in the pod's allocatedResourcesStatus."""
    return [
        (resource.get("health", ""), resource.get("message", ""))
        for status in ((pod or {}).get("status") or {}).get("containerStatuses") or []
        for entry in status.get("allocatedResourcesStatus") or []
        for resource in entry.get("resources") or []
    ]


def test_an_injected_chip_fault_reaches_the_pod_status_and_evicts(real: RealCluster) -> None:
    ns = "real-fault"
    tolerant = claim_template(ns, "tolerant", "chip.trainium.sim.dev")
    tolerant["spec"]["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = [
        {"key": f"{DRIVER}/unhealthy", "operator": "Exists", "effect": "NoExecute"}
    ]
    real.apply(namespace(ns), tolerant, claim_template(ns, "chip", "chip.trainium.sim.dev"))
    real.apply(workload_pod(ns, "survivor", "tolerant", node=NODE1))
    real.apply(workload_pod(ns, "victim", "chip", node=NODE1))
    survivor = real.running(ns, "survivor")
    victim = real.running(ns, "victim")

    device = inject_fault(real, NODE1, survivor)
    chip = int(device.rsplit("chip", 1)[1])
    health = wait_for(
        f"{device} Unhealthy in the survivor's allocatedResourcesStatus",
        lambda: [h for h in device_health(real.cluster.pod(ns, "survivor")) if h[0] == "Unhealthy"],
        timeout=120,
    )
    assert health == [("Unhealthy", f"chip {chip} failed: uncorrected HBM ECC error")]
    assert real.cluster.pod(ns, "survivor") is not None, "a tolerating pod was evicted"

    container = victim["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
    assert container in real.containerd_tasks(NODE1)
    inject_fault(real, NODE1, victim)
    wait_for("the victim evicted", lambda: real.cluster.pod(ns, "victim") is None, timeout=180)
    wait_for(
        "the victim's container stopped by the kubelet",
        lambda: container not in real.containerd_tasks(NODE1),
    )


def healthy_only(real: RealCluster, ns: str, name: str) -> bool:
    return [h for h, _ in device_health(real.cluster.pod(ns, name))] == ["Healthy"]


def test_a_failed_core_marks_only_the_partition_over_it(real: RealCluster) -> None:
    """Per-core health through the real kubelet: an SRAM error on core 6 makes
    the partition of cores 4-7 Unhealthy and leaves cores 0-3 of the chip Healthy."""
    ns = "real-core-fault"
    on_chip = f'device.attributes["{DRIVER}"].chipIndex == 3'
    templates = {
        "low": f'{on_chip} && device.attributes["{DRIVER}"].coreStart == 0',
        "high": f'{on_chip} && device.attributes["{DRIVER}"].coreStart == 4',
    }
    real.apply(namespace(ns))
    for name, cel in templates.items():
        four = f'{cel} && device.attributes["{DRIVER}"].coreCount == 4'
        template = claim_template(ns, name, "core.trainium.sim.dev", four)
        # The failed core taints its devices NoExecute; "high" stays to be looked at.
        template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = [
            {"key": f"{DRIVER}/unhealthy", "operator": "Exists", "effect": "NoExecute"}
        ]
        real.apply(template, workload_pod(ns, name, name, node=NODE2))
    high = real.running(ns, "high")
    real.running(ns, "low")
    for name in templates:
        wait_for(
            f"{name} Healthy in its allocatedResourcesStatus",
            functools.partial(healthy_only, real, ns, name),
        )
    [result] = real.cluster.claim_of(high)["status"]["allocation"]["devices"]["results"]
    assert result["device"].endswith("-chip03-cores4-7"), result
    response = inject(
        real, NODE2, {"node": NODE2, "chip": 3, "core": 6, "kind": "ecc-uncorrected-sram"}
    )
    assert response.status_code < 300, response.text
    health = wait_for(
        "cores 4-7 Unhealthy in the pod's allocatedResourcesStatus",
        lambda: [h for h in device_health(real.cluster.pod(ns, "high")) if h[0] == "Unhealthy"],
        timeout=120,
    )
    assert health == [("Unhealthy", "chip 3 core 6 failed: uncorrected SRAM ECC error (core 6)")]
    assert healthy_only(real, ns, "low")
    real.kubectl("delete", "namespace", ns, "--wait=false")


def test_down_leaves_nothing_behind(real: RealCluster, host_before: dict[str, str]) -> None:
    """Last of the package (conftest.py orders it): `trainium-dra down` with
    pods running removes every trace."""
    paths = real.cluster.paths
    result = subprocess.run(
        trainium_dra_argv(["down", f"--state-dir={paths.root}"]),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert host_state() == host_before
    assert not paths.root.exists()
