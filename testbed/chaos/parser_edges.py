"""The input edges that are pure parsers, each as a hypothesis strategy and a check.

- opaque claim configs, as the node daemon parses them at prepare;
- UltraServer objects, as the controller parses them;
- NodeDeviceHealth reports (schema-valid, as the apiserver lets them in),
  as the controller turns them into taints;
- checkpoint files, truncated, flipped or edited with a recomputed checksum,
  as the daemon reads them at start;
- slices of a pool edited by someone else, as the controller plans the writes
  that put them back.
"""

import json
import random
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from driver.controller.healthtaints import EFFECTS, STATES, device_health, parse_reports, taints
from driver.controller.slices import MANAGED_BY_LABEL, build_slices
from driver.controller.writeplan import WritePlan, plan_writes, same
from driver.devicemodel.layout import build_layout
from driver.devicemodel.poolplan import RackInput
from driver.devicemodel.profiles import CONFIG_KINDS as KINDS
from driver.devicemodel.profiles import NEURON_CONFIG, TRAINIUM
from driver.devicemodel.ultraserver import DEVICE_MODES, FLAT_DEVICES, SpecError, parse_spec
from driver.jsontypes import JSON
from driver.names import DEFAULT_DRIVER_NAME, rack_label
from driver.node.claimconfig import ConfigError, parse_config, shown
from driver.node.durable.checkpoint import (
    CheckpointError,
    ClaimRecord,
    DeviceRecord,
    checksum,
    decode,
    encode_plain,
)
from simdevice.topology import GENERATIONS, VALID_LNC, rack_spec
from testbed.chaos.fuzzing import ACCEPTED, JSON_VALUES, REFUSED, either, maybe_field, weighted

# --- opaque claim configs ---------------------------------------------------

WHERE = "status.allocation.devices.config[0].opaque.parameters"
LNC_LIST = ", ".join(map(str, VALID_LNC))
CONFIG_ALLOWED = {
    WHERE: (TRAINIUM.dialect.api_version,),
    f"{WHERE}.apiVersion": (shown(TRAINIUM.dialect.api_version),),
    f"{WHERE}.kind": (", ".join(KINDS),),
    f"{WHERE}.logicalNeuronCore": (LNC_LIST,),
    f"{WHERE}.*": (", ".join(TRAINIUM.dialect.fields[NEURON_CONFIG]),),
}

configs = weighted(
    (1, JSON_VALUES),
    (
        5,
        maybe_field(
            {
                "apiVersion": either(
                    st.just(TRAINIUM.dialect.api_version), "v1", "trainium.sim.dev/v1"
                ),
                "kind": either(st.sampled_from(KINDS), "neuronConfig", ""),
                "logicalNeuronCore": either(
                    st.sampled_from(VALID_LNC), 0, 3, -1, True, 2.0, "2", 2**70
                ),
            },
            required=("apiVersion", "kind"),
        ),
    ),
)


def refusal_names(message: str, allowed_by_field: Mapping[str, tuple[str, ...]]) -> None:
    """A refusal starts with a known field's path and says what that field allows."""
    field, sep, rest = message.partition(": ")
    assert sep and rest, f"refusal names no field: {message!r}"
    allowed = allowed_by_field.get(field) or next(
        (v for k, v in allowed_by_field.items() if k.endswith(".*") and field.startswith(k[:-1])),
        None,
    )
    assert allowed is not None, f"refusal names no known field: {message!r}"
    assert any(a in rest for a in allowed), (
        f"refusal of {field} does not say the allowed values {allowed}: {message!r}"
    )


def check_config(parameters: Any) -> str:
    try:
        config = parse_config(parameters, WHERE)
    except ConfigError as err:
        refusal_names(str(err), CONFIG_ALLOWED)
        return REFUSED
    lnc = config.logical_neuron_core
    assert config.kind in KINDS
    assert lnc is None or (type(lnc) is int and lnc in VALID_LNC), f"accepted LNC {lnc!r}"
    return ACCEPTED


# --- UltraServer objects ------------------------------------------------------

