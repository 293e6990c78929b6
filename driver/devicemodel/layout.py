"""Which devices one rack publishes and which counters each consumes.

Pure: a RackSpec in, a Layout out. The counter scheme (docs/device-model.md,
"Counters") makes exclusivity exact: two devices can be allocated together
iff their cores do not overlap.

- A *group* is up to 32 cores of consecutive chips on one server. Each group
  has a *fine* counter set with one counter per aligned core pair, whose
  capacity is the pair's two cores.
- Two *coarse* counter sets (or one, for small racks) hold one counter per
  group whose value is the group's core count.
- A device inside one group consumes, from each pair it touches, the cores it
  has there, and its core count from the group's coarse counter; a device
  spanning groups (a 16-chip server, the whole rack) consumes whole coarse
  counters only.

Three pool layouts share these devices (docs/device-model.md, "Pool layouts"):
`rack` puts the whole rack in one pool, so the rack device consumes every
coarse counter and the scheduler alone keeps it apart from everything under
it; `node` gives each server a pool of its own, with coarse sets only where a
server has several groups, and leaves the rack device consuming nothing: the
controller keeps it apart from the servers' devices; `server` has the `node`
layout's server pools and no rack device at all (a whole rack is a gang of
server claims), so nothing but the counters has to keep devices apart.
"""

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from driver.devicemodel.naming import (
    ULTRASERVER_DEVICE,
    chip_name,
    pair_counter,
    partition_name,
    server_name,
)
from simdevice.topology import ChipPlace, RackSpec, chip_places, rack_spec

MAX_CORES_PER_COUNTER_SET: Final = 32
CORES_PER_COUNTER: Final = 2
"""A fine counter covers an aligned core pair. Partitions are aligned, so two
distinct devices share a pair only as two single cores (1 + 1 fits) or when
one covers the whole pair (2 + anything does not): exact, with half the
counters of one per core, and the scheduler checks every counter of a pool
for every device it considers."""
MAX_COARSE_SETS: Final = 2
"""The rack device consumes every coarse counter, and a device may consume
from at most 2 counter sets."""

PARTITION_SIZES: Final = (1, 2, 4)
"""Core partitions published per chip, besides the whole chip."""

COARSE_SET_PREFIX: Final = "groups"

POOL_LAYOUTS: Final = ("rack", "node", "server")
"""`rack`: one pool per rack; `node`: one pool per server plus the rack's own;
`server`: one pool per server, no rack device published."""
SERVER_POOL_LAYOUTS: Final = ("node", "server")
"""The layouts whose servers have pools of their own."""


@dataclass(frozen=True)
class LayoutOptions:
    """What a site chooses of a partitioned rack's layout (UltraServer spec)."""

    pools: str = "rack"  # one of POOL_LAYOUTS
    partition_sizes: tuple[int, ...] = PARTITION_SIZES  # core partitions besides whole chips


DEFAULT_OPTIONS: Final = LayoutOptions()


class LayoutError(ValueError):
    """The rack does not fit the counter scheme; the message names the field."""


@dataclass(frozen=True)
class Group:
    """Consecutive chips of one server sharing one fine counter set."""

    index: int
    server: int
    chips: tuple[int, ...]  # local chip indexes on the server
    name: str  # a DNS label, e.g. "server03" or "server01-chips04-07"
    cores: int

    @property
    def fine_set(self) -> str:
        return f"cores-{self.name}"


@dataclass(frozen=True)
class Consumption:
    """Counters one device takes from one counter set."""

    counter_set: str
    counters: MappingProxyType[str, int]


@dataclass(frozen=True)
class PlannedDevice:
    """One device of the rack, before it is written as a ResourceSlice entry."""

    name: str
    kind: str  # core | chip | server | ultraserver
    server: int | None  # None for the whole rack
    chips: tuple[ChipPlace, ...]
    core_start: int  # first physical core on its chip; 0 for chip and larger
    core_count: int
    consumes: tuple[Consumption, ...]

    @functools.cached_property
    def cores(self) -> frozenset[tuple[int, int]]:
        """(rack chip index, physical core) pairs this device covers; kept, as
        health checks ask it once per report for every device."""
        if self.kind == "core":
            chip = self.chips[0].index
            return frozenset(
                (chip, c) for c in range(self.core_start, self.core_start + self.core_count)
            )
        per_chip = self.core_count // len(self.chips)
        return frozenset((p.index, c) for p in self.chips for c in range(per_chip))


