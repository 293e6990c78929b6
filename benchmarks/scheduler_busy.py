"""The scheduler on a busy fleet: CPU per pod at 0%, 50% and 90% of the
fleet's cores already allocated, for our layouts and for per-node pools of
the same devices, the layouts taking turns round by round.

A run publishes the layout's slices, writes the held devices of
`testbed.fleetfill` as allocated claims, checks that the scheduler
counts them as taken (a claim for one held server must stay unschedulable),
then schedules unpinned single-core pods and reads the kube-scheduler's CPU
time from /proc around them, with a CPU profile of its first seconds.
With `--scheduler counters-first` the node pools also run on the patched
kube-scheduler (hack/k8s-counters-first) as an arm of their own; every run
then starts on a freshly started scheduler of its arm's build.
"""

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final

from kubernetes import client

from benchmarks.report import interleaved
from benchmarks.scheduler_layouts import (
    FLEET_LAYOUTS,
    available_slices,
    fleet_rack_name,
    node_pool_slices,
    ordered_slices,
    rack_nodes,
    same_device_pool_slices,
    server_pool_slices,
)
from benchmarks.scheduler_runs import (
    NS,
    ProfileRequest,
    gone_already,
    nothing_left,
    publish,
    run_pods,
)
from driver.devicemodel.naming import server_pool
from driver.jsontypes import JSON
from driver.names import DEFAULT_DRIVER_NAME
from localsim.controlplane.plane import ControlPlane
from testbed.controlplane import custom, load_claim, pod, unschedulable, write_allocated
from testbed.countersfirst import ARM as COUNTERS_FIRST_ARM
from testbed.countersfirst import NAME as COUNTERS_FIRST
from testbed.fleetfill import RACK_CORES, Held, Where, fleet_fill, held_claims, held_cores
from testbed.waiting import wait_for

OCCUPANCIES: Final = (0, 50, 90)
"""Percent of the fleet's cores held before the single-core pods come."""
RACK_POOLS_MAX_RACKS: Final = 1
"""Fleets the default run measures rack pools on: every node of a larger fleet
gathers its rack's whole pool for every pod: one trial run of 100 pods at
10 racks, 90% held, took about ten minutes."""
SEED: Final = 11
CHECK: Final = "held-check"
STOCK: Final = "stock"
"""The kube-scheduler `make binaries` builds; other builds are named by `--scheduler`."""


def _rack_pools(racks: int, held: Sequence[Held]) -> list[JSON]:
    return [
        s
        for r in range(racks)
        for s in FLEET_LAYOUTS["rack pools"](rack_nodes(r), fleet_rack_name(r))
    ]


def _node_pools(racks: int, held: Sequence[Held]) -> list[JSON]:
    """As the controller publishes them: a rack device only on racks nothing is held of."""
    busy = {h.rack for h in held}
    return [
        s
        for r in range(racks)
        for s in node_pool_slices(rack_nodes(r), fleet_rack_name(r), advertised=r not in busy)
    ]


def _server_pools(racks: int, held: Sequence[Held]) -> list[JSON]:
    return [s for r in range(racks) for s in server_pool_slices(rack_nodes(r), fleet_rack_name(r))]


def _per_node(racks: int, held: Sequence[Held]) -> list[JSON]:
    return [
        s for r in range(racks) for s in same_device_pool_slices(rack_nodes(r), fleet_rack_name(r))
    ]


def _over_held(
    build: Callable[..., list[JSON]], pools: str
) -> Callable[[int, Sequence[Held]], list[JSON]]:
    """`pools` as `build` (`ordered_slices` or `available_slices`) publishes it
    over the held devices, static: the pods a run schedules do not change it, as
    the controller's next pass would; rack devices as `_node_pools` publishes them."""

    def slices(racks: int, held: Sequence[Held]) -> list[JSON]:
        busy = {h.rack for h in held}
        return [
            s
            for r in range(racks)
            for s in build(
                rack_nodes(r),
                fleet_rack_name(r),
                pools,
                frozenset(h.device for h in held if h.rack == r),
                advertised=r not in busy,
            )
        ]

    return slices


def _node(h: Held) -> str:
    return rack_nodes(h.rack)[h.server]


@dataclass(frozen=True)
class BusyLayout:
    slices: Callable[[int, Sequence[Held]], list[JSON]]
    pool_of: Where
    per_node: bool = False
    scheduler: str = STOCK
    """The kube-scheduler build that runs it."""


