"""Checkpoint, CDI spec and socket paths: the files the daemon leaves on a node."""

import json
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from driver.devicemodel.placement import NodePlace
from driver.kubeletplugin import sockets
from driver.node import cdi
from driver.node.devices import AllocatedDevice, ClaimGrant, fabric_of
from driver.node.durable.atomicfile import write_atomic, write_if_changed
from driver.node.durable.checkpoint import (
    PREPARE_COMPLETED,
    Checkpoint,
    CheckpointError,
    ClaimRecord,
    DeviceRecord,
)
from driver.node.durable.claimfiles import (
    ClaimFiles,
    TokenKeyError,
    claim_fabric,
    derive_token,
    load_or_create_key,
)
from driver.node.paths import NodePaths, node_path
from localsim.standin.kubelet import container_edits
from simdevice.topology import CoreRange
from tests.node.slicedata import RACK


def record(uid: str) -> ClaimRecord:
    device = DeviceRecord("req", "rack-a", "s1-chip0", "chip", [[0, 0, 8]])
    return ClaimRecord(uid, "ns", "c", PREPARE_COMPLETED, 2, [0, 1, 2, 3], [device], "ab")


def test_checkpoint_round_trip_and_cores(tmp_path: Path) -> None:
    cp = Checkpoint(tmp_path / "checkpoint.json")
    cp.put(record("u1"))
    cp.put(record("u2"))
    cp.drop("u2")
    again = Checkpoint(tmp_path / "checkpoint.json")
    assert again.claims == {"u1": record("u1")}
    assert again.claims["u1"].physical_cores() == {(0, c) for c in range(8)}
    assert stat.S_IMODE((tmp_path / "checkpoint.json").stat().st_mode) == 0o600
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["checkpoint.json", "checkpoint.json.journal"]  # no temp files left


def test_admin_access_devices_hold_no_cores(tmp_path: Path) -> None:
    monitor = DeviceRecord("req", "rack-a", "s1-chip1", "chip", [[1, 0, 8]], admin_access=True)
    claim = replace(record("u1"), devices=[*record("u1").devices, monitor])
    cp = Checkpoint(tmp_path / "checkpoint.json")
    cp.put(claim)
    again = Checkpoint(tmp_path / "checkpoint.json").claims["u1"]
    assert again.devices[1].admin_access
    assert again.exclusive_cores() == {(0, c) for c in range(8)}
    assert again.physical_cores() == {(chip, c) for chip in (0, 1) for c in range(8)}


def test_damaged_checkpoint_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    Checkpoint(path).put(record("u1"))
    doc = json.loads(path.read_text())
    doc["claims"]["u1"]["visible_cores"] = [7]
    path.write_text(json.dumps(doc))
    with pytest.raises(CheckpointError, match="checksum mismatch"):
        Checkpoint(path)
    path.write_text('{"version": 1, "claims": ')
    with pytest.raises(CheckpointError, match="not JSON"):
        Checkpoint(path)


def test_atomic_write_replaces_content(tmp_path: Path) -> None:
    target = tmp_path / "f"
    write_atomic(target, b"one")
    write_atomic(target, b"two", mode=0o600)
    assert target.read_bytes() == b"two"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_cdi_spec_resolves_to_env_and_mounts(tmp_path: Path) -> None:
    edits = cdi.ClaimEdits(
        claim_uid="uid-1",
        visible_cores=[8, 9],
        lnc=2,
        workload_socket=tmp_path / "workload.sock",
        token_file=tmp_path / "claims/uid-1.token",
        node_name="node-1",
        ultraserver="rack-a",
        server_index=1,
        generation="trn3-gen2",
        ring=[4, 5],
        fabric_ips=["fd00::1/64", "fd00::2/64"],
    )
    assert cdi.write_spec(tmp_path, "trainium.sim.dev", edits)
    path = cdi.spec_path(tmp_path, "trainium.sim.dev", "uid-1")
    assert path.name == "k8s.trainium.sim.dev-claim_uid-1.json"
    doc = json.loads(path.read_text())
    assert doc["cdiVersion"] == cdi.CDI_VERSION
    resolved = container_edits(tmp_path, [cdi.cdi_device_id("trainium.sim.dev", "uid-1")])
    assert resolved.env["NEURON_RT_VISIBLE_CORES"] == "8,9"
    assert resolved.env["NEURON_LOGICAL_NC_CONFIG"] == "2"
    assert resolved.env["TRAINIUM_DRA_RING"] == "4,5"
    assert resolved.env["TRAINIUM_DRA_GENERATION"] == "trn3-gen2"
    assert resolved.env["TRAINIUM_DRA_FABRIC_IPS"] == "fd00::1/64,fd00::2/64"
    assert {m["containerPath"] for m in resolved.mounts} == {
        cdi.CONTAINER_WORKLOAD_DIR,
        cdi.CONTAINER_TOKEN_FILE,
    }
    socket = cdi.host_path(resolved.mounts, resolved.env["TRAINIUM_DRA_WORKLOAD_SOCKET"])
    assert socket == edits.workload_socket
    assert cdi.host_path(resolved.mounts, resolved.env["TRAINIUM_DRA_TOKEN_FILE"]) == (
        edits.token_file
    )
    assert cdi.remove_spec(tmp_path, "trainium.sim.dev", "uid-1")
    assert not path.exists()


