"""`--publishing available` under the real apiserver, scheduler and controller:
the hazard of withdrawing devices is a chip's claim released while a claim
for a core inside that chip is created, with the controller still acting on
the claims it saw before. Were it then to withdraw the chip's cores, the
scheduler would have allocated one of them while it was published, and the
counters of an allocated device missing from its slice count for nothing:
a claim for the whole chip would be allocated over it.

The controller runs with `--withdraw-lag-seconds`, which holds it between
deciding withdrawals and re-reading the claims, and each round, on several
chips of several racks at once, releases a held chip at a random moment
around that window and creates a claim for one core of it and, a moment
later, one for the whole chip. Whatever the timing, no core may be in two
allocated claims. The controller's log shows how often its re-read refused
a withdrawal it had decided: the race reached the window. RACES_ENV raises
the number of rounds (`make available-races`)."""

import os
import random
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from kubernetes import client

from driver.controller.handlers import CLAIM_DELAY
from driver.controller.reconciler import WITHDRAW_AFTER
from driver.devicemodel.layout import LayoutOptions, build_layout
from driver.devicemodel.naming import chip_name, rack_of_pool, server_pool
from driver.jsontypes import JSON
from driver.localsim.controlplane.plane import ControlPlane
from driver.names import DEFAULT_DRIVER_NAME
from simdevice.topology import rack_spec
from testbed.controlplane import (
    custom,
    load_claim,
    node_pool_racks,
    pod,
    published,
    rack_slices,
    write_allocated,
)
from testbed.fleetfill import Held, held_claim
from testbed.waiting import wait_for

pytestmark = pytest.mark.integration

NS = "avail-race"
GENERATION = "trn3-gen1"
RACKS = 3
SERVERS = 4
CHIPS_PER_RACK = 3
LAG = 1.5
RACES_ENV = "TRAINIUM_DRA_AVAILABLE_ROUNDS"
ROUNDS = int(os.environ.get(RACES_ENV, "4"))
"""Rounds of RACKS x CHIPS_PER_RACK races; the suite runs four (about two
minutes on a loaded two-CPU machine), `make available-races` forty."""
LAYOUT = build_layout(rack_spec(GENERATION), LayoutOptions("node"))
DEVICE_CORES = {d.name: d.cores for d in LAYOUT.devices}
EVERY_DEVICE = {d.name for d in LAYOUT.devices if d.kind != "ultraserver"}
SLICES_PER_RACK = SERVERS * (1 + 4) + 1  # per server: a counter slice and 4 group slices
DECIDED = CLAIM_DELAY + WITHDRAW_AFTER
"""About when, after a chip is held, the controller decides to withdraw what it blocks."""


def rack_name(i: int) -> str:
    return f"avail-{i}"


def node_name(rack: int, server: int) -> str:
    return f"avail-{rack}-{server}"


@pytest.fixture(scope="module")
def log_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("avail-race") / "controller.log"


@pytest.fixture(scope="module")
def api(control_plane: ControlPlane, log_path: Path) -> Iterator[client.ApiClient]:
    racks = {rack_name(r): [node_name(r, s) for s in range(SERVERS)] for r in range(RACKS)}
    with node_pool_racks(
        control_plane,
        log_path,
        "avail-race",
        NS,
        racks,
        "--publishing",
        "available",
        "--withdraw-lag-seconds",
        str(LAG),
        generation=GENERATION,
    ) as api:
        for rack in racks:
            wait_for(f"{rack} published", partial(published, api, rack, SLICES_PER_RACK), 120, 1)
        yield api


def pinned(shape: str, name: str, rack: int, server: int, chip: int) -> JSON:
    """A claim of `shape` that only the given chip's devices match."""
    claim = load_claim(shape, name, NS, rack_name(rack))
    attr = f'device.attributes["{DEFAULT_DRIVER_NAME}"]'
    where = f"{attr}.serverIndex == {server} && {attr}.chipIndex == {chip}"
    for request in claim["spec"]["devices"]["requests"]:
        request["exactly"].setdefault("selectors", []).append({"cel": {"expression": where}})
    return claim


def create(api: client.ApiClient, claim: JSON) -> None:
    name = claim["metadata"]["name"]
    custom(api).create_namespaced_custom_object(
        "resource.k8s.io", "v1", NS, "resourceclaims", claim
    )
    client.CoreV1Api(api).create_namespaced_pod(NS, pod(name, NS, [name]))


def claims(api: client.ApiClient) -> list[JSON]:
    found: list[JSON] = custom(api).list_namespaced_custom_object(
        "resource.k8s.io", "v1", NS, "resourceclaims"
    )["items"]
    return found


def allocated(api: client.ApiClient) -> dict[str, list[JSON]]:
    return {
        c["metadata"]["name"]: c["status"]["allocation"]["devices"]["results"]
        for c in claims(api)
        if (c.get("status") or {}).get("allocation")
    }


