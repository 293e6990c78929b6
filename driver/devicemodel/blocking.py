"""Which devices of a rack are blocked, the publishing order that lists
them last (publishing option `order`) and what withdrawing blocked devices
would publish (not offered by the controller: docs/device-model.md).

Pure: a Layout and the names of its allocated devices in, names or an order
out. A device is *blocked* when it is not allocated itself but some counter
it consumes has too little left once the allocated devices' consumption is
taken: a core of a chip a claim holds, the chip over a held core, the server
over either. The scheduler's allocator tries a node's devices in slice order
and pays a selector evaluation for a blocked device before its counters turn
it down; listed after the free ones, it is reached only when nothing free
matches. The set of devices is unchanged, so what can be allocated is too.
"""

from collections import Counter
from collections.abc import Collection
from typing import Final

from driver.devicemodel.layout import Layout, PlannedDevice

PUBLISHING: Final = ("plain", "order")
"""`plain`: every slice in layout order; `order`: blocked devices after the free ones."""


def blocked_devices(layout: Layout, allocated: Collection[str]) -> frozenset[str]:
    """Names of the unallocated devices whose counters the allocated ones exhaust."""
    capacity = {
        (set_name, counter): value
        for set_name, counters in layout.counter_sets()
        for counter, value in counters.items()
    }
    used: Counter[tuple[str, str]] = Counter()
    for device in layout.devices:
        if device.name in allocated:
            for c in device.consumes:
                used.update({(c.counter_set, k): v for k, v in c.counters.items()})
    return frozenset(
        d.name
        for d in layout.devices
        if d.name not in allocated
        and any(
            used[(c.counter_set, k)] + v > capacity[(c.counter_set, k)]
            for c in d.consumes
            for k, v in c.counters.items()
        )
    )


def device_order(layout: Layout, allocated: Collection[str]) -> tuple[PlannedDevice, ...]:
    """The layout's devices, those not blocked first, then the blocked ones,
    each part in layout order. Allocated devices keep their place: the
    allocator skips them with a set lookup, and moving them would rewrite a
    slice on allocations that block nothing new."""
    blocked = blocked_devices(layout, allocated)
    return (
        *(d for d in layout.devices if d.name not in blocked),
        *(d for d in layout.devices if d.name in blocked),
    )
