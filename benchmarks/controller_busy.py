"""The controller as a fleet fills: its CPU and its writes per allocated claim.

Racks of one pool layout are published by the real controller on etcd and
an apiserver alone; then the held devices of `testbed.fleetfill` at 90% are
written as allocated claims in two bands (0 to 50% of the cores, then 50 to
90%), and the controller reacts as it does to the scheduler's allocations:
rack devices withdrawn (`node` layout), fabric status on server claims,
UltraServer status. Each band is measured from the first claim written until
the controller has written nothing for a few seconds.
"""

import random
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any, Final

from kubernetes import client

from benchmarks.publishing import GROUP, VERSION, rack_names, rack_nodes
from driver.devicemodel.naming import server_pool
from driver.procstat import process_cpu_seconds
from localsim.controlplane.plane import ControlPlane
from testbed.controlplane import (
    controller,
    custom,
    delta,
    published,
    request_counts,
    ultraserver,
    write_allocated,
)
from testbed.fleetfill import Held, fleet_fill, held_claims, held_cores
from testbed.waiting import wait_for

NS: Final = "bench-busy"
BUSY_ARMS: Final = (("node", "plain"), ("node", "order"), ("server", "plain"), ("server", "order"))
"""Layout and publishing order (`--publishing`): the node layout withdraws and
advertises rack devices, the server layout has none; `order` also rewrites a
slice whenever the devices an allocation blocks change."""
BANDS: Final = (50, 90)
"""Percent of the fleet's cores held at the end of each band."""
QUIET_SECONDS: Final = 3.0
"""The controller has caught up once the apiserver saw none of its writes this long."""
WRITES: Final = {
    "slices": ("resourceslices", ""),
    "rack status": ("ultraservers", "status"),
    "claim status": ("resourceclaims", "status"),
}
"""The controller's writes by what they change (resource, subresource); the
held claims' own status writes are PUTs, the controller's are PATCHes."""


def controller_writes(counts: dict[tuple[str, str, str], int]) -> dict[str, int]:
    out = dict.fromkeys(WRITES, 0)
    for (resource, sub, verb), n in counts.items():
        for name, (res, subresource) in WRITES.items():
            if resource != res or sub != subresource:
                continue
            ours = verb == "PATCH" if name == "claim status" else verb != "GET"
            if ours and verb in ("POST", "PUT", "PATCH", "DELETE"):
                out[name] += n
    return out


class Quiet:
    """Whether the controller's writes have stood still for QUIET_SECONDS."""

    def __init__(self, cp: ControlPlane) -> None:
        self.cp = cp
        self.last = controller_writes(request_counts(cp))
        self.since = time.monotonic()

    def __call__(self) -> bool:
        now = controller_writes(request_counts(self.cp))
        if now != self.last:
            self.last, self.since = now, time.monotonic()
        return time.monotonic() - self.since >= QUIET_SECONDS


def bands(held: Sequence[Held], total: int) -> list[tuple[int, list[Held]]]:
    """The held devices in random order, cut where each band's share is reached."""
    order = list(held)
    random.Random(3).shuffle(order)
    out: list[tuple[int, list[Held]]] = []
    start, cores = 0, 0
    for percent in BANDS:
        end = start
        while end < len(order) and cores < percent / 100 * total:
            cores += order[end].cores
            end += 1
        out.append((percent, order[start:end]))
        start = end
    return out


def busy_controller(
    cp: ControlPlane,
    api: client.ApiClient,
    racks: int,
    pools: str,
    log: Path,
    *,
    publishing: str,
) -> list[dict[str, Any]]:
    """Publish `racks` racks in `pools` in the `publishing` order, fill them band
    by band, measure each band."""
    names = rack_names(racks)
    objects = custom(api)
    for i, name in enumerate(names):
        spec = ultraserver(name, "trn3-gen2", rack_nodes(i), pools=pools)
        spec["spec"]["fabric"] = {"setupSeconds": 0}
        objects.create_cluster_custom_object(GROUP, VERSION, "ultraservers", spec)
    slices = 36 * 2 + (1 if pools == "node" else 0)  # per server: counters and devices
    total = racks * 36 * 32
    held = fleet_fill(racks, max(BANDS) / 100, seed=17)
    out: list[dict[str, Any]] = []
    lease = f"busy-{pools}-{publishing}"
    with controller(cp, log, "--lease-name", lease, "--publishing", publishing) as proc:
        for name in names:
            wait_for(f"{name} published", partial(published, api, name, slices), 600, 0.5)
        done = 0
        for percent, band in bands(held, total):
            claims = held_claims(
                band,
                lambda h: server_pool(names[h.rack], h.server),
                lambda h: rack_nodes(h.rack)[h.server],
                NS,
            )
            for i, (claim, _) in enumerate(claims):
                claim["metadata"]["name"] = f"held-{percent}-{i:06d}"
            before, cpu = request_counts(cp), process_cpu_seconds(proc.pid)
            t0 = time.monotonic()
            write_allocated(api, claims)
            wait_for("the controller caught up", Quiet(cp), 1800, 0.5)
            used = process_cpu_seconds(proc.pid) - cpu
            writes = controller_writes(delta(before, request_counts(cp)))
            done += held_cores(band)
            out.append(
                {
                    "pools": pools,
                    "publishing": publishing,
                    "racks": racks,
                    "held_percent": percent,
                    "held_cores": done,
                    "claims": len(band),
                    "seconds": round(time.monotonic() - t0 - QUIET_SECONDS, 1),
                    "cpu_ms_per_claim": round(1000 * used / max(1, len(band)), 2),
                    "writes_per_claim": {
                        k: round(v / max(1, len(band)), 3) for k, v in writes.items()
                    },
                }
            )
    custom(api).delete_collection_namespaced_custom_object(
        "resource.k8s.io", "v1", NS, "resourceclaims"
    )
    for name in names:
        objects.delete_cluster_custom_object(GROUP, VERSION, "ultraservers", name)
    return out