def no_core_twice(api: client.ApiClient) -> dict[tuple[str, int, int], str]:
    """Every allocated core and its claim; fails on a core in two claims."""
    owner: dict[tuple[str, int, int], str] = {}
    for name, results in allocated(api).items():
        for r in results:
            for chip, core in DEVICE_CORES[r["device"]]:
                key = (rack_of_pool(r["pool"]), chip, core)
                assert key not in owner, f"core {key} allocated to {owner[key]} and to {name}"
                owner[key] = name
    return owner


def every_device_back(api: client.ApiClient) -> bool:
    for r in range(RACKS):
        names = {
            d["name"]
            for s in rack_slices(api, rack_name(r))
            for d in s["spec"].get("devices") or []
        }
        if not EVERY_DEVICE <= names:
            return False
    return True


def clear(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    core.delete_collection_namespaced_pod(NS, grace_period_seconds=0)
    custom(api).delete_collection_namespaced_custom_object(
        "resource.k8s.io", "v1", NS, "resourceclaims"
    )
    wait_for("pods gone", lambda: not core.list_namespaced_pod(NS).items, 120, 0.2)
    wait_for("claims gone", lambda: not claims(api), 120, 0.2)
    wait_for("every device published again", partial(every_device_back, api), 120, 0.2)


def race(api: client.ApiClient, held: str, core: JSON, chip: JSON, at: float, gap: float) -> None:
    """At `at` (monotonic): release `held`, create the core's claim, then
    `gap` seconds later the chip's, each with its pod."""
    own = client.ApiClient(api.configuration)
    time.sleep(max(0.0, at - time.monotonic()))
    custom(own).delete_namespaced_custom_object("resource.k8s.io", "v1", NS, "resourceclaims", held)
    create(own, core)
    time.sleep(gap)
    create(own, chip)
    own.close()


def one_round(api: client.ApiClient, round_no: int, rng: random.Random) -> dict[str, int]:
    """Race on CHIPS_PER_RACK chips of every rack; return which claim won how often."""
    chips = [
        (r, server, chip)
        for r in range(RACKS)
        for server, chip in rng.sample(
            [(s, c) for s in range(SERVERS) for c in range(LAYOUT.rack.chips_per_server)],
            CHIPS_PER_RACK,
        )
    ]
    prefix = f"r{round_no:02d}"
    write_allocated(
        api,
        [
            held_claim(
                f"{prefix}-held-{r}-{s}-{c}",
                NS,
                Held(r, s, chip_name(s, c), 8, "chip"),
                (server_pool(rack_name(r), s), node_name(r, s)),
            )
            for r, s, c in chips
        ],
    )
    start = time.monotonic()
    threads = []
    for r, s, c in chips:
        at = start + DECIDED + rng.uniform(-0.5, LAG + 0.5)
        core = pinned("core-1", f"{prefix}-core-{r}-{s}-{c}", r, s, c)
        chip = pinned("chip", f"{prefix}-chip-{r}-{s}-{c}", r, s, c)
        args = (api, f"{prefix}-held-{r}-{s}-{c}", core, chip, at, rng.uniform(0.0, 0.4))
        threads.append(threading.Thread(target=race, args=args))
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    def winners() -> dict[str, int] | None:
        names = allocated(api)
        won = {"core": 0, "chip": 0}
        for r, s, c in chips:
            mine = [k for k in won if f"{prefix}-{k}-{r}-{s}-{c}" in names]
            if not mine:
                return None
            for k in mine:
                won[k] += 1
        return won

    wait_for(f"round {round_no}: every chip's race decided", winners, 120, 0.2)
    # Past any withdrawal the controller had decided, and a re-add after it.
    time.sleep(DECIDED + LAG + 2.0)
    no_core_twice(api)
    won = winners()
    assert won is not None and sum(won.values()) == len(chips), won
    return won


def test_a_chip_released_as_a_core_of_it_is_claimed_is_never_allocated_twice(
    api: client.ApiClient, log_path: Path
) -> None:
    rng = random.Random(20260611)
    totals = {"core": 0, "chip": 0}
    for round_no in range(ROUNDS):
        won = one_round(api, round_no, rng)
        for k, n in won.items():
            totals[k] += n
        clear(api)
    refused = sum(1 for line in log_path.read_text().splitlines() if "withdrawals refused" in line)
    races = ROUNDS * RACKS * CHIPS_PER_RACK
    print(f"{ROUNDS} rounds, {races} races: won {totals}, re-reads that refused {refused}")
    # The race reached the window: the controller decided withdrawals that the
    # claims listed just before the write no longer called for.
    assert refused > 0
    assert totals["core"] > 0
