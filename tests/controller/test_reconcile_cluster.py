"""The controller process against the real apiserver: minimal writes counted
by the apiserver itself, nodes leaving and returning, deletion, a restart in
the middle of publishing, and two replicas that never fight."""

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from localsim.controlplane.plane import ControlPlane
from testbed.controlplane import (
    condition,
    controller,
    custom,
    delta,
    get_rack,
    install,
    published,
    rack_slices,
    request_counts,
    stop,
    ultraserver,
    writes,
)
from testbed.waiting import wait_for

pytestmark = pytest.mark.integration

RACK = "ctl-rec-gen2"
NODES = [f"ctl-rec-{i:02d}" for i in range(36)]
SLICES = 5 + 36 + 1
LEASE = "ctl-rec"
OURS = ("resourceslices", "ultraservers")
RESYNC = "1"


def lease_holder(api: client.ApiClient) -> str:
    lease = custom(api).get_namespaced_custom_object(
        "coordination.k8s.io", "v1", "default", "leases", LEASE
    )
    return str(lease["spec"].get("holderIdentity") or "")


def chips(api: client.ApiClient) -> int:
    rack = get_rack(api, RACK) or {}
    return int(((rack.get("status") or {}).get("devices") or {}).get("chip", 0))


def slice_versions(api: client.ApiClient) -> dict[str, str]:
    return {s["metadata"]["name"]: s["metadata"]["resourceVersion"] for s in rack_slices(api, RACK)}


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> Iterator[tuple[ControlPlane, client.ApiClient]]:
    install(control_plane)
    for node in NODES:
        control_plane.create_node(node)
    with control_plane.api_client() as api:
        try:
            yield control_plane, api
        finally:
            for name in (RACK, "ctl-rec-small"):
                try:
                    custom(api).delete_cluster_custom_object(
                        "trainium.sim.dev", "v1alpha1", "ultraservers", name
                    )
                except client.exceptions.ApiException as err:
                    if err.status != 404:
                        raise
            for node in NODES:
                try:
                    control_plane.delete_node(node)
                except client.exceptions.ApiException as err:
                    if err.status != 404:
                        raise
            custom(api).delete_namespaced_custom_object(
                "coordination.k8s.io", "v1", "default", "leases", LEASE
            )


def create_rack(
    api: client.ApiClient, name: str = RACK, nodes: list[str] = NODES, generation: str = "trn3-gen2"
) -> None:
    if get_rack(api, name) is None:
        body = ultraserver(name, generation, nodes)
        custom(api).create_cluster_custom_object(
            "trainium.sim.dev", "v1alpha1", "ultraservers", body
        )


def test_restart_mid_publish_then_quiet_resync_then_node_churn(
    cluster: tuple[ControlPlane, client.ApiClient], tmp_path: Path
) -> None:
    cp, api = cluster
    create_rack(api)
    args = (
        "--resync-seconds",
        RESYNC,
        "--lease-name",
        LEASE,
        "--lease-seconds",
        "6",
        "--workers",
        "1",
    )
    with controller(cp, tmp_path / "first.log", *args) as first:
        wait_for("publishing started", lambda: len(rack_slices(api, RACK)) >= 3, 60, 0.02)
        first.kill()
        first.wait()
    partial = len(rack_slices(api, RACK))
    assert 3 <= partial < SLICES, "the controller was meant to die mid-publish"

    with controller(cp, tmp_path / "second.log", *args, "--identity", "second"):
        wait_for("rack published after restart", lambda: published(api, RACK, SLICES), 120)
        names = [s["metadata"]["name"] for s in rack_slices(api, RACK)]
        assert len(names) == len(set(names)) == SLICES

        # A resync with nothing changed: no write to a slice or the rack, over several periods.
        time.sleep(2)
        before, versions = request_counts(cp), slice_versions(api)
        time.sleep(5 * float(RESYNC))
        assert writes(delta(before, request_counts(cp)), OURS) == 0
        assert slice_versions(api) == versions

        # A node goes away: its slice and the rack device go, the pool generation moves.
        generation = rack_slices(api, RACK)[0]["spec"]["pool"]["generation"]
        cp.delete_node(NODES[7])
        wait_for("node 7 withdrawn", lambda: published(api, RACK, SLICES - 2, generation + 1), 60)
        left = rack_slices(api, RACK)
        assert {s["spec"]["pool"]["generation"] for s in left} == {generation + 1}
        assert not [
            s for s in left if s["metadata"]["name"].split(".")[1] in ("server07", "ultraserver")
        ]
        rack = wait_for(
            "status shows the gap",
            lambda: (r := get_rack(api, RACK)) and r["status"]["servers"]["mapped"] == 35 and r,
        )
        assert rack["status"]["servers"]["missing"] == [f"server 7: node {NODES[7]} not found"]
        assert condition(rack, "Ready")["status"] == "False"  # type: ignore[index]
        assert condition(rack, "Degraded")["reason"] == "ServersWithoutNode"  # type: ignore[index]

        # ... and comes back.
        cp.create_node(NODES[7])
        wait_for("node 7 back", lambda: published(api, RACK, SLICES, generation + 2), 60)
        assert {s["spec"]["pool"]["generation"] for s in rack_slices(api, RACK)} == {generation + 2}
        wait_for("ready again", lambda: condition(get_rack(api, RACK), "Ready")["status"] == "True")  # type: ignore[index]


