"""Desired vs existing ResourceSlices of one rack -> the fewest writes.

Pure. Each pool of the rack is planned on its own (the `node` and `server`
layouts have a pool per server): a change in one pool, such as the rack
device withdrawn from its pool of one, never rewrites the other pools, whose
every rewrite the scheduler would take in and requeue its pods for. Rules,
per pool:
- equal slices (after normalising what the apiserver adds) are not written,
  so a resync with nothing changed makes no write at all;
- a change confined to one existing slice is one update that keeps the pool
  generation: a single write is atomic, consumers never see a mixed pool;
- so are taints added or lifted, and devices reordered, in several slices (a
  failed chip taints its own devices, its server and the rack-wide device;
  `order` publishing moves blocked devices back): each device stays in its
  slice, so a consumer that reads the pool between the updates sees every
  device once, tainted or not yet, as if the failure came a moment later, and
  the eviction controller acts on the first slice written;
- anything larger (slices added or removed, several changed otherwise) moves
  the pool generation, so every slice of the pool is written with it. Consumers
  ignore the pool until all `resourceSliceCount` slices of the new generation
  exist.
Obsolete slices are deleted first, then updates, then creates.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kubernetes.utils import parse_quantity

from driver.jsontypes import JSON

SPEC_FIELDS: Final = (
    "driver",
    "pool",
    "nodeName",
    "nodeSelector",
    "allNodes",
    "perDeviceNodeSelection",
    "devices",
    "sharedCounters",
)


@dataclass(frozen=True)
class Write:
    verb: str  # create | update | delete
    name: str
    body: JSON | None  # full object for create/update
    resource_version: str | None  # optimistic concurrency for update/delete


@dataclass(frozen=True)
class WritePlan:
    """The writes that turn a pool (or a rack's pools) into the desired slices,
    and the pool generation they leave."""

    generation: int
    writes: tuple[Write, ...]


def plan_writes(desired: Sequence[JSON], existing: Sequence[JSON], owner: JSON | None) -> WritePlan:
    """The writes that turn `existing` into `desired` (pool.generation filled
    in), pool by pool; its generation is the highest of the pools'.
    Obsolete slices are deleted first, then updates, then creates, across pools."""
    pools = dict.fromkeys(_pool(s) for s in [*existing, *desired])
    per_pool = [
        _plan_pool(
            [s for s in desired if _pool(s) == pool],
            [s for s in existing if _pool(s) == pool],
            owner,
        )
        for pool in pools
    ]
    order = {"delete": 0, "update": 1, "create": 2}
    writes = sorted((w for p in per_pool for w in p.writes), key=lambda w: order[w.verb])
    return WritePlan(max((p.generation for p in per_pool), default=0), tuple(writes))


def _pool(slice_: JSON) -> str:
    return str(slice_["spec"]["pool"]["name"])


def _plan_pool(desired: Sequence[JSON], existing: Sequence[JSON], owner: JSON | None) -> WritePlan:
    """The writes of one pool."""
    current = {str(s["metadata"]["name"]): s for s in existing}
    generations = {int(s["spec"]["pool"]["generation"]) for s in existing}
    generation = max(generations, default=0)
    wanted = {str(s["metadata"]["name"]): s for s in desired}

    def want(name: str, gen: int) -> JSON:
        body = _with_generation(wanted[name], gen)
        if owner is not None:
            body["metadata"]["ownerReferences"] = [owner]
        return body

    changed = [n for n in wanted if n in current and not same(want(n, generation), current[n])]
    creates = [n for n in wanted if n not in current]
    deletes = [n for n in current if n not in wanted]
    beyond = [n for n in changed if not same_devices(want(n, generation), current[n])]
    if not creates and not deletes and len(beyond) <= 1 and len(generations) <= 1:
        return WritePlan(
            generation, tuple(_update(want(n, generation), current[n]) for n in changed)
        )
    generation += 1
    writes = [Write("delete", n, None, _rv(current[n])) for n in deletes]
    writes += [_update(want(n, generation), current[n]) for n in wanted if n in current]
    writes += [Write("create", n, want(n, generation), None) for n in creates]
    return WritePlan(generation, tuple(writes))


def _update(body: JSON, existing: JSON) -> Write:
    body["metadata"]["resourceVersion"] = _rv(existing)
    _keep_taint_times(body, existing)
    return Write("update", str(body["metadata"]["name"]), body, _rv(existing))


def _keep_taint_times(body: JSON, existing: JSON) -> None:
    """A taint that stays keeps the time the apiserver first stamped on it."""
    stamped = {
        (d["name"], t["key"], t.get("value", ""), t["effect"]): t["timeAdded"]
        for d in existing["spec"].get("devices") or []
        for t in d.get("taints") or []
        if t.get("timeAdded")
    }
    if not stamped:
        return

    def stamp(device: JSON) -> JSON:
        taints = [
            {**t, "timeAdded": stamped[k]}
            if (k := (device["name"], t["key"], t.get("value", ""), t["effect"])) in stamped
            else t
            for t in device.get("taints") or []
        ]
        return {**device, "taints": taints} if taints else device

    devices = [stamp(d) for d in body["spec"].get("devices") or []]
    body["spec"] = {**body["spec"], "devices": devices}


def _rv(obj: JSON) -> str:
    return str(obj["metadata"].get("resourceVersion", ""))


def _with_generation(slice_: JSON, generation: int) -> JSON:
    meta = dict(slice_["metadata"])
    meta["labels"] = dict(meta.get("labels") or {})
    spec = dict(slice_["spec"])
    spec["pool"] = {**spec["pool"], "generation": generation}
    return {**slice_, "metadata": meta, "spec": spec}


def same(desired: JSON, existing: JSON) -> bool:
    """Equal as the apiserver stores them: our labels and owner, the spec."""
    labels = existing["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in desired["metadata"]["labels"].items()):
        return False
    if _owners(desired) != _owners(existing):
        return False
    if desired["spec"] == existing["spec"]:  # the common case, without normalising
        return True
    return normalize_spec(desired["spec"]) == normalize_spec(existing["spec"])


def same_devices(desired: JSON, existing: JSON) -> bool:
    """Equal once every device's taints are set aside and devices are taken
    by name, in any order."""
    return same(_untainted_by_name(desired), _untainted_by_name(existing))


def _untainted_by_name(slice_: JSON) -> JSON:
    devices = sorted(
        (
            {k: v for k, v in d.items() if k != "taints"}
            for d in slice_["spec"].get("devices") or []
        ),
        key=lambda d: str(d.get("name")),
    )
    return {**slice_, "spec": {**slice_["spec"], "devices": devices}}


def _owners(obj: JSON) -> list[tuple[str, str, str, str]]:
    return [
        (str(o.get("apiVersion")), str(o.get("kind")), str(o.get("name")), str(o.get("uid")))
        for o in obj["metadata"].get("ownerReferences") or []
    ]


def normalize_spec(spec: Mapping[str, Any]) -> JSON:
    """Drop empty fields and taint timestamps, parse quantities to numbers."""
    out: JSON = {}
    for key in SPEC_FIELDS:
        value = spec.get(key)
        if value in (None, [], {}, False):
            continue
        if key == "devices":
            value = [_device(d) for d in value]
        elif key == "sharedCounters":
            value = [{"name": c["name"], "counters": _counters(c.get("counters"))} for c in value]
        out[key] = value
    return out


def _device(device: Mapping[str, Any]) -> JSON:
    out: JSON = {k: v for k, v in device.items() if v not in (None, [], {}, False)}
    if "capacity" in out:
        out["capacity"] = {
            k: {**v, "value": parse_quantity(v["value"])} for k, v in out["capacity"].items()
        }
    if "consumesCounters" in out:
        out["consumesCounters"] = [
            {"counterSet": c["counterSet"], "counters": _counters(c.get("counters"))}
            for c in out["consumesCounters"]
        ]
    if "taints" in out:
        out["taints"] = [{k: v for k, v in t.items() if k != "timeAdded"} for t in out["taints"]]
    return out


def _counters(counters: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: parse_quantity(v["value"]) for k, v in (counters or {}).items()}
