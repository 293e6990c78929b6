"""What must stay true through a fault, counted: devices duplicated or lost in
the published slices, claims prepared twice, cores leaked, pods evicted.

`count_*` are pure (data in, a count out); `slice_devices` reads the API.
"""

from collections import Counter
from collections.abc import Mapping, Set
from dataclasses import dataclass

from kubernetes import client

from driver.names import DEFAULT_DRIVER_NAME
from driver.node.durable.checkpoint import ClaimRecord

PoolDevices = dict[str, Counter[str]]
"""pool name -> how many slices of the pool's current generation list each device."""


@dataclass(frozen=True)
class Audit:
    duplicated_devices: int
    lost_devices: int
    claims_prepared_twice: int
    leaked_cores: int
    pods_wrongly_evicted: int

    def clean(self) -> bool:
        return not any(vars(self).values())


def slice_devices(
    api: client.ApiClient, driver: str = DEFAULT_DRIVER_NAME, labels: str = ""
) -> PoolDevices:
    """Devices of every pool's newest generation; older generations are on their way out.
    Read as plain JSON: a whole rack's slices as client models take seconds."""
    items = client.CustomObjectsApi(api).list_cluster_custom_object(
        "resource.k8s.io",
        "v1",
        "resourceslices",
        field_selector=f"spec.driver={driver}",
        label_selector=labels,
    )["items"]
    newest: dict[str, int] = {}
    for s in items:
        pool = s["spec"]["pool"]
        newest[pool["name"]] = max(newest.get(pool["name"], 0), pool["generation"])
    out: PoolDevices = {}
    for s in items:
        pool = s["spec"]["pool"]
        if pool["generation"] == newest[pool["name"]]:
            names = (d["name"] for d in s["spec"].get("devices") or [])
            out.setdefault(pool["name"], Counter()).update(names)
    return out


def count_duplicated(devices: PoolDevices) -> int:
    """Extra copies of a device within one pool."""
    return sum(n - 1 for pool in devices.values() for n in pool.values() if n > 1)


def count_lost(baseline: PoolDevices, now: PoolDevices) -> int:
    """Devices published before the fault and missing after it."""
    return sum(len(set(devs) - set(now.get(pool, Counter()))) for pool, devs in baseline.items())


def count_prepared_twice(checkpoints: Mapping[str, Mapping[str, ClaimRecord]]) -> int:
    """Claims recorded on more than one node, plus cores held by two claims of one node."""
    nodes_of: Counter[str] = Counter(uid for claims in checkpoints.values() for uid in claims)
    twice = sum(1 for n in nodes_of.values() if n > 1)
    for claims in checkpoints.values():
        holders: Counter[tuple[int, int]] = Counter(
            core for record in claims.values() for core in record.exclusive_cores()
        )
        twice += sum(1 for n in holders.values() if n > 1)
    return twice


def count_leaked_cores(checkpoints: Mapping[str, Mapping[str, ClaimRecord]], live: Set[str]) -> int:
    """Cores still held for claims that no longer exist."""
    return sum(
        len(record.exclusive_cores())
        for claims in checkpoints.values()
        for uid, record in claims.items()
        if uid not in live
    )


def count_evicted(before: Mapping[str, str], after: Mapping[str, str]) -> int:
    """Pods (name -> uid) Running before that are not the same pod Running after."""
    return sum(1 for name, uid in before.items() if after.get(name) != uid)
