"""A busy fleet: which devices are already held, and the allocated claims
that hold them (the scheduler benchmark's occupancy step, the busy-fleet test).

Pure: a fleet size, an occupancy and a seed in, claim objects out. The
claims carry `status.allocation` as the scheduler writes it (one result per
device: request, driver, pool, device; a node selector for a device of one
node), so the scheduler's allocator counts those devices, and the counters
they consume, as taken without scheduling thousands of pods first. The same
held devices are written into every layout: only the pool a device lives in
differs (the rack, the server's pool, or the node's).
"""

import functools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from driver.devicemodel.layout import LayoutOptions, build_layout
from driver.devicemodel.naming import chip_name, partition_name, server_name
from driver.jsontypes import JSON
from driver.names import DEFAULT_DRIVER_NAME
from simdevice.topology import rack_spec

GENERATION: Final = "trn3-gen2"
SERVERS: Final = rack_spec(GENERATION).servers
CHIPS_PER_SERVER: Final = rack_spec(GENERATION).chips_per_server
CORES_PER_CHIP: Final = rack_spec(GENERATION).chip.cores
RACK_CORES: Final = SERVERS * CHIPS_PER_SERVER * CORES_PER_CHIP

MIX: Final = {"server": 0.35, "chip": 0.40, "cores": 0.25}
"""Share of the held cores by the kind of device holding them: training jobs
on whole servers, inference on chips, small jobs and notebooks on 1, 2 or
4 cores."""
PARTITIONS: Final = (4, 2, 1)
"""Core partition sizes the small jobs take, drawn uniformly."""


@dataclass(frozen=True)
class Held:
    """One device a claim holds: its rack, server and name in the rack."""

    rack: int
    server: int
    device: str
    cores: int
    kind: str  # server | chip | core


def _take_servers(free: list[int], cores: int, rack: int) -> list[Held]:
    per_server = CHIPS_PER_SERVER * CORES_PER_CHIP
    taken = [free.pop() for _ in range(min(len(free), cores // per_server))]
    return [Held(rack, s, server_name(s), per_server, "server") for s in taken]


def _partitions(rng: random.Random, held: tuple[int, int, int], budget: int) -> list[Held]:
    """Aligned partitions of random sizes on one chip (rack, server, chip), up to `budget` cores."""
    rack, server, chip = held
    out: list[Held] = []
    start = 0
    while start < CORES_PER_CHIP and budget > 0:
        fits = [s for s in PARTITIONS if s <= budget and start % s == 0]
        fits = [s for s in fits if start + s <= CORES_PER_CHIP]
        size = rng.choice(fits)
        out.append(Held(rack, server, partition_name(server, chip, start, size), size, "core"))
        start += size
        budget -= size
    return out


def rack_fill(rng: random.Random, rack: int, fraction: float) -> list[Held]:
    """Devices held in one rack: `fraction` of its cores, in the MIX's shares.

    Servers are drawn first, chips from the servers left, then core
    partitions fill chips from the start, leaving the chip's last cores free:
    the free cores of a busy rack are scattered over many chips, as they are
    after a day of jobs coming and going."""
    target = round(fraction * RACK_CORES)
    servers = list(range(SERVERS))
    rng.shuffle(servers)
    held = _take_servers(servers, round(MIX["server"] * target), rack)
    chips = [(s, c) for s in servers for c in range(CHIPS_PER_SERVER)]
    rng.shuffle(chips)
    for _ in range(min(len(chips), round(MIX["chip"] * target) // CORES_PER_CHIP)):
        s, c = chips.pop()
        held.append(Held(rack, s, chip_name(s, c), CORES_PER_CHIP, "chip"))
    left = target - sum(h.cores for h in held)
    # Each chip small jobs use is filled to the fleet's occupancy, at least one core.
    per_chip = max(1, min(CORES_PER_CHIP, round(fraction * CORES_PER_CHIP)))
    while left > 0 and chips:
        s, c = chips.pop()
        small = _partitions(rng, (rack, s, c), min(per_chip, left))
        held += small
        left -= sum(h.cores for h in small)
    return held


def fleet_fill(racks: int, fraction: float, seed: int) -> list[Held]:
    """The held devices of every rack, drawn from one seed."""
    rng = random.Random(seed)
    return [h for r in range(racks) for h in rack_fill(rng, r, fraction)]


Where = Callable[[Held], str]
"""The pool a held device lives in, or the node it is on."""


def node_selector(node: str) -> JSON:
    return {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        ]
    }


MAX_RESULTS: Final = 32
"""The most devices one allocation may list (the API's limit)."""


@functools.cache
def _overlapping() -> dict[str, tuple[str, ...]]:
    """Device name -> every device of its server whose cores overlap it (itself too)."""
    layout = build_layout(rack_spec(GENERATION), LayoutOptions("node"))
    devices = [d for d in layout.devices if d.server is not None]
    return {
        d.name: tuple(o.name for o in devices if o.server == d.server and o.cores & d.cores)
        for d in devices
    }


def anchor_holds(held: Held) -> list[tuple[str, ...]]:
    """What the per-node anchor's claims hold for one held device: no counters
    keep its devices apart, so every device overlapping the held one is held
    with it (in claims of at most MAX_RESULTS devices) and the same cores are
    taken as in our layouts."""
    names = _overlapping()[held.device]
    return [names[i : i + MAX_RESULTS] for i in range(0, len(names), MAX_RESULTS)]


def held_claim(
    name: str, namespace: str, held: Held, where: tuple[str, str], devices: Sequence[str] = ()
) -> tuple[JSON, JSON]:
    """A claim for the held device's class and its allocated status: the held
    device, or `devices` of it when given (`anchor_holds`).

    Returned apart: the apiserver takes `status` only on the status
    subresource, after the claim exists. `where`: the device's pool and node."""
    pool, node = where
    request = "held"
    klass = f"{held.kind}.{DEFAULT_DRIVER_NAME}"
    claim: JSON = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "labels": {"bench/held": held.kind}},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": request,
                        "exactly": {
                            "deviceClassName": klass,
                            "allocationMode": "ExactCount",
                            "count": len(devices) or 1,
                        },
                    }
                ]
            }
        },
    }
    status: JSON = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": request, "driver": DEFAULT_DRIVER_NAME, "pool": pool, "device": d}
                    for d in devices or (held.device,)
                ]
            },
            "nodeSelector": node_selector(node),
        }
    }
    return claim, status


def held_claims(
    held: Sequence[Held], pool_of: Where, node_of: Where, namespace: str, *, per_node: bool = False
) -> list[tuple[JSON, JSON]]:
    """Every held device as a claim of its own in the pools `pool_of` names;
    `per_node`: pools without counters, each claim holding the devices
    overlapping its own (`anchor_holds`)."""
    if not per_node:
        return [
            held_claim(f"held-{i:06d}", namespace, h, (pool_of(h), node_of(h)))
            for i, h in enumerate(held)
        ]
    return [
        held_claim(f"held-{i:06d}-{j}", namespace, h, (pool_of(h), node_of(h)), part)
        for i, h in enumerate(held)
        for j, part in enumerate(anchor_holds(h))
    ]


def held_cores(held: Sequence[Held]) -> int:
    return sum(h.cores for h in held)
