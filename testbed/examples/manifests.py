"""Every example under deploy/examples/ applied to a running cluster, checking
what its README promises. Each check takes a `target`: the stand-in rack
(tests/e2e/examples/test_examples.py) or the real-node UltraServer
(tests/realnodes/test_examples.py); both import these same functions, which
pytest collects there by their `test_` names.

Examples run one after the other and each is deleted (namespace included)
before the next, so each starts from an empty rack.
"""

import re

from kubernetes import client

from driver.jsontypes import JSON
from testbed.examples.target import BUSY, Target
from testbed.localcluster import EXAMPLES, Cluster, results, wait_for

CHIP = re.compile(r"^server(\d\d)-chip(\d\d)$")


def node_of(pod: dict[str, object]) -> str:
    spec = pod["spec"]
    assert isinstance(spec, dict)
    return str(spec["nodeName"])


def test_single_core(target: Target) -> None:
    files = ("single-core/single-core.yaml",)
    target.apply(*files)
    try:
        pod = target.cluster.running("example-single-core", "gemm")
        [result] = results(target.cluster.claim_of(pod))
        match = re.fullmatch(r"server(\d\d)-chip(\d\d)-core(\d)", result["device"])
        assert match, result["device"]
        server, chip, core = (int(g) for g in match.groups())
        node = node_of(pod)
        assert node == target.node(server)
        env = target.seen(pod)
        assert env["NEURON_RT_VISIBLE_CORES"] == str(chip * 8 + core)  # LNC 1: one id per core
        # The workload annotation ran a GEMM on exactly the claimed core.
        busy = wait_for("utilization on the claimed core", lambda: target.busy_cores(node))
        assert busy == [chip * 8 + core]
    finally:
        target.delete(*files)