_NODE_POOLS: Final = BusyLayout(
    _node_pools, lambda h: server_pool(fleet_rack_name(h.rack), h.server)
)
BUSY_LAYOUTS: Final = {
    "rack pools": BusyLayout(_rack_pools, lambda h: fleet_rack_name(h.rack)),
    "node pools": _NODE_POOLS,
    "server pools": BusyLayout(
        _server_pools, lambda h: server_pool(fleet_rack_name(h.rack), h.server)
    ),
    "per-node pools (same devices)": BusyLayout(_per_node, _node, per_node=True),
    "rack pools (ordered)": BusyLayout(
        _over_held(ordered_slices, "rack"), lambda h: fleet_rack_name(h.rack)
    ),
    "node pools (ordered)": BusyLayout(
        _over_held(ordered_slices, "node"), lambda h: server_pool(fleet_rack_name(h.rack), h.server)
    ),
    "server pools (ordered)": BusyLayout(
        _over_held(ordered_slices, "server"),
        lambda h: server_pool(fleet_rack_name(h.rack), h.server),
    ),
    "rack pools (available)": BusyLayout(
        _over_held(available_slices, "rack"), lambda h: fleet_rack_name(h.rack)
    ),
    "node pools (available)": BusyLayout(
        _over_held(available_slices, "node"),
        lambda h: server_pool(fleet_rack_name(h.rack), h.server),
    ),
    "server pools (available)": BusyLayout(
        _over_held(available_slices, "server"),
        lambda h: server_pool(fleet_rack_name(h.rack), h.server),
    ),
    COUNTERS_FIRST_ARM: BusyLayout(
        _NODE_POOLS.slices, _NODE_POOLS.pool_of, scheduler=COUNTERS_FIRST
    ),
}
"""Ours in the three pool layouts: rack (the chart's default), node as the
controller publishes it on a busy fleet, server (no rack device at all); and
the anchor: the node layout's devices one pool per node, no counters (the
AWS driver's shape); and our three layouts again as `--publishing order`
publishes them, the devices the held ones block last in each slice."""


def write_held(api: client.ApiClient, claims: Sequence[tuple[JSON, JSON]]) -> float:
    """Write the held claims with their allocations; seconds taken."""
    t0 = time.perf_counter()
    write_allocated(api, claims)
    return time.perf_counter() - t0


def check_taken(api: client.ApiClient, held: Sequence[Held], timeout: float = 120) -> str | None:
    """A claim that fits only a held server must stay unschedulable: the
    scheduler's message, or None when nothing whole-server is held."""
    servers = [h for h in held if h.kind == "server"]
    if not servers:
        return None
    target = servers[-1]
    claim = load_claim("server", CHECK, NS, fleet_rack_name(target.rack))
    attr = f'device.attributes["{DEFAULT_DRIVER_NAME}"].serverIndex'
    claim["spec"]["devices"]["requests"][0]["exactly"]["selectors"].append(
        {"cel": {"expression": f"{attr} == {target.server}"}}
    )
    custom(api).create_namespaced_custom_object(
        "resource.k8s.io", "v1", NS, "resourceclaims", claim
    )
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(NS, pod(CHECK, NS, [CHECK]))
    try:
        message: str = wait_for(
            "the check pod refused", lambda: unschedulable(api, NS, CHECK), timeout, 0.5
        )
        bound = core.read_namespaced_pod(CHECK, NS).spec.node_name
        if bound:
            raise AssertionError(f"{CHECK}: bound to {bound}: the held server was not taken")
        return message
    finally:
        gone_already(core.delete_namespaced_pod, CHECK, NS, grace_period_seconds=0)
        gone_already(
            custom(api).delete_namespaced_custom_object,
            "resource.k8s.io",
            "v1",
            NS,
            "resourceclaims",
            CHECK,
        )


def clear_busy(shared: client.ApiClient) -> None:
    """Pods one by one (no kubelet confirms a graceful delete), claims and
    slices by collection, then wait until all are gone."""
    api = client.ApiClient(shared.configuration)
    core = client.CoreV1Api(api)
    for item in core.list_namespaced_pod(NS).items:
        gone_already(core.delete_namespaced_pod, item.metadata.name, NS, grace_period_seconds=0)
    wait_for("pods cleared", lambda: not core.list_namespaced_pod(NS, limit=1).items, 600, 0.5)
    custom(api).delete_collection_namespaced_custom_object(
        "resource.k8s.io", "v1", NS, "resourceclaims"
    )
    custom(api).delete_collection_cluster_custom_object("resource.k8s.io", "v1", "resourceslices")
    for plural in ("resourceclaims", "resourceslices"):
        wait_for(f"{plural} cleared", partial(nothing_left, api, plural), 600, 0.5)


def singles(i: int) -> tuple[JSON | None, JSON]:
    name = f"c{i:05d}"
    return load_claim("core-1", name, NS), pod(name, NS, [name])


