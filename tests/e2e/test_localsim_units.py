"""Unit tests of the local cluster's pure parts: cluster plan, chart selection,
pod status shapes, the keyed queue, workload annotations, status and top."""

from pathlib import Path

import pytest

from driver.devicemodel.ultraserver import DEFAULT_SERVER_INDEX_LABEL as SERVER_INDEX_LABEL
from localsim.clusterspec import (
    RACK_LABEL,
    ClusterSpec,
    ClusterSpecError,
    node_labels,
    ultraserver_object,
)
from localsim.commands.flags import parse_sizes, parse_up
from localsim.commands.status import ClaimCores, allocation_rows, compact, table
from localsim.commands.top import parse_metrics, render, shade
from localsim.controlplane.chart import NAMESPACE, select
from localsim.paths import ClusterPaths
from localsim.standin import podstatus
from localsim.standin.argv import node_daemon_argv
from localsim.standin.workloadclient import workload_spec
from simdevice.workloads import WorkloadError


def test_default_cluster_is_one_full_trn3_gen2_rack() -> None:
    spec = ClusterSpec.build()
    [rack] = spec.racks
    assert (rack.name, rack.generation, rack.servers, rack.nodes) == ("rack-a", "trn3-gen2", 36, 36)
    assert rack.node_names()[-1] == "rack-a-node-35"
    assert ClusterSpec.from_json(spec.to_json()) == spec


def test_more_racks_and_other_generations() -> None:
    spec = ClusterSpec.build(racks=3, generation="trn2", nodes_per_rack=2)
    assert [r.name for r in spec.racks] == ["rack-a", "rack-b", "rack-c"]
    assert all(r.servers == 4 and r.nodes == 2 for r in spec.racks)
    assert spec.node_count() == 6


@pytest.mark.parametrize(
    ("kwargs", "flag"),
    [
        ({"generation": "trn9"}, "--generation"),
        ({"racks": 0}, "--racks"),
        ({"nodes_per_rack": 37}, "--nodes-per-rack"),
        ({"device_mode": "dense"}, "--mode"),
    ],
)
def test_bad_flags_name_the_flag(kwargs: dict[str, object], flag: str) -> None:
    with pytest.raises(ClusterSpecError, match=f"^{flag}:"):
        ClusterSpec.build(**kwargs)  # type: ignore[arg-type]


def test_ultraserver_finds_its_nodes_by_label() -> None:
    rack = ClusterSpec.build(nodes_per_rack=3).racks[0]
    obj = ultraserver_object(rack, "partitioned")
    selector = obj["spec"]["nodes"]["selector"]["matchLabels"]
    labels = node_labels(rack, 2)
    assert all(labels[k] == v for k, v in selector.items())
    assert labels[SERVER_INDEX_LABEL] == "2" and labels[RACK_LABEL] == "rack-a"
    assert obj["spec"]["nodes"]["serverIndexLabel"] == SERVER_INDEX_LABEL


def test_daemon_serves_every_node_of_the_rack_with_short_paths() -> None:
    paths = ClusterPaths(Path("/tmp/tdra-abcdefgh"))
    spec = ClusterSpec.build()
    argv = node_daemon_argv(paths, spec, spec.racks[0], 8080, "trainium-dra")
    assert not [a for a in argv if a.startswith("--heartbeat")], "no operator, no heartbeat"
    nodes = [a for a in argv if a.startswith("--node=")]
    assert nodes[0] == "--node=rack-a-node-0=0" and len(nodes) == 36
    registration = paths.kubelet_root("rack-a-node-35") / "plugins_registry"
    assert len(str(registration / "trainium.sim.dev-reg.sock")) <= 107


def test_chart_selection_orders_definitions_first_and_skips_workloads() -> None:
    docs = [
        None,
        {"kind": "Deployment", "metadata": {"name": "ctl"}},
        {"kind": "DeviceClass", "metadata": {"name": "core"}},
        {"kind": "ClusterRole", "metadata": {"name": "r"}},
        {"kind": "ServiceAccount", "metadata": {"name": "sa"}},
        {"kind": "CustomResourceDefinition", "metadata": {"name": "crd"}},
    ]
    rendered = select(docs)
    assert [o["kind"] for o in rendered.applied] == [
        "Namespace",
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "DeviceClass",
    ]
    assert rendered.applied[0]["metadata"]["name"] == NAMESPACE
    assert rendered.skipped == ["Deployment/ctl"]


POD = {
    "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
    "spec": {"containers": [{"name": "a", "image": "img"}, {"name": "b", "image": "img2"}]},
    "status": {},
}


def test_running_status_marks_every_container_ready() -> None:
    status = podstatus.running(POD, {"b": 2})
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert status["phase"] == "Running" and conditions["Ready"] == "True"
    assert [c["restartCount"] for c in status["containerStatuses"]] == [0, 2]
    assert all("running" in c["state"] for c in status["containerStatuses"])


def test_waiting_status_carries_the_error() -> None:
    status = podstatus.waiting(POD, "FailedPrepareDynamicResources", "lnc: bad")
    assert status["phase"] == "Pending"
    waiting = status["containerStatuses"][0]["state"]["waiting"]
    assert waiting == {"reason": "FailedPrepareDynamicResources", "message": "lnc: bad"}
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["message"] == "lnc: bad"


def test_finished_status_fails_when_any_container_failed() -> None:
    assert podstatus.finished(POD, {"a": 0, "b": 0}, {})["phase"] == "Succeeded"
    failed = podstatus.finished(POD, {"a": 0, "b": 1}, {"b": "core hang"})
    assert failed["phase"] == "Failed"
    terminated = failed["containerStatuses"][1]["state"]["terminated"]
    assert terminated["exitCode"] == 1 and terminated["message"] == "core hang"