def test_lnc2_partition(target: Target) -> None:
    files = ("lnc2-partition/lnc2-partition.yaml",)
    target.apply(*files)
    try:
        pod = target.cluster.running("example-lnc2-partition", "attention")
        [result] = results(target.cluster.claim_of(pod))
        match = re.fullmatch(r"server(\d\d)-chip(\d\d)-cores(\d)-(\d)", result["device"])
        assert match, result["device"]
        chip, first, last = int(match[2]), int(match[3]), int(match[4])
        assert last - first + 1 == 4
        env = target.seen(pod)
        assert env["NEURON_LOGICAL_NC_CONFIG"] == "2"
        # 4 physical cores fused in pairs: 2 logical cores, chip d owning ids 4d..4d+3.
        expected = [chip * 4 + first // 2, chip * 4 + first // 2 + 1]
        assert env["NEURON_RT_VISIBLE_CORES"] == ",".join(map(str, expected))
    finally:
        target.delete(*files)


def test_whole_chip(target: Target) -> None:
    files = ("whole-chip/whole-chip.yaml",)
    target.apply(*files)
    try:
        pod = target.cluster.running("example-whole-chip", "train")
        [result] = results(target.cluster.claim_of(pod))
        match = CHIP.fullmatch(result["device"])
        assert match, result["device"]
        assert node_of(pod) == target.node(int(match[1]))
        env = target.seen(pod)
        lnc = int(env["NEURON_LOGICAL_NC_CONFIG"])
        assert len(env["NEURON_RT_VISIBLE_CORES"].split(",")) == 8 // lnc
    finally:
        target.delete(*files)


def test_two_chips_same_server(target: Target) -> None:
    files = ("two-chips-same-server/two-chips-same-server.yaml",)
    target.apply(*files)
    try:
        pod = target.cluster.running("example-two-chips", "all-reduce")
        devices = [r["device"] for r in results(target.cluster.claim_of(pod))]
        matches = [CHIP.fullmatch(d) for d in devices]
        assert len(devices) == 2 and all(matches), devices
        servers = {m[1] for m in matches if m}
        chips = {m[2] for m in matches if m}
        assert len(servers) == 1 and len(chips) == 2, devices
        assert node_of(pod) == target.node(int(servers.pop()))
        assert len(target.seen(pod)["NEURON_RT_VISIBLE_CORES"].split(",")) == 2 * 8
    finally:
        target.delete(*files)


def test_whole_server(target: Target) -> None:
    files = ("whole-server/whole-server.yaml",)
    target.apply(*files)
    try:
        pod = target.cluster.running("example-whole-server", "train")
        [result] = results(target.cluster.claim_of(pod))
        match = re.fullmatch(r"server(\d\d)", result["device"])
        assert match, result["device"]
        assert node_of(pod) == target.node(int(match[1]))
        env = target.seen(pod)
        lnc = int(env["NEURON_LOGICAL_NC_CONFIG"])
        assert len(env["NEURON_RT_VISIBLE_CORES"].split(",")) == target.server_cores // lnc
    finally:
        target.delete(*files)


def test_whole_rack_shared_by_a_pod_per_server(target: Target) -> None:
    files = ("whole-rack/whole-rack.yaml",)
    servers = target.rack.servers
    target.apply(*files)
    try:
        pods = target.cluster.job_pods("example-whole-rack", "rack-train", servers)
        nodes = {node_of(p) for p in pods}
        assert nodes == {target.node(i) for i in range(servers)}
        claim = target.cluster.claim_of(pods[0])
        assert [r["device"] for r in results(claim)] == ["ultraserver"]
        reserved = {r["uid"] for r in claim["status"]["reservedFor"]}
        assert reserved == {p["metadata"]["uid"] for p in pods}
        fused = ",".join(str(i) for i in range(target.server_cores // 2))
        for pod in pods:  # every node prepared its own chips, fused by the rack config
            env = target.seen(pod)
            assert env["NEURON_LOGICAL_NC_CONFIG"] == "2"
            assert env["NEURON_RT_VISIBLE_CORES"] == fused
    finally:
        target.delete(*files)


def test_first_available(target: Target) -> None:
    """The first alternative no rack here has; a Trainium3 Gen2 chip on the
    rack the example is written for, else the third: four cores."""
    files = ("first-available/first-available.yaml",)
    target.apply(*files)
    try:
        pod = target.cluster.running("example-first-available", "gemm")
        [result] = results(target.cluster.claim_of(pod))
        if target.rack.generation == "trn3-gen2":
            assert result["request"] == "accel/trn3-chip"
            assert CHIP.fullmatch(result["device"]), result["device"]
        else:
            assert result["request"] == "accel/four-cores"
            assert re.fullmatch(r"server\d\d-chip\d\d-cores\d-\d", result["device"]), result
        target.seen(pod)
    finally:
        target.delete(*files)


def test_cel_topology(target: Target) -> None:
    files = ("cel-topology/cel-topology.yaml",)
    target.apply(*files)
    try:
        pod = target.cluster.running("example-cel-topology", "gemm")
        [result] = results(target.cluster.claim_of(pod))
        pattern = rf"{target.server(3)}-chip\d\d-cores4-7"
        assert re.fullmatch(pattern, result["device"]), result["device"]
        assert node_of(pod) == target.node(3)
        assert len(target.seen(pod)["NEURON_RT_VISIBLE_CORES"].split(",")) == 4
    finally:
        target.delete(*files)


def test_admin_access(target: Target) -> None:
    files = ("admin-access/1-monitor.yaml", "admin-access/2-workload.yaml")
    server = target.server(2)
    target.apply(files[0])
    try:
        monitor = target.cluster.running("example-admin-access", "monitor")
        watched = results(target.cluster.claim_of(monitor))
        chips = [f"{server}-chip{i:02d}" for i in range(target.rack.chips_per_server)]
        assert sorted(r["device"] for r in watched) == chips
        assert all(r.get("adminAccess") for r in watched)
        target.apply(files[1])
        workload = target.cluster.running("example-admin-access", "workload")
        [result] = results(target.cluster.claim_of(workload))
        assert result["device"] == f"{server}-chip00" and not result.get("adminAccess")
        assert node_of(workload) == node_of(monitor) == target.node(2)
        target.seen(workload)
    finally:
        target.delete(*files)


def test_device_taint_toleration(target: Target) -> None:
    files = ("device-taints/1-maintenance-taint.yaml", "device-taints/2-toleration.yaml")
    cluster = target.cluster
    target.apply(*files)
    try:
        pod = cluster.running("example-device-taints", "tolerated")
        [result] = results(cluster.claim_of(pod))
        assert result["device"] == f"{target.server(4)}-chip01"
        assert node_of(pod) == target.node(4)
        target.seen(pod)

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
        target.delete(*files)


def taint_rule_condition(cluster: Cluster, name: str) -> JSON | None:
    group, version = cluster.release.device_taint_rule_api.split("/")
    rule = client.CustomObjectsApi(cluster.api).get_cluster_custom_object(
        group, version, "devicetaintrules", name
    )
    conditions = (rule.get("status") or {}).get("conditions") or []
    found: JSON | None = next((c for c in conditions if c["type"] == "EvictionInProgress"), None)
    return found


def test_drain_chip(target: Target) -> None:
    """An admin's NoExecute DeviceTaintRule on one chip: the pod holding it is
    evicted and its claim unprepared, and the Job's next pod gets another chip."""
    files = ("drain-chip/1-job.yaml", "drain-chip/2-drain.yaml")
    namespace = "example-drain-chip"
    cluster = target.cluster
    server = target.server(6)
    target.apply(files[0])
    try:
        [first] = cluster.job_pods(namespace, "train", 1)
        claim = cluster.claim_of(first)
        [result] = results(claim)
        assert result["device"] == f"{server}-chip02"
        target.seen(first)
        spec_file = (
            cluster.paths.cdi_dir(node_of(first))
            / f"k8s.trainium.sim.dev-claim_{claim['metadata']['uid']}.json"
        )
        assert spec_file.exists()
        target.apply(files[1])
        wait_for(
            "the drained pod gone",
            lambda: cluster.pod(namespace, first["metadata"]["name"]) is None,
        )
        # The kubelet unprepared the claim before the pod went away.
        assert not spec_file.exists()
        [replacement] = cluster.job_pods(namespace, "train", 1)
        assert replacement["metadata"]["uid"] != first["metadata"]["uid"]
        [moved] = results(cluster.claim_of(replacement))
        others = {f"{server}-chip{i:02d}" for i in range(target.rack.chips_per_server)} - {
            result["device"]
        }
        assert moved["device"] in others, moved
        assert node_of(replacement) == target.node(6)
        target.seen(replacement)
        # The evicted pod counts as failed, never as the index's completion.
        status = client.BatchV1Api(cluster.api).read_namespaced_job("train", namespace).status
        assert (status.failed, status.succeeded or 0) == (1, 0), status

        def completed() -> JSON | None:
            condition = taint_rule_condition(cluster, "example-drain-server06-chip02")
            return condition if condition and condition["reason"] == "Completed" else None

        assert wait_for("the rule's eviction completed", completed)["status"] == "False"
    finally:
        target.delete(*files)


def test_invalid_config(target: Target) -> None:
    """Malformed: refused when created. Well formed but too big for the device:
    refused at prepare, and the pod says why."""
    refused, fits_not = "invalid-config/1-refused.yaml", "invalid-config/2-does-not-fit.yaml"
    cluster = target.cluster
    namespace = "example-invalid-config"
    try:
        applied = cluster.kubectl("apply", "-f", str(EXAMPLES / refused), check=False)
        assert applied.returncode != 0
        assert (
            "spec.spec.devices.config[0].opaque.parameters.logicalNeuronCore: "
            "must be one of 1, 2, 4, got 3"
        ) in applied.stderr
        target.apply(fits_not)
        expected = "logicalNeuronCore=2 does not fit device"

        def warned() -> list[JSON] | None:
            events = cluster.events(namespace, "train")
            found = [e for e in events if e["reason"] == "FailedPrepareDynamicResources"]
            return found if found and expected in found[0]["message"] else None

        [warning, *_] = wait_for("the prepare error in the pod's events", warned)
        assert warning["type"] == "Warning"
        assert "status.allocation.devices.config: " in warning["message"]
        pod = cluster.pod(namespace, "train")
        assert pod is not None and pod["status"]["phase"] == "Pending"
    finally:
        target.delete(refused, fits_not)


def test_demo_job(target: Target) -> None:
    files = ("demo-job/demo-job.yaml",)
    cluster = target.cluster
    target.apply(*files)
    try:
        pods = cluster.job_pods("demo", "trainer", 4)
        devices = [results(cluster.claim_of(p))[0]["device"] for p in pods]
        assert all(re.fullmatch(r"server\d\d", d) for d in devices) and len(set(devices)) == 4
        nodes = {node_of(p) for p in pods}
        for pod in pods:
            target.seen(pod)

        seen: list[set[str]] = []

        def busy_nodes() -> set[str] | None:
            sample = target.sample()
            busy = {n for n, cores in sample.cores.items() if all(v > BUSY for v in cores.values())}
            seen.append(busy)
            return busy if nodes <= busy else None

        try:
            wait_for("every core of the 4 trainers' nodes busy", busy_nodes)
        except AssertionError as err:
            raise AssertionError(f"{err}; trainers on {sorted(nodes)}, busy: {seen[-1]}") from None
    finally:
        target.delete(*files)