SPEC_ALLOWED = {
    "spec": ("an object",),
    "spec.generation": (", ".join(GENERATIONS),),
    "spec.mode": (", ".join(DEVICE_MODES),),
    "spec.flatDevice": (", ".join(FLAT_DEVICES),),
    "spec.defaultLogicalNeuronCore": (LNC_LIST,),
    "spec.nodes": ("names or selector", "an object"),
    "spec.nodes.names": ("one node per server", "each node once", "a list of node names"),
    "spec.nodes.selector": ("a label selector",),
    "spec.nodes.serverIndexLabel": ("a label name",),
    "spec.fabric": ("an object",),
    "spec.fabric.setupSeconds": ("from 0 to 600",),
    "spec.fabric.failedServers": ("server indexes of",),
    "spec.fabric.bindingConditions": ("true or false",),
}

node_names = st.sampled_from([4, 36, 3]).flatmap(
    lambda n: st.lists(st.text(min_size=1, max_size=6), min_size=n, max_size=n)
)
specs = st.builds(
    lambda spec: {"metadata": {"name": "fuzz", "uid": "u", "generation": 1}, "spec": spec},
    either(
        maybe_field(
            {
                "generation": either(st.sampled_from(GENERATIONS), "trn4", ""),
                "mode": either(st.sampled_from(DEVICE_MODES), "Flat"),
                "flatDevice": either(st.sampled_from(FLAT_DEVICES), "server"),
                "defaultLogicalNeuronCore": either(
                    st.sampled_from(VALID_LNC), 0, 3, "x", 2.5, True
                ),
                "nodes": either(
                    maybe_field(
                        {
                            "names": either(node_names),
                            "selector": either(st.just({"matchLabels": {"rack": "a"}})),
                            "serverIndexLabel": either(st.just("trainium.sim.dev/server-index")),
                        },
                        required=("names",),
                    )
                ),
                "fabric": either(
                    maybe_field(
                        {
                            "setupSeconds": either(st.floats(0, 600), -1, 601, "1"),
                            "failedServers": either(st.lists(st.integers(-1, 40), max_size=4)),
                            "bindingConditions": either(st.booleans(), "false"),
                        }
                    )
                ),
            },
            required=("generation", "nodes"),
        )
    ),
)


def check_spec(obj: Mapping[str, Any]) -> str:
    try:
        spec = parse_spec(obj)
    except SpecError as err:
        refusal_names(str(err), SPEC_ALLOWED)
        return REFUSED
    assert spec.mode in DEVICE_MODES and spec.flat_device in FLAT_DEVICES
    assert type(spec.default_lnc) is int and spec.default_lnc in VALID_LNC
    assert spec.node_names is None or all(isinstance(n, str) for n in spec.node_names)
    assert spec.selector is None or isinstance(spec.selector, dict)
    assert isinstance(spec.server_index_label, str)
    assert isinstance(spec.fabric.binding_conditions, bool)
    assert all(type(s) is int for s in spec.fabric.failed_servers)
    return ACCEPTED


# --- NodeDeviceHealth reports -----------------------------------------------

HEALTH_RACK = rack_spec("trn3-gen1")
HEALTH_DEVICES = build_layout(HEALTH_RACK).devices
HEALTH_NODES = {0: "n0", 1: "n1"}

entries = st.fixed_dictionaries(
    {"chip": st.integers(0, 63), "state": st.sampled_from(STATES)},
    optional={
        "core": st.integers(0, 63),
        "reason": st.text(max_size=63),
        "message": st.text(max_size=64),
    },
)
reports = st.builds(
    lambda node, devices: {
        "metadata": {"name": node},
        "spec": {"nodeName": node, "devices": devices},
    },
    st.sampled_from(["n0", "n1", "elsewhere"]),
    st.lists(entries, max_size=12),
)
"""What the CRD schema lets a daemon write."""


def check_report(obj: Mapping[str, Any]) -> str:
    node = obj["metadata"]["name"]
    parsed = parse_reports(obj)
    health = device_health(HEALTH_DEVICES, HEALTH_NODES, {node: parsed})
    out = taints(health, DEFAULT_DRIVER_NAME)
    servers = {s for s, n in HEALTH_NODES.items() if n == node}
    bad = {
        (r.chip, r.core): r.state
        for r in parsed
        if servers and r.chip < HEALTH_RACK.chips_per_server
    }
    for h in health:
        assert out[h.device][0]["effect"] == EFFECTS[h.state]
    if not servers or not bad:
        assert out == {}, f"taints without a mapped unhealthy chip: {sorted(out)[:3]}"
    for (chip, core), _ in bad.items():
        over = [
            d.name
            for d in HEALTH_DEVICES
            if any(p.server in servers and p.local_index == chip for p in d.chips)
            and (core is None or any((p.index, core) in d.cores for p in d.chips))
        ]
        if core is None or core < HEALTH_RACK.chip.cores:
            assert all(name in out for name in over), f"chip {chip} core {core}: untainted"
    return ACCEPTED