@dataclass(frozen=True)
class Layout:
    """Every device and counter set of one rack, in publishing order."""

    rack: RackSpec
    options: LayoutOptions
    groups: tuple[Group, ...]
    coarse_sets: tuple[tuple[str, tuple[Group, ...]], ...]
    devices: tuple[PlannedDevice, ...]

    def counter_sets(self, server: int | None = None) -> list[tuple[str, dict[str, int]]]:
        """(set name, counter -> capacity): fine sets in group order, then
        coarse; with `server`, only the sets of that server's pool."""
        sets: list[tuple[str, dict[str, int]]] = []
        for group in self.groups:
            if server is not None and group.server != server:
                continue
            sets.append(
                (
                    group.fine_set,
                    whole_chips_counters(group.chips, self.rack.chip.cores),
                )
            )
        for name, members in self.coarse_sets:
            if server is None or members[0].server == server:
                sets.append((name, {g.name: g.cores for g in members}))
        return sets


def fine_counters(local_chip: int, start: int, count: int) -> list[tuple[str, int]]:
    """(counter, cores of it taken) for cores start..start+count-1 of one chip."""
    unit = CORES_PER_COUNTER
    end = start + count
    return [
        (pair_counter(local_chip, first), min(end, first + unit) - max(start, first))
        for first in range(start - start % unit, end, unit)
    ]


def whole_chips_counters(chips: Iterable[int], cores_per_chip: int) -> dict[str, int]:
    """Every fine counter of `chips`, each at all of its cores: a fine set's
    capacities, and what a device holding those chips whole consumes."""
    return {name: value for c in chips for name, value in fine_counters(c, 0, cores_per_chip)}