def test_event_is_about_the_pod() -> None:
    event = podstatus.event(POD, "n1", "Warning", "Why", "what")
    assert event["involvedObject"]["uid"] == "u1" and event["source"]["host"] == "n1"


def test_workload_annotation() -> None:
    assert workload_spec({}) is None
    spec = workload_spec({"trainium.sim.dev/workload": '{"kind": "gemm", "m": 1}'})
    assert spec == {"kind": "gemm", "m": 1}
    with pytest.raises(WorkloadError, match="not JSON"):
        workload_spec({"trainium.sim.dev/workload": "{kind: gemm"})
    with pytest.raises(WorkloadError, match="'kind'"):
        workload_spec({"trainium.sim.dev/workload": "[1, 2]"})


def test_compact_and_table() -> None:
    assert compact("0,1,2,3,8,10,11") == "0-3,8,10-11"
    assert compact("") == ""
    assert table(["A", "BB"], [["xyz", 1]]).splitlines() == ["A     BB", "xyz   1"]


def test_allocation_rows_show_devices_pods_and_cores() -> None:
    claim = {
        "metadata": {"namespace": "ns", "name": "c", "uid": "cu"},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"driver": "trainium.sim.dev", "pool": "rack-a", "device": "server00"},
                        {"driver": "other", "pool": "x", "device": "y"},
                    ]
                }
            },
            "reservedFor": [{"uid": "p1"}],
        },
    }
    unallocated = {"metadata": {"namespace": "ns", "name": "d", "uid": "du"}, "status": {}}
    pods = {"p1": {"metadata": {"name": "trainer"}}}
    rows = allocation_rows(
        [claim, unallocated],
        pods,
        "trainium.sim.dev",
        lambda uid: {"rack-a-node-0": ClaimCores("1", "0,1,2,3")},
    )
    assert rows == [["ns", "c", "rack-a/server00", "trainer", "rack-a-node-0", "1", "0-3"]]


METRICS = """\
# TYPE neuroncore_utilization_ratio gauge
neuroncore_utilization_ratio{chip="0",neuroncore="0",node="rack-a-node-0",ultraserver="rack-a"} 1.0
neuroncore_utilization_ratio{chip="0",neuroncore="1",node="rack-a-node-0",ultraserver="rack-a"} 0.5
neuroncore_utilization_ratio{chip="0",neuroncore="0",node="rack-a-node-1",ultraserver="rack-a"} 0.0
# TYPE execution_status_total counter
execution_status_total{chip="0",node="rack-a-node-0",status_type="completed"} 3.0
execution_status_total{chip="0",node="rack-a-node-0",status_type="completed_with_err"} 1.0
"""


def test_top_reads_and_draws_per_core_utilization() -> None:
    sample = parse_metrics(METRICS)
    assert sample.cores["rack-a-node-0"] == {0: 1.0, 1: 0.5}
    assert sample.completed == 3.0
    assert shade(0.0) == " " and shade(1.0) == "█" and shade(7.0) == "█"
    rack = ClusterSpec.build(nodes_per_rack=2).racks[0]
    screen = render(rack, sample, "12:00:00")
    row = next(line for line in screen.splitlines() if line.startswith("rack-a-node-0 "))
    assert "|█▄      |" in row
    compact_screen = render(rack, sample, "12:00:00", idle_rows=False)
    assert "rack-a-node-1 " not in compact_screen and "(1 idle nodes not shown)" in compact_screen


def test_node_pools_reach_the_ultraserver_objects_and_the_saved_state() -> None:
    spec = ClusterSpec.build(racks=2, pools="node")
    assert all(
        ultraserver_object(r, spec.device_mode, spec.pools)["spec"]["pools"] == "node"
        for r in spec.racks
    )
    assert "pools" not in ultraserver_object(spec.racks[0], "partitioned")["spec"]
    assert ClusterSpec.from_json(spec.to_json()) == spec
    with pytest.raises(ClusterSpecError, match=r"^--pools: node needs --mode partitioned"):
        ClusterSpec.build(device_mode="flat", pools="node")
    # The fleet layout reaches the racks from the command line.
    flags = parse_up(["--racks", "2", "--pools", "server"])
    assert {
        ultraserver_object(r, "partitioned", flags.spec.pools)["spec"]["pools"]
        for r in flags.spec.racks
    } == {"server"}


def test_partition_sizes_reach_the_ultraserver_objects_and_bad_ones_are_refused() -> None:
    spec = ClusterSpec.build(pools="node", partition_sizes=(1, 2))
    [rack] = spec.racks
    assert ultraserver_object(rack, spec.device_mode, spec.pools, spec.partition_sizes)["spec"][
        "partitionSizes"
    ] == [1, 2]
    assert "partitionSizes" not in ultraserver_object(rack, spec.device_mode)["spec"]
    assert ClusterSpec.from_json(spec.to_json()) == spec
    for sizes in ((3,), (1, 1)):
        with pytest.raises(ClusterSpecError, match=r"^--partition-sizes: .* out of 1,2,4"):
            ClusterSpec.build(partition_sizes=sizes)
    with pytest.raises(ClusterSpecError, match="--mode partitioned"):
        ClusterSpec.build(device_mode="flat", partition_sizes=(1,))
    with pytest.raises(ClusterSpecError, match="write sizes as 1,2,4"):
        parse_sizes("1,two")
    with pytest.raises(ClusterSpecError, match=r"^--partition-sizes: 3 must be distinct"):
        parse_sizes("3")  # whatif offline reads the flag through this too