# --- checkpoint files -------------------------------------------------------

CHECKPOINT = Path("/var/lib/trainium-dra/node/checkpoint.json")
CHECKPOINT_FIXES = ("move it aside", "written by another release")

records = st.builds(
    lambda uid, chip, start, lnc: ClaimRecord(
        uid=uid,
        namespace="ns",
        name=f"claim-{uid}",
        state="PrepareCompleted",
        lnc=lnc,
        visible_cores=[chip * 8 + start],
        devices=[DeviceRecord("req", "rack", f"chip{chip}", "core", [[chip, start, 1]])],
        token_sha256="0" * 64,
    ),
    st.uuids().map(str),
    st.integers(0, 15),
    st.integers(0, 7),
    st.sampled_from(VALID_LNC),
)
claim_sets = st.dictionaries(st.uuids().map(str), records, max_size=4).map(
    lambda d: {r.uid: r for r in d.values()}
)


def edited_with_checksum(
    claims: Mapping[str, ClaimRecord], field: str, value: Any, rng: random.Random
) -> bytes:
    """A hostile edit that keeps the checksum right: one field of one record replaced."""
    body = {uid: asdict(r) for uid, r in sorted(claims.items())}
    if body:
        uid = rng.choice(sorted(body))
        target = body[uid]
        if field.startswith("devices.") and target["devices"]:
            target["devices"][0][field.split(".", 1)[1]] = value
        else:
            target[field] = value
    else:
        body["x"] = value
    doc = {"version": 1, "checksum": checksum(body), "claims": body}
    return json.dumps(doc).encode()


RECORD_FIELDS = [
    "uid",
    "state",
    "lnc",
    "visible_cores",
    "devices",
    "unknown",
    "devices.ranges",
    "devices.kind",
    "devices.request",
]

checkpoint_files = st.one_of(
    st.tuples(claim_sets, st.just("intact"), st.just(0), st.just(0)),
    st.tuples(claim_sets, st.just("truncate"), st.integers(0, 10**6), st.just(0)),
    st.tuples(claim_sets, st.just("flip"), st.integers(0, 10**6), st.integers(1, 255)),
    st.tuples(claim_sets, st.sampled_from(RECORD_FIELDS), JSON_VALUES, st.randoms()),
    st.tuples(claim_sets, st.just("bytes"), st.binary(max_size=200), st.just(0)),
)


def corrupt(case: tuple[dict[str, ClaimRecord], str, Any, Any]) -> bytes:
    claims, how, a, b = case
    data = encode_plain({uid: asdict(record) for uid, record in claims.items()})
    if how == "intact":
        return data
    if how == "truncate":
        return data[: a % max(1, len(data))]
    if how == "flip":
        buf = bytearray(data)
        buf[a % len(buf)] ^= b
        return bytes(buf)
    if how == "bytes":
        return bytes(a)
    return edited_with_checksum(claims, how, a, b)


def well_formed(record: ClaimRecord) -> None:
    assert isinstance(record.uid, str) and isinstance(record.state, str)
    assert type(record.lnc) is int
    assert all(type(c) is int for c in record.visible_cores)
    assert all(isinstance(d, DeviceRecord) for d in record.devices)
    record.physical_cores()


def check_checkpoint(case: tuple[dict[str, ClaimRecord], str, Any, Any]) -> str:
    data = corrupt(case)
    try:
        claims = decode(data, CHECKPOINT)
    except CheckpointError as err:
        message = str(err)
        assert message.startswith(f"{CHECKPOINT}: "), message
        assert any(fix in message for fix in CHECKPOINT_FIXES), message
        return REFUSED
    if case[1] == "intact":
        assert claims == case[0], "an intact checkpoint lost a claim"
    for record in claims.values():
        well_formed(record)
    return ACCEPTED


# --- slices edited by someone else -------------------------------------------

