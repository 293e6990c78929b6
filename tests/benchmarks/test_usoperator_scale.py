"""The operator scale benchmark's core at a tiny size against a real control
plane and the real operator process, its allocation check on allocations it
must refuse, and its page block."""

import copy
from pathlib import Path
from typing import Any

import pytest

from benchmarks.pages import usoperator_scale as page
from benchmarks.usoperator_scale import (
    SHAPES,
    allocate_and_release,
    allocation_errors,
    fleet,
    fleet_nodes,
    percentile,
    running_fleet,
    ultraservers,
    workload_objects,
)
from localsim.controlplane.plane import ControlPlane

PAIR = "neuron.amazonaws.com/ultraserver-server-id-2"


@pytest.mark.integration
def test_a_small_fleet_allocates_and_releases_every_workload(tmp_path: Path) -> None:
    with (
        ControlPlane.running(tmp_path / "cp", storage_only=True) as cp,
        running_fleet(cp, tmp_path, racks=4) as f,
    ):
        results = allocate_and_release(f, 3)
        left = ultraservers(f.api)
    assert (results["racks"], results["nodes"], results["workloads"]) == (4, 16, 3)
    assert results["nodes_allocated"] == 1 + 2 + 4
    assert results["ultraserver_allocations"] == 3
    seconds = results["to_allocated_seconds"]
    assert (
        0 < seconds["p50"] <= seconds["p90"] <= seconds["max"] <= results["allocate_wall_seconds"]
    )
    assert results["allocate_cpu_seconds_per_workload"] > 0
    assert results["release_wall_seconds"] > 0
    assert 0 < results["rss_mib_allocated"] <= results["rss_mib_peak"]
    assert len(left) == 4
    assert not any(u["status"].get("allocations") for u in left)


def allocated(name: str, size: int, count: int, nodes: list[str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"topologySize": size, "serverCount": count},
        "status": {"state": "Allocated", "nodes": nodes},
    }


SPEC = fleet(3)
LABELS = fleet_nodes(SPEC)
RACK_OF = {r.node_name(s): r.name for r in SPEC.racks for s in range(r.nodes)}


def test_right_allocations_pass_the_check() -> None:
    workloads = [
        allocated("pair", 2, 1, ["us-000-node-0", "us-000-node-1"]),
        allocated("two", 1, 2, ["us-000-node-2", "us-001-node-0"]),
        allocated("quad", 4, 1, [f"us-002-node-{i}" for i in range(4)]),
    ]
    assert LABELS["us-000-node-0"][PAIR] == LABELS["us-000-node-1"][PAIR]
    assert allocation_errors(workloads, LABELS, RACK_OF) == []


def test_a_node_in_two_workloads_is_named() -> None:
    workloads = [
        allocated("a", 1, 1, ["us-000-node-0"]),
        allocated("b", 1, 1, ["us-000-node-0"]),
    ]
    assert allocation_errors(workloads, LABELS, RACK_OF) == [
        "node us-000-node-0 is held by both a and b"
    ]


def test_a_pair_across_pairs_and_groups_in_one_ultraserver_are_named() -> None:
    split = allocated("split", 2, 1, ["us-000-node-1", "us-000-node-2"])
    crowded = allocated("crowded", 1, 2, ["us-001-node-0", "us-001-node-3"])
    short = allocated("short", 4, 1, ["us-002-node-0"])
    errors = allocation_errors([split, crowded, short], LABELS, RACK_OF)
    assert errors == [
        "split holds ['us-000-node-1', 'us-000-node-2'] of us-000, not one group of 2",
        "crowded holds nodes of 1 UltraServers, wants 2",
        "crowded holds ['us-001-node-0', 'us-001-node-3'] of us-001, not one group of 1",
        "short holds 1 nodes, wants 4 x 1",
        "short holds ['us-002-node-0'] of us-002, not one group of 4",
    ]


def test_workloads_take_every_shape_in_turn() -> None:
    shapes = [(w["spec"]["topologySize"], w["spec"]["serverCount"]) for w in workload_objects(8)]
    assert shapes == [*SHAPES, *SHAPES[:2]]


def test_percentile_is_a_measured_value() -> None:
    values = [0.5, 0.1, 0.4, 0.2, 0.3]
    assert (percentile(values, 0.5), percentile(values, 0.9), percentile(values, 1.0)) == (
        0.3,
        0.5,
        0.5,
    )


PAYLOAD = {
    "command": "make bench-usoperator-scale",
    "machine": {"date": "2026-12-06", "cpus": 2, "python": "3.11.7"},
    "conditions": {
        "cpus": 2,
        "kubernetes_version": "v1.37.2",
        "git_commit": "0123456789abcdef",
        "load_1min_before": 0.5,
        "load_during_1min": {"samples": 3, "max": 0.7, "mean": 0.6},
        "load_1min_after": 0.6,
    },
    "results": {
        "racks": 100,
        "nodes": 400,
        "workloads": 50,
        "nodes_allocated": 171,
        "shapes": [list(s) for s in SHAPES],
        "poll_seconds": 0.1,
        "to_allocated_seconds": {"p50": 1.25, "p90": 1.5, "max": 1.75},
        "allocate_wall_seconds": 1.8,
        "allocate_cpu_seconds_per_workload": 0.017,
        "release_wall_seconds": 1.4,
        "release_cpu_seconds_per_workload": 0.009,
        "rss_mib_allocated": 182.0,
        "rss_mib_peak": 230.0,
    },
}
EMPTY = "<!-- usoperator-scale:start -->\n<!-- usoperator-scale:end -->"


def test_the_block_shows_the_run_and_says_when_there_is_none() -> None:
    text = page.render(EMPTY, copy.deepcopy(PAYLOAD))
    assert (
        "| seconds from a workload's create to `Allocated`: p50, p90, max | 1.25, 1.50, 1.75 |"
        in text
    )
    assert "| operator CPU seconds per workload, releasing | 0.009 |" in text
    assert "100 Trn3 Gen1 UltraServers (400 nodes); 50 workloads" in text
    assert page.NOT_RUN in page.render(EMPTY, None)
