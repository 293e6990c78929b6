"""The slice builder against the API limits of resource.k8s.io/v1 (k8s.io/api
v0.36 resource/v1 types.go and the apiserver's validation), for every generation
and mode."""

import itertools
import re
from collections import Counter

import pytest

from driver.controller.slices import build_slices
from driver.devicemodel.layout import LayoutOptions, planned_devices
from driver.devicemodel.poolplan import RackInput
from driver.devicemodel.ultraserver import SpecError, parse_spec
from simdevice.topology import GENERATIONS, rack_spec

DRIVER = "trainium.sim.dev"
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,31}$")
MAX_DEVICES_WITH_COUNTERS_OR_TAINTS = 64
MAX_COUNTER_SETS = 8
MAX_COUNTERS_PER_SET = 32
MAX_CONSUMPTIONS_PER_DEVICE = 2
MAX_COUNTERS_PER_CONSUMPTION = 32
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_STRING_ATTRIBUTE = 64
MODES = [
    ("partitioned", "chip", "rack"),
    ("partitioned", "chip", "node"),
    ("partitioned", "chip", "server"),
    ("flat", "chip", "rack"),
    ("flat", "core", "rack"),
]


def rack_input(
    generation: str, mode: str, flat_device: str, name: str = "r" * 63, pools: str = "rack"
) -> RackInput:
    rack = rack_spec(generation)
    nodes = {s: f"node-{s:03d}-" + "n" * 200 for s in range(rack.servers)}
    selector = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Exists"}]}]}
    # With binding conditions, as published by default: the limits must hold with them.
    return RackInput(
        name,
        rack,
        mode,
        flat_device,
        nodes,
        selector,
        {},
        True,
        LayoutOptions(pools),
    )


@pytest.mark.parametrize(
    ("generation", "mode", "flat_device", "pools"), [(g, *m) for g in GENERATIONS for m in MODES]
)
def test_every_limit_holds(generation: str, mode: str, flat_device: str, pools: str) -> None:
    slices = build_slices(rack_input(generation, mode, flat_device, pools=pools), DRIVER)
    set_names: list[tuple[str, str]] = []
    device_names: list[str] = []
    per_pool = Counter(s["spec"]["pool"]["name"] for s in slices)
    for s in slices:
        name = s["metadata"]["name"]
        assert len(name) <= 253 and all(DNS_LABEL.match(part) for part in name.split("."))
        spec = s["spec"]
        pool = spec["pool"]["name"]
        assert len(pool) <= 253 and all(DNS_SUBDOMAIN.match(part) for part in pool.split("/"))
        assert spec["pool"]["resourceSliceCount"] == per_pool[pool]
        assert ("devices" in spec) != ("sharedCounters" in spec)
        selections = [
            k
            for k in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")
            if k in spec
        ]
        assert len(selections) == 1
        if pool == "r" * 63:
            assert "nodeName" not in spec, "a kubelet deletes the slices named after its node"
        else:
            assert pools in ("node", "server") and "nodeName" in spec, (
                "a server's pool is indexed by its node"
            )
        sets = spec.get("sharedCounters", [])
        assert len(sets) <= MAX_COUNTER_SETS
        for counter_set in sets:
            assert DNS_LABEL.match(counter_set["name"])
            assert 1 <= len(counter_set["counters"]) <= MAX_COUNTERS_PER_SET
            assert all(DNS_LABEL.match(c) for c in counter_set["counters"])
            set_names.append((pool, counter_set["name"]))
        devices = spec.get("devices", [])
        assert len(devices) <= MAX_DEVICES_WITH_COUNTERS_OR_TAINTS
        for d in devices:
            assert DNS_LABEL.match(d["name"])
            device_names.append(d["name"])
            assert len(d["attributes"]) + len(d["capacity"]) <= MAX_ATTRIBUTES_AND_CAPACITIES
            for key in itertools.chain(d["attributes"], d["capacity"]):
                assert C_IDENTIFIER.match(key), key
            for value in d["attributes"].values():
                assert len(value) == 1
                assert len(str(value.get("string", ""))) <= MAX_STRING_ATTRIBUTE
            consumes = d.get("consumesCounters", [])
            assert len(consumes) <= MAX_CONSUMPTIONS_PER_DEVICE
            assert len({c["counterSet"] for c in consumes}) == len(consumes)
            assert all(len(c["counters"]) <= MAX_COUNTERS_PER_CONSUMPTION for c in consumes)
            if mode == "flat":
                assert not consumes
    assert len(set(set_names)) == len(set_names)
    assert len(set(device_names)) == len(device_names)