def test_two_replicas_one_writer_and_a_quiet_takeover(
    cluster: tuple[ControlPlane, client.ApiClient], tmp_path: Path
) -> None:
    cp, api = cluster
    create_rack(api)
    args = ("--resync-seconds", RESYNC, "--lease-name", LEASE, "--lease-seconds", "6")
    with (
        controller(cp, tmp_path / "a.log", *args, "--identity", "replica-a") as a,
        controller(cp, tmp_path / "b.log", *args, "--identity", "replica-b") as b,
    ):
        holder = wait_for(
            "a leader",
            lambda: lease_holder(api) in ("replica-a", "replica-b") and lease_holder(api),
            30,
        )
        wait_for("rack published", lambda: published(api, RACK, SLICES), 60)
        time.sleep(2)
        before, versions = request_counts(cp), slice_versions(api)
        time.sleep(4)
        assert writes(delta(before, request_counts(cp)), OURS) == 0
        assert slice_versions(api) == versions
        assert lease_holder(api) == holder
        standby_log = (tmp_path / ("b.log" if holder == "replica-a" else "a.log")).read_text()
        assert "waiting for lease" in standby_log and "rack " not in standby_log

        leader, standby = (a, "replica-b") if holder == "replica-a" else (b, "replica-a")
        before = request_counts(cp)
        stop(leader)
        assert leader.returncode == 0
        wait_for("standby takes over", lambda: lease_holder(api) == standby, 30)
        # The new leader reconciles everything and finds nothing to change.
        time.sleep(4)
        assert writes(delta(before, request_counts(cp)), ("resourceslices",)) == 0
        assert slice_versions(api) == versions

        # It is really the writer now: a spec change reaches the slices.
        rack = get_rack(api, RACK)
        assert rack is not None
        custom(api).patch_cluster_custom_object(
            "trainium.sim.dev", "v1alpha1", "ultraservers", RACK, {"spec": {"mode": "flat"}}
        )
        wait_for(
            "flat mode published by the new leader",
            lambda: published(api, RACK, 36) and chips(api) == 144,
        )


def test_deleting_the_rack_removes_its_slices(
    cluster: tuple[ControlPlane, client.ApiClient], tmp_path: Path
) -> None:
    cp, api = cluster
    small = [f"ctl-rec-small-{i}" for i in range(4)]
    for node in small:
        cp.create_node(node)
    try:
        with controller(
            cp,
            tmp_path / "c.log",
            "--resync-seconds",
            RESYNC,
            "--lease-name",
            LEASE,
            "--lease-seconds",
            "6",
        ):
            create_rack(api, "ctl-rec-small", small, "trn2")
            wait_for(
                "small rack published",
                lambda: len(rack_slices(api, "ctl-rec-small")) == 3 + 16 + 1,
                60,
            )
            owners = {
                r["name"]
                for s in rack_slices(api, "ctl-rec-small")
                for r in s["metadata"]["ownerReferences"]
            }
            assert owners == {"ctl-rec-small"}
            custom(api).delete_cluster_custom_object(
                "trainium.sim.dev", "v1alpha1", "ultraservers", "ctl-rec-small"
            )
            wait_for("slices gone", lambda: not rack_slices(api, "ctl-rec-small"), 60)
            assert len(rack_slices(api, RACK)) > 0
    finally:
        for node in small:
            cp.delete_node(node)
