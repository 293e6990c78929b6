"""The write planner: fewest writes, and the pool generation rule."""

import copy
from typing import Any

from driver.controller.slices import build_slices
from driver.controller.writeplan import plan_writes
from driver.devicemodel.layout import LayoutOptions
from driver.devicemodel.poolplan import RackInput
from simdevice.topology import rack_spec

OWNER = {
    "apiVersion": "trainium.sim.dev/v1alpha1",
    "kind": "UltraServer",
    "name": "r",
    "uid": "u1",
    "controller": True,
}


def desired(
    nodes: dict[int, str] | None = None, taints: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    rack = rack_spec("trn2")
    nodes = {s: f"n{s}" for s in range(rack.servers)} if nodes is None else nodes
    sel = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Exists"}]}]}
    return build_slices(
        RackInput("r", rack, "partitioned", "chip", nodes, sel, taints or {}, False), "d.dev"
    )


def stored(writes: Any) -> list[dict[str, Any]]:
    """What the apiserver would hold after the writes: resourceVersion set, taints stamped."""
    out = []
    for i, w in enumerate(writes):
        body = copy.deepcopy(w.body)
        body["metadata"]["resourceVersion"] = str(100 + i)
        for d in body["spec"].get("devices", []):
            for t in d.get("taints", []):
                t.setdefault("timeAdded", "2026-01-01T00:00:00Z")
        out.append(body)
    return out


def test_cold_publish_creates_every_slice_at_generation_one() -> None:
    write_plan = plan_writes(desired(), [], OWNER)
    assert write_plan.generation == 1
    assert [w.verb for w in write_plan.writes] == ["create"] * len(desired())
    assert all(w.body and w.body["spec"]["pool"]["generation"] == 1 for w in write_plan.writes)
    assert all(
        w.body and w.body["metadata"]["ownerReferences"] == [OWNER] for w in write_plan.writes
    )


def test_resync_with_nothing_changed_writes_nothing() -> None:
    existing = stored(plan_writes(desired(), [], OWNER).writes)
    write_plan = plan_writes(desired(), existing, OWNER)
    assert write_plan.writes == ()
    assert write_plan.generation == 1


def test_quantities_compare_by_value_not_spelling() -> None:
    existing = stored(plan_writes(desired(), [], OWNER).writes)
    for s in existing:
        for d in s["spec"].get("devices", []):
            d["capacity"]["hbm"]["value"] = f"{int(d['capacity']['hbm']['value']) // 1024**3}Gi"
    assert plan_writes(desired(), existing, OWNER).writes == ()


def test_change_in_one_slice_is_one_update_at_the_same_generation() -> None:
    existing = stored(plan_writes(desired(), [], OWNER).writes)
    taint = [{"key": "d.dev/unhealthy", "value": "degraded", "effect": "NoSchedule"}]
    write_plan = plan_writes(desired(taints={"server01-chip05": taint}), existing, OWNER)
    assert write_plan.generation == 1
    assert [(w.verb, w.name) for w in write_plan.writes] == [
        ("update", "r.server01-chips04-07.d.dev")
    ]
    assert write_plan.writes[0].resource_version is not None


def test_taints_in_several_slices_are_updates_at_the_same_generation() -> None:
    existing = stored(plan_writes(desired(), [], OWNER).writes)
    taint = [{"key": "d.dev/unhealthy", "value": "failed", "effect": "NoExecute"}]
    tainted = {"server01-chip05": taint, "server01": taint, "ultraserver": taint}
    write_plan = plan_writes(desired(taints=tainted), existing, OWNER)
    assert write_plan.generation == 1
    assert sorted((w.verb, w.name) for w in write_plan.writes) == [
        ("update", "r.server01-chips04-07.d.dev"),
        ("update", "r.server01-chips12-15.d.dev"),
        ("update", "r.ultraserver.d.dev"),
    ]
    written = {s["metadata"]["name"]: s for s in stored(write_plan.writes)}
    after = [written.get(s["metadata"]["name"], s) for s in existing]
    lifted = plan_writes(desired(), after, OWNER)
    assert lifted.generation == 1 and len(lifted.writes) == 3


def test_taints_beside_a_change_in_another_slice_move_the_generation() -> None:
    existing = stored(plan_writes(desired(), [], OWNER).writes)
    taint = [{"key": "d.dev/unhealthy", "value": "failed", "effect": "NoExecute"}]
    want = desired(taints={"server01-chip05": taint, "ultraserver": taint})
    edited = next(s for s in want if s["metadata"]["name"] == "r.server02-chips00-03.d.dev")
    edited["spec"]["devices"][0]["attributes"] = {"extra": {"string": "x"}}
    edited2 = next(s for s in want if s["metadata"]["name"] == "r.server03-chips00-03.d.dev")
    edited2["spec"]["devices"][0]["attributes"] = {"extra": {"string": "y"}}
    write_plan = plan_writes(want, existing, OWNER)
    assert write_plan.generation == 2 and len(write_plan.writes) == len(existing)


def test_taint_keeps_its_time_when_the_pool_is_rewritten() -> None:
    taint = [{"key": "d.dev/unhealthy", "value": "failed", "effect": "NoExecute"}]
    existing = stored(plan_writes(desired(taints={"server01-chip05": taint}), [], OWNER).writes)
    assert plan_writes(desired(taints={"server01-chip05": taint}), existing, OWNER).writes == ()
    nodes = {0: "n0", 1: "n1", 2: "n2"}
    write_plan = plan_writes(
        desired(nodes=nodes, taints={"server01-chip05": taint}), existing, OWNER
    )
    body = next(w.body for w in write_plan.writes if w.name == "r.server01-chips04-07.d.dev")
    assert body is not None
    chip = next(d for d in body["spec"]["devices"] if d["name"] == "server01-chip05")
    assert chip["taints"][0]["timeAdded"] == "2026-01-01T00:00:00Z"


def test_node_gone_deletes_its_slices_and_moves_the_generation() -> None:
    existing = stored(plan_writes(desired(), [], OWNER).writes)
    write_plan = plan_writes(desired(nodes={0: "n0", 1: "n1", 3: "n3"}), existing, OWNER)
    assert write_plan.generation == 2
    deletes = sorted(w.name for w in write_plan.writes if w.verb == "delete")
    assert deletes == sorted(
        [f"r.server02-chips{a:02d}-{a + 3:02d}.d.dev" for a in (0, 4, 8, 12)]
        + ["r.ultraserver.d.dev"]
    )
    updates = [w for w in write_plan.writes if w.verb == "update"]
    assert len(updates) == len(existing) - 5
    assert all(
        w.body
        and w.body["spec"]["pool"]
        == {"name": "r", "generation": 2, "resourceSliceCount": len(existing) - 5}
        for w in updates
    )
    assert [w.verb for w in write_plan.writes][:5] == ["delete"] * 5


def test_half_published_pool_converges_in_one_generation_without_duplicates() -> None:
    full = stored(plan_writes(desired(), [], OWNER).writes)
    half = full[:7]
    for s in half[:3]:
        s["spec"]["pool"]["generation"] = 0
    write_plan = plan_writes(desired(), half, OWNER)
    assert write_plan.generation == 2
    names = [w.name for w in write_plan.writes]
    assert len(names) == len(set(names)) == len(full)
    assert {w.verb for w in write_plan.writes} == {"update", "create"}


def test_new_owner_uid_rewrites_the_pool() -> None:
    existing = stored(plan_writes(desired(), [], OWNER).writes)
    write_plan = plan_writes(desired(), existing, {**OWNER, "uid": "u2"})
    assert write_plan.generation == 2 and len(write_plan.writes) == len(existing)


def node_pool_rack(advertised: bool) -> list[dict[str, Any]]:
    rack = rack_spec("trn3-gen2")
    nodes = {s: f"n{s}" for s in range(rack.servers)}
    sel = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Exists"}]}]}
    return build_slices(
        RackInput(
            "r",
            rack,
            "partitioned",
            "chip",
            nodes,
            sel,
            {},
            True,
            layout=LayoutOptions("node"),
            rack_advertised=advertised,
        ),
        "d.dev",
    )


def test_the_rack_device_leaving_rewrites_no_server_pool() -> None:
    existing = stored(plan_writes(node_pool_rack(True), [], OWNER).writes)
    withdrawn = plan_writes(node_pool_rack(False), existing, OWNER)
    assert [(w.verb, w.name) for w in withdrawn.writes] == [("delete", "r.ultraserver.d.dev")]
    back = plan_writes(node_pool_rack(True), existing[:-1], OWNER)
    assert [w.verb for w in back.writes] == ["create"]
    assert back.writes[0].body is not None
    assert back.writes[0].body["spec"]["pool"] == {
        "name": "r",
        "generation": 1,
        "resourceSliceCount": 1,
    }
