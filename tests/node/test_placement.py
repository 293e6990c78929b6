"""Nodes given without a server index are placed from the UltraServer objects,
with the controller's own node mapping."""

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from driver.devicemodel.placement import PlacementError, find_place
from localsim.controlplane.plane import ControlPlane
from testbed.daemon import Daemon, short_tmpdir
from testbed.rack import Site, published_rack
from testbed.waiting import Deadline

ROOT = Path(__file__).resolve().parents[2]
ULTRASERVER_CRD = ROOT / "charts/trainium-dra/crds/ultraservers.trainium.sim.dev.yaml"
SITE = Site("placement.sim.dev", "placement-rack", "placement", ("placement-n0", "placement-n1"))


def ultraserver(name: str, nodes: dict[str, Any], generation: str = "trn3-gen2") -> dict[str, Any]:
    return {
        "apiVersion": "trainium.sim.dev/v1alpha1",
        "kind": "UltraServer",
        "metadata": {"name": name},
        "spec": {"generation": generation, "nodes": nodes},
    }


def names(*first: str, servers: int = 36) -> dict[str, Any]:
    return {"names": [*first, *(f"absent-{i}" for i in range(len(first), servers))]}


def test_found_by_name_list() -> None:
    objs = [ultraserver("a", names("x", "y")), ultraserver("b", names("p", "q", "n"))]
    name, index, rack = find_place("n", {}, objs)
    assert (name, index, rack.generation) == ("b", 2, "trn3-gen2")


def test_found_by_selector_and_index_label() -> None:
    selector = {"selector": {"matchLabels": {"rack": "r1"}}, "serverIndexLabel": "idx"}
    objs = [ultraserver("r1", selector, "trn2")]
    name, index, rack = find_place("n", {"rack": "r1", "idx": "3"}, objs)
    assert (name, index, rack.servers) == ("r1", 3, 4)
    with pytest.raises(PlacementError, match=r"^--node: n is not mapped by any UltraServer"):
        find_place("n", {"rack": "r2", "idx": "3"}, objs)


def test_restricted_to_one_ultraserver_and_invalid_specs_skipped() -> None:
    objs = [ultraserver("bad", {"names": ["n"]}), ultraserver("a", names("n"))]
    assert find_place("n", {}, objs)[:2] == ("a", 0)
    with pytest.raises(PlacementError, match="UltraServer other"):
        find_place("n", {}, objs, only="other")


@pytest.mark.integration
def test_daemon_waits_for_its_ultraserver_then_serves(control_plane: ControlPlane) -> None:
    control_plane.kubectl("apply", "-f", str(ULTRASERVER_CRD))
    objects = k8s.CustomObjectsApi(control_plane.api_client())
    body = ultraserver(SITE.rack_id, names(*SITE.nodes))

    def create_once_waiting(daemon: Daemon) -> None:
        """The UltraServer appears only after the daemon said it is waiting for one."""
        deadline = Deadline(60)
        while not deadline.passed():
            if any("is not mapped by any UltraServer" in line for line in daemon.stderr):
                objects.create_cluster_custom_object(
                    "trainium.sim.dev", "v1alpha1", "ultraservers", body
                )
                return
            time.sleep(0.1)

    with published_rack(control_plane, SITE, []), short_tmpdir() as workdir:
        daemon = Daemon(workdir, control_plane.kubeconfig, site=SITE, placed_by_flags=False)
        creator = threading.Thread(target=create_once_waiting, args=(daemon,))
        creator.start()
        try:
            daemon.start(timeout=60)
            described = daemon.sim("GET", "/sim/v1/nodes").json()
            assert [(d["name"], d["ultraserver"], d["serverIndex"]) for d in described] == [
                (node, SITE.rack_id, i) for i, node in enumerate(SITE.nodes)
            ]
        finally:
            creator.join()
            assert daemon.stop() == 0
            objects.delete_cluster_custom_object(
                "trainium.sim.dev", "v1alpha1", "ultraservers", SITE.rack_id
            )
