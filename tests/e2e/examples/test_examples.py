"""Every example under deploy/examples/ applied to a running local cluster
(one full Trn3 Gen2 rack, 36 nodes), checking what its README promises.

Examples run one after the other and each is deleted (namespace included)
before the next, so each starts from an empty rack. The cluster is the
package's (conftest.py), shared with test_scheduling.py.
"""

import re
import subprocess

import httpx
import pytest
from kubernetes import client

from driver.jsontypes import JSON
from driver.localsim.children import trainium_dra_argv
from driver.localsim.top import parse_metrics
from tests.e2e.cluster import EXAMPLES, Cluster, results, wait_for

pytestmark = pytest.mark.integration

CHIP = re.compile(r"^server(\d\d)-chip(\d\d)$")


def node_of(pod: dict[str, object]) -> str:
    spec = pod["spec"]
    assert isinstance(spec, dict)
    return str(spec["nodeName"])


def server_node(server: str | int) -> str:
    return f"rack-a-node-{int(server)}"


def test_single_core(cluster: Cluster) -> None:
    files = ("single-core/single-core.yaml",)
    cluster.apply(*files)
    try:
        pod = cluster.running("example-single-core", "gemm")
        claim = cluster.claim_of(pod)
        [result] = results(claim)
        match = re.fullmatch(r"server(\d\d)-chip(\d\d)-core(\d)", result["device"])
        assert match, result["device"]
        server, chip, core = (int(g) for g in match.groups())
        node = node_of(pod)
        assert node == server_node(server)
        env = cluster.cdi_env(node, claim["metadata"]["uid"])
        assert env["NEURON_RT_VISIBLE_CORES"] == str(chip * 8 + core)  # LNC 1: one id per core

        def busy_cores() -> list[int] | None:
            sample = parse_metrics(httpx.get(cluster.metrics_url()).text)
            busy = [c for c, v in sample.cores.get(node, {}).items() if v > 0]
            return busy or None

        # The workload annotation ran a GEMM on exactly the claimed core.
        assert wait_for("utilization on the claimed core", busy_cores) == [chip * 8 + core]
    finally:
        cluster.delete(*files)


