"""The node daemon against claims the real scheduler allocated, through the kubelet stand-in."""

import json
import stat
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from driver import claimendpoint, container
from driver.claimendpoint import ClaimEndpoint
from driver.kubeletplugin import pluginclient, protocol
from driver.node import cdi
from driver.node.devices import device_attributes
from driver.node.durable.checkpoint import Checkpoint
from localsim.controlplane.plane import ControlPlane
from localsim.standin.kubelet import KubeletError, container_edits
from simdevice.topology import CoreRange
from testbed.controlplane import write_allocated
from testbed.daemon import HEALTH_TIMEOUT, Daemon, short_tmpdir
from testbed.fleetfill import node_selector
from testbed.healthcache import HealthCache
from testbed.rack import DRIVER, NAMESPACE, NODES, RACK, RACK_ID, Rack, published_rack, slices
from testbed.waiting import Deadline, wait_for

pytestmark = pytest.mark.integration

NEURON = {"apiVersion": "trainium.sim.dev/v1alpha1", "kind": "NeuronConfig"}
ATTRS = device_attributes(slices(), DRIVER)
HEALTH_CRD = (
    Path(__file__).resolve().parents[2]
    / "charts/trainium-dra/crds/nodedevicehealths.trainium.sim.dev.yaml"
)


def attr(name: str) -> str:
    return f'device.attributes["{DRIVER}"].{name}'


@pytest.fixture(scope="module")
def rack(control_plane: ControlPlane) -> Iterator[Rack]:
    with published_rack(control_plane) as published:
        yield published


@pytest.fixture(scope="module")
def daemon(
    control_plane: ControlPlane, rack: Rack, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Daemon]:
    with short_tmpdir() as workdir:
        running = Daemon(workdir, control_plane.kubeconfig).start()
        yield running
        assert running.stop() == 0
        for node in NODES:  # SIGTERM removed every socket
            paths = running.paths(node)
            sockets = (paths.registration_socket, paths.dra_socket, paths.workload_socket)
            assert not any(path.exists() for path in sockets)


def expected_cores(device: str, lnc: int) -> list[int]:
    a = ATTRS[("plugintest-rack", device)]
    core_range = CoreRange(int(a["chipIndex"]), int(a["coreStart"]), int(a["coreCount"]))
    return core_range.visible_cores(lnc, RACK.chip.cores)


def prepare_pod(daemon: Daemon, rack: Rack, pod_name: str) -> tuple[str, dict[str, Any], Any]:
    pod = rack.bound_pod(pod_name)
    node = pod["spec"]["nodeName"]
    kubelet = daemon.kubelet(node)
    refs = kubelet.pod_claims(rack.objects, pod)
    prepared = kubelet.prepare(refs)
    return node, pod, (kubelet, refs, prepared)


