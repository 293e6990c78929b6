"""The publishing and storage benchmarks read etcd's database size after a
run; what runs before it wrote and deleted must not count. Against a real
etcd and kube-apiserver."""

from pathlib import Path

import pytest
from kubernetes import client

from benchmarks.publishing import clear_etcd_history, storage
from localsim.controlplane.plane import ControlPlane

pytestmark = pytest.mark.integration

MIB = 2**20
WRITES = 60
VALUE = "x" * (256 * 1024)
"""60 config maps of 256 KiB: 15 MiB written, then deleted."""


def test_clearing_the_history_leaves_out_what_earlier_runs_deleted(tmp_path: Path) -> None:
    with ControlPlane.running(tmp_path / "cp", storage_only=True) as cp, cp.api_client() as api:
        core = client.CoreV1Api(api)
        clear_etcd_history(cp)
        start = storage(cp)["etcd_db_bytes"]
        for i in range(WRITES):
            core.create_namespaced_config_map(
                "default", {"metadata": {"name": f"run-{i}"}, "data": {"v": VALUE}}
            )
        for i in range(WRITES):
            core.delete_namespaced_config_map(f"run-{i}", "default")
        clear_etcd_history(cp)
        left = storage(cp)["etcd_db_bytes"]
        for i in range(WRITES):
            core.create_namespaced_config_map(
                "default", {"metadata": {"name": f"again-{i}"}, "data": {"v": VALUE}}
            )
        grown = storage(cp)["etcd_db_bytes"]
    assert left - start < 2 * MIB, (start, left)
    assert grown - left > 10 * MIB, (left, grown)
