"""SIGKILL the daemon (a real subprocess) at every step of prepare and unprepare.

After each crash the daemon restarts from its checkpoint and the kubelet
stand-in retries, as the kubelet does: the claim ends up prepared exactly once
with the right cores, and unprepare leaves no file, record or core behind.
A power loss is a SIGKILL plus the loss of whatever was not fsync'd: the
token and CDI spec (written without fsync) vanish or come back, and the
restarted daemon must put them back as the checkpoint says.
"""

import signal
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import pytest

from driver.node import cdi
from driver.node.durable.checkpoint import PREPARE_COMPLETED, PREPARE_STARTED, Checkpoint
from driver.node.durable.claimfiles import hash_token
from driver.node.durable.failpoints import PREPARE_POINTS, UNPREPARE_POINTS
from localsim.controlplane.plane import ControlPlane
from localsim.standin.kubelet import container_edits
from testbed.daemon import Daemon, short_tmpdir
from testbed.rack import DRIVER, SITE, Rack, published_rack
from testbed.waiting import wait_for

pytestmark = pytest.mark.integration

CLAIM, POD = "crash", "crash-pod"
CHIP = f'device.attributes["{DRIVER}"].resourceType == "chip"'


@pytest.fixture(scope="module")
def rack(control_plane: ControlPlane) -> Iterator[Rack]:
    with published_rack(control_plane) as published:
        yield published


@pytest.fixture(scope="module")
def allocated(rack: Rack) -> tuple[Rack, dict[str, Any]]:
    """One chip claim the real scheduler allocated, reserved for its pod."""
    rack.create_claim(CLAIM, selector=CHIP)
    rack.create_pod(POD, CLAIM)
    return rack, rack.bound_pod(POD)


@pytest.fixture
def workdir() -> Iterator[Path]:
    with short_tmpdir() as path:
        yield path


def assert_clean(daemon: Daemon, node: str) -> None:
    paths = daemon.paths(node)
    assert list(paths.cdi_dir.iterdir()) == []
    assert list(paths.claims_dir.iterdir()) == []
    assert Checkpoint(paths.checkpoint).claims == {}


def assert_prepared_once(daemon: Daemon, node: str, uid: str, cdi_ids: list[str]) -> None:
    paths = daemon.paths(node)
    claims = Checkpoint(paths.checkpoint).claims
    assert list(claims) == [uid]
    assert claims[uid].state == PREPARE_COMPLETED
    cores = claims[uid].physical_cores()
    assert len(cores) == 8 and len({chip for chip, _ in cores}) == 1
    assert len(list(paths.cdi_dir.iterdir())) == 1
    env = container_edits(paths.cdi_dir, cdi_ids).env
    assert env["NEURON_RT_VISIBLE_CORES"] == ",".join(map(str, claims[uid].visible_cores))
    assert hash_token(paths.token_file(uid).read_text()) == claims[uid].token_sha256


def crash(daemon: Daemon, call: Any) -> None:
    """Run `call`; the daemon must die of SIGKILL at its failpoint while serving it."""
    with pytest.raises(grpc.RpcError):
        call()
    assert daemon.wait_dead() == -signal.SIGKILL


@pytest.mark.parametrize("point", PREPARE_POINTS)
def test_crash_during_prepare(
    point: str, allocated: tuple[Rack, dict[str, Any]], control_plane: ControlPlane, workdir: Path
) -> None:
    rack, pod = allocated
    node = pod["spec"]["nodeName"]
    first = Daemon(workdir, control_plane.kubeconfig, failpoint=point).start()
    kubelet = first.kubelet(node)
    refs = kubelet.pod_claims(rack.objects, pod)
    crash(first, lambda: kubelet.prepare(refs))
    second = Daemon(workdir, control_plane.kubeconfig).start()
    try:
        kubelet = second.kubelet(node)
        prepared = kubelet.prepare(refs)
        (uid,) = prepared
        assert_prepared_once(second, node, uid, prepared[uid].devices[0]["cdi_device_ids"])
        kubelet.unprepare(refs)
        assert_clean(second, node)
    finally:
        assert second.stop() == 0