def test_socket_names_follow_the_kubelet_conventions(tmp_path: Path) -> None:
    plain = NodePaths(tmp_path, "trainium.sim.dev", tmp_path / "state", tmp_path / "cdi")
    assert plain.registration_socket == tmp_path / "plugins_registry/trainium.sim.dev-reg.sock"
    assert plain.registration_staging.parent == plain.registration_socket.parent
    assert plain.registration_staging.name.startswith(".")
    assert plain.dra_socket == tmp_path / "plugins/trainium.sim.dev/dra.sock"
    rolling = NodePaths(tmp_path, "trainium.sim.dev", tmp_path, tmp_path, pod_uid="p-1")
    assert rolling.registration_socket.name == "trainium.sim.dev-p-1-reg.sock"
    assert rolling.dra_socket.name == "dra-p-1.sock"
    assert node_path("/sim/{node}/kubelet", "n3") == Path("/sim/n3/kubelet")


def test_a_stopping_daemon_leaves_its_successors_socket(tmp_path: Path) -> None:
    """Rolling update: the old pod must not delete the socket the new one bound."""
    path = tmp_path / "workload.sock"
    path.write_text("old")
    old_inode = path.stat().st_ino
    path.rename(tmp_path / "old")  # kept alive, so the new file gets another inode
    path.write_text("new")
    sockets.remove_if_same(path, old_inode)
    assert path.read_text() == "new"
    sockets.remove_if_same(path, path.stat().st_ino)
    assert not path.exists()


def test_token_key_is_made_once_and_a_damaged_one_refused(tmp_path: Path) -> None:
    path = tmp_path / "token.key"
    key = load_or_create_key(path)
    assert load_or_create_key(path) == key and len(key) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["token.key"]
    assert derive_token(key, "u1", "n1") == derive_token(key, "u1", "n1")
    assert derive_token(key, "u1", "n1") != derive_token(key, "u1", "n2")
    path.write_bytes(b"x")
    with pytest.raises(TokenKeyError, match=r"token\.key: holds 1 bytes, not 32"):
        load_or_create_key(path)


def test_cached_fabric_of_a_claim_is_the_same_as_worked_out_whole() -> None:
    place = NodePlace("node-1", "rack-a", 1, RACK)
    devices = (
        AllocatedDevice("a", "rack-a", "d0", "core", (CoreRange(2, 0, 1), CoreRange(2, 1, 1))),
        AllocatedDevice("a", "rack-a", "d1", "chip", (CoreRange(0, 0, RACK.chip.cores),)),
        AllocatedDevice("b", "rack-a", "d2", "core", (CoreRange(2, 4, 4),)),
        AllocatedDevice("c", "rack-a", "rack", "ultraserver", (CoreRange(1, 0, 8),)),
    )
    for count in range(1, len(devices) + 1):
        grant = ClaimGrant(devices[:count], 1, (), count == len(devices))
        assert claim_fabric(grant, place) == fabric_of(grant, place)


def test_write_if_changed_leaves_a_file_that_holds_the_data(tmp_path: Path) -> None:
    target = tmp_path / "f"
    assert write_if_changed(target, b"one", mode=0o644)
    inode = target.stat().st_ino
    assert not write_if_changed(target, b"one", mode=0o644)
    assert target.stat().st_ino == inode
    assert write_if_changed(target, b"two", mode=0o644)
    assert target.read_bytes() == b"two" and target.stat().st_ino != inode
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_claim_files_are_written_only_where_they_differ(tmp_path: Path) -> None:
    paths = NodePaths(tmp_path / "k", "trainium.sim.dev", tmp_path / "s", tmp_path / "cdi")
    for directory in (paths.claims_dir, paths.cdi_dir):
        directory.mkdir(parents=True)
    files = ClaimFiles("trainium.sim.dev", NodePlace("node-1", "rack-a", 0, RACK), paths, b"k" * 32)
    claim = replace(record("u1"), token_nonce="n1")
    token, spec = paths.token_file("u1"), cdi.spec_path(paths.cdi_dir, "trainium.sim.dev", "u1")
    assert files.write_token(claim) and files.write_spec(claim)
    written = token.stat().st_ino, spec.stat().st_ino
    assert not files.write_token(claim) and not files.write_spec(claim)
    assert files.restore({"u1": claim}) == ([], [])
    assert (token.stat().st_ino, spec.stat().st_ino) == written
    token.unlink()
    assert files.restore({"u1": claim}) == (["u1"], [])
    assert token.read_text() == files.token(claim)
    spec.write_bytes(b"")
    assert files.write_spec(claim) and not files.write_token(claim)
    assert spec.read_bytes() == cdi.spec_bytes("trainium.sim.dev", files.edits(claim))
    assert files.write_token(replace(claim, token_nonce="other"))  # a new prepare's token