def metric(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        found = dict(
            part.split("=", 1) for part in line[len(name) + 1 : line.index("}")].split(",")
        )
        if all(found.get(k) == f'"{v}"' for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no sample {name}{labels}")


def test_sockets_registration_and_probes(daemon: Daemon) -> None:
    for node in NODES:
        paths = daemon.paths(node)
        assert stat.S_IMODE(paths.dra_socket.stat().st_mode) == 0o660
        assert stat.S_IMODE(paths.registration_socket.stat().st_mode) == 0o660
        assert stat.S_IMODE(paths.plugin_dir.stat().st_mode) == 0o750
        assert stat.S_IMODE(paths.state_dir.stat().st_mode) == 0o750
    assert daemon.http("GET", "/healthz").status_code == 200
    assert daemon.http("GET", "/readyz").status_code == 503  # nobody registered yet
    plugins = [daemon.kubelet(node).plugin for node in NODES]
    assert [p.version if p else "" for p in plugins] == ["v1", "v1"]
    for plugin, node in zip(plugins, NODES, strict=True):
        assert plugin is not None and plugin.endpoint == daemon.paths(node).dra_socket
    ready = daemon.http("GET", "/readyz")
    assert ready.status_code == 200, ready.text
    assert set(ready.json()) == set(NODES)
    described = daemon.sim("GET", "/sim/v1/nodes").json()
    assert [(d["name"], d["serverIndex"], d["registered"]) for d in described] == [
        (node, i, True) for i, node in enumerate(NODES)
    ]
    for d in described:  # the optional TCP listener serves the same API
        spec = httpx.get(f"http://127.0.0.1:{d['workloadTcpPort']}/openapi.json").json()
        assert d["name"] in spec["info"]["title"]


def test_prepare_run_and_unprepare_a_core_partition(daemon: Daemon, rack: Rack) -> None:
    rack.create_claim(
        "part", selector=f"{attr('coreCount')} == 2", config={**NEURON, "logicalNeuronCore": 1}
    )
    rack.create_pod("part-pod", "part")
    node, _, (kubelet, refs, prepared) = prepare_pod(daemon, rack, "part-pod")
    paths = daemon.paths(node)
    (uid,) = prepared
    (device,) = prepared[uid].devices
    cores = expected_cores(device["device_name"], 1)
    edits = container_edits(paths.cdi_dir, device["cdi_device_ids"])
    assert edits.env["NEURON_RT_VISIBLE_CORES"] == ",".join(map(str, cores))
    assert edits.env["NEURON_LOGICAL_NC_CONFIG"] == "1"
    mounts = {m["containerPath"]: Path(m["hostPath"]) for m in edits.mounts}
    token = mounts[edits.env["TRAINIUM_DRA_TOKEN_FILE"]].read_text()
    socket_path = cdi.host_path(edits.mounts, edits.env["TRAINIUM_DRA_WORKLOAD_SOCKET"])
    assert socket_path == paths.workload_socket
    assert kubelet.prepare(refs).keys() == {uid}  # idempotent

    api = httpx.Client(transport=httpx.HTTPTransport(uds=str(socket_path)), base_url="http://node")
    auth = {"Authorization": f"Bearer {token}"}
    assert api.get(f"/v1/claims/{uid}/jobs").status_code == 401
    assert (
        api.get(f"/v1/claims/{uid}/jobs", headers={"Authorization": "Bearer x"}).status_code == 403
    )
    outside = [c for c in range(RACK.chip.cores * RACK.chips_per_server) if c not in cores][:1]
    gemm = {"kind": "gemm", "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16", "iterations": 20000}
    refused = api.post(
        f"/v1/claims/{uid}/jobs", headers=auth, json={"workload": gemm, "cores": outside}
    )
    assert refused.status_code == 403 and "cores" in refused.json()["detail"]
    job = api.post(f"/v1/claims/{uid}/jobs", headers=auth, json={"workload": gemm})
    assert job.status_code == 201, job.text
    assert api.get("/openapi.json").json()["info"]["title"].startswith("trainium-dra workload API")

    def busy() -> dict[int, float] | None:
        text = daemon.http("GET", "/metrics").text
        values = {
            c: metric(text, "neuroncore_utilization_ratio", node=node, neuroncore=str(c))
            for c in range(RACK.chip.cores * RACK.chips_per_server)
        }
        return values if all(values[c] > 0.05 for c in cores) else None

    values = wait_for("utilization on the claim's cores", busy, timeout=20)
    assert {c for c, v in values.items() if v > 0} == set(cores)
    text = daemon.http("GET", "/metrics").text
    labels = {"node": node, "neuroncore": str(cores[0]), "engine": "tensor"}
    assert metric(text, "neuroncore_engine_utilization_ratio", **labels) > 0
    cancelled = api.delete(f"/v1/claims/{uid}/jobs/{job.json()['id']}", headers=auth)
    assert cancelled.json()["state"] == "cancelled"

    kubelet.unprepare(refs)
    assert list(paths.cdi_dir.iterdir()) == []
    assert not paths.token_file(uid).exists()
    assert Checkpoint(paths.checkpoint).claims == {}
    assert api.get(f"/v1/claims/{uid}/jobs", headers=auth).status_code == 404
    metrics = daemon.http("GET", "/metrics").text
    assert metric(metrics, "trainium_dra_node_prepared_claims", node=node) == 0
    assert metric(metrics, "trainium_dra_node_requests_total", node=node, operation="prepare") >= 2
    rack.delete_claim("part", "part-pod")


def test_a_plan_longer_than_a_request_starts_one_job(
    daemon: Daemon,
    rack: Rack,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A busy node can plan a large job for longer than one request waits (a rack
    of real nodes planning at once did): the container retries its start, and the
    daemon still runs the job once."""
    rack.create_claim("slowplan", selector=f"{attr('coreCount')} == 8")
    rack.create_pod("slowplan-pod", "slowplan")
    node, _, (kubelet, refs, prepared) = prepare_pod(daemon, rack, "slowplan-pod")
    (uid,) = prepared
    edits = container_edits(daemon.paths(node).cdi_dir, prepared[uid].devices[0]["cdi_device_ids"])
    mounts = {m["containerPath"]: Path(m["hostPath"]) for m in edits.mounts}
    endpoint = ClaimEndpoint(
        uid,
        daemon.paths(node).workload_socket,
        mounts[edits.env["TRAINIUM_DRA_TOKEN_FILE"]].read_text().strip(),
    )
    # a shape no other test plans: its first plan takes a few tenths of a second
    # of CPU, many times the request's 20 ms
    spec = {"kind": "train-step", "hidden": 8192, "seq": 8192, "layers": 3, "iterations": 10**6}
    monkeypatch.setattr(claimendpoint, "TIMEOUT", 0.02)
    job_id = container.once_up(lambda: endpoint.start(spec), wait=120)
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("=", 1)[0] for line in lines] == ["waiting_for_api"], lines
    assert "timed out" in lines[0]
    monkeypatch.setattr(claimendpoint, "TIMEOUT", 30.0)
    jobs = endpoint.jobs()
    assert [(j["id"], j["state"]) for j in jobs] == [(job_id, "running")]
    kubelet.unprepare(refs)
    rack.delete_claim("slowplan", "slowplan-pod")


def test_ultraserver_claim_is_prepared_on_every_node(daemon: Daemon, rack: Rack) -> None:
    rack.create_claim("whole", selector=f'{attr("resourceType")} == "ultraserver"')
    for i, node in enumerate(NODES):
        rack.create_pod(f"whole-{i}", "whole", node=node)
    for i, node in enumerate(NODES):
        pod = rack.bound_pod(f"whole-{i}")
        assert pod["spec"]["nodeName"] == node
        kubelet = daemon.kubelet(node)
        edits = kubelet.start_pod(rack.objects, pod, daemon.paths(node).cdi_dir)["main"]
        # no UltraServer object: the Trainium3 default LNC=1, every core its own id
        assert edits.env["NEURON_LOGICAL_NC_CONFIG"] == "1"
        assert edits.env["NEURON_RT_VISIBLE_CORES"] == ",".join(
            map(str, range(RACK.chips_per_server * RACK.chip.cores))
        )
        assert edits.env["TRAINIUM_DRA_SERVER_INDEX"] == str(i)
        kubelet.stop_pod(rack.objects, pod)
        assert list(daemon.paths(node).cdi_dir.iterdir()) == []
    rack.delete_claim("whole", *(f"whole-{i}" for i in range(len(NODES))))


def test_bad_config_is_refused_and_nothing_is_written(daemon: Daemon, rack: Rack) -> None:
    rack.create_claim(
        "badlnc", selector=f"{attr('coreCount')} == 2", config={**NEURON, "logicalNeuronCore": 4}
    )
    rack.create_pod("badlnc-pod", "badlnc")
    pod = rack.bound_pod("badlnc-pod")
    node = pod["spec"]["nodeName"]
    kubelet = daemon.kubelet(node)
    with pytest.raises(
        KubeletError, match=r"status.allocation.devices.config: logicalNeuronCore=4"
    ):
        kubelet.prepare(kubelet.pod_claims(rack.objects, pod))
    paths = daemon.paths(node)
    assert list(paths.cdi_dir.iterdir()) == []
    assert Checkpoint(paths.checkpoint).claims == {}
    rack.delete_claim("badlnc", "badlnc-pod")


def test_32_single_core_devices(daemon: Daemon, rack: Rack) -> None:
    rack.create_claim("many", count=32, selector=f"{attr('coreCount')} == 1")
    rack.create_pod("many-pod", "many")
    node, _, (kubelet, refs, prepared) = prepare_pod(daemon, rack, "many-pod")
    (uid,) = prepared
    assert len(prepared[uid].devices) == 32
    ids = prepared[uid].devices[0]["cdi_device_ids"]
    edits = container_edits(daemon.paths(node).cdi_dir, ids)
    assert edits.env["NEURON_RT_VISIBLE_CORES"] == ",".join(map(str, range(32)))
    assert kubelet.plugin is not None
    with pluginclient.channel(kubelet.plugin.endpoint) as ch:
        beta = pluginclient.node_prepare(ch, refs, 30.0, version="v1beta1").claims[uid]
    assert beta.error == ""
    assert sorted(d.device_name for d in beta.devices) == sorted(
        d["device_name"] for d in prepared[uid].devices
    )
    kubelet.unprepare(refs)
    rack.delete_claim("many", "many-pod")


def test_fault_reaches_health_stream_and_report_and_clears(
    daemon: Daemon, rack: Rack, control_plane: ControlPlane
) -> None:
    control_plane.kubectl("apply", "-f", str(HEALTH_CRD))
    rack.create_claim("sick", selector=f'{attr("resourceType")} == "chip"')
    rack.create_pod("sick-pod", "sick")
    node, _, (kubelet, refs, prepared) = prepare_pod(daemon, rack, "sick-pod")
    (uid,) = prepared
    device = prepared[uid].devices[0]["device_name"]
    chip = int(ATTRS[("plugintest-rack", device)]["chipIndex"])
    stream = kubelet.watch_health()
    health = protocol.health
    fault = {"node": node, "kind": "ecc-uncorrected-hbm", "chip": chip}

    def wait_state(want: int, within: float) -> None:
        """Read the stream until the device shows `want`. The stream resends
        every second (HEALTH_TIMEOUT / 3), and what it sent while the test did
        other things waits in the channel: the first update read may be older."""
        deadline = Deadline(within)
        for update in stream:
            states = {d.device.device_name: d.health for d in update.devices}
            if states.get(device) == want:
                return
            if deadline.passed():
                raise AssertionError(
                    f"{device}: health {states.get(device)}, not {want}, {deadline}"
                )
        raise AssertionError("health stream ended")

    def reported(state: str) -> bool:
        out = control_plane.kubectl("get", "nodedevicehealths", node, "-o", "json").stdout
        entries = json.loads(out)["spec"].get("devices") or []
        return (
            any(e["chip"] == chip and e["state"] == state for e in entries)
            if state
            else not entries
        )

    try:
        wait_state(health.HEALTHY, within=5)
        assert daemon.sim("POST", "/sim/v1/faults", json=fault).status_code == 200
        wait_state(health.UNHEALTHY, within=5)
        wait_for("failed chip in NodeDeviceHealth", lambda: reported("failed"), timeout=10)
        text = daemon.http("GET", "/metrics").text
        chip_labels = {"node": node, "chip": str(chip)}
        assert metric(text, "neuron_device_health_state", **chip_labels) == 2
        ecc = metric(
            text, "hardware_ecc_events_total", **chip_labels, event_type="mem_ecc_uncorrected"
        )
        assert ecc == 1
        assert daemon.sim("DELETE", "/sim/v1/faults", json=fault).status_code == 200
        wait_state(health.HEALTHY, within=5)
        wait_for("recovery in NodeDeviceHealth", lambda: reported(""), timeout=10)
    finally:
        # A failure above must not leave the chip failed or the claim prepared
        # for the module's next tests.
        daemon.sim("DELETE", "/sim/v1/faults", json=fault)
        stream.cancel()
        kubelet.unprepare(refs)
        rack.delete_claim("sick", "sick-pod")
        for n in NODES:
            control_plane.kubectl("delete", "nodedevicehealths", n, "--ignore-not-found")


def test_the_health_stream_resends_within_the_kubelets_timeout(daemon: Daemon, rack: Rack) -> None:
    """Without changes the full list comes again before the kubelet would call
    the devices Unknown (its timeout is the one the stream reports)."""
    rack.create_claim("resend", selector=f"{attr('coreCount')} == 1")
    rack.create_pod("resend-pod", "resend", node=NODES[0])
    _, _, (kubelet, refs, _) = prepare_pod(daemon, rack, "resend-pod")
    stream = kubelet.watch_health()
    cache = HealthCache()
    # The stream lists prepared devices only: the one above, from the next health check on.
    first = next(update for update in stream if update.devices)
    cache.ingest(first.devices, time.monotonic())
    device = first.devices[0].device
    assert first.devices[0].health_check_timeout_seconds == HEALTH_TIMEOUT
    deadline = time.monotonic() + 3 * HEALTH_TIMEOUT
    states = []
    for update in stream:
        now = time.monotonic()
        states.append(cache.state(device.pool_name, device.device_name, now))
        cache.ingest(update.devices, now)
        if now > deadline:
            break
    stream.cancel()
    kubelet.unprepare(refs)
    rack.delete_claim("resend", "resend-pod")
    assert len(states) >= 3
    assert set(states) == {"Healthy"}, "a device went stale between two updates"


def test_concurrent_prepares_hand_out_each_core_once(daemon: Daemon, rack: Rack) -> None:
    names = ("conc-a", "conc-b")
    for name in names:
        rack.create_claim(name, count=4, selector=f"{attr('coreCount')} == 1")
        rack.create_pod(f"{name}-pod", name, node=NODES[0])
    kubelet = daemon.kubelet(NODES[0])
    refs = [
        ref
        for name in names
        for ref in kubelet.pod_claims(rack.objects, rack.bound_pod(f"{name}-pod"))
    ]
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(
            pool.map(lambda i: kubelet.prepare(refs[i % 2 :] + refs[: i % 2]), range(16))
        )
    assert all(answer == answers[0] for answer in answers)
    claims = Checkpoint(daemon.paths(NODES[0]).checkpoint).claims
    assert set(claims) == {uid for _, uid, _ in refs}
    a, b = (claims[uid].physical_cores() for _, uid, _ in refs)
    assert len(a) == len(b) == 4 and not a & b
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda _: kubelet.unprepare(refs), range(8)))
    assert Checkpoint(daemon.paths(NODES[0]).checkpoint).claims == {}
    assert list(daemon.paths(NODES[0]).cdi_dir.iterdir()) == []
    for name in names:
        rack.delete_claim(name, f"{name}-pod")


def test_a_repeated_prepare_leaves_the_claims_files_alone(daemon: Daemon, rack: Rack) -> None:
    """The kubelet prepares a prepared claim again after a restart or a retry:
    the answer comes from the record, the files a container may have mounted
    keep their inode and mtime, and only a missing or damaged file is written."""
    rack.create_claim("again", selector=f"{attr('coreCount')} == 2")
    rack.create_pod("again-pod", "again", node=NODES[0])
    node, _, (kubelet, refs, prepared) = prepare_pod(daemon, rack, "again-pod")
    paths = daemon.paths(node)
    (uid,) = prepared
    token, spec = paths.token_file(uid), cdi.spec_path(paths.cdi_dir, DRIVER, uid)
    watched = (token, spec, paths.checkpoint, Checkpoint(paths.checkpoint).journal)

    def stamps() -> list[tuple[int, int, int]]:
        return [(p.stat().st_ino, p.stat().st_mtime_ns, p.stat().st_size) for p in watched]

    before = stamps()
    contents = token.read_bytes(), spec.read_bytes()
    record = Checkpoint(paths.checkpoint).claims[uid]
    time.sleep(0.05)  # a rewrite would show in mtime_ns even on a coarse clock
    for _ in range(3):
        assert kubelet.prepare(refs) == prepared
        assert stamps() == before
    assert Checkpoint(paths.checkpoint).claims[uid] == record  # same nonce, no write

    token.unlink()
    spec.write_bytes(b"{}")
    again = kubelet.prepare(refs)
    assert again == prepared
    assert (token.read_bytes(), spec.read_bytes()) == contents
    assert Checkpoint(paths.checkpoint).claims[uid] == record
    edits = container_edits(paths.cdi_dir, again[uid].devices[0]["cdi_device_ids"])
    mounted = {m["containerPath"]: Path(m["hostPath"]) for m in edits.mounts}
    assert mounted[edits.env["TRAINIUM_DRA_TOKEN_FILE"]] == token
    kubelet.unprepare(refs)
    rack.delete_claim("again", "again-pod")


def forged_claim(name: str, device: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A claim of `device` on the first node and the allocation written for it
    by hand, as no scheduler would: the backstop's input."""
    request = {"deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": 1}
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"devices": {"requests": [{"name": "req", "exactly": request}]}},
    }
    result = {"request": "req", "driver": DRIVER, "pool": RACK_ID, "device": device}
    status = {
        "allocation": {"devices": {"results": [result]}, "nodeSelector": node_selector(NODES[0])}
    }
    return claim, status


def test_a_double_allocation_is_refused_and_nothing_of_it_is_prepared(
    daemon: Daemon, rack: Rack
) -> None:
    """Two claims allocated overlapping devices (a chip, then a core in it),
    written straight to the apiserver: the chip's claim prepares, the core's is
    refused through the real DRA socket, naming both, with no file, no record."""
    write_allocated(
        rack.api,
        [forged_claim("forged-chip", "s0-chip0"), forged_claim("forged-core", "s0-c0-cores2-1")],
    )
    kubelet = daemon.kubelet(NODES[0])
    paths = daemon.paths(NODES[0])
    chip, core = (rack.claim(name) for name in ("forged-chip", "forged-core"))
    chip_ref = (NAMESPACE, chip["metadata"]["uid"], "forged-chip")
    core_ref = (NAMESPACE, core["metadata"]["uid"], "forged-core")
    assert set(kubelet.prepare([chip_ref])) == {chip_ref[1]}
    before = sorted(p.name for p in paths.cdi_dir.iterdir())
    for refs in ([core_ref], [core_ref, chip_ref]):
        with pytest.raises(KubeletError) as refused:
            kubelet.prepare(refs)
        message = str(refused.value)
        assert f"device {RACK_ID}/s0-c0-cores2-1 of claim {NAMESPACE}/forged-core" in message
        assert f"device {RACK_ID}/s0-chip0 of claim {NAMESPACE}/forged-chip" in message
        assert "chip 0 core 2" in message and "forged-chip:" not in message
        assert sorted(p.name for p in paths.cdi_dir.iterdir()) == before
        assert set(Checkpoint(paths.checkpoint).claims) == {chip_ref[1]}
        assert not paths.token_file(core_ref[1]).exists()
    kubelet.unprepare([chip_ref])
    assert set(kubelet.prepare([core_ref])) == {core_ref[1]}  # once the chip is given back
    kubelet.unprepare([core_ref])
    assert list(paths.cdi_dir.iterdir()) == []
    rack.delete_claim("forged-chip")
    rack.delete_claim("forged-core")