@pytest.mark.parametrize("point", UNPREPARE_POINTS)
def test_crash_during_unprepare(
    point: str, allocated: tuple[Rack, dict[str, Any]], control_plane: ControlPlane, workdir: Path
) -> None:
    rack, pod = allocated
    node = pod["spec"]["nodeName"]
    first = Daemon(workdir, control_plane.kubeconfig, failpoint=point).start()
    kubelet = first.kubelet(node)
    refs = kubelet.pod_claims(rack.objects, pod)
    kubelet.prepare(refs)
    crash(first, lambda: kubelet.unprepare(refs))
    second = Daemon(workdir, control_plane.kubeconfig).start()
    try:
        second.kubelet(node).unprepare(refs)
        assert_clean(second, node)
    finally:
        assert second.stop() == 0


def test_power_loss_after_answering_restores_the_claims_files(
    allocated: tuple[Rack, dict[str, Any]], control_plane: ControlPlane, workdir: Path
) -> None:
    """The kubelet got its answer, then the node lost power before the disk held
    the spec and token: the restarted daemon writes them back, byte for byte,
    before it registers, so a container started from the kubelet's own record
    of the claim finds them."""
    rack, pod = allocated
    node = pod["spec"]["nodeName"]
    first = Daemon(workdir, control_plane.kubeconfig).start()
    kubelet = first.kubelet(node)
    refs = kubelet.pod_claims(rack.objects, pod)
    (uid,) = kubelet.prepare(refs)
    paths = first.paths(node)
    spec = cdi.spec_path(paths.cdi_dir, DRIVER, uid)
    before = spec.read_bytes(), paths.token_file(uid).read_bytes()
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    spec.unlink()
    paths.token_file(uid).write_bytes(b"")  # renamed into place, its data never written
    second = Daemon(workdir, control_plane.kubeconfig).start()
    try:
        assert (spec.read_bytes(), paths.token_file(uid).read_bytes()) == before
        kubelet = second.kubelet(node)
        prepared = kubelet.prepare(refs)
        assert_prepared_once(second, node, uid, prepared[uid].devices[0]["cdi_device_ids"])
        assert (spec.read_bytes(), paths.token_file(uid).read_bytes()) == before
        kubelet.unprepare(refs)
        assert_clean(second, node)
    finally:
        assert second.stop() == 0


def test_power_loss_after_unprepare_removes_files_that_came_back(
    allocated: tuple[Rack, dict[str, Any]], control_plane: ControlPlane, workdir: Path
) -> None:
    """Unprepare answered once the checkpoint dropped the claim; the unlinks of
    its files were never made durable, so they may be back after a power loss.
    The restarted daemon removes files of claims it has no record of, and
    temp files of writes that never finished."""
    rack, pod = allocated
    node = pod["spec"]["nodeName"]
    first = Daemon(workdir, control_plane.kubeconfig).start()
    kubelet = first.kubelet(node)
    refs = kubelet.pod_claims(rack.objects, pod)
    (uid,) = kubelet.prepare(refs)
    paths = first.paths(node)
    spec = cdi.spec_path(paths.cdi_dir, DRIVER, uid)
    saved = spec.read_bytes(), paths.token_file(uid).read_bytes()
    kubelet.unprepare(refs)
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    spec.write_bytes(saved[0])
    paths.token_file(uid).write_bytes(saved[1])
    (paths.cdi_dir / f".{spec.name}.tmp-1234").write_bytes(saved[0][:10])
    (paths.claims_dir / f".{uid}.token.tmp-1234").write_bytes(saved[1][:3])
    other = paths.cdi_dir / "k8s.other.example.com-claim_x.json"
    other.write_text("{}")  # another driver's spec is not ours to remove
    second = Daemon(workdir, control_plane.kubeconfig).start()
    try:
        assert [p.name for p in paths.cdi_dir.iterdir()] == [other.name]
        other.unlink()
        assert_clean(second, node)
    finally:
        assert second.stop() == 0


