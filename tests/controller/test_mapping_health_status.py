"""Pure pieces around the builder: spec parsing and node mapping, health
reports to taints and status conditions."""

import datetime

import pytest

from driver.controller.healthtaints import (
    Report,
    device_health,
    parse_reports,
    taints,
    unhealthy_cores,
)
from driver.controller.ultraserverstatus import Observed, compute_status
from driver.devicemodel.layout import build_layout
from driver.devicemodel.nodemap import map_nodes, selector_matches
from driver.devicemodel.ultraserver import SpecError, parse_spec
from simdevice.topology import rack_spec

NOW = datetime.datetime(2026, 12, 2, 10, 0, tzinfo=datetime.UTC)


def rack_obj(**spec: object) -> dict[str, object]:
    base = {"generation": "trn2", "nodes": {"names": ["a", "b", "c", "d"]}}
    return {"metadata": {"name": "r", "uid": "u", "generation": 3}, "spec": {**base, **spec}}


def test_parse_spec_defaults_and_errors_name_the_field() -> None:
    spec = parse_spec(rack_obj())
    assert (spec.mode, spec.flat_device, spec.default_lnc, spec.object_generation) == (
        "partitioned",
        "chip",
        2,
        3,
    )
    assert parse_spec(rack_obj(generation="trn3-gen1")).default_lnc == 1
    with pytest.raises(SpecError, match=r"^spec.generation: unknown generation 'trn9'"):
        parse_spec(rack_obj(generation="trn9"))
    with pytest.raises(SpecError, match=r"^spec.nodes.names: trn2 has 4 servers but 2 names"):
        parse_spec(rack_obj(nodes={"names": ["a", "b"]}))
    with pytest.raises(SpecError, match=r"^spec.nodes: set exactly one"):
        parse_spec(rack_obj(nodes={}))


def test_names_mapping_reports_missing_nodes_and_targets_the_rack_by_hostname() -> None:
    spec = parse_spec(rack_obj())
    labels = {n: {"kubernetes.io/hostname": f"h-{n}"} for n in "abcd"}
    full = map_nodes(spec, labels)
    assert full.nodes == {0: "a", 1: "b", 2: "c", 3: "d"} and not full.missing
    assert full.rack_nodes == {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {
                        "key": "kubernetes.io/hostname",
                        "operator": "In",
                        "values": ["h-a", "h-b", "h-c", "h-d"],
                    }
                ]
            }
        ]
    }
    partial = map_nodes(spec, {n: labels[n] for n in "abd"})
    assert partial.missing == {2: "node c not found"} and partial.rack_nodes is None
    unlabeled = map_nodes(spec, {**labels, "b": {}})
    assert unlabeled.rack_nodes is None and "b lack label" in (unlabeled.rack_problem or "")


def test_selector_mapping_by_server_index_label_and_conflicts() -> None:
    spec = parse_spec(rack_obj(nodes={"selector": {"matchLabels": {"rack": "x"}}}))
    idx = "trainium.sim.dev/server-index"
    nodes = {
        "n0": {"rack": "x", idx: "0"},
        "n1": {"rack": "x", idx: "1"},
        "n1b": {"rack": "x", idx: "1"},
        "n3": {"rack": "x", idx: "3"},
        "other": {"rack": "y", idx: "2"},
        "bad": {"rack": "x", idx: "9"},
    }
    m = map_nodes(spec, nodes)
    assert m.nodes == {0: "n0", 3: "n3"}
    assert m.missing == {1: "nodes n1, n1b all claim server 1", 2: f"no node with label {idx}=2"}
    complete = map_nodes(spec, {f"n{i}": {"rack": "x", idx: str(i)} for i in range(4)})
    term = complete.rack_nodes["nodeSelectorTerms"][0]["matchExpressions"]  # type: ignore[index]
    assert {"key": "rack", "operator": "In", "values": ["x"]} in term
    assert {"key": idx, "operator": "Lt", "values": ["4"]} in term


def test_selector_semantics() -> None:
    sel = {
        "matchLabels": {"a": "1"},
        "matchExpressions": [
            {"key": "b", "operator": "NotIn", "values": ["2"]},
            {"key": "c", "operator": "Exists"},
        ],
    }
    assert selector_matches(sel, {"a": "1", "c": ""})
    assert not selector_matches(sel, {"a": "1", "b": "2", "c": ""})
    assert not selector_matches(sel, {"a": "1"})


def test_health_taints_overlapping_devices_with_the_worst_state() -> None:
    layout = build_layout(rack_spec("trn3-gen2"))
    nodes = {s: f"n{s}" for s in range(36)}
    obj = {
        "spec": {
            "devices": [
                {"chip": 2, "state": "degraded", "reason": "Ecc"},
                {"chip": 2, "core": 3, "state": "failed", "reason": "Hang"},
                {"chip": 0, "state": "healthy"},
            ]
        }
    }
    reports = {"n5": parse_reports(obj)}
    assert reports["n5"] == [Report(2, None, "degraded", "Ecc"), Report(2, 3, "failed", "Hang")]
    health = {h.device: h for h in device_health(layout.devices, nodes, reports)}
    assert health["server05-chip02-core3"].state == "failed"
    assert health["server05-chip02-cores2-3"].state == "failed"
    assert health["server05-chip02-core4"].state == "degraded"
    assert health["server05-chip02"].state == "failed" and health["server05"].state == "failed"
    assert health["ultraserver"].node is None and health["server05"].node == "n5"
    assert len(health) == 15 + 2
    t = taints(health.values(), "d.dev")
    assert t["server05-chip02-core4"] == [
        {"key": "d.dev/unhealthy", "value": "degraded", "effect": "NoSchedule"}
    ]
    assert t["server05-chip02-core3"][0]["effect"] == "NoExecute"
    assert unhealthy_cores(nodes, reports, 8) == 8
    assert device_health(layout.devices, {s: n for s, n in nodes.items() if s != 5}, reports) == []


def test_status_conditions_keep_their_time_until_they_change() -> None:
    layout = build_layout(rack_spec("trn2"))
    spec = parse_spec(rack_obj())
    mapping = map_nodes(spec, {n: {"kubernetes.io/hostname": n} for n in "abcd"})
    obs = Observed(
        3, 4, mapping, layout.devices, 1, 20, (), {"server00-chip00-cores0-3", "server01"}, 0, None
    )
    first = compute_status(obs, None, NOW)
    assert first["cores"] == {"total": 512, "allocated": 4 + 128, "free": 512 - 132, "unhealthy": 0}
    assert first["devices"] == {"core": 64 * 14, "chip": 64, "server": 4, "ultraserver": 1}
    assert [c["status"] for c in first["conditions"]] == ["True", "True", "False"]
    later = compute_status(obs, first, NOW + datetime.timedelta(hours=1))
    assert later == first
    broken = compute_status(
        Observed(3, 4, mapping, layout.devices, 1, 20, (), (), 0, "500 boom"),
        first,
        NOW + datetime.timedelta(hours=2),
    )
    ready = broken["conditions"][0]
    assert (ready["status"], ready["reason"]) == ("False", "PublishFailed")
    assert ready["lastTransitionTime"] == "2026-12-02T12:00:00Z"
    assert (
        broken["conditions"][2]["lastTransitionTime"]
        == first["conditions"][2]["lastTransitionTime"]
    )