def test_lnc2_partition(cluster: Cluster) -> None:
    files = ("lnc2-partition/lnc2-partition.yaml",)
    cluster.apply(*files)
    try:
        pod = cluster.running("example-lnc2-partition", "attention")
        claim = cluster.claim_of(pod)
        [result] = results(claim)
        match = re.fullmatch(r"server(\d\d)-chip(\d\d)-cores(\d)-(\d)", result["device"])
        assert match, result["device"]
        chip, first, last = int(match[2]), int(match[3]), int(match[4])
        assert last - first + 1 == 4
        env = cluster.cdi_env(node_of(pod), claim["metadata"]["uid"])
        assert env["NEURON_LOGICAL_NC_CONFIG"] == "2"
        # 4 physical cores fused in pairs: 2 logical cores, chip d owning ids 4d..4d+3.
        expected = [chip * 4 + first // 2, chip * 4 + first // 2 + 1]
        assert env["NEURON_RT_VISIBLE_CORES"] == ",".join(map(str, expected))
    finally:
        cluster.delete(*files)


def test_whole_chip(cluster: Cluster) -> None:
    files = ("whole-chip/whole-chip.yaml",)
    cluster.apply(*files)
    try:
        pod = cluster.running("example-whole-chip", "train")
        claim = cluster.claim_of(pod)
        [result] = results(claim)
        match = CHIP.fullmatch(result["device"])
        assert match, result["device"]
        assert node_of(pod) == server_node(match[1])
        env = cluster.cdi_env(node_of(pod), claim["metadata"]["uid"])
        lnc = int(env["NEURON_LOGICAL_NC_CONFIG"])
        assert len(env["NEURON_RT_VISIBLE_CORES"].split(",")) == 8 // lnc
    finally:
        cluster.delete(*files)


def test_two_chips_same_server(cluster: Cluster) -> None:
    files = ("two-chips-same-server/two-chips-same-server.yaml",)
    cluster.apply(*files)
    try:
        pod = cluster.running("example-two-chips", "all-reduce")
        devices = [r["device"] for r in results(cluster.claim_of(pod))]
        matches = [CHIP.fullmatch(d) for d in devices]
        assert len(devices) == 2 and all(matches), devices
        servers = {m[1] for m in matches if m}
        chips = {m[2] for m in matches if m}
        assert len(servers) == 1 and len(chips) == 2, devices
        assert node_of(pod) == server_node(servers.pop())
    finally:
        cluster.delete(*files)


def test_whole_server(cluster: Cluster) -> None:
    files = ("whole-server/whole-server.yaml",)
    cluster.apply(*files)
    try:
        pod = cluster.running("example-whole-server", "train")
        claim = cluster.claim_of(pod)
        [result] = results(claim)
        match = re.fullmatch(r"server(\d\d)", result["device"])
        assert match, result["device"]
        assert node_of(pod) == server_node(match[1])
        env = cluster.cdi_env(node_of(pod), claim["metadata"]["uid"])
        lnc = int(env["NEURON_LOGICAL_NC_CONFIG"])
        assert len(env["NEURON_RT_VISIBLE_CORES"].split(",")) == 32 // lnc
    finally:
        cluster.delete(*files)


def test_whole_rack_shared_by_36_pods(cluster: Cluster) -> None:
    files = ("whole-rack/whole-rack.yaml",)
    cluster.apply(*files)
    try:
        pods = cluster.job_pods("example-whole-rack", "rack-train", 36)
        nodes = {node_of(p) for p in pods}
        assert nodes == {server_node(i) for i in range(36)}
        claim = cluster.claim_of(pods[0])
        assert [r["device"] for r in results(claim)] == ["ultraserver"]
        reserved = {r["uid"] for r in claim["status"]["reservedFor"]}
        assert reserved == {p["metadata"]["uid"] for p in pods}
        for node in nodes:  # every node prepared its own 4 chips, fused by the rack config
            env = cluster.cdi_env(node, claim["metadata"]["uid"])
            assert env["NEURON_LOGICAL_NC_CONFIG"] == "2"
            assert env["NEURON_RT_VISIBLE_CORES"] == ",".join(str(i) for i in range(16))
    finally:
        cluster.delete(*files)


def test_first_available(cluster: Cluster) -> None:
    files = ("first-available/first-available.yaml",)
    cluster.apply(*files)
    try:
        pod = cluster.running("example-first-available", "gemm")
        [result] = results(cluster.claim_of(pod))
        # No Trainium2 chip in the rack: the second alternative was taken.
        assert result["request"] == "accel/trn3-chip"
        assert CHIP.fullmatch(result["device"]), result["device"]
    finally:
        cluster.delete(*files)


def test_cel_topology(cluster: Cluster) -> None:
    files = ("cel-topology/cel-topology.yaml",)
    cluster.apply(*files)
    try:
        pod = cluster.running("example-cel-topology", "gemm")
        [result] = results(cluster.claim_of(pod))
        assert re.fullmatch(r"server03-chip\d\d-cores4-7", result["device"]), result["device"]
        assert node_of(pod) == "rack-a-node-3"
    finally:
        cluster.delete(*files)


def test_admin_access(cluster: Cluster) -> None:
    files = ("admin-access/1-monitor.yaml", "admin-access/2-workload.yaml")
    cluster.apply(files[0])
    try:
        monitor = cluster.running("example-admin-access", "monitor")
        watched = results(cluster.claim_of(monitor))
        assert sorted(r["device"] for r in watched) == [f"server02-chip0{i}" for i in range(4)]
        assert all(r.get("adminAccess") for r in watched)
        cluster.apply(files[1])
        workload = cluster.running("example-admin-access", "workload")
        [result] = results(cluster.claim_of(workload))
        assert result["device"] == "server02-chip00" and not result.get("adminAccess")
        assert node_of(workload) == node_of(monitor) == "rack-a-node-2"
    finally:
        cluster.delete(*files)


def test_device_taint_toleration(cluster: Cluster) -> None:
    files = ("device-taints/1-maintenance-taint.yaml", "device-taints/2-toleration.yaml")
    cluster.apply(*files)
    try:
        pod = cluster.running("example-device-taints", "tolerated")
        [result] = results(cluster.claim_of(pod))
        assert result["device"] == "server04-chip01"
        assert node_of(pod) == "rack-a-node-4"

        def refused() -> list[str] | None:
            messages = [
                e["message"]
                for e in cluster.events("example-device-taints", "untolerated")
                if e["reason"] == "FailedScheduling"
            ]
            return messages or None

        assert "cannot allocate all claims" in wait_for("untolerated refused", refused)[0]
        untolerated = cluster.pod("example-device-taints", "untolerated")
        assert untolerated is not None and not untolerated["spec"].get("nodeName")
    finally:
        cluster.delete(*files)


def taint_rule_condition(cluster: Cluster, name: str) -> JSON | None:
    group, version = cluster.release.device_taint_rule_api.split("/")
    rule = client.CustomObjectsApi(cluster.api).get_cluster_custom_object(
        group, version, "devicetaintrules", name
    )
    conditions = (rule.get("status") or {}).get("conditions") or []
    found: JSON | None = next((c for c in conditions if c["type"] == "EvictionInProgress"), None)
    return found


def test_drain_chip(cluster: Cluster) -> None:
    """An admin's NoExecute DeviceTaintRule on one chip: the pod holding it is
    evicted and its claim unprepared, and the Job's next pod gets another chip."""
    files = ("drain-chip/1-job.yaml", "drain-chip/2-drain.yaml")
    namespace = "example-drain-chip"
    cluster.apply(files[0])
    try:
        [first] = cluster.job_pods(namespace, "train", 1)
        claim = cluster.claim_of(first)
        [result] = results(claim)
        assert result["device"] == "server06-chip02"
        spec_file = (
            cluster.paths.cdi_dir(node_of(first))
            / f"k8s.trainium.sim.dev-claim_{claim['metadata']['uid']}.json"
        )
        assert spec_file.exists()
        cluster.apply(files[1])
        wait_for(
            "the drained pod gone",
            lambda: cluster.pod(namespace, first["metadata"]["name"]) is None,
        )
        # The kubelet stand-in unprepared the claim before the pod went away.
        assert not spec_file.exists()
        [replacement] = cluster.job_pods(namespace, "train", 1)
        assert replacement["metadata"]["uid"] != first["metadata"]["uid"]
        [moved] = results(cluster.claim_of(replacement))
        assert re.fullmatch(r"server06-chip0[013]", moved["device"]), moved
        assert node_of(replacement) == "rack-a-node-6"

        def completed() -> JSON | None:
            condition = taint_rule_condition(cluster, "example-drain-server06-chip02")
            return condition if condition and condition["reason"] == "Completed" else None

        assert wait_for("the rule's eviction completed", completed)["status"] == "False"
    finally:
        cluster.delete(*files)


def test_invalid_config(cluster: Cluster) -> None:
    """Malformed: refused when created. Well formed but too big for the device:
    refused at prepare, and the pod says why."""
    refused, fits_not = "invalid-config/1-refused.yaml", "invalid-config/2-does-not-fit.yaml"
    try:
        applied = cluster.kubectl("apply", "-f", str(EXAMPLES / refused), check=False)
        assert applied.returncode != 0
        assert (
            "spec.spec.devices.config[0].opaque.parameters.logicalNeuronCore: "
            "must be one of 1, 2, 4, got 3"
        ) in applied.stderr
        cluster.apply(fits_not)
        expected = "logicalNeuronCore=2 does not fit device"

        def failed() -> dict[str, str] | None:
            pod = cluster.pod("example-invalid-config", "train")
            statuses = (pod or {}).get("status", {}).get("containerStatuses") or []
            waiting = statuses[0]["state"].get("waiting") if statuses else None
            return waiting if waiting and expected in waiting.get("message", "") else None

        waiting = wait_for("the prepare error in the pod status", failed)
        assert waiting["reason"] == "FailedPrepareDynamicResources"
        assert "status.allocation.devices.config: " in waiting["message"]
        pod = cluster.pod("example-invalid-config", "train")
        assert pod is not None and pod["status"]["phase"] == "Pending"
        events = cluster.events("example-invalid-config", "train")
        warnings = [e for e in events if e["reason"] == "FailedPrepareDynamicResources"]
        assert warnings and warnings[0]["type"] == "Warning" and expected in warnings[0]["message"]
    finally:
        cluster.delete(refused, fits_not)


def test_demo_job(cluster: Cluster) -> None:
    files = ("demo-job/demo-job.yaml",)
    cluster.apply(*files)
    try:
        pods = cluster.job_pods("demo", "trainer", 4)
        devices = [results(cluster.claim_of(p))[0]["device"] for p in pods]
        assert all(re.fullmatch(r"server\d\d", d) for d in devices) and len(set(devices)) == 4
        nodes = {node_of(p) for p in pods}

        seen: list[set[str]] = []

        def busy_nodes() -> set[str] | None:
            sample = parse_metrics(httpx.get(cluster.metrics_url()).text)
            busy = {n for n, cores in sample.cores.items() if all(v > 0 for v in cores.values())}
            seen.append(busy)
            return busy if nodes <= busy else None

        try:
            wait_for("every core of the 4 trainers' nodes busy", busy_nodes)
        except AssertionError as err:
            raise AssertionError(f"{err}; trainers on {sorted(nodes)}, busy: {seen[-1]}") from None
    finally:
        cluster.delete(*files)


def test_status_shows_allocations_and_unhealthy_devices(cluster: Cluster) -> None:
    """`trainium-dra status` on a running claim and on a chip the simulator failed."""
    files = ("whole-chip/whole-chip.yaml",)
    cluster.apply(*files)
    sim = cluster.sim_control()
    fault = {"node": "rack-a-node-7", "kind": "ecc-uncorrected-hbm", "chip": 1}
    try:
        pod = cluster.running("example-whole-chip", "train")
        claim = cluster.claim_of(pod)
        [result] = results(claim)

        def status() -> str:
            done = subprocess.run(
                trainium_dra_argv(["status", f"--state-dir={cluster.paths.root}"]),
                capture_output=True,
                text=True,
                check=True,
            )
            return done.stdout

        row = next(line for line in status().splitlines() if claim["metadata"]["name"] in line)
        assert f"rack-a/{result['device']}" in row and node_of(pod) in row and "train" in row
        sim.post("/sim/v1/faults", json=fault).raise_for_status()
        unhealthy = wait_for(
            "the failed chip in status",
            lambda: [
                line
                for line in status().split("UNHEALTHY DEVICES")[1].splitlines()
                if "server07-chip01 " in line + " "
            ],
        )
        assert "rack-a-node-7" in unhealthy[0] and "failed" in unhealthy[0]
        sim.request("DELETE", "/sim/v1/faults", json=fault).raise_for_status()
        wait_for("recovery", lambda: "(none)" in status().split("UNHEALTHY DEVICES")[1])
    finally:
        sim.request("DELETE", "/sim/v1/faults", json=fault)
        sim.close()
        cluster.delete(*files)