def probe_pods(racks: int, held: Sequence[Held], wanted: int) -> int:
    """Single-core pods a run schedules: `wanted`, or half the free cores when fewer."""
    free = racks * RACK_CORES - held_cores(held)
    return max(1, min(wanted, free // 2))


def busy_run(
    cp: ControlPlane,
    api: client.ApiClient,
    *,
    racks: int,
    held: Sequence[Held],
    layout: str,
    pods: int,
    profile: ProfileRequest | None,
) -> dict[str, Any]:
    """One layout at one occupancy: publish, hold, check, schedule, clear."""
    shape = BUSY_LAYOUTS[layout]
    slices = shape.slices(racks, held)
    publish(api, slices)
    try:
        claims = held_claims(held, shape.pool_of, _node, NS, per_node=shape.per_node)
        fill_seconds = write_held(api, claims)
        refused = check_taken(api, held)
        result = run_pods(cp, api, probe_pods(racks, held, pods), singles, 3600, profile=profile)
    finally:
        clear_busy(api)
    return {
        **result,
        "slices": len(slices),
        "held_devices": len(held),
        "held_cores": held_cores(held),
        "fill_seconds": round(fill_seconds, 1),
        "held_server_refused": refused,
    }


@dataclass(frozen=True)
class Occupancy:
    """One occupancy of one fleet size: what every layout's runs share."""

    racks: int
    percent: int
    held: Sequence[Held]
    pods: int
    profiles: tuple[Path, int] | None
    schedulers: Mapping[str, Path] = field(default_factory=dict)
    """The kube-scheduler binary of each build the arms use, when they differ:
    each run then restarts the scheduler on its arm's binary."""


def run_line(run: int, total: int, at: Occupancy, layout: str, elapsed: float) -> str:
    """A run's progress line: which of how many, its fleet and occupancy, its
    layout, the time since the step began (pure)."""
    fleet = f"{at.racks} rack{'' if at.racks == 1 else 's'}"
    return (
        f"bench-scheduler occupancy: run {run} of {total} ({fleet}, {at.percent}% held): "
        f"{layout}; {elapsed:,.0f} s elapsed"
    )


@dataclass
class Runs:
    """The step's runs so far: each layout's rounds at the current occupancy
    (its profiles are named after them), and the count for progress lines."""

    total: int
    started: float = field(default_factory=time.monotonic)
    done: int = 0
    rounds: dict[str, int] = field(default_factory=dict)

    def next(self, at: Occupancy, layout: str) -> int:
        """Count and announce a run of `layout` at `at`; its round number."""
        self.done += 1
        elapsed = time.monotonic() - self.started
        print(run_line(self.done, self.total, at, layout, elapsed), flush=True)
        self.rounds[layout] = self.rounds.get(layout, 0) + 1
        return self.rounds[layout]


def _round(
    cp: ControlPlane, api: client.ApiClient, at: Occupancy, runs: Runs, layout: str
) -> dict[str, Any]:
    """The next round of `layout` at `at`, its profile named after the round."""
    round_ = runs.next(at, layout)
    profile = None
    if at.profiles is not None:
        slug = "".join(c if c.isalnum() else "-" for c in layout.lower()).strip("-")
        name = f"busy-racks{at.racks}-{at.percent}pct-{slug}-{round_}.pb.gz"
        profile = ProfileRequest(at.profiles[0] / name, at.profiles[1])
    build = {}
    if at.schedulers:
        binary = at.schedulers[BUSY_LAYOUTS[layout].scheduler]
        cp.restart_scheduler(binary)
        # The cache directory's name: the Kubernetes version, and the patch's hash.
        build = {"scheduler_build": binary.parent.name}
    result = busy_run(
        cp, api, racks=at.racks, held=at.held, layout=layout, pods=at.pods, profile=profile
    )
    return {**result, **build}


def occupancy_runs(
    cp: ControlPlane,
    api: client.ApiClient,
    *,
    racks: int,
    occupancies: Sequence[int],
    layouts: Sequence[str],
    pods: int,
    repeats: int,
    profiles: tuple[Path, int] | None,
    schedulers: Mapping[str, Path] | None = None,
) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Per occupancy, `repeats` interleaved rounds over the layouts, each
    holding the same devices (one seed per occupancy); `schedulers`: the
    binary of each build when the layouts run on more than one."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    progress = Runs(len(occupancies) * len(layouts) * repeats)
    for percent in occupancies:
        held = fleet_fill(racks, percent / 100, SEED + percent)
        at = Occupancy(racks, percent, held, pods, profiles, schedulers or {})
        progress.rounds.clear()
        runs = {name: partial(_round, cp, api, at, progress, name) for name in layouts}
        out[str(percent)] = interleaved(runs, repeats)
    return out