def test_prepare_left_unfinished_by_an_earlier_release_is_dropped_on_restart(
    allocated: tuple[Rack, dict[str, Any]], control_plane: ControlPlane, workdir: Path
) -> None:
    """Earlier releases recorded `PrepareStarted` before writing a claim's files;
    the kubelet never got an answer for such a claim, so it holds nothing."""
    rack, pod = allocated
    node = pod["spec"]["nodeName"]
    first = Daemon(workdir, control_plane.kubeconfig).start()
    kubelet = first.kubelet(node)
    refs = kubelet.pod_claims(rack.objects, pod)
    (uid,) = kubelet.prepare(refs)
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    checkpoint = Checkpoint(first.paths(node).checkpoint)
    checkpoint.put(replace(checkpoint.claims[uid], state=PREPARE_STARTED, token_nonce=""))
    second = Daemon(workdir, control_plane.kubeconfig).start()
    try:
        assert_clean(second, node)
        kubelet = second.kubelet(node)
        prepared = kubelet.prepare(refs)
        assert_prepared_once(second, node, uid, prepared[uid].devices[0]["cdi_device_ids"])
        kubelet.unprepare(refs)
    finally:
        assert second.stop() == 0


def test_claim_deleted_while_daemon_is_down_is_cleaned_on_restart(
    rack: Rack, control_plane: ControlPlane, workdir: Path
) -> None:
    rack.create_claim("gone", selector=CHIP)
    rack.create_pod("gone-pod", "gone")
    pod = rack.bound_pod("gone-pod")
    node = pod["spec"]["nodeName"]
    first = Daemon(workdir, control_plane.kubeconfig, failpoint="prepare-after-cdi").start()
    kubelet = first.kubelet(node)
    crash(first, lambda: kubelet.prepare(kubelet.pod_claims(rack.objects, pod)))
    assert len(list(first.paths(node).cdi_dir.iterdir())) == 1
    rack.delete_claim("gone", "gone-pod")
    second = Daemon(workdir, control_plane.kubeconfig).start()
    try:
        paths = second.paths(node)
        # Unprepare drops the record before it removes the files: wait for both.
        wait_for(
            "stale claim to be unprepared and its files removed",
            lambda: (
                not Checkpoint(paths.checkpoint).claims
                and not any(paths.cdi_dir.iterdir())
                and not any(paths.claims_dir.iterdir())
            ),
            timeout=20,
        )
        assert_clean(second, node)
    finally:
        assert second.stop() == 0


def test_rolling_update_hands_claims_to_the_new_pod(
    allocated: tuple[Rack, dict[str, Any]], control_plane: ControlPlane, workdir: Path
) -> None:
    rack, pod = allocated
    node = pod["spec"]["nodeName"]
    old = Daemon(workdir, control_plane.kubeconfig).start()
    kubelet = old.kubelet(node)
    refs = kubelet.pod_claims(rack.objects, pod)
    kubelet.prepare(refs)
    new = Daemon(workdir, control_plane.kubeconfig, pod_uid="pod-2").start()
    try:
        old_sockets = (old.paths(node).registration_socket, old.paths(node).dra_socket)
        new_sockets = (new.paths(node).registration_socket, new.paths(node).dra_socket)
        assert new_sockets[0].name == f"{DRIVER}-pod-2-reg.sock"
        assert new_sockets[1].name == "dra-pod-2.sock"
        assert all(p.is_socket() for p in old_sockets + new_sockets)
        assert old.stop() == 0
        assert not any(p.exists() for p in old_sockets)
        assert all(p.is_socket() for p in new_sockets)
        plugin = kubelet.register()
        assert plugin.endpoint == new_sockets[1]
        kubelet.prepare(refs)  # the new pod sees the old pod's checkpoint: nothing doubled
        assert len(Checkpoint(new.paths(node).checkpoint).claims) == 1
        kubelet.unprepare(refs)
        assert_clean(new, node)
    finally:
        assert new.stop() == 0


def test_damaged_checkpoint_stops_the_daemon_with_a_clear_error(
    control_plane: ControlPlane, workdir: Path
) -> None:
    daemon = Daemon(workdir, control_plane.kubeconfig)
    checkpoint = daemon.paths(SITE.nodes[0]).checkpoint
    checkpoint.parent.mkdir(parents=True)
    checkpoint.write_text('{"version": 1, "checksum": "0", "claims": {}}')
    with pytest.raises(AssertionError, match=r"(?s)exit 1\).*checkpoint.json: checksum mismatch"):
        daemon.start()
