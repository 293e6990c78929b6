"""The real controller and node daemon, each with a token of the ServiceAccount
the chart gives it, do their whole job under the chart's RBAC and admission
policy: the controller publishes a rack and writes its status, the daemon
places its node from the UltraServer objects and reports a fault in its own
NodeDeviceHealth, and the controller turns that into device taints."""

import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from driver.devicemodel.naming import ULTRASERVER_DEVICE
from localsim.controlplane.plane import ControlPlane
from testbed import controlplane
from testbed.daemon import Daemon, short_tmpdir
from testbed.rack import Site
from testbed.waiting import wait_for
from tests.deploy.access import access_installed
from tests.deploy.chart import Case, kubectl

pytestmark = pytest.mark.integration

CASE = Case("run", None)
DRIVER = "deploy-run.sim.dev"
RACK = "deploy-run-rack"
NODES = tuple(f"deploy-run-n{i}" for i in range(4))
DAEMON_NODE = NODES[1]
POD = "deploy-run-daemon"
CONTROLLER_SA = f"{CASE.release}-trainium-dra-controller"
NODE_SA = f"{CASE.release}-trainium-dra-node"
GROUP, VERSION = "trainium.sim.dev", "v1alpha1"
REFUSED = re.compile(r"Forbidden|forbidden|\(403\)|HTTP 403")
"""How an API refusal shows in the components' logs."""


def token_kubeconfig(cp: ControlPlane, token: str, path: Path) -> Path:
    """The admin kubeconfig with the admin's token swapped for `token`."""
    config: dict[str, Any] = yaml.safe_load(cp.kubeconfig.read_text())
    config["users"][0]["user"] = {"token": token}
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def installed(control_plane: ControlPlane, crds: None) -> Iterator[k8s.ApiClient]:
    cp = control_plane
    with access_installed(cp, CASE, f"--set=driverName={DRIVER}"):
        api = cp.api_client()
        custom = k8s.CustomObjectsApi(api)
        try:
            for node in NODES:
                cp.create_node(node)
            custom.create_cluster_custom_object(
                GROUP,
                VERSION,
                "ultraservers",
                controlplane.ultraserver(RACK, "trn3-gen1", list(NODES)),
            )
            yield api
        finally:
            with suppress(k8s.ApiException):
                custom.delete_cluster_custom_object(GROUP, VERSION, "ultraservers", RACK)
            for item in controlplane.rack_slices(api, RACK, DRIVER):
                with suppress(k8s.ApiException):
                    k8s.ResourceV1Api(api).delete_resource_slice(item["metadata"]["name"])
            with suppress(k8s.ApiException):
                custom.delete_cluster_custom_object(
                    GROUP, VERSION, "nodedevicehealths", DAEMON_NODE
                )
            with suppress(subprocess.CalledProcessError):
                cp.kubectl(
                    "delete", "pod", POD, "-n", CASE.namespace, "--force", "--grace-period=0"
                )
            for node in NODES:
                with suppress(k8s.ApiException):
                    cp.delete_node(node)
            api.close()


@contextmanager
def controller(kubeconfig: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "driver.cli",
                "controller",
                f"--kubeconfig={kubeconfig}",
                f"--driver-name={DRIVER}",
                f"--lease-namespace={CASE.namespace}",
                f"--lease-name={CONTROLLER_SA}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield proc
    finally:
        controlplane.stop(proc)


def pod_bound_token(cp: ControlPlane) -> str:
    """A token of the node ServiceAccount bound to a pod on DAEMON_NODE, as the kubelet gets."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": POD, "namespace": CASE.namespace},
        "spec": {
            "nodeName": DAEMON_NODE,
            "serviceAccountName": NODE_SA,
            "containers": [{"name": "node", "image": "trainium-dra:test"}],
        },
    }
    created = k8s.CoreV1Api(cp.api_client()).create_namespaced_pod(CASE.namespace, pod)
    return kubectl(
        cp,
        "create",
        "token",
        NODE_SA,
        "-n",
        CASE.namespace,
        "--bound-object-kind=Pod",
        f"--bound-object-name={POD}",
        f"--bound-object-uid={created.metadata.uid}",
    ).strip()


def taints(api: k8s.ApiClient) -> dict[str, list[Any]]:
    return {
        d["name"]: d["taints"]
        for s in controlplane.rack_slices(api, RACK, DRIVER)
        for d in s["spec"].get("devices") or []
        if d.get("taints")
    }


def all_tainted(api: k8s.ApiClient, names: set[str]) -> dict[str, list[Any]] | None:
    """Every device taint, once all of `names` carry one."""
    found = taints(api)
    return found if found.keys() >= names else None


def health_devices(api: k8s.ApiClient) -> list[dict[str, Any]]:
    """The unhealthy chips DAEMON_NODE's NodeDeviceHealth lists (none when absent)."""
    obj = controlplane.custom(api).list_cluster_custom_object(
        GROUP, VERSION, "nodedevicehealths", field_selector=f"metadata.name={DAEMON_NODE}"
    )["items"]
    found: list[dict[str, Any]] = obj[0]["spec"].get("devices") or [] if obj else []
    return found


def test_controller_and_daemon_work_with_only_their_chart_permissions(
    control_plane: ControlPlane, installed: k8s.ApiClient, tmp_path: Path
) -> None:
    cp, api = control_plane, installed
    controller_token = kubectl(cp, "create", "token", CONTROLLER_SA, "-n", CASE.namespace).strip()
    controller_config = token_kubeconfig(cp, controller_token, tmp_path / "controller.kubeconfig")
    node_config = token_kubeconfig(cp, pod_bound_token(cp), tmp_path / "node.kubeconfig")
    log = tmp_path / "controller.log"
    with controller(controller_config, log):
        wait_for(
            "the rack's slices", lambda: controlplane.rack_slices(api, RACK, DRIVER), timeout=90
        )
        status = wait_for(
            "the rack's status",
            lambda: (controlplane.get_rack(api, RACK) or {}).get("status"),
            timeout=60,
        )
        assert status["servers"]["summary"] == "4/4"
        assert taints(api) == {}
        with short_tmpdir() as workdir:
            site = Site(DRIVER, RACK, CASE.namespace, (DAEMON_NODE,))
            daemon = Daemon(workdir, node_config, site=site, placed_by_flags=False).start()
            try:
                fault = {"node": DAEMON_NODE, "kind": "ecc-uncorrected-hbm", "chip": 2}
                assert daemon.sim("POST", "/sim/v1/faults", json=fault).status_code == 200
                report = wait_for(
                    "the failed chip in the daemon's NodeDeviceHealth",
                    lambda: health_devices(api),
                    timeout=30,
                )
                assert [(d["chip"], d["state"]) for d in report] == [(2, "failed")]
                # The chip's own devices, its server and the rack-wide device sit
                # in different slices, written one after another.
                tainted = wait_for(
                    "taints on the chip, its server and the rack-wide device",
                    lambda: all_tainted(api, {ULTRASERVER_DEVICE, "server01"}),
                    timeout=30,
                )
                assert all(
                    n in (ULTRASERVER_DEVICE, "server01") or n.startswith("server01-chip02")
                    for n in tainted
                ), tainted
            finally:
                assert daemon.stop() == 0
            assert not REFUSED.search("".join(daemon.stderr)), "".join(daemon.stderr)[-3000:]
    text = log.read_text()
    assert "acquired lease" in text
    assert not REFUSED.search(text), text[-3000:]