@pytest.mark.parametrize("generation", GENERATIONS)
def test_partitioned_publishes_every_kind(generation: str) -> None:
    rack = rack_spec(generation)
    slices = build_slices(rack_input(generation, "partitioned", "chip"), DRIVER)
    kinds: dict[str, int] = {}
    for s in slices:
        for d in s["spec"].get("devices", []):
            kind = d["attributes"]["resourceType"]["string"]
            kinds[kind] = kinds.get(kind, 0) + 1
    assert kinds == {
        "core": rack.chips * (8 + 4 + 2),
        "chip": rack.chips,
        "server": rack.servers,
        "ultraserver": 1,
    }


def test_missing_node_withdraws_its_devices_and_the_rack_device() -> None:
    full = rack_input("trn3-gen2", "partitioned", "chip")
    partial = RackInput(
        **{**full.__dict__, "nodes": {s: n for s, n in full.nodes.items() if s != 7}}
    )
    names = {s["metadata"]["name"].split(".")[1] for s in build_slices(partial, DRIVER)}
    assert "server07" not in names and "server06" in names
    assert "ultraserver" not in names
    assert {n for n in names if n.startswith("counters-")} == {f"counters-{i}" for i in range(5)}


def test_node_pools_give_each_server_its_own_pool_on_its_node() -> None:
    slices = build_slices(
        rack_input("trn3-gen1", "partitioned", "chip", name="rack-b", pools="node"), DRIVER
    )
    by_pool: dict[str, set[str]] = {}
    for s in slices:
        where = s["spec"].get("nodeName") or "rack-wide"
        by_pool.setdefault(s["spec"]["pool"]["name"], set()).add(where)
    assert by_pool.pop("rack-b") == {"rack-wide"}
    assert len(by_pool) == 4
    for server in range(4):
        assert by_pool[f"rack-b/server{server:02d}"] == {f"node-{server:03d}-" + "n" * 200}
    rack_device = next(s for s in slices if s["spec"]["pool"]["name"] == "rack-b")
    assert [d["name"] for d in rack_device["spec"]["devices"]] == ["ultraserver"]
    assert "consumesCounters" not in rack_device["spec"]["devices"][0]


def test_slices_sort_counters_then_servers_then_rack() -> None:
    names = [
        s["metadata"]["name"].split(".")[1]
        for s in build_slices(rack_input("trn3-gen2", "partitioned", "chip"), DRIVER)
    ]
    assert names == sorted(names)
    assert names[:5] == [f"counters-{i}" for i in range(5)]
    assert names[5:41] == [f"server{i:02d}" for i in range(36)]
    assert names[-1] == "ultraserver"


@pytest.mark.parametrize(("sizes", "per_chip"), [((1,), 9), ((1, 4), 11), ((1, 2, 4), 15)])
def test_partition_sizes_decide_the_devices_of_a_chip(
    sizes: tuple[int, ...], per_chip: int
) -> None:
    spec = parse_spec(
        {
            "metadata": {"name": "r"},
            "spec": {
                "generation": "trn3-gen2",
                "partitionSizes": list(sizes),
                "nodes": {"names": [f"n{i}" for i in range(36)]},
            },
        }
    )
    devices = planned_devices(spec.rack, "partitioned", "chip", spec.layout)
    assert len(devices) == 144 * per_chip + 36 + 1
    assert {d.core_count for d in devices if d.kind == "core"} == set(sizes)


@pytest.mark.parametrize("sizes", [[3], [1, 1], "1", [8]])
def test_partition_sizes_outside_the_aligned_ones_are_refused(sizes: object) -> None:
    obj = {
        "metadata": {"name": "r"},
        "spec": {
            "generation": "trn3-gen1",
            "partitionSizes": sizes,
            "nodes": {"names": [f"n{i}" for i in range(4)]},
        },
    }
    with pytest.raises(SpecError, match=r"^spec\.partitionSizes: .* 1, 2, 4"):
        parse_spec(obj)