SLICE_RACK = RackInput(
    name="fuzz",
    rack=rack_spec("trn3-gen1"),
    mode="partitioned",
    flat_device="chip",
    nodes={0: "n0"},
    rack_nodes=None,
    taints={},
    binding_conditions=True,
)
DESIRED = build_slices(SLICE_RACK, DEFAULT_DRIVER_NAME)
SLICE_EDITS = (
    "device-attribute",
    "drop-device",
    "add-device",
    "pool",
    "delete",
    "label",
    "rack-label",
    "managed-by",
)


def published_pool() -> list[JSON]:
    """The pool as the apiserver holds it after a clean publish (generation 1)."""
    write_plan = plan_writes(DESIRED, [], None)
    return [
        {**w.body, "metadata": {**w.body["metadata"], "resourceVersion": "1"}}
        for w in write_plan.writes
        if w.body is not None
    ]


PUBLISHED = published_pool()
slice_edits = st.lists(
    st.tuples(
        st.sampled_from(SLICE_EDITS),
        st.integers(0, len(PUBLISHED) - 1),
        st.integers(0, 10**6),
        JSON_VALUES,
    ),
    min_size=1,
    max_size=4,
)


def edit_pool(pool: list[JSON], edits: list[tuple[str, int, int, Any]]) -> list[JSON]:
    """Someone else's edits, each one kind of change to one slice; `pool` is
    left as it was (only the slices edited are copied)."""
    out: list[JSON] = list(pool)
    copied: set[int] = set()
    for how, index, pick, value in edits:
        if not out:
            break
        with_devices = [s for s in out if s["spec"].get("devices")]
        pool = with_devices if how.endswith("device") or how.startswith("device") else out
        target = (pool or out)[index % len(pool or out)]
        if id(target) not in copied:
            at = next(i for i, s in enumerate(out) if s is target)
            target = out[at] = json.loads(json.dumps(target))
            copied.add(id(target))
        devices = target["spec"].get("devices") or []
        if how == "delete":
            out.remove(target)
        elif how == "label":
            target["metadata"]["labels"] = {**target["metadata"]["labels"], "edited": "yes"}
            target["metadata"]["labels"].pop(next(iter(target["metadata"]["labels"])), None)
        elif how == "managed-by":
            target["metadata"]["labels"].pop(MANAGED_BY_LABEL, None)
        elif how == "rack-label":
            target["metadata"]["labels"].pop(rack_label(DEFAULT_DRIVER_NAME), None)
        elif how == "pool":
            target["spec"]["pool"]["generation"] = pick % 5
        elif how == "drop-device" and devices:
            devices.pop(pick % len(devices))
        elif how == "add-device":
            devices.append({"name": f"foreign-{pick}", "attributes": {}})
            target["spec"]["devices"] = devices
        elif how == "device-attribute" and devices:
            device = devices[pick % len(devices)]
            device.setdefault("attributes", {})["resourceType"] = {"string": str(value)[:20]}
    return out


def apply_writes(existing: list[JSON], write_plan: WritePlan) -> dict[str, JSON]:
    """What the apiserver holds after the controller's writes."""
    held = {s["metadata"]["name"]: s for s in existing}
    for write in write_plan.writes:
        if write.verb == "delete":
            held.pop(write.name, None)
        elif write.body is not None:
            held[write.name] = write.body
    return held


def check_slice_edit(edits: list[tuple[str, int, int, Any]]) -> str:
    edited = edit_pool(PUBLISHED, edits)
    label = rack_label(DEFAULT_DRIVER_NAME)
    seen = [s for s in edited if s["metadata"]["labels"].get(label) == SLICE_RACK.name]
    write_plan = plan_writes(DESIRED, seen, None)
    # a create of a name the list missed takes the slice back
    held = apply_writes(edited, write_plan)
    wanted = {s["metadata"]["name"]: s for s in DESIRED}
    assert set(held) == set(wanted), f"slices after restore: {sorted(set(held) ^ set(wanted))}"
    for name, body in held.items():
        desired = {**wanted[name], "spec": {**wanted[name]["spec"], "pool": body["spec"]["pool"]}}
        assert same(desired, body), f"slice {name} not restored"
    generations = {s["spec"]["pool"]["generation"] for s in held.values()}
    assert len(generations) == 1, f"pool left at generations {generations}"
    return ACCEPTED
