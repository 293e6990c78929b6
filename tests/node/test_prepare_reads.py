"""What a prepare asks of the apiserver, seen from the apiserver itself: the
daemon (a real subprocess, called by a real gRPC client on its unix socket)
reads nothing but its claims while preparing, the rack's default LNC coming
from its UltraServer watch; and a prepare waiting for a device the slice
watch has not brought yet does not hold up another one."""

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from typing import Any

import pytest
from kubernetes import client as k8s

from driver.names import rack_label
from driver.node.durable.checkpoint import Checkpoint
from localsim.controlplane.plane import ControlPlane
from testbed import controlplane
from testbed.daemon import Daemon, short_tmpdir
from testbed.rack import DRIVER, NODES, RACK, RACK_ID, SITE, Rack, published_rack

pytestmark = pytest.mark.integration

PREPARES = 20
READ_VERBS = {"GET", "LIST"}
PREPARE_COULD_READ = {"resourceclaims", "resourceslices", "ultraservers", "nodes"}
LATE_POOL = "plugintest-late"
ULTRASERVERS = ("trainium.sim.dev", "v1alpha1", "ultraservers")


@pytest.fixture(scope="module")
def rack(control_plane: ControlPlane) -> Iterator[Rack]:
    crd = "ultraservers.trainium.sim.dev"
    control_plane.kubectl("apply", "-f", str(controlplane.CHART / "crds" / f"{crd}.yaml"))
    control_plane.kubectl("wait", "--for=condition=Established", f"crd/{crd}")
    with published_rack(control_plane) as published:
        absent = [f"reads-absent-{i}" for i in range(len(NODES), RACK.servers)]
        body = controlplane.ultraserver(
            RACK_ID, "trn3-gen2", [*NODES, *absent], defaultLogicalNeuronCore=2
        )
        objects = k8s.CustomObjectsApi(published.api)
        objects.create_cluster_custom_object(*ULTRASERVERS, body)
        try:
            yield published
        finally:
            with suppress(k8s.ApiException):
                objects.delete_cluster_custom_object(*ULTRASERVERS, RACK_ID)


def reads(plane: ControlPlane) -> dict[tuple[str, str, str], int]:
    """GETs and LISTs the apiserver served of what a prepare could read, by
    (resource, subresource, verb). The daemon's health report (its own thread,
    on NodeDeviceHealth objects) is no part of a prepare."""
    return {
        key: count
        for key, count in controlplane.request_counts(plane).items()
        if key[2] in READ_VERBS and key[0] in PREPARE_COULD_READ
    }


def test_prepares_read_their_claim_and_nothing_else(
    control_plane: ControlPlane, rack: Rack
) -> None:
    rack.create_claim("reads", selector=f'device.attributes["{DRIVER}"].resourceType == "chip"')
    rack.create_pod("reads-pod", "reads")
    with short_tmpdir() as workdir:
        daemon = Daemon(workdir, control_plane.kubeconfig).start()
        try:
            pod = rack.bound_pod("reads-pod")
            node = pod["spec"]["nodeName"]
            kubelet = daemon.kubelet(node)
            refs = kubelet.pod_claims(rack.objects, pod)
            before = reads(control_plane)
            for _ in range(PREPARES):
                assert kubelet.prepare(refs).keys() == {refs[0][1]}
            after = reads(control_plane)
            (record,) = Checkpoint(daemon.paths(node).checkpoint).claims.values()
            kubelet.unprepare(refs)
        finally:
            assert daemon.stop() == 0
    assert controlplane.delta(before, after) == {("resourceclaims", "", "GET"): PREPARES}
    assert record.lnc == 2  # the UltraServer's default, from the watch
    rack.delete_claim("reads", "reads-pod")


def allocate(rack: Rack, name: str, pool: str, device: str) -> str:
    """Create claim `name` and write an allocation of (pool, device) into its
    status, as the scheduler would; returns its UID."""
    rack.create_claim(name)
    result = {"request": "req", "driver": DRIVER, "pool": pool, "device": device}
    status = {"status": {"allocation": {"devices": {"results": [result]}}}}
    k8s.CustomObjectsApi(rack.api).patch_namespaced_custom_object_status(
        "resource.k8s.io", "v1", SITE.namespace, "resourceclaims", name, status
    )
    uid: str = rack.claim(name)["metadata"]["uid"]
    return uid


def late_slice() -> dict[str, Any]:
    """A slice of node 0's first two cores (the rack's default LNC is 2), in a
    pool published only mid-test."""
    attrs = {
        "resourceType": {"string": "core"},
        "ultraserverId": {"string": RACK_ID},
        "serverIndex": {"int": 0},
        "chipIndex": {"int": 0},
        "coreStart": {"int": 0},
        "coreCount": {"int": 2},
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": LATE_POOL, "labels": {rack_label(DRIVER): RACK_ID}},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": LATE_POOL, "generation": 1, "resourceSliceCount": 1},
            "nodeName": NODES[0],
            "devices": [{"name": "late-core", "attributes": attrs}],
        },
    }


def test_a_prepare_waiting_for_the_slice_watch_does_not_block_another(
    control_plane: ControlPlane, rack: Rack
) -> None:
    late_uid = allocate(rack, "late", LATE_POOL, "late-core")
    held_uid = allocate(rack, "held", RACK_ID, "s0-c1-cores0-2")
    late, held = (SITE.namespace, late_uid, "late"), (SITE.namespace, held_uid, "held")
    resource = k8s.ResourceV1Api(rack.api)
    with short_tmpdir() as workdir:
        daemon = Daemon(
            workdir, control_plane.kubeconfig, extra_args=("--slice-cache-seconds", "60")
        ).start()
        try:
            kubelet = daemon.kubelet(NODES[0])
            with ThreadPoolExecutor(1) as pool:
                waiting = pool.submit(kubelet.prepare, [late])
                time.sleep(1.0)
                assert not waiting.done()
                started = time.monotonic()
                assert kubelet.prepare([held]).keys() == {held_uid}
                assert time.monotonic() - started < 5.0
                assert not waiting.done()
                resource.create_resource_slice(late_slice())
                prepared = waiting.result(timeout=30)
            assert [d["device_name"] for d in prepared[late_uid].devices] == ["late-core"]
            kubelet.unprepare([late, held])
        finally:
            assert daemon.stop() == 0
            with suppress(k8s.ApiException):
                resource.delete_resource_slice(LATE_POOL)
    rack.delete_claim("late")
    rack.delete_claim("held")