def chips_per_group(rack: RackSpec) -> int:
    """The largest number of chips that divides a server and fits one fine set."""
    fit = max(1, MAX_CORES_PER_COUNTER_SET // rack.chip.cores)
    return max(
        n
        for n in range(1, rack.chips_per_server + 1)
        if rack.chips_per_server % n == 0 and n <= fit
    )


def make_groups(rack: RackSpec) -> tuple[Group, ...]:
    if rack.chip.cores > MAX_CORES_PER_COUNTER_SET:
        raise LayoutError(
            f"chip.cores: {rack.chip.cores} cores exceed the "
            f"{MAX_CORES_PER_COUNTER_SET} counters of one counter set; use smaller chips"
        )
    if rack.chip.cores % CORES_PER_COUNTER:
        raise LayoutError(
            f"chip.cores: {rack.chip.cores} cores do not split into core pairs, "
            "which the fine counters count; use an even number of cores"
        )
    size = chips_per_group(rack)
    groups: list[Group] = []
    for server in range(rack.servers):
        for first in range(0, rack.chips_per_server, size):
            chips = tuple(range(first, first + size))
            whole = size == rack.chips_per_server
            name = (
                server_name(server)
                if whole
                else f"{server_name(server)}-chips{first:02d}-{first + size - 1:02d}"
            )
            groups.append(Group(len(groups), server, chips, name, size * rack.chip.cores))
    return tuple(groups)


def split_coarse(groups: Sequence[Group]) -> tuple[tuple[str, tuple[Group, ...]], ...]:
    """Spread the groups evenly over as few coarse sets as the limits allow."""
    count = -(-len(groups) // MAX_CORES_PER_COUNTER_SET)
    if count > MAX_COARSE_SETS:
        raise LayoutError(
            f"servers: {len(groups)} counter groups need {count} coarse counter sets, "
            f"more than the {MAX_COARSE_SETS} one device may consume; use a smaller rack"
        )
    per_set = -(-len(groups) // count)
    return tuple(
        (f"{COARSE_SET_PREFIX}-{i}", tuple(groups[i * per_set : (i + 1) * per_set]))
        for i in range(count)
    )


def per_server_coarse(groups: Sequence[Group]) -> tuple[tuple[str, tuple[Group, ...]], ...]:
    """Node pools: one coarse set for each server that has several groups."""
    servers = sorted({g.server for g in groups})
    out = []
    for server in servers:
        members = tuple(g for g in groups if g.server == server)
        if len(members) > 1:
            out.append((f"{COARSE_SET_PREFIX}-{server_name(server)}", members))
    return tuple(out)


def _coarse_consumption(
    coarse: Sequence[tuple[str, tuple[Group, ...]]], taken: dict[int, int]
) -> tuple[Consumption, ...]:
    """Coarse counters for {group index: cores taken}, one entry per set touched."""
    out = []
    for name, members in coarse:
        counters = {g.name: taken[g.index] for g in members if g.index in taken}
        if counters:
            out.append(Consumption(name, MappingProxyType(counters)))
    return tuple(out)


@functools.cache
def build_layout(rack: RackSpec, options: LayoutOptions = DEFAULT_OPTIONS) -> Layout:
    """Devices of the partitioned mode, small first within each chip, chip-major.

    Order matters: the scheduler's allocator is first-fit over devices in slice
    order, so chip-major order packs single cores onto chips already in use
    and leaves whole chips free for bigger claims.

    Immutable and a function of the rack spec alone, so it is built once per
    spec rather than twice in every reconcile.
    """
    pools = options.pools
    if pools not in POOL_LAYOUTS:
        raise LayoutError(f"spec.pools: {pools!r} is not one of {', '.join(POOL_LAYOUTS)}")
    if not set(options.partition_sizes) <= set(PARTITION_SIZES):
        raise LayoutError(
            f"spec.partitionSizes: {list(options.partition_sizes)} may hold only "
            f"{', '.join(map(str, PARTITION_SIZES))}"
        )
    groups = make_groups(rack)
    coarse = split_coarse(groups) if pools == "rack" else per_server_coarse(groups)
    group_of = {(g.server, chip): g for g in groups for chip in g.chips}
    places = chip_places(rack)
    cores_per_chip = rack.chip.cores
    devices: list[PlannedDevice] = []
    for server in range(rack.servers):
        server_places = [p for p in places if p.server == server]
        for place in server_places:
            group = group_of[(server, place.local_index)]
            for size in sorted(options.partition_sizes):
                for start in range(0, cores_per_chip, size):
                    devices.append(_in_group(place, start, size, group, coarse))
            devices.append(_in_group(place, 0, cores_per_chip, group, coarse))
        server_groups = [g for g in groups if g.server == server]
        server_cores = cores_per_chip * rack.chips_per_server
        if len(server_groups) == 1:
            group = server_groups[0]
            fine = whole_chips_counters(group.chips, cores_per_chip)
            consumes = (
                Consumption(group.fine_set, MappingProxyType(fine)),
                *_coarse_consumption(coarse, {group.index: group.cores}),
            )
        else:
            consumes = _coarse_consumption(coarse, {g.index: g.cores for g in server_groups})
        devices.append(
            PlannedDevice(
                server_name(server),
                "server",
                server,
                tuple(server_places),
                0,
                server_cores,
                consumes,
            )
        )
    whole_rack = {g.index: g.cores for g in groups}
    devices.append(
        PlannedDevice(
            ULTRASERVER_DEVICE,
            "ultraserver",
            None,
            tuple(places),
            0,
            rack.cores,
            _coarse_consumption(coarse, whole_rack) if pools == "rack" else (),
        )
    )
    return Layout(rack, options, groups, coarse, tuple(devices))


def _in_group(
    place: ChipPlace,
    start: int,
    count: int,
    group: Group,
    coarse: Sequence[tuple[str, tuple[Group, ...]]],
) -> PlannedDevice:
    fine = dict(fine_counters(place.local_index, start, count))
    consumes = (
        Consumption(group.fine_set, MappingProxyType(fine)),
        *_coarse_consumption(coarse, {group.index: count}),
    )
    is_chip = count == group.cores // len(group.chips)
    kind = "chip" if is_chip else "core"
    name = (
        chip_name(place.server, place.local_index)
        if is_chip
        else partition_name(place.server, place.local_index, start, count)
    )
    return PlannedDevice(name, kind, place.server, (place,), start, count, consumes)


def flat_devices(rack: RackSpec, unit: str) -> tuple[PlannedDevice, ...]:
    """Devices of the flat mode: whole chips, or single cores, no counters."""
    devices: list[PlannedDevice] = []
    for place in chip_places(rack):
        if unit == "chip":
            devices.append(
                PlannedDevice(
                    chip_name(place.server, place.local_index),
                    "chip",
                    place.server,
                    (place,),
                    0,
                    rack.chip.cores,
                    (),
                )
            )
        else:
            for core in range(rack.chip.cores):
                devices.append(
                    PlannedDevice(
                        partition_name(place.server, place.local_index, core, 1),
                        "core",
                        place.server,
                        (place,),
                        core,
                        1,
                        (),
                    )
                )
    return tuple(devices)


def planned_devices(
    rack: RackSpec, mode: str, flat_device: str, layout: LayoutOptions = DEFAULT_OPTIONS
) -> tuple[PlannedDevice, ...]:
    """All devices the rack could publish in `mode`, whether or not their nodes exist."""
    if mode == "partitioned":
        return build_layout(rack, layout).devices
    return flat_devices(rack, flat_device)


@functools.lru_cache(maxsize=32)
def devices_by_name(
    generation: str, mode: str, flat_device: str, layout: LayoutOptions = DEFAULT_OPTIONS
) -> Mapping[str, PlannedDevice]:
    """A rack's devices by the name an allocation result gives (device names
    are unique within a rack, whichever pool holds them)."""
    return {d.name: d for d in planned_devices(rack_spec(generation), mode, flat_device, layout)}
