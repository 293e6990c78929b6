"""The pure pieces of a cheap resync: the inputs digest moves exactly when
something the slices are built from moves, and the slice index tracks each
rack's slices from watch events."""

from driver.controller.healthtaints import Report
from driver.controller.rackstate import inputs_key
from driver.controller.sliceindex import SliceIndex
from driver.devicemodel.nodemap import map_nodes
from driver.devicemodel.ultraserver import parse_spec
from testbed.controlplane import ultraserver

NODES = [f"dig-{i}" for i in range(4)]
LABEL = "neuron.sim.dev/ultraserver"


def rack(**spec: object) -> dict[str, object]:
    obj = ultraserver("dig", "trn2", NODES, **spec)
    obj["metadata"].update(uid="uid-1", generation=1)
    return obj


def key(
    obj: dict[str, object], nodes: dict[str, dict[str, str]], reports: dict[str, list[Report]]
) -> str:
    return inputs_key(obj, map_nodes(parse_spec(obj), nodes), reports, "neuron.sim.dev", True)


def labels(names: list[str]) -> dict[str, dict[str, str]]:
    return {n: {"kubernetes.io/hostname": n} for n in names}


def test_the_digest_follows_the_inputs_and_nothing_else() -> None:
    base = key(rack(), labels(NODES), {})
    assert key(rack(), labels(NODES), {}) == base
    # A node of another rack, or a health report of one, changes nothing here.
    assert (
        key(rack(), labels([*NODES, "elsewhere"]), {"elsewhere": [Report(0, None, "failed", "x")]})
        == base
    )
    assert key(rack(), labels(NODES[:3]), {}) != base
    assert key(rack(), labels(NODES), {NODES[1]: [Report(0, None, "failed", "x")]}) != base
    assert key(rack(mode="flat"), labels(NODES), {}) != base
    other = rack()
    other["metadata"]["uid"] = "uid-2"  # type: ignore[index]
    assert key(other, labels(NODES), {}) != base


def meta(name: str, rack_name: str, rv: str) -> dict[str, object]:
    return {"name": name, "resourceVersion": rv, "labels": {LABEL: rack_name}}


def test_the_index_tracks_each_racks_slices() -> None:
    index = SliceIndex(LABEL)
    changed = index.replace([meta("a.0", "a", "1"), meta("a.1", "a", "2"), meta("b.0", "b", "3")])
    assert changed == {"a", "b"}
    assert index.versions("a") == {"a.0": "1", "a.1": "2"}
    assert index.apply("MODIFIED", meta("a.1", "a", "7")) == "a"
    assert index.versions("a") == {"a.0": "1", "a.1": "7"}
    assert index.apply("DELETED", meta("b.0", "b", "8")) == "b"
    assert index.versions("b") == {}
    assert index.apply("ADDED", {"name": "foreign", "resourceVersion": "9"}) is None
    # A relist reports only the racks whose slices differ from what the watch showed.
    assert index.replace([meta("a.0", "a", "1"), meta("a.1", "a", "7"), meta("c.0", "c", "9")]) == {
        "c"
    }
